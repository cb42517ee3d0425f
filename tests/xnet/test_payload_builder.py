"""get_xnet_payload: trimming to the expected index, limits and byte budget, signals first,
seeded rotation, and — as a property — its output always validates."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from state_manager.certified_slice import decode_valid_certified_stream_slice
from xnet.errors import InvalidBuildRequest
from xnet.expected_indices import expected_indices_from_payloads
from xnet.payload_builder import compute_rotation, get_xnet_payload, has_messages_at
from xnet.payload_validator import Valid, own_stream_end, validate_slice, validate_xnet_payload
from xnet.slice_pool import SlicePool, restrict_pooled_slice
from xnet.slice_validation import InvalidSlice

from .fixtures import OWN, P1, P2, P3, PEERS, REGISTRY_VERSION, TEST_LIMITS, PeerSubnet, Registry, own_state, \
    payload, put_slice

BIG = 1 << 20
REGISTRY = Registry()


def validate(xnet_payload, state, past=(), limits=TEST_LIMITS):
    return validate_xnet_payload(xnet_payload, OWN, state, list(past), REGISTRY.public_key_for, REGISTRY_VERSION,
                                 limits)


def ranges(xnet_payload):
    """``{subnet: (messages_begin, messages_end) or None for header-only}``."""
    out = {}
    for remote, data in xnet_payload:
        s = decode_valid_certified_stream_slice(data)
        out[remote] = (s.messages_begin, s.messages_end) if s.messages else None
    return out


@pytest.fixture(scope="module")
def snaps():
    """Each peer's stream to us: P1 [0, 10), P2 [0, 6), P3 [0, 8); signals in range of our streams."""
    return {
        P1: PeerSubnet(P1, message_size=40).commit(0, 10, 2),
        P2: PeerSubnet(P2, message_size=40).commit(0, 6, 1),
        P3: PeerSubnet(P3, message_size=40).commit(0, 8, 3),
    }


def state_expecting(p1=2, p2=0, p3=1):
    """Our streams to the peers: we sent [0, 4) to each; we expect the given message indices."""
    return own_state({P1: (0, 4, p1), P2: (0, 4, p2), P3: (0, 4, p3)})


def full_pool(snaps, peers=PEERS) -> SlicePool:
    pool = SlicePool(OWN, BIG)
    for peer in peers:
        assert put_slice(pool, peer, snaps[peer].slice(0, 0))
    return pool


def build(state, pool, budget=BIG, past=(), limits=TEST_LIMITS, seed=b"seed"):
    return get_xnet_payload(state, list(past), pool, budget, limits, seed)


# --------------------------------------------------------------------------- basics


def test_one_slice_per_peer_sorted_and_cut_to_the_expected_index(snaps):
    state = state_expecting()
    xnet_payload = build(state, full_pool(snaps))
    assert [remote for remote, _ in xnet_payload] == [P1, P2, P3]
    assert ranges(xnet_payload) == {P1: (2, 10), P2: (0, 6), P3: (1, 8)}
    assert isinstance(validate(xnet_payload, state), Valid)


def test_past_payloads_move_the_cut(snaps):
    state = state_expecting()
    past = payload((P1, snaps[P1].slice(2, 2, msg_limit=3)))  # [2, 5) agreed, not executed
    xnet_payload = build(state, full_pool(snaps, [P1]), past=[past])
    assert ranges(xnet_payload) == {P1: (5, 10)}
    assert isinstance(validate(xnet_payload, state, [past]), Valid)
    # Without accounting for the past payload the same slice would overlap.
    assert ranges(build(state, full_pool(snaps, [P1]))) == {P1: (2, 10)}


def test_builder_does_not_change_the_pool(snaps):
    pool = full_pool(snaps)
    before = {remote: pool.get(remote) for remote in pool.remotes()}
    build(state_expecting(), pool, budget=3000)
    assert {remote: pool.get(remote) for remote in pool.remotes()} == before


def test_empty_pool_gives_an_empty_payload():
    assert build(state_expecting(), SlicePool(OWN, BIG)) == ()


# --------------------------------------------------------------------------- limits and budget


def test_message_limit(snaps):
    state = state_expecting()
    limits = TEST_LIMITS.with_(max_slice_messages=2)
    xnet_payload = build(state, full_pool(snaps), limits=limits)
    assert ranges(xnet_payload) == {P1: (2, 4), P2: (0, 2), P3: (1, 3)}
    assert isinstance(validate(xnet_payload, state, limits=limits), Valid)


def test_slice_byte_limit(snaps):
    state = state_expecting()
    pool = full_pool(snaps, [P1])
    three = restrict_pooled_slice(pool.get(P1), 2, 5).byte_size
    limits = TEST_LIMITS.with_(max_slice_bytes=three)
    xnet_payload = build(state, pool, limits=limits)
    assert ranges(xnet_payload) == {P1: (2, 5)}
    assert isinstance(validate(xnet_payload, state, limits=limits), Valid)


