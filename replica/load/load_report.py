"""What ``replica load`` reports (``LoadReport``), and the error that ends a run early with the
report so far (``LoadFailed``).

Every offered call ends in exactly one of:

* ``submitted`` — a node took it (or it was answered, though no node confirmed it at the
  time); it is then answered (``replied``, ``rejected`` by code) or, if no certified answer
  came by the end of the drain, ``lost``;
* ``refused`` — a node refused it, by the node's reason (``pool_full``, ``expired``, ...);
* ``not_submitted`` — it never reached a node that took it, by cause: ``client limit`` (the
  generator's submitters were all busy when it was due, or the load window closed before one
  was free: the client, not the testnet, was the limit), ``no node confirmed`` (no node
  answered, and no certified status of it ever appeared), or an error's name.

``duplicated`` and the other half of ``lost`` come from the load canisters' own counters
(echoes seen twice, callbacks without a relay). ``drain_s`` / ``drain_rounds``: how long, in
seconds and in the subnets' heights, answers were awaited after the load window closed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from replica.errors import ReplicaError

__all__ = ["CLIENT_LIMIT", "NOT_CONFIRMED", "LoadReport", "LoadFailed"]

CLIENT_LIMIT = "client limit"
NOT_CONFIRMED = "no node confirmed"


@dataclass
class LoadReport:
    options: Any   # LoadOptions
    wall_s: float
    submitting_s: float
    offered: int
    submitted: int
    refused: dict[str, int]
    not_submitted: dict[str, int]
    replied: int
    rejected: dict[str, int]
    inner_rejects: dict[str, int]
    lost: int
    duplicated: int
    latency_ms: list[float] = field(repr=False)
    latency_rounds: list[int] = field(repr=False)
    canister_totals: dict[str, int] = field(default_factory=dict)
    drain_s: float = 0.0
    drain_rounds: int = 0
    #: Why the load stopped before its duration (``interrupted``, ``stopped``), if it did.
    ended_early: str | None = None
    #: The error that ended the run, if one did (then the numbers are those so far).
    error: str | None = None

    @property
    def answered(self) -> int:
        return self.replied + sum(self.rejected.values())

    @property
    def client_limited(self) -> bool:
        """The generator could not submit every call when it was due."""
        return self.not_submitted.get(CLIENT_LIMIT, 0) > 0

    @property
    def achieved_per_s(self) -> float:
        return self.replied / self.wall_s if self.wall_s > 0 else 0.0

    def percentile(self, samples: list, q: float) -> float:
        if not samples:
            return 0.0
        ordered = sorted(samples)
        return float(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))])

    def as_json(self) -> dict:
        return {
            "offered": self.offered, "offered_per_s": self.options.rate, "duration_s": self.options.duration_s,
            "submitted": self.submitted, "submitted_per_s": round(self.submitted / max(self.submitting_s, 1e-9), 1),
            "achieved_per_s": round(self.achieved_per_s, 1), "wall_s": round(self.wall_s, 2),
            "answered": self.answered, "replied": self.replied, "rejected": self.rejected,
            "inner_rejects": self.inner_rejects, "refused": self.refused, "not_submitted": self.not_submitted,
            "client_limited": self.client_limited, "lost": self.lost, "duplicated": self.duplicated,
            "p50_ms": round(self.percentile(self.latency_ms, 0.5), 1),
            "p90_ms": round(self.percentile(self.latency_ms, 0.9), 1),
            "p99_ms": round(self.percentile(self.latency_ms, 0.99), 1),
            "p50_rounds": self.percentile(self.latency_rounds, 0.5),
            "p99_rounds": self.percentile(self.latency_rounds, 0.99),
            "max_rounds": max(self.latency_rounds, default=0),
            "drain_s": round(self.drain_s, 2), "drain_rounds": self.drain_rounds,
            "canisters": self.canister_totals, "ended_early": self.ended_early, "error": self.error,
        }

    def table(self) -> list[str]:
        j = self.as_json()
        not_submitted = _counts(j["not_submitted"])
        if self.client_limited:
            not_submitted += " (the client was the limit: raise --submitters or lower --rate)"
        rows = [
            ("offered", f"{j['offered']} calls ({j['offered_per_s']:g} calls/s for {j['duration_s']:g} s)"),
            ("submitted", f"{j['submitted']} ({j['submitted_per_s']} calls/s)"),
            ("not submitted", not_submitted),
            ("refused at submission", _counts(j["refused"])),
            ("answered", f"{j['answered']}: replied {j['replied']}, rejected {_counts(j['rejected'])}"),
            ("achieved", f"{j['achieved_per_s']} replied calls/s over {j['wall_s']} s"),
            ("latency", f"p50 {j['p50_ms']} ms / {j['p50_rounds']:.0f} rounds, p90 {j['p90_ms']} ms, "
                        f"p99 {j['p99_ms']} ms / {j['p99_rounds']:.0f} rounds"),
            ("drain", f"{j['drain_s']} s, {j['drain_rounds']} rounds"),
            ("inner calls rejected", _counts(j["inner_rejects"])),
            ("lost", str(j["lost"])),
            ("duplicated", str(j["duplicated"])),
        ]
        if self.ended_early:
            rows.append(("ended early", self.ended_early))
        if self.error:
            rows.append(("error", self.error))
        width = max(len(name) for name, _ in rows)
        return [f"  {name:<{width}}  {value}" for name, value in rows]


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{code} {n}" for code, n in sorted(counts.items())) or "none"


class LoadFailed(ReplicaError):
    """A load run ended by an error; ``report`` holds what it counted until then (its
    ``error`` names the cause)."""

    def __init__(self, message: str, report: LoadReport | None = None) -> None:
        super().__init__(message)
        self.report = report
