"""Regression tests for bugs the property tests of this package found."""

from __future__ import annotations

import cbor2
import pytest

from message_routing.limits import MINIMAL
from message_routing.stream_handler import garbage_collect_signals
from message_routing.valid_set_rule import IngressInductionFailure, induct_ingress
from replica.execution import ExecutionEnvironment, install_canister
from replica.client import MalformedIngress, decode_signed_ingress, sign_ingress
from replica.ic import cbor
from replica.sdk import encode_value
from replica.inprocess.simulation import GENESIS_TIME_NS, Simulation
from state_manager.encoding import encode
from state_manager.messages import Ingress
from state_manager.streams import ExpectedIndices, RejectReason, RejectSignal, StreamHeader, StreamSlice
from tests.builders import A, ingress, state
from tests.xnet.fixtures import OWN, P1, REGISTRY_VERSION, TEST_LIMITS, PeerSubnet, Registry, own_state, put_slice
from xnet.payload_builder import get_xnet_payload
from xnet.payload_validator import Invalid, Valid, validate_xnet_payload
from xnet.slice_pool import SlicePool
from xnet.slice_validation import EmptySlice, validate_stream_slice

from .canisters import REJECTED_BASE, Recorder, sent_calls

NOW = 1_000 * 10**9


# -- reject signals for a peer's last messages were never garbage-collected ---------------------

def test_a_header_only_slice_that_frees_our_reject_signals_is_not_empty():
    # The peer's stream to us: begin moved from 3 to 4, no messages, no new signals.
    stream_slice = StreamSlice(StreamHeader(begin=4, end=4, signals_end=0), messages_begin=4)
    expected = ExpectedIndices(message_index=4, signal_index=0)
    with pytest.raises(EmptySlice):  # nothing to gain: we hold no reject signal below 4
        validate_stream_slice(stream_slice, expected, 0, 3, 2048)
    with pytest.raises(EmptySlice):
        validate_stream_slice(stream_slice, expected, 0, 3, 2048, own_reject_signals_begin=4)
    # we still keep a reject signal for the peer's message 3: the new begin frees it
    validate_stream_slice(stream_slice, expected, 0, 3, 2048, own_reject_signals_begin=3)


def test_a_call_rejected_by_a_remote_subnet_lets_both_subnets_become_quiescent():
    sim = Simulation({"subnet-a": (0, 99), "subnet-b": (100, 199)}, ExecutionEnvironment([Recorder]),
                     limits=MINIMAL)
    install_canister(sim.state_of("subnet-a"), 1, Recorder)
    sim.submit(Ingress(b"user", 1, "fire", encode_value(((150, "ping", 150),)), bytes(32),
                       GENESIS_TIME_NS + 10 * 10**9))
    sim.run_until_quiescent(max_ticks=30)  # used to spin: subnet-b kept its reject signal forever
    assert not sim.state_of("subnet-b").streams["subnet-a"].reject_signals
    outcomes = sent_calls(sim.state_of("subnet-a").canisters[1].stable)
    assert outcomes == {(150, 0): REJECTED_BASE + 3}  # DESTINATION_INVALID, via a reject signal
    assert sim.state_of("subnet-b").metadata.counters["reject_signals_sent"] == 1


def test_a_reject_signal_survives_until_the_peer_has_seen_it():
    # GC must not get ahead of the peer: a header whose begin is at the signal keeps it.
    stream_slice = StreamSlice(StreamHeader(begin=3, end=3, signals_end=0), messages_begin=3)
    with pytest.raises(EmptySlice):
        validate_stream_slice(stream_slice, ExpectedIndices(4, 0), 0, 3, 2048, own_reject_signals_begin=3)


