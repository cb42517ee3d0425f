"""The slice pool: one verified slice per peer, appended or replaced only when more useful,
garbage-collected against expected indices, bounded in bytes, and the next request."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from state_manager.streams import ExpectedIndices
from xnet.errors import InvalidPoolRequest
from xnet.slice_pool import SlicePool

from .fixtures import OWN, P1, P2, P3, PeerSubnet, decode_slice, put_slice

BIG = 1 << 20


def messages_range(pool: SlicePool, remote: str) -> tuple[int, int]:
    s = pool.get(remote).stream_slice
    return (s.messages_begin, s.messages_end) if s.messages else (None, None)


@pytest.fixture(scope="module")
def history():
    """P1 at heights 1..3: the stream grows, signals advance."""
    peer = PeerSubnet(P1)
    return peer.commit(0, 6, 1), peer.commit(0, 9, 2), peer.commit(0, 12, 3)


# --------------------------------------------------------------------------- put


def test_first_slice_is_accepted_and_decoded_fields_kept(history):
    h1, _, _ = history
    pool = SlicePool(OWN, BIG)
    data = h1.slice(0, 0, msg_limit=3)
    assert put_slice(pool, P1, data)
    pooled = pool.get(P1)
    assert (pooled.data, pooled.byte_size, pooled.certification_height, pooled.witness_begin) == (data, len(data), 1, 0)
    assert pooled.stream_slice == decode_slice(P1, data).stream_slice
    assert pool.remotes() == (P1,) and pool.byte_size() == len(data)


def test_own_subnet_slices_are_never_pooled(history):
    pool = SlicePool(P1, BIG)  # pretend we are P1: a slice "from" P1 is our own
    data = history[0].slice()
    assert not pool.put(P1, data, decode_slice(P1, data, own=OWN))
    assert pool.remotes() == ()


def test_continuation_is_appended(history):
    h1, _, h3 = history
    pool = SlicePool(OWN, BIG)
    put_slice(pool, P1, h1.slice(0, 0, msg_limit=3))  # [0, 3) at height 1
    assert pool.next_request(P1, ExpectedIndices(0, 0), 10, BIG)[:2] == (0, 3)
    newer = h3.slice(0, 3, msg_limit=4)  # [3, 7) at height 3, witness [0, 7)
    assert put_slice(pool, P1, newer)
    pooled = pool.get(P1)
    assert messages_range(pool, P1) == (0, 7)
    assert pooled.certification_height == 3 and pooled.stream_slice.header == h3.header
    # What the pool holds is exactly one verified slice of [0, 7).
    assert decode_slice(P1, pooled.data).stream_slice == pooled.stream_slice


def test_header_only_continuation_refreshes_signals_and_keeps_messages(history):
    h1, h2, _ = history
    pool = SlicePool(OWN, BIG)
    put_slice(pool, P1, h1.slice(0, 0, msg_limit=3))
    assert put_slice(pool, P1, h2.header_only(0, 3))  # witness [0, 3), newer signals
    assert messages_range(pool, P1) == (0, 3)
    assert pool.get(P1).stream_slice.header.signals_end == 2
    assert decode_slice(P1, pool.get(P1).data).stream_slice == pool.get(P1).stream_slice
    # The same refresh again adds nothing.
    assert not put_slice(pool, P1, h2.header_only(0, 3))


def test_continuation_from_an_older_height_is_rejected(history):
    h1, h2, _ = history
    pool = SlicePool(OWN, BIG)
    put_slice(pool, P1, h2.slice(0, 0, msg_limit=3))
    assert not put_slice(pool, P1, h1.slice(0, 3, msg_limit=2))
    assert messages_range(pool, P1) == (0, 3) and pool.get(P1).certification_height == 2


def test_continuation_whose_messages_differ_is_rejected(history):
    """Another history of P1 under the same key: the digests of [0, 3) differ."""
    h1, _, _ = history
    forged = PeerSubnet(P1, salt=b"fork")
    forged.commit(0, 6, 1)
    f2 = forged.commit(0, 9, 2)
    pool = SlicePool(OWN, BIG)
    put_slice(pool, P1, h1.slice(0, 0, msg_limit=3))
    before = pool.get(P1)
    assert not put_slice(pool, P1, f2.slice(0, 3, msg_limit=2))
    assert pool.get(P1) == before


@pytest.mark.parametrize(
    "first, second, replaced",
    [
        # more messages from the same begin (same height)
        (("h1", 0, 0, 2), ("h1", 0, 0, 4), True),
        # fewer messages from the same begin
        (("h1", 0, 0, 4), ("h1", 0, 0, 2), False),
        # newer signals, superset of the messages
        (("h1", 2, 2, 2), ("h2", 1, 1, 5), True),
        # newer signals but losing messages
        (("h1", 2, 2, 3), ("h2", 3, 3, 5), False),
        # newer height covering the same messages (header-only pooled: everything covers it)
        (("h1", 0, 6, 0), ("h2", 0, 9, 0), True),
        # older height
        (("h2", 0, 0, 3), ("h1", 0, 0, 5), False),
        # same slice again
        (("h2", 0, 0, 3), ("h2", 0, 0, 3), False),
        # gap-shaped: starts elsewhere, not a continuation, not a superset
        (("h1", 0, 0, 2), ("h2", 4, 4, 2), False),
    ],
)
def test_replacement_only_by_a_more_useful_slice(history, first, second, replaced):
    snapshots = dict(zip(("h1", "h2", "h3"), history))
    pool = SlicePool(OWN, BIG)

    def fetch(spec):
        name, witness_begin, msg_begin, limit = spec
        return snapshots[name].slice(witness_begin, msg_begin, msg_limit=limit)

    first_data, second_data = fetch(first), fetch(second)
    assert put_slice(pool, P1, first_data)
    assert put_slice(pool, P1, second_data) is replaced
    assert pool.get(P1).data == (second_data if replaced else first_data)


def test_messages_replace_a_header_only_slice_of_the_same_height(history):
    """After GC left only the header, a fetch from the expected index at the same height wins."""
    _, _, h3 = history
    pool = SlicePool(OWN, BIG)
    put_slice(pool, P1, h3.slice(0, 0, msg_limit=4))
    pool.garbage_collect({P1: ExpectedIndices(4, 2)})
    assert messages_range(pool, P1) == (None, None)
    assert put_slice(pool, P1, h3.slice(4, 4, msg_limit=3))
    assert messages_range(pool, P1) == (4, 7)


def test_put_checks_its_arguments(history):
    data = history[0].slice()
    decoded = decode_slice(P1, data)
    pool = SlicePool(OWN, BIG)
    for args in ((7, data, decoded), (P1, bytearray(data), decoded), (P1, data, decoded.stream_slice)):
        with pytest.raises(InvalidPoolRequest):
            pool.put(*args)


def test_header_only_newer_signals_replace_header_only(history):
    h1, h2, _ = history
    pool = SlicePool(OWN, BIG)
    put_slice(pool, P1, h1.header_only(6, 6))
    assert put_slice(pool, P1, h2.header_only(9, 9))
    assert pool.get(P1).stream_slice.header.signals_end == 2


# --------------------------------------------------------------------------- garbage collection


def test_gc_cuts_messages_below_the_expected_index(history):
    _, _, h3 = history
    pool = SlicePool(OWN, BIG)
    put_slice(pool, P1, h3.slice(0, 0, msg_limit=8))  # [0, 8)
    size = pool.byte_size()
    pool.garbage_collect({P1: ExpectedIndices(5, 0)})
    assert messages_range(pool, P1) == (5, 8)
    assert pool.byte_size() < size
    assert decode_slice(P1, pool.get(P1).data).stream_slice == pool.get(P1).stream_slice
    # Expected at the begin: untouched.
    before = pool.get(P1)
    pool.garbage_collect({P1: ExpectedIndices(5, 0)})
    assert pool.get(P1) == before


def test_gc_keeps_a_header_only_slice_with_new_signals(history):
    _, _, h3 = history
    pool = SlicePool(OWN, BIG)
    put_slice(pool, P1, h3.slice(0, 0, msg_limit=4))  # [0, 4), signals_end 3
    pool.garbage_collect({P1: ExpectedIndices(4, 2)})
    assert messages_range(pool, P1) == (None, None)
    assert pool.get(P1).stream_slice.header.signals_end == 3


def test_gc_drops_a_slice_with_nothing_new(history):
    _, _, h3 = history
    pool = SlicePool(OWN, BIG)
    put_slice(pool, P1, h3.slice(0, 0, msg_limit=4))
    pool.garbage_collect({P1: ExpectedIndices(4, 3)})
    assert pool.remotes() == () and pool.byte_size() == 0


def test_gc_drops_messages_beyond_a_gap(history):
    _, _, h3 = history
    pool = SlicePool(OWN, BIG)
    put_slice(pool, P1, h3.slice(6, 6, msg_limit=3))  # [6, 9) but we expect 4
    pool.garbage_collect({P1: ExpectedIndices(4, 0)})
    assert messages_range(pool, P1) == (None, None)  # header kept for its signals
    pool.garbage_collect({P1: ExpectedIndices(4, 3)})
    assert pool.remotes() == ()


def test_gc_leaves_peers_without_expected_indices_alone(history):
    pool = SlicePool(OWN, BIG)
    put_slice(pool, P1, history[0].slice())
    before = pool.get(P1)
    pool.garbage_collect({P2: ExpectedIndices(100, 100)})
    assert pool.get(P1) == before
    assert pool.remove(P1) and not pool.remove(P1)


# --------------------------------------------------------------------------- byte bound


@pytest.fixture(scope="module")
def three_peers():
    return {p: PeerSubnet(p, message_size=40).commit(0, 10, 1) for p in (P1, P2, P3)}


def test_an_oversized_slice_is_cut_to_its_longest_fitting_prefix(three_peers):
    snapshot = three_peers[P1]
    full = snapshot.slice()
    pool = SlicePool(OWN, len(full) - 1)
    assert put_slice(pool, P1, full)
    begin, end = messages_range(pool, P1)
    assert begin == 0 and 0 < end < 10
    assert pool.byte_size() <= pool.max_bytes
    assert decode_slice(P1, pool.get(P1).data).stream_slice == pool.get(P1).stream_slice
    # One more message would not have fit.
    assert len(snapshot.slice(0, 0, msg_limit=end + 1)) > pool.max_bytes or end == 9


def test_a_slice_whose_header_alone_does_not_fit_is_rejected(three_peers):
    pool = SlicePool(OWN, 100)
    assert not put_slice(pool, P1, three_peers[P1].slice())
    assert pool.remotes() == ()


def test_eviction_is_largest_first_then_greater_subnet(three_peers):
    small = {p: three_peers[p].slice(0, 0, msg_limit=1) for p in (P1, P2, P3)}
    large = three_peers[P3].slice(0, 0, msg_limit=5)
    room = len(small[P1]) + len(small[P2]) + len(small[P3])
    pool = SlicePool(OWN, room)
    for p in (P1, P2, P3):
        assert put_slice(pool, p, small[p])
    assert pool.byte_size() == room
    # P3 grows: someone must go. P1 and P2 are equally large; the greater id (P2) goes first.
    assert put_slice(pool, P3, large)
    assert len(small[P1]) == len(small[P2]) and len(small[P1]) + len(large) <= room
    assert pool.remotes() == (P1, P3)
    assert pool.byte_size() <= room


def test_the_pool_never_exceeds_its_bound(three_peers):
    specs = [(p, limit) for limit in (1, 3, 6, 10) for p in (P1, P2, P3)]
    for bound in (600, 900, 1500, 2500):
        pool = SlicePool(OWN, bound)
        for p, limit in specs:
            put_slice(pool, p, three_peers[p].slice(0, 0, msg_limit=limit))
            assert pool.byte_size() <= bound
            assert pool.byte_size() == sum(pool.get(r).byte_size for r in pool.remotes())


# --------------------------------------------------------------------------- next request


def test_next_request_from_the_expected_index_when_nothing_is_held(history):
    pool = SlicePool(OWN, BIG)
    assert pool.next_request(P1, ExpectedIndices(4, 1), 10, 1000) == (4, 4, 10, 1000)


def test_next_request_continues_the_held_messages(history):
    _, _, h3 = history
    pool = SlicePool(OWN, BIG)
    data = h3.slice(4, 4, msg_limit=3)  # [4, 7)
    put_slice(pool, P1, data)
    assert pool.next_request(P1, ExpectedIndices(4, 0), 10, 5000) == (4, 7, 7, 5000 - len(data))
    # Holding more than wanted: a header-only refresh of [4, 7).
    assert pool.next_request(P1, ExpectedIndices(4, 0), 2, 100) == (4, 7, 0, 0)
    # The answer is appended.
    put_slice(pool, P1, h3.slice(4, 7, msg_limit=7))
    assert messages_range(pool, P1) == (4, 12)


def test_next_request_ignores_held_messages_that_do_not_continue(history):
    _, _, h3 = history
    pool = SlicePool(OWN, BIG)
    put_slice(pool, P1, h3.slice(6, 6, msg_limit=3))  # [6, 9)
    assert pool.next_request(P1, ExpectedIndices(4, 0), 10, 99) == (4, 4, 10, 99)  # a gap
    assert pool.next_request(P1, ExpectedIndices(9, 0), 10, 99) == (9, 9, 10, 99)  # all old


@pytest.mark.parametrize("args", [(OWN, 0), (OWN, -1), (OWN, True), (1, 10)])
def test_bad_configuration_is_rejected(args):
    with pytest.raises(InvalidPoolRequest):
        SlicePool(*args)


def test_bad_request_limits_are_rejected():
    with pytest.raises(InvalidPoolRequest):
        SlicePool(OWN, 10).next_request(P1, ExpectedIndices(0, 0), -1, 10)


# --------------------------------------------------------------------------- property


@pytest.fixture(scope="module")
def histories():
    """P1 and P2 at three heights each: streams growing from the front, GC'd at the back."""
    out = {}
    for peer in (P1, P2):
        subnet = PeerSubnet(peer, message_size=30)
        out[peer] = [subnet.commit(0, 6, 0), subnet.commit(1, 9, 1), subnet.commit(2, 12, 2)]
    return out