@pytest.mark.parametrize("budget", [0, 300, 800, 1200, 1500, 2000, 2600, 3500, 5000])
def test_byte_budget_is_respected(snaps, budget):
    state = state_expecting()
    xnet_payload = build(state, full_pool(snaps), budget=budget)
    assert sum(len(data) for _, data in xnet_payload) <= budget
    assert isinstance(validate(xnet_payload, state), Valid)


def test_block_limit_caps_the_budget(snaps):
    state = state_expecting()
    limits = TEST_LIMITS.with_(max_block_payload_bytes=1500)
    xnet_payload = build(state, full_pool(snaps), budget=BIG, limits=limits)
    assert 0 < sum(len(data) for _, data in xnet_payload) <= 1500
    assert isinstance(validate(xnet_payload, state, limits=limits), Valid)


def test_at_least_one_message_when_it_fits(snaps):
    state = state_expecting()
    pool = full_pool(snaps, [P1])
    one = restrict_pooled_slice(pool.get(P1), 2, 3).byte_size
    assert ranges(build(state, pool, budget=one)) == {P1: (2, 3)}
    # One byte less: the message does not fit; the header-only slice still carries new
    # signals (2 > our begin 0) and fits, so it goes in instead.
    assert ranges(build(state, pool, budget=one - 1)) == {P1: None}
    assert build(state, pool, budget=200) == ()


# --------------------------------------------------------------------------- what is skipped


def test_nothing_new_is_skipped(snaps):
    state = own_state({P1: (2, 4, 10)})  # every message inducted, signals_end 2 == our begin
    assert build(state, full_pool(snaps, [P1])) == ()


def test_only_new_signals_give_a_header_only_slice(snaps):
    state = own_state({P1: (0, 4, 10)})  # every message inducted, signals_end 2 > our begin 0
    xnet_payload = build(state, full_pool(snaps, [P1]))
    assert ranges(xnet_payload) == {P1: None}
    assert isinstance(validate(xnet_payload, state), Valid)


def test_a_slice_that_would_fail_validation_is_skipped(snaps):
    state = own_state({P1: (0, 1, 2)})  # P1's signals_end 2 acknowledges a message we never sent
    assert build(state, full_pool(snaps, [P1])) == ()


def test_a_gap_is_not_bridged(snaps):
    pool = SlicePool(OWN, BIG)
    put_slice(pool, P1, snaps[P1].slice(5, 5))  # [5, 10), but we expect 2
    state = state_expecting()
    assert ranges(build(state, pool)) == {P1: None}  # only its new signals
    assert build(own_state({P1: (2, 4, 2)}), pool) == ()  # and without new signals: nothing


def test_bad_arguments(snaps):
    with pytest.raises(InvalidBuildRequest):
        build(state_expecting(), full_pool(snaps), budget=-1)
    with pytest.raises(InvalidBuildRequest):
        build(state_expecting(), full_pool(snaps), seed="text")


# --------------------------------------------------------------------------- ordering


def test_rotation_is_a_seeded_permutation():
    remotes = [P3, P1, P2]
    for seed in (b"", b"a", b"b", bytes(32)):
        order = compute_rotation(remotes, seed)
        assert sorted(order) == sorted(remotes)
        assert order == compute_rotation(list(reversed(remotes)), seed)
        start = order.index(P1)
        assert order[start:] + order[:start] == (P1, P2, P3)  # a rotation of the sorted list
    assert compute_rotation([], b"x") == ()


def test_rotation_is_fair_across_seeds():
    firsts = Counter(compute_rotation(PEERS, i.to_bytes(4, "big"))[0] for i in range(300))
    assert set(firsts) == set(PEERS)
    assert all(70 <= count <= 130 for count in firsts.values()), firsts


def test_builder_is_deterministic_under_a_seed(snaps):
    state, pool = state_expecting(), full_pool(snaps)
    for seed in (b"x", b"y", b"z"):
        assert build(state, pool, budget=2500, seed=seed) == build(state, pool, budget=2500, seed=seed)


def test_tight_budget_is_shared_fairly_across_seeds(snaps):
    """A budget for about one slice: which peer gets in follows the rotation's first peer."""
    state, pool = state_expecting(), full_pool(snaps)
    budget = max(restrict_pooled_slice(pool.get(p), b, b + 1).byte_size for p, b in ((P1, 2), (P2, 0), (P3, 1)))
    winners = Counter()
    for i in range(30):
        seed = i.to_bytes(4, "big")
        xnet_payload = build(state, pool, budget=budget, seed=seed)
        assert len(xnet_payload) == 1 and ranges(xnet_payload)[xnet_payload[0][0]] is not None
        assert xnet_payload[0][0] == compute_rotation(PEERS, seed)[0]
        winners[xnet_payload[0][0]] += 1
    assert set(winners) == set(PEERS)


