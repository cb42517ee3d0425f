"""SliceFetcher (pure) and SharedSliceFetcher (shell): what to ask each peer for next, and
which answers enter the pool — checked against the request they answer."""

from __future__ import annotations

import pytest

from state_manager import certified_slice as cs
from state_manager.streams import ExpectedIndices
from xnet.fetched_slice import FetchedSliceRejected
from xnet.grpc.shared_fetcher import SharedSliceFetcher
from xnet.slice_fetcher import SliceFetcher
from xnet.slice_pool import SlicePool
from xnet.slice_request import GetStreamSliceRequest

from .fixtures import OWN, P1, P2, REGISTRY_VERSION, TEST_LIMITS, PeerSubnet, Registry, own_state

BIG = 1 << 20
LIMITS = TEST_LIMITS.with_(max_slice_messages=5, max_slice_bytes=BIG)
KEYS = Registry().public_key_for


def fetcher(max_response_bytes: int = BIG) -> SliceFetcher:
    return SliceFetcher(SlicePool(OWN, BIG), LIMITS, max_response_bytes)


def deliver(f: SliceFetcher, remote: str, data: bytes) -> None:
    f.accept(remote, data, f.decode(remote, data, KEYS, REGISTRY_VERSION))


def pooled_range(f: SliceFetcher, remote: str) -> tuple[int, int]:
    s = f.pool.get(remote).stream_slice
    return (s.messages_begin, s.messages_end)


@pytest.fixture(scope="module")
def p1():
    """P1 at heights 1, 2: messages [0, 12) to us, signals for our stream up to 2, then 4."""
    peer = PeerSubnet(P1)
    return peer.commit(0, 12, 2), peer.commit(0, 12, 4)


# --------------------------------------------------------------------------- next_request


def test_before_any_block_a_peer_is_asked_from_the_start():
    assert fetcher().next_request(P1) == GetStreamSliceRequest(OWN, 0, 0, 5, BIG)


def test_requests_begin_at_the_expected_indices():
    f = fetcher()
    f.remember_indices(own_state({P1: (0, 6, 3)}), [OWN, P1, P2])
    assert f.expected(P1) == ExpectedIndices(3, 0) and f.expected(P2) == ExpectedIndices(0, 0)
    assert f.expected(OWN) == ExpectedIndices(0, 0)  # never a peer of itself
    assert f.next_request(P1) == GetStreamSliceRequest(OWN, 3, 3, 5, BIG)


def test_a_pooled_slice_is_continued_and_a_full_one_asks_nothing(p1):
    h1, _ = p1
    f = fetcher()
    f.remember_indices(own_state({P1: (0, 6, 3)}), [P1])
    f.next_request(P1)
    deliver(f, P1, h1.slice(3, 3, msg_limit=2))                     # [3, 5)
    request = f.next_request(P1)
    assert (request.witness_begin, request.msg_begin, request.msg_limit) == (3, 5, 3)
    assert request.byte_limit == BIG - f.pool.get(P1).byte_size
    deliver(f, P1, h1.slice(3, 5, msg_limit=3))                     # appended: [3, 8)
    assert pooled_range(f, P1) == (3, 8)
    assert f.next_request(P1) is None                               # 5 = max_slice_messages pooled


def test_remembering_indices_garbage_collects_the_pool(p1):
    h1, _ = p1
    f = fetcher()
    f.remember_indices(own_state({P1: (0, 6, 3)}), [P1])
    deliver(f, P1, h1.slice(3, 3, msg_limit=4))                     # [3, 7)
    f.remember_indices(own_state({P1: (0, 6, 5)}), [P1])            # a block inducted 3 and 4
    assert pooled_range(f, P1) == (5, 7)
    assert f.next_request(P1).msg_begin == 7


# --------------------------------------------------------------------------- answers


def test_an_answer_is_pooled_and_remembered_as_the_last_one(p1):
    h1, _ = p1
    f = fetcher()
    f.remember_indices(own_state({P1: (0, 6, 3)}), [P1])
    f.next_request(P1)
    data = h1.slice(3, 3, msg_limit=2)
    assert not f.is_last_answer(P1, data)
    deliver(f, P1, data)
    assert f.is_last_answer(P1, data) and pooled_range(f, P1) == (3, 5)


