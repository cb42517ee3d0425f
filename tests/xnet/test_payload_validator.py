"""validate_xnet_payload: each Invalid rule, each Transient condition, and the index rules
that reject validly signed slices (replays, gaps, overlaps, bad signals)."""

from __future__ import annotations

import pytest

from state_manager import certified_slice as cs
from state_manager.streams import RejectReason, RejectSignal
from xnet import errors, slice_validation as sv
from xnet.payload_validator import (
    MALFORMED_PAYLOAD, OWN_SUBNET, PAYLOAD_TOO_LARGE, REGISTRY_VERSION_UNAVAILABLE, STATE_UNAVAILABLE,
    UNDECODABLE_SLICE, UNSORTED_SUBNETS, INVALID_SLICE, Invalid, Transient, Valid, decode_xnet_payload,
    validate_xnet_payload,
)

from .fixtures import OWN, P1, P2, REGISTRY_VERSION, TEST_LIMITS, PeerSubnet, Registry, own_state, payload


class World:
    """We (OWN) sent P1 messages [2, 5) (0 and 1 acknowledged) and received P1's messages
    below 3; P1's stream to us holds [0, 12). P2 is fresh: nothing sent, nothing received."""

    def __init__(self):
        p1 = PeerSubnet(P1)
        self.p1_old = p1.commit(0, 3, 1)  # height 1: only [0, 3), signals_end 1
        self.p1 = p1.commit(0, 12, 4)  # height 2: [0, 12), acknowledges our 0..3
        self.p1_same_signals = p1.commit(0, 12, 2)  # height 3: signals_end back at our begin
        self.p1_regressed = p1.commit(0, 12, 1)  # height 4: signals_end below our begin
        self.p1_beyond = p1.commit(0, 12, 6)  # height 5: acknowledges 5 which we never sent
        self.p2 = PeerSubnet(P2).commit(0, 4, 0)
        self.to_p2 = PeerSubnet(P1, own=P2).commit(0, 4, 0)  # P1's stream to P2, not to us
        bad = PeerSubnet(P1)
        self.bad_rejects = bad.commit(0, 6, 4, [RejectSignal(3, RejectReason.QUEUE_FULL),
                                                RejectSignal(2, RejectReason.QUEUE_FULL)])
        self.registry = Registry()

    def state(self):
        return own_state({P1: (2, 5, 3), P2: (0, 0, 0)})

    def validate(self, xnet_payload, *, state="default", past=(), registry=None, version=REGISTRY_VERSION,
                 limits=TEST_LIMITS, lookup=None):
        state = self.state() if state == "default" else state
        lookup = lookup or (registry or self.registry).public_key_for
        return validate_xnet_payload(xnet_payload, OWN, state, list(past), lookup, version, limits)


@pytest.fixture(scope="module")
def w():
    return World()


def assert_invalid(result, remote, reason, error):
    assert isinstance(result, Invalid), result
    assert (result.remote, result.reason) == (remote, reason)
    assert type(result.error) is error, result.error


# --------------------------------------------------------------------------- valid


def test_valid_payload_decodes_every_slice(w):
    first = w.p1.slice(3, 3, msg_limit=3)
    second = w.p2.slice(0, 0)
    xnet_payload = payload((P2, second), (P1, first))
    result = w.validate(xnet_payload)
    assert isinstance(result, Valid)
    assert result.byte_size == len(first) + len(second)
    assert [remote for remote, _ in result.slices] == [P1, P2]
    p1_slice = result.slices[0][1]
    assert (p1_slice.messages_begin, p1_slice.messages_end, p1_slice.header.signals_end) == (3, 6, 4)
    assert decode_xnet_payload(xnet_payload) == result.slices


def test_empty_payload_is_valid(w):
    assert w.validate(()) == Valid((), 0)


def test_header_only_slice_with_new_signals_is_valid(w):
    result = w.validate(payload((P1, w.p1.header_only(3, 3))))
    assert isinstance(result, Valid)
    assert result.slices[0][1].messages == ()


def test_past_payloads_move_the_expected_index(w):
    past = payload((P1, w.p1.slice(3, 3, msg_limit=3)))  # [3, 6)
    assert isinstance(w.validate(payload((P1, w.p1.slice(3, 6, msg_limit=2))), past=[past]), Valid)


# --------------------------------------------------------------------------- payload-level rules