def test_the_payload_builder_and_validator_carry_a_header_that_frees_our_reject_signals():
    """The same bug in the replica's XNet path: builder and validator must agree to carry it."""
    state = own_state({P1: (0, 0, 4)})  # we received P1's messages [0, 4) and rejected message 3
    state.streams[P1].reject_signals.append(RejectSignal(3, RejectReason.CANISTER_NOT_FOUND))
    snapshot = PeerSubnet(P1).commit(4, 4, 0)  # P1 saw the signal and dropped message 3: begin = 4
    pool = SlicePool(OWN, 1 << 20)
    assert put_slice(pool, P1, snapshot.header_only())
    built = get_xnet_payload(state, [], pool, 1 << 20, TEST_LIMITS, b"seed")
    assert [remote for remote, _ in built] == [P1]
    result = validate_xnet_payload(built, OWN, state, [], Registry().public_key_for, REGISTRY_VERSION, TEST_LIMITS)
    assert isinstance(result, Valid)
    ((_, stream_slice),) = result.slices
    garbage_collect_signals(state, P1, stream_slice)
    assert not state.streams[P1].reject_signals
    # once a past payload carries that header, the same slice again would be empty
    state.streams[P1].reject_signals.append(RejectSignal(3, RejectReason.CANISTER_NOT_FOUND))
    assert get_xnet_payload(state, [built], pool, 1 << 20, TEST_LIMITS, b"seed") == ()
    again = validate_xnet_payload(built, OWN, state, [built], Registry().public_key_for, REGISTRY_VERSION, TEST_LIMITS)
    assert isinstance(again, Invalid) and isinstance(again.error, EmptySlice)


# -- a far-future expiry pinned a rejected ingress status in the history ------------------------

def test_a_too_far_expiry_does_not_pin_the_rejected_status():
    s = state(A, canisters=[1])
    s.metadata.batch_time = NOW
    msg = ingress(1, n=1, expiry=2**64 - 1)
    assert induct_ingress(s, msg, MINIMAL) is IngressInductionFailure.EXPIRY_TOO_FAR
    status = s.ingress_history.get(msg.message_id)
    assert status.expiry_time == NOW + MINIMAL.max_ingress_ttl_ns
    s.ingress_history.prune(NOW + MINIMAL.max_ingress_ttl_ns + 1, MINIMAL.ingress_history_retention_ns)
    s.ingress_history.prune(NOW + MINIMAL.max_ingress_ttl_ns + MINIMAL.ingress_history_retention_ns + 2,
                            MINIMAL.ingress_history_retention_ns)
    assert msg.message_id not in s.ingress_history


def test_an_expiry_within_the_ttl_is_kept_as_claimed():
    s = state(A, canisters=[1])
    s.metadata.batch_time = NOW
    msg = ingress(77, n=2, expiry=NOW + 5)  # no such canister: rejected, expiry is fine
    assert induct_ingress(s, msg, MINIMAL) is IngressInductionFailure.CANISTER_NOT_FOUND
    assert s.ingress_history.get(msg.message_id).expiry_time == NOW + 5


# -- an envelope version of ``true`` was accepted as version 1 ---------------------------------

def test_envelope_version_true_is_not_version_1():
    """Of the former msgpack envelope ``[version, content, pubkey, signature]``: neither ``true``
    nor 1 (that format's one version) is accepted now; and in the IC's CBOR envelope ``true``
    is never a number either."""
    content = [1, "m", encode_value(None), 0, 10**18]
    for version in (True, 1):
        with pytest.raises(MalformedIngress):
            decode_signed_ingress(encode([version, content, bytes(32), bytes(64)]), 4096, now_ns=0)
    envelope = sign_ingress(None, 1, "m", None, 0, 10**18)
    assert decode_signed_ingress(envelope, 4096, now_ns=0).source == b"\x04"  # the genuine envelope is fine
    value = cbor.decode(envelope, max_bytes=4096)
    forged = cbor2.dumps(dict(value, content=dict(value["content"], ingress_expiry=True)))
    with pytest.raises(MalformedIngress):
        decode_signed_ingress(forged, 4096, now_ns=0)
