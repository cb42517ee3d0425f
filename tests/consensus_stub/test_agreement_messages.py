"""Agreement messages: canonical encodings with a version, strict decoders, node-key signatures."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consensus_stub.agreement import messages as m
from consensus_stub.agreement.signing import (
    NodeKeyVerifier, compute_finalization_message, compute_notarization_message, compute_proposal_message,
)
from consensus_stub.block import GENESIS_PARENT_HASH, Block, block_hash
from state_manager.certification import CertificationShare
from state_manager.messages import Ingress

from .agreement_fixtures import T0, dealt

FUZZ = settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])

BLOCK = Block(1, GENESIS_PARENT_HASH, T0, 1, (), (), "alpha-node-1", 0)
CHILD = Block(2, block_hash(BLOCK), T0 + 1, 1, (), (("beta", b"slice"),), "alpha-node-3", 1)
DIGEST = block_hash(BLOCK)
SIG = b"\x30" + b"\x01" * 70


def examples() -> list[m.Message]:
    return [
        m.Proposal(CHILD, SIG),
        m.NotarizationShare(1, DIGEST, "alpha-node-2", SIG),
        m.FinalizationShare(1, DIGEST, "alpha-node-2", SIG),
        m.Status("alpha-node-4", 3, 5),
        m.CatchUp((BLOCK, CHILD), (("alpha-node-1", SIG), ("alpha-node-2", SIG))),
        m.IngressGossip((Ingress(b"user", 5, "m", b"arg", b"\x07" * 32, T0 + 60),)),
        m.CertificationShareGossip(CertificationShare(4, b"\x05" * 32, 2, b"\x11" * 48, b"\x92\x04\xc4\x20" + b"\x05" * 32)),
    ]


@pytest.mark.parametrize("message", examples(), ids=lambda msg: type(msg).__name__)
def test_every_kind_round_trips_and_carries_version_and_kind(message):
    data = m.encode_message(message)
    assert m.decode_message(data) == message
    version, kind = msgpack.unpackb(data)[:2]
    assert version == m.MESSAGE_VERSION and kind in set(m.Kind)
    for bad in (data + b"\x00", data[:-1]):
        with pytest.raises(m.MalformedMessage):
            m.decode_message(bad)


def test_the_share_layout_is_fixed():
    """A golden encoding: a change of layout must come with a new version."""
    data = m.encode_message(m.NotarizationShare(7, b"\xaa" * 32, "n", b"\x01"))
    assert data == bytes([0x96, 0x02, 0x02, 0x07, 0xC4, 0x20]) + b"\xaa" * 32 + b"\xa1n\xc4\x01\x01"


@pytest.mark.parametrize("value, error", [
    ([3, 2, 1, b"\x00" * 32, "n", b"s"], m.UnsupportedMessageVersion),
    ([1, 2, 1, b"\x00" * 32, "n", b"s"], m.UnsupportedMessageVersion),   # the project's own BLS variant's
    ([1, 7, 1, b"\x00" * 32, 1, b"s" * 96], m.UnsupportedMessageVersion),
    ([True, 2, 1, b"\x00" * 32, "n", b"s"], m.UnsupportedMessageVersion),
    ([2, 7, 1, b"\x00" * 32, 1, b"s" * 48], m.MalformedMessage),                   # a share without its witness
    ([2, 7, 1, b"\x00" * 32, 1, b"s" * 48, "w"], m.MalformedMessage),              # a witness that is not bytes
    ([2, 7, 1, b"\x00" * 32, 1, b"s" * 48, b"w" * 2049], m.MalformedMessage),      # a witness too large
    ([2, 99, 1], m.UnknownMessageKind),
    ([2, "2", 1], m.UnknownMessageKind),
    ([1], m.MalformedMessage),
    ({"v": 1}, m.MalformedMessage),
    ([2, 2, 1, b"\x00" * 31, "n", b"s"], m.MalformedMessage),       # short hash
    ([2, 2, 0, b"\x00" * 32, "n", b"s"], m.MalformedMessage),       # height 0
    ([2, 2, 1, b"\x00" * 32, "", b"s"], m.MalformedMessage),        # no signer
    ([2, 2, 1, b"\x00" * 32, "n", b""], m.MalformedMessage),        # empty signature
    ([2, 2, 1, b"\x00" * 32, "n", b"s" * 129], m.MalformedMessage),  # signature too long
    ([2, 2, 1, b"\x00" * 32, "n"], m.MalformedMessage),             # arity
    ([2, 4, "n", 5, 3], m.MalformedMessage),                        # notarized below finalized
    ([2, 4, "n", -1, 3], m.MalformedMessage),
    ([2, 5, [], []], m.MalformedMessage),                           # catch-up without blocks
    ([2, 1, b"not a block", b"s"], m.MalformedMessage),
    ([2, 6, []], m.MalformedMessage),                               # empty gossip
])
def test_garbage_is_refused_with_a_typed_error(value, error):
    with pytest.raises(error):
        m.decode_message(msgpack.packb(value, use_bin_type=True))


def test_non_canonical_bytes_are_refused():
    data = m.encode_message(m.Status("n", 3, 5))
    wide = data.replace(b"\x03\x05", b"\xcc\x03\x05")   # 3 as a one-byte uint instead of a fixint
    assert msgpack.unpackb(wide) == msgpack.unpackb(data)
    with pytest.raises(m.MalformedMessage, match="canonical"):
        m.decode_message(wide)


def test_catch_up_checks_its_shape():
    with pytest.raises(m.MalformedMessage):
        m.CatchUp((CHILD, BLOCK), ())                                 # heights not consecutive
    with pytest.raises(m.MalformedMessage):
        m.CatchUp((BLOCK,), (("b", SIG), ("a", SIG)))                 # signers unsorted
    too_many = [m.encode_message(m.Proposal(BLOCK, SIG))] * (m.MAX_CATCH_UP_BLOCKS + 1)
    with pytest.raises(m.MalformedMessage, match="at most"):
        m.decode_message(msgpack.packb([m.MESSAGE_VERSION, 5, too_many, []], use_bin_type=True))


@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes_decode_or_raise_malformed(data):
    try:
        message = m.decode_message(data)
    except m.MalformedMessage:
        return
    assert m.encode_message(message) == data


@FUZZ
@given(st.sampled_from(range(len(examples()))), st.data())
def test_mutated_messages_decode_to_themselves_or_raise_malformed(index, data):
    encoded = bytearray(m.encode_message(examples()[index]))
    position = data.draw(st.integers(0, len(encoded) - 1))
    mutation = data.draw(st.sampled_from(["flip", "cut", "insert"]))
    if mutation == "flip":
        encoded[position] ^= data.draw(st.integers(1, 255))
    elif mutation == "cut":
        del encoded[position:]
    else:
        encoded[position:position] = data.draw(st.binary(min_size=1, max_size=4))
    try:
        message = m.decode_message(bytes(encoded))
    except m.MalformedMessage:
        return
    assert m.encode_message(message) == bytes(encoded)


# -- what nodes sign ----------------------------------------------------------------------

def test_signed_messages_are_domain_separated():
    assert compute_notarization_message(1, DIGEST) != compute_finalization_message(1, DIGEST)
    assert compute_notarization_message(1, DIGEST) != compute_notarization_message(2, DIGEST)
    assert compute_proposal_message(DIGEST).endswith(DIGEST)
    assert compute_notarization_message(1, DIGEST)[-40:] == (1).to_bytes(8, "big") + DIGEST


def test_node_key_signatures_verify_only_for_their_node_and_message():
    registry, _, subnet, signers, verifier = dealt()
    message = compute_notarization_message(1, DIGEST)
    signature = signers["alpha-node-1"](message)
    assert verifier.is_valid_signature("alpha-node-1", message, signature)
    assert not verifier.is_valid_signature("alpha-node-2", message, signature)
    assert not verifier.is_valid_signature("alpha-node-1", compute_finalization_message(1, DIGEST), signature)
    assert not verifier.is_valid_signature("alpha-node-1", message, b"garbage")
    assert not verifier.is_valid_signature("mallory", message, signature)
    other = NodeKeyVerifier.for_subnet(registry.record(1), "no-such-subnet")
    assert not other.is_valid_signature("alpha-node-1", message, signature)
