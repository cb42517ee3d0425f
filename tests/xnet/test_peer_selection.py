"""PeerSelector: deterministic for a seeded rng, latency-weighted, failure-penalized."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from xnet.peer_selection import PeerSelector

PEERS = ["n1", "n2", "n3", "n4"]


def test_same_seed_same_order_whatever_the_input_order():
    selector = PeerSelector()
    selector.record_success("n2", 0.01)
    selector.record_failure("n3")
    first = [selector.order(PEERS, random.Random(7)) for _ in range(3)]
    shuffled = [selector.order(list(reversed(PEERS)), random.Random(7)) for _ in range(3)]
    assert first == shuffled and len({tuple(o) for o in first}) == 1
    assert sorted(first[0]) == PEERS


def test_order_is_a_full_fallback_sequence_without_duplicates():
    selector = PeerSelector()
    rng = random.Random(1)
    for _ in range(50):
        order = selector.order(PEERS + ["n1"], rng)
        assert sorted(order) == PEERS
    assert selector.order([], rng) == []
    with pytest.raises(ValueError):
        selector.choose([], rng)


def test_low_latency_peers_are_preferred():
    selector = PeerSelector()
    for _ in range(10):
        selector.record_success("fast", 0.005)
        selector.record_success("slow", 0.5)
    rng = random.Random(3)
    picks = Counter(selector.choose(["fast", "slow"], rng) for _ in range(1000))
    assert picks["fast"] > 900 and picks["slow"] > 0  # preferred, but the slow one is still tried


def test_failures_and_timeouts_demote_a_peer_until_it_recovers():
    selector = PeerSelector()
    for peer in ("a", "b", "c"):
        selector.record_success(peer, 0.02)
    selector.record_failure("b")
    selector.record_failure("c", timed_out=True)
    assert selector.score("a") < selector.score("b") < selector.score("c")
    rng = random.Random(11)
    firsts = Counter(selector.order(["a", "b", "c"], rng)[0] for _ in range(1000))
    assert firsts["a"] > 880 and firsts["b"] > firsts["c"]
    for _ in range(3):
        selector.record_failure("a")
    assert selector.consecutive_failures("a") == 3
    assert selector.score("a") > selector.score("b")
    for _ in range(20):
        selector.record_success("a", 0.02)
    assert selector.consecutive_failures("a") == 0
    assert selector.score("a") < selector.score("b")


def test_ewma_update_rule():
    selector = PeerSelector(initial_latency_s=0.1, smoothing=0.5)
    assert selector.latency_estimate("x") == 0.1
    selector.record_success("x", 0.3)
    assert selector.latency_estimate("x") == pytest.approx(0.2)
    selector.record_failure("x", latency_s=0.0)  # penalty sample 1.0 s
    assert selector.latency_estimate("x") == pytest.approx(0.6)
    selector.forget("x")
    assert selector.latency_estimate("x") == 0.1


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), True, "1"])
def test_bad_latency_samples_are_rejected(bad):
    with pytest.raises(ValueError):
        PeerSelector().record_success("x", bad)
