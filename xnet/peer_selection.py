"""Which replica of a peer subnet to fetch slices from (pure: the caller measures time and
passes in the randomness).

Each peer has an EWMA latency estimate. A failure feeds a penalty sample into the estimate
(a timeout a larger one) and doubles the peer's score per consecutive failure, so a dead
replica is soon asked rarely but never excluded: it can recover once it answers again.
Peers are ordered by weighted random sampling without replacement, weight ``1 / score``;
the order is the fallback sequence for retries. Equal inputs and the same random sequence
give the same order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Protocol

__all__ = ["RandomSource", "PeerSelector"]


class RandomSource(Protocol):
    """Uniform floats in ``[0, 1)`` (``random.Random`` fits)."""

    def random(self) -> float: ...


@dataclass(slots=True)
class _PeerStats:
    latency_s: float
    consecutive_failures: int = 0


def _check_seconds(value: float, what: str) -> float:
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not is_number or not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be a finite, non-negative number of seconds, got {value!r}")
    return float(value)


class PeerSelector:
    """Latency-weighted random choice of peer replicas, with failure penalties."""

    def __init__(
        self,
        *,
        initial_latency_s: float = 0.05,
        smoothing: float = 0.3,
        failure_latency_s: float = 1.0,
        timeout_latency_s: float = 5.0,
        max_backoff_doublings: int = 8,
        min_latency_s: float = 0.001,
    ) -> None:
        if not 0 < smoothing <= 1:
            raise ValueError("smoothing must be in (0, 1]")
        if type(max_backoff_doublings) is not int or max_backoff_doublings < 0:
            raise ValueError("max_backoff_doublings must be a non-negative int")
        self._initial = _check_seconds(initial_latency_s, "initial_latency_s")
        self._failure = _check_seconds(failure_latency_s, "failure_latency_s")
        self._timeout = _check_seconds(timeout_latency_s, "timeout_latency_s")
        # A floor keeps weights finite for a peer that answers in "zero" time.
        self._floor = _check_seconds(min_latency_s, "min_latency_s") or 1e-6
        self._smoothing = float(smoothing)
        self._max_doublings = max_backoff_doublings
        self._stats: dict[str, _PeerStats] = {}

    def _get(self, peer: str) -> _PeerStats:
        stats = self._stats.get(peer)
        if stats is None:
            stats = self._stats[peer] = _PeerStats(self._initial)
        return stats

    def _update(self, stats: _PeerStats, sample_s: float) -> None:
        """``latency ← latency + α · (sample − latency)``."""
        stats.latency_s += self._smoothing * (sample_s - stats.latency_s)

    def record_success(self, peer: str, latency_s: float) -> None:
        """``peer`` answered in ``latency_s`` seconds."""
        stats = self._get(peer)
        self._update(stats, _check_seconds(latency_s, "latency_s"))
        stats.consecutive_failures = 0

    def record_failure(self, peer: str, *, timed_out: bool = False, latency_s: float = 0.0) -> None:
        """``peer`` failed (or ``timed_out``) after ``latency_s`` seconds."""
        penalty = self._timeout if timed_out else self._failure
        stats = self._get(peer)
        self._update(stats, max(penalty, _check_seconds(latency_s, "latency_s")))
        stats.consecutive_failures += 1

    def latency_estimate(self, peer: str) -> float:
        """The EWMA latency of ``peer`` (the initial estimate for a peer never seen)."""
        stats = self._stats.get(peer)
        return self._initial if stats is None else stats.latency_s

    def consecutive_failures(self, peer: str) -> int:
        stats = self._stats.get(peer)
        return 0 if stats is None else stats.consecutive_failures

    def score(self, peer: str) -> float:
        """``max(latency, floor) · 2^min(consecutive failures, cap)`` — lower is better."""
        doublings = min(self.consecutive_failures(peer), self._max_doublings)
        return max(self.latency_estimate(peer), self._floor) * 2.0**doublings

    def forget(self, peer: str) -> None:
        """Drop what is known about ``peer`` (it left the registry)."""
        self._stats.pop(peer, None)

    def order(self, peers: Iterable[str], rng: RandomSource) -> list[str]:
        """All distinct ``peers`` in fallback order: weighted random sampling without
        replacement, ``P(next = p) = w(p) / Σ w`` over the remaining peers, ``w = 1 / score``.
        Peers are sorted first so the caller's iteration order does not matter."""
        remaining = sorted(dict.fromkeys(peers))
        weights = [1.0 / self.score(peer) for peer in remaining]
        ordered = []
        while remaining:
            point = rng.random() * sum(weights)
            index = len(remaining) - 1  # float rounding can leave ``point`` at the very end
            for i, weight in enumerate(weights):
                point -= weight
                if point < 0:
                    index = i
                    break
            ordered.append(remaining.pop(index))
            weights.pop(index)
        return ordered

    def choose(self, peers: Iterable[str], rng: RandomSource) -> str:
        """The first peer of ``order``; ``ValueError`` if there are none."""
        ordered = self.order(peers, rng)
        if not ordered:
            raise ValueError("no peers to choose from")
        return ordered[0]