@pytest.mark.parametrize("served", [(4, 4), (2, 2)])  # a gap, an overlap
def test_an_answer_to_another_request_is_refused_and_changes_nothing(p1, served):
    h1, _ = p1
    f = fetcher()
    f.remember_indices(own_state({P1: (0, 6, 3)}), [P1])
    f.next_request(P1)                                              # asks for [3, ...)
    data = h1.slice(*served, msg_limit=2)
    with pytest.raises(FetchedSliceRejected):
        deliver(f, P1, data)
    assert f.pool.get(P1) is None and not f.is_last_answer(P1, data)


def test_answers_are_checked_against_the_indices_their_request_was_made_for(p1):
    h1, _ = p1
    f = fetcher()
    f.remember_indices(own_state({P1: (0, 6, 3)}), [P1])
    f.next_request(P1)                                              # made at signal index 0
    f.remember_indices(own_state({P1: (3, 6, 3)}), [P1])            # a block moved it to 3
    deliver(f, P1, h1.slice(3, 3, msg_limit=2))                     # signals_end 2: fine for the request
    assert pooled_range(f, P1) == (3, 5)
    f.next_request(P1)                                              # made at signal index 3
    with pytest.raises(FetchedSliceRejected, match="signals_end"):
        deliver(f, P1, h1.slice(3, 5, msg_limit=2))


def test_without_a_request_a_verified_answer_is_not_checked(p1):
    h1, _ = p1
    f = fetcher()
    f.remember_indices(own_state({P1: (0, 6, 3)}), [P1])
    deliver(f, P1, h1.slice(4, 4, msg_limit=2))                     # would be a gap
    assert pooled_range(f, P1) == (4, 6)


def test_signals_beyond_our_stream_end_are_refused():
    f = fetcher()
    f.remember_indices(own_state({P1: (0, 3, 0)}), [P1])            # we sent [0, 3)
    f.next_request(P1)
    data = PeerSubnet(P1).commit(0, 4, 5).slice(0, 0)                # acknowledges 5 messages
    with pytest.raises(FetchedSliceRejected, match="never sent"):
        deliver(f, P1, data)


def test_decode_verifies_under_the_peer_key_and_caps_the_size(p1):
    h1, _ = p1
    data = h1.slice(3, 3, msg_limit=2)
    with pytest.raises(cs.SliceDecodeError):
        fetcher().decode(P2, data, KEYS, REGISTRY_VERSION)          # P1's slice claimed by P2
    with pytest.raises(cs.SliceTooLarge):
        fetcher(max_response_bytes=len(data) - 1).decode(P1, data, KEYS, REGISTRY_VERSION)
    with pytest.raises(cs.SliceDecodeError):
        fetcher().decode(P1, data[:-1], KEYS, REGISTRY_VERSION)


# --------------------------------------------------------------------------- the shell


def test_the_shared_fetcher_counts_refusals_and_accepts_a_repeat_silently(p1):
    h1, h2 = p1
    shared = SharedSliceFetcher(fetcher(), lambda: (KEYS, REGISTRY_VERSION), name="node-1")
    shared.remember_indices(own_state({P1: (0, 6, 3)}), [P1])
    assert shared.wanted(P1) == GetStreamSliceRequest(OWN, 3, 3, 5, BIG)
    good = h1.slice(3, 3, msg_limit=2)
    assert shared.deliver(P1, good)
    assert shared.deliver(P1, good)                                 # the same answer again
    assert not shared.deliver(P1, b"garbage")
    assert not shared.deliver(P1, h2.slice(6, 6, msg_limit=1))      # a gap after [3, 5)
    with shared.pool() as pool:
        assert pool.get(P1).data == good
    assert shared.rejected_slices() == {(P1, "FetchedSliceRejected"): 1, (P1, "MalformedSlice"): 1}