def test_new_signals_go_first(snaps):
    """P1 only has signals to offer; P2 and P3 have messages. With room for P1's header-only
    slice and one message slice, P1 is in for every seed; the message slice rotates."""
    state = state_expecting(p1=10)
    pool = full_pool(snaps)
    signals = restrict_pooled_slice(pool.get(P1), 10, 10).byte_size
    one_message = max(restrict_pooled_slice(pool.get(p), b, b + 1).byte_size for p, b in ((P2, 0), (P3, 1)))
    budget = signals + one_message
    with_messages = Counter()
    for i in range(20):
        xnet_payload = build(state, pool, budget=budget, seed=i.to_bytes(4, "big"))
        got = ranges(xnet_payload)
        assert got[P1] is None
        assert sum(len(data) for _, data in xnet_payload) <= budget
        assert isinstance(validate(xnet_payload, state), Valid)
        with_messages.update(p for p in got if p != P1)
    assert set(with_messages) == {P2, P3}


# --------------------------------------------------------------------------- property


@st.composite
def scenarios(draw):
    """Mostly honest peers (signals inside our stream, pooled slices around the expected
    index), sometimes not; random message sizes, limits, budget and seed."""
    peers = draw(st.lists(st.sampled_from(PEERS), unique=True, min_size=1, max_size=3))
    spec = {}
    for peer in sorted(peers):
        our_begin = draw(st.integers(0, 3))
        our_end = our_begin + draw(st.integers(0, 4))
        remote_begin = draw(st.integers(0, 3))
        remote_end = remote_begin + draw(st.integers(0, 8))
        expected = draw(st.integers(remote_begin, remote_end))  # our signals_end for the peer
        honest = draw(st.integers(0, 4)) > 0
        if honest:  # signals inside our stream; the pooled slice reaches past the expected index
            remote_signals = draw(st.integers(our_begin, our_end))
            msg_begin = draw(st.integers(remote_begin, expected))
            limit = expected - msg_begin + draw(st.integers(1, 6))
        else:  # may regress or acknowledge what we never sent; may leave a gap
            remote_signals = draw(st.integers(0, our_end + 2))
            msg_begin = draw(st.integers(remote_begin, remote_end))
            limit = draw(st.integers(0, 8))
        witness_begin = draw(st.integers(remote_begin, msg_begin))
        past = draw(st.none() | st.none() | st.integers(0, 2))
        sizes = draw(st.lists(st.integers(1, 200), min_size=remote_end - remote_begin,
                              max_size=remote_end - remote_begin))
        spec[peer] = (our_begin, our_end, remote_begin, remote_end, expected, remote_signals, witness_begin,
                      msg_begin, limit, past, sizes)
    limits = TEST_LIMITS.with_(max_slice_messages=draw(st.integers(1, 6)),
                               max_slice_bytes=draw(st.integers(800, 5000)),
                               max_block_payload_bytes=draw(st.integers(1000, 12000)))
    budget = draw(st.integers(0, 1500) | st.integers(1500, 12000) | st.just(12000))
    seed = draw(st.binary(max_size=4))
    return spec, limits, budget, seed


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_builder_output_always_validates(scenario):
    spec, limits, budget, seed = scenario
    state = own_state({peer: (s[0], s[1], s[4]) for peer, s in spec.items()})
    pool = SlicePool(OWN, BIG)
    past_entries = []
    for peer, (_, _, rb, re, expected, signals, wb, mb, limit, past, sizes) in spec.items():
        snapshot = PeerSubnet(peer).commit(rb, re, signals, sizes={rb + i: n for i, n in enumerate(sizes)})
        put_slice(pool, peer, snapshot.slice(wb, mb, msg_limit=limit))
        if past is not None:
            past_entries.append((peer, snapshot.slice(expected, expected, msg_limit=past)))
    past_payloads = [payload(*past_entries)] if past_entries else []
    xnet_payload = get_xnet_payload(state, past_payloads, pool, budget, limits, seed)
    assert xnet_payload == get_xnet_payload(state, past_payloads, pool, budget, limits, seed)
    assert sum(len(data) for _, data in xnet_payload) <= min(budget, limits.max_block_payload_bytes)
    result = validate(xnet_payload, state, past_payloads, limits=limits)
    assert isinstance(result, Valid), result
    if len(spec) == 1:  # liveness: a lone peer's next message goes in whenever it fits and is valid
        (peer,) = spec
        pooled = pool.get(peer)
        expected = expected_indices_from_payloads(state, [peer], past_payloads)[peer]
        if has_messages_at(pooled.stream_slice, expected):
            begin = expected.message_index
            one = restrict_pooled_slice(pooled, begin, begin + 1)
            try:
                validate_slice(one.stream_slice, one.byte_size, expected, own_stream_end(state, peer), limits)
                fits = one.byte_size <= min(budget, limits.max_block_payload_bytes)
            except InvalidSlice:
                fits = False
            if fits:
                assert ranges(xnet_payload)[peer][0] == begin