operations = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.sampled_from((P1, P2)), st.integers(0, 2), st.integers(0, 12),
                  st.integers(0, 12), st.integers(0, 6)),
        st.tuples(st.just("gc"), st.sampled_from((P1, P2)), st.integers(0, 12), st.integers(0, 3)),
    ),
    min_size=1, max_size=8,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(max_bytes=st.integers(300, 4000), ops=operations)
def test_pool_invariants(histories, max_bytes, ops):
    """Whatever is put and collected: within the bound, and every pooled slice is exactly
    one verified slice whose decoded fields the pool reports."""
    pool = SlicePool(OWN, max_bytes)
    for op in ops:
        if op[0] == "put":
            _, peer, height, a, b, limit = op
            snapshot = histories[peer][height]
            header = snapshot.header
            witness_begin = min(max(a, header.begin), header.end)
            msg_begin = min(max(b, witness_begin), header.end)
            put_slice(pool, peer, snapshot.slice(witness_begin, msg_begin, msg_limit=limit))
        else:
            _, peer, message_index, signal_index = op
            pool.garbage_collect({peer: ExpectedIndices(message_index, signal_index)})
        assert pool.byte_size() <= max_bytes
        for remote in pool.remotes():
            pooled = pool.get(remote)
            decoded = decode_slice(remote, pooled.data)
            assert decoded.stream_slice == pooled.stream_slice
            assert decoded.witness_begin == pooled.witness_begin
            assert decoded.certification.height == pooled.certification_height
            assert pooled.byte_size == len(pooled.data)