@pytest.mark.parametrize("bad", [
    [],  # a list, not a tuple
    ((P1,),),
    ((P1, "text"),),
    ((1, b"x"),),
    "nonsense",
])
def test_malformed_payload(w, bad):
    assert_invalid(w.validate(bad), None, MALFORMED_PAYLOAD, errors.MalformedXNetPayload)


def test_unsorted_subnets(w):
    xnet_payload = ((P2, w.p2.slice()), (P1, w.p1.slice(3, 3)))
    assert_invalid(w.validate(xnet_payload), None, UNSORTED_SUBNETS, errors.UnsortedXNetPayload)


def test_duplicate_subnet(w):
    xnet_payload = ((P1, w.p1.slice(3, 3, msg_limit=1)), (P1, w.p1.slice(3, 4, msg_limit=1)))
    assert_invalid(w.validate(xnet_payload), None, UNSORTED_SUBNETS, errors.UnsortedXNetPayload)


def test_own_subnet_in_payload(w):
    xnet_payload = payload((OWN, w.p2.slice()), (P1, w.p1.slice(3, 3)))
    assert_invalid(w.validate(xnet_payload), OWN, OWN_SUBNET, errors.OwnSubnetInPayload)


def test_total_size_over_the_block_budget(w):
    xnet_payload = payload((P1, w.p1.slice(3, 3)), (P2, w.p2.slice()))
    total = sum(len(data) for _, data in xnet_payload)
    limits = TEST_LIMITS.with_(max_block_payload_bytes=total - 1)
    assert_invalid(w.validate(xnet_payload, limits=limits), None, PAYLOAD_TOO_LARGE, errors.XNetPayloadTooLarge)
    assert isinstance(w.validate(xnet_payload, limits=TEST_LIMITS.with_(max_block_payload_bytes=total)), Valid)


# --------------------------------------------------------------------------- transient


def test_state_not_available_is_transient(w):
    assert w.validate(payload((P1, w.p1.slice(3, 3))), state=None) == Transient(STATE_UNAVAILABLE)


def test_unknown_registry_version_is_transient(w):
    xnet_payload = payload((P1, w.p1.slice(3, 3)))
    result = w.validate(xnet_payload, registry=Registry(version=REGISTRY_VERSION - 1))
    assert result == Transient(REGISTRY_VERSION_UNAVAILABLE)
    # Once the registry catches up, the same payload is decided.
    assert isinstance(w.validate(xnet_payload), Valid)


def test_a_permanent_error_wins_over_a_transient_one(w):
    def lookup(subnet, version):
        if subnet == P2:
            raise errors.RegistryVersionUnavailable("not yet")
        return w.registry.public_key_for(subnet, version)

    gap = payload((P1, w.p1.slice(4, 4)), (P2, w.p2.slice()))
    assert_invalid(w.validate(gap, lookup=lookup), P1, INVALID_SLICE, sv.MessageIndexMismatch)
    fine = payload((P1, w.p1.slice(3, 3)), (P2, w.p2.slice()))
    assert w.validate(fine, lookup=lookup) == Transient(REGISTRY_VERSION_UNAVAILABLE)


# --------------------------------------------------------------------------- certified-slice decoding


def test_garbage_slice(w):
    assert_invalid(w.validate(payload((P1, b"\x94" + bytes([cs.SLICE_VERSION]) + b"garbage"))), P1, UNDECODABLE_SLICE, cs.MalformedSlice)


def test_slice_signed_by_another_subnet(w):
    """P2's slice presented as P1's: the signature does not verify under P1's key."""
    xnet_payload = payload((P1, w.p2.slice()))
    assert_invalid(w.validate(xnet_payload), P1, UNDECODABLE_SLICE, cs.InvalidCertificationSignature)


def test_slice_addressed_to_another_subnet(w):
    assert_invalid(w.validate(payload((P1, w.to_p2.slice()))), P1, UNDECODABLE_SLICE, cs.SliceForAnotherSubnet)


def test_subnet_without_a_key(w):
    registry = Registry(subnets=(OWN, P1))
    assert_invalid(w.validate(payload((P2, w.p2.slice())), registry=registry), P2, UNDECODABLE_SLICE,
                   cs.UnknownSubnetKey)


def test_reject_signals_out_of_order(w):
    state = own_state({P1: (0, 5, 0)})
    assert_invalid(w.validate(payload((P1, w.bad_rejects.slice(0, 0))), state=state), P1, UNDECODABLE_SLICE,
                   cs.InvalidRejectSignals)


