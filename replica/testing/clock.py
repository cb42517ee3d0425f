"""The deterministic testnet's clock: time moves only when the test moves it.

Every node, block maker, ingress expiry and certificate-freshness check reads this clock, so
a run depends on the calls made, never on the wall clock. It starts at ``GENESIS_TIME_NS``.
"""

from __future__ import annotations

from .errors import TimeRegression

__all__ = ["GENESIS_TIME_NS", "ManualClock"]

#: 2026-01-01T00:00:00Z: any fixed instant would do; a realistic one reads better in logs.
GENESIS_TIME_NS = 1_767_225_600 * 10**9


class ManualClock:
    """A callable returning the current time in nanoseconds; ``set`` / ``advance`` move it."""

    __slots__ = ("_now",)

    def __init__(self, start_ns: int = GENESIS_TIME_NS) -> None:
        self._now = start_ns

    def __call__(self) -> int:
        return self._now

    def set(self, time_ns: int) -> None:
        if type(time_ns) is not int:
            raise TimeRegression(f"a time is an int of nanoseconds, not {time_ns!r}")
        if time_ns < self._now:
            raise TimeRegression(f"time {time_ns} ns is before the current time {self._now} ns")
        self._now = time_ns

    def advance(self, delta_ns: int) -> None:
        if type(delta_ns) is not int or delta_ns < 0:
            raise TimeRegression(f"advance_time takes a non-negative int of nanoseconds, not {delta_ns!r}")
        self._now += delta_ns
