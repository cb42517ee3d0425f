"""check_fetched_slice: what an honest replica's answer satisfies beyond verifying."""

from __future__ import annotations

import pytest

from state_manager.streams import ExpectedIndices
from tests.xnet.fixtures import P1, PeerSubnet, decode_slice
from xnet.fetched_slice import FetchedSliceRejected, check_fetched_slice
from xnet.slice_pool import SlicePool

EXPECTED = ExpectedIndices(message_index=3, signal_index=2)
OWN_END = 5


def check(data: bytes, witness_begin: int, msg_begin: int, pooled=None) -> None:
    check_fetched_slice(decode_slice(P1, data), witness_begin, msg_begin, EXPECTED, OWN_END, pooled)


def test_honest_answers_pass():
    snapshot = PeerSubnet(P1).commit(0, 8, signals_end=4)
    check(snapshot.slice(msg_begin=3), 3, 3)
    check(snapshot.slice(witness_begin=3, msg_begin=5), 3, 5)   # a continuation of pooled [3, 5)
    check(snapshot.header_only(msg_begin=8), 8, 8)              # nothing new but signals


@pytest.mark.parametrize("served, asked", [
    ((4, 4), (3, 3)),    # a gap: starts after what was asked for
    ((2, 2), (3, 3)),    # an overlap: starts before
    ((5, 5), (3, 5)),    # a continuation whose witness does not reach the pooled messages
])
def test_answers_to_another_request_are_refused(served, asked):
    snapshot = PeerSubnet(P1).commit(0, 8, signals_end=4)
    with pytest.raises(FetchedSliceRejected):
        check(snapshot.slice(witness_begin=served[0], msg_begin=served[1]), *asked)


@pytest.mark.parametrize("signals_end", [1, 6])
def test_signals_must_stay_between_the_expected_index_and_our_stream_end(signals_end):
    snapshot = PeerSubnet(P1).commit(0, 8, signals_end=signals_end)
    with pytest.raises(FetchedSliceRejected, match="signals_end"):
        check(snapshot.slice(msg_begin=3), 3, 3)


def test_an_older_certification_than_the_pooled_one_is_a_replay():
    peer = PeerSubnet(P1)
    old = peer.commit(0, 8, signals_end=4)
    new = peer.commit(0, 9, signals_end=4)
    pool = SlicePool("subnet-own", 1 << 20)
    assert pool.put(P1, new.slice(msg_begin=3), decode_slice(P1, new.slice(msg_begin=3)))
    with pytest.raises(FetchedSliceRejected, match="older"):
        check(old.slice(msg_begin=3), 3, 3, pool.get(P1))
    check(new.slice(msg_begin=3), 3, 3, pool.get(P1))