def test_oversized_encoded_slice(w):
    data = w.p1.slice(3, 3)
    limits = TEST_LIMITS.with_(max_slice_bytes=len(data) - 1)
    assert_invalid(w.validate(payload((P1, data)), limits=limits), P1, UNDECODABLE_SLICE, cs.SliceTooLarge)
    assert isinstance(w.validate(payload((P1, data)), limits=TEST_LIMITS.with_(max_slice_bytes=len(data))), Valid)


# --------------------------------------------------------------------------- index rules


def test_replayed_old_slice_is_rejected_by_indices(w):
    """Validly signed by P1 (height 1), but its messages [0, 3) were inducted already."""
    old = w.p1_old.slice(0, 0)
    assert isinstance(w.validate(payload((P1, old)), state=own_state({P1: (0, 5, 0)})), Valid)
    assert_invalid(w.validate(payload((P1, old))), P1, INVALID_SLICE, sv.MessageIndexMismatch)


def test_replayed_slice_from_a_past_payload_is_an_overlap(w):
    data = w.p1.slice(3, 3, msg_limit=3)
    past = payload((P1, data))
    assert_invalid(w.validate(past, past=[past]), P1, INVALID_SLICE, sv.MessageIndexMismatch)


def test_partial_overlap_is_rejected(w):
    past = payload((P1, w.p1.slice(3, 3, msg_limit=3)))  # [3, 6)
    overlapping = payload((P1, w.p1.slice(3, 5, msg_limit=3)))  # [5, 8)
    assert_invalid(w.validate(overlapping, past=[past]), P1, INVALID_SLICE, sv.MessageIndexMismatch)


def test_gap_is_rejected(w):
    assert_invalid(w.validate(payload((P1, w.p1.slice(3, 4)))), P1, INVALID_SLICE, sv.MessageIndexMismatch)
    past = payload((P1, w.p1.slice(3, 3, msg_limit=3)))
    assert_invalid(w.validate(payload((P1, w.p1.slice(3, 7))), past=[past]), P1, INVALID_SLICE,
                   sv.MessageIndexMismatch)


def test_regressing_signals_end_is_rejected(w):
    # Messages are at the right index, but signals_end 1 is below our stream's begin 2.
    assert_invalid(w.validate(payload((P1, w.p1_regressed.slice(3, 3)))), P1, INVALID_SLICE, sv.SignalsRegress)
    # Or below the signals_end of a past payload's slice.
    past = payload((P1, w.p1.slice(3, 3, msg_limit=3)))  # signals_end 4
    assert_invalid(w.validate(payload((P1, w.p1_same_signals.slice(3, 6))), past=[past]), P1, INVALID_SLICE,
                   sv.SignalsRegress)


def test_signals_acknowledging_messages_never_sent_are_rejected(w):
    assert_invalid(w.validate(payload((P1, w.p1_beyond.slice(3, 3)))), P1, INVALID_SLICE, sv.SignalsBeyondStream)
    # P2's stream from us is empty: any acknowledgement is beyond it.
    state = own_state({P1: (2, 5, 3)})
    peer = PeerSubnet(P2)
    assert_invalid(w.validate(payload((P2, peer.commit(0, 2, 1).slice())), state=state), P2, INVALID_SLICE,
                   sv.SignalsBeyondStream)


def test_empty_slice_is_rejected(w):
    """Header-only and no new signals: signals_end 2 equals the expected signal index 2."""
    assert_invalid(w.validate(payload((P1, w.p1_same_signals.header_only(3, 3)))), P1, INVALID_SLICE,
                   sv.EmptySlice)
    # An old header-only slice with fewer signals regresses.
    assert_invalid(w.validate(payload((P1, w.p1_old.header_only(0, 0)))), P1, INVALID_SLICE, sv.SignalsRegress)


def test_too_many_messages(w):
    data = w.p1.slice(3, 3, msg_limit=3)
    limits = TEST_LIMITS.with_(max_slice_messages=2)
    assert_invalid(w.validate(payload((P1, data)), limits=limits), P1, INVALID_SLICE, sv.SliceExceedsLimits)
    assert isinstance(w.validate(payload((P1, data)), limits=TEST_LIMITS.with_(max_slice_messages=3)), Valid)
