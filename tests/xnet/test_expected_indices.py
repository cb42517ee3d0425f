"""Expected XNet indices: from the state alone, and advanced by agreed past payloads."""

from __future__ import annotations

import pytest

from state_manager.streams import ExpectedIndices, StreamHeader, StreamSlice
from xnet.errors import CorruptPastPayload
from xnet.expected_indices import expected_indices, expected_indices_for, expected_indices_from_payloads
from xnet.xnet_payload import decode_past_payloads

from .fixtures import OWN, P1, P2, P3, PeerSubnet, own_state, payload


@pytest.fixture(scope="module")
def p1():
    peer = PeerSubnet(P1)
    return peer, peer.commit(0, 12, 4)


def test_no_stream_expects_the_beginning():
    assert expected_indices_for(own_state({}), P1, ()) == ExpectedIndices(0, 0)


def test_state_alone_gives_signals_end_and_begin():
    state = own_state({P1: (2, 6, 4), P2: (0, 0, 7)})
    assert expected_indices(state, [P2, P1, P3]) == {
        P1: ExpectedIndices(message_index=4, signal_index=2),
        P2: ExpectedIndices(message_index=7, signal_index=0),
        P3: ExpectedIndices(0, 0),
    }


def test_own_subnet_has_no_expected_indices():
    state = own_state({P1: (0, 0, 0)})
    assert OWN not in expected_indices(state, [OWN, P1])


def test_a_past_slice_with_messages_advances_both_indices(p1):
    _, snapshot = p1
    state = own_state({P1: (0, 5, 3)})
    past = payload((P1, snapshot.slice(3, 3, msg_limit=4)))  # messages [3, 7), signals_end 4
    assert expected_indices_from_payloads(state, [P1], [past]) == {P1: ExpectedIndices(7, 4)}
    # Without the past payload: the state's indices.
    assert expected_indices_from_payloads(state, [P1], []) == {P1: ExpectedIndices(3, 0)}


def test_a_past_header_only_slice_advances_only_the_signal_index(p1):
    _, snapshot = p1
    state = own_state({P1: (0, 5, 3)})
    past = payload((P1, snapshot.header_only(3, 3)))
    assert expected_indices_from_payloads(state, [P1], [past]) == {P1: ExpectedIndices(3, 4)}


def test_the_latest_past_payload_wins(p1):
    peer, first = p1
    state = own_state({P1: (0, 6, 3)})
    second = PeerSubnet(P1).commit(0, 12, 4)
    later = PeerSubnet(P1)
    later.commit(0, 12, 4)
    newer = later.commit(0, 14, 6)
    pasts = [
        payload((P1, first.slice(3, 3, msg_limit=2))),  # [3, 5)
        payload((P1, second.slice(5, 5, msg_limit=3))),  # [5, 8)
        payload(),
        payload((P1, newer.header_only(8, 8))),  # signals_end 6, no messages
    ]
    assert expected_indices_from_payloads(state, [P1], pasts) == {P1: ExpectedIndices(8, 6)}
    assert expected_indices_from_payloads(state, [P1], pasts[:2]) == {P1: ExpectedIndices(8, 4)}


def test_other_peers_slices_do_not_move_our_indices(p1):
    _, snapshot = p1
    other = PeerSubnet(P2).commit(0, 3, 1)
    state = own_state({P1: (0, 5, 3), P2: (0, 2, 0)})
    past = payload((P2, other.slice(0, 0)))
    assert expected_indices_from_payloads(state, [P1, P2], [past]) == {
        P1: ExpectedIndices(3, 0),
        P2: ExpectedIndices(3, 1),
    }


def test_mapping_form_agrees_with_the_payload_form(p1):
    _, snapshot = p1
    state = own_state({P1: (0, 5, 3)})
    past = payload((P1, snapshot.slice(3, 3, msg_limit=4)))
    decoded = decode_past_payloads([past])
    assert decoded == [{P1: StreamSlice(snapshot.header, 3, decoded[0][P1].messages)}]
    assert expected_indices(state, [P1], decoded) == expected_indices_from_payloads(state, [P1], [past])
    assert expected_indices_for(state, P1, [{P1: StreamSlice(StreamHeader(0, 9, 2), 9, ())}]) == ExpectedIndices(3, 2)


@pytest.mark.parametrize("bad", [((P1, b"garbage"),), ((P1, "not bytes"),), [(P1, b"")]])
def test_a_past_payload_that_does_not_decode_is_a_local_fault(bad):
    with pytest.raises(CorruptPastPayload):
        expected_indices_from_payloads(own_state({}), [P1], [bad])
