"""The endpoint's slice provider: serves the latest certified snapshot, raises the encoder's errors."""

from __future__ import annotations

import pytest

from state_manager import bls
from state_manager.certification import aggregate_certification, sign_certification_share
from state_manager.certified_slice import IndexOutOfRange, InvalidSliceRequest, NoStream, decode_certified_stream_slice
from state_manager.state_manager import StateManager
from tests.builders import A, B, C, request, state
from xnet.slice_provider import CertifiedSliceProvider

DEAL = bls.deal_threshold_keys(1, 1, b"slice-provider-test-seed-32bytes")


def certified_manager() -> StateManager:
    s = state(A)
    stream = s.stream_to(B)
    for i in range(5):
        stream.push(request(i, 100 + i))
    s.stream_to(C)
    manager = StateManager(s)
    s.metadata.batch_number = 1
    trees = manager.commit(s)
    share = sign_certification_share(1, trees.certified_root, 1, DEAL.secret_share(1))
    manager.deliver_certification(aggregate_certification([share], 1, DEAL.public_key, {1: DEAL.public_key_share(1)}),
                                  DEAL.public_key)
    return manager


def test_serves_verifiable_slices_from_the_certified_snapshot():
    manager = certified_manager()
    provider = CertifiedSliceProvider(A, manager.latest_certified)
    data = provider.get_stream_slice(B, 1, 2, 2, 10_000)
    decoded = decode_certified_stream_slice(B, A, lambda subnet, version: DEAL.public_key, 1, data)
    assert (decoded.stream_slice.messages_begin, len(decoded.stream_slice.messages)) == (2, 2)
    assert decoded.witness_begin == 1
    assert provider.list_streams() == [B, C]
    assert provider.latest() is manager.latest_certified()


def test_errors_are_the_encoders():
    provider = CertifiedSliceProvider(A, certified_manager().latest_certified)
    with pytest.raises(NoStream):
        provider.get_stream_slice("nowhere", 0, 0, 1, 100)
    with pytest.raises(NoStream):
        provider.get_stream_slice(A, 0, 0, 1, 100)  # loopback is never served
    with pytest.raises(IndexOutOfRange):
        provider.get_stream_slice(B, 0, 6, 1, 100)
    with pytest.raises(InvalidSliceRequest):
        provider.get_stream_slice(B, -1, 0, 1, 100)
    uncertified = CertifiedSliceProvider(A, lambda: None)
    with pytest.raises(NoStream):
        uncertified.get_stream_slice(B, 0, 0, 1, 100)
    assert uncertified.list_streams() == []
