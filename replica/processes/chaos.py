"""Chaos for a node-model testnet: ``replica testnet up|run --chaos-kill RATE [--chaos-seed N]``.

While the testnet runs (not while it starts or settles), the launcher SIGKILLs a random
running node about ``RATE`` times a second across the testnet (a Poisson process: the gaps
are exponential with mean ``1 / RATE``), and the supervisor restarts it. A kill never leaves
more than ``f = (n - 1) // 3`` of a subnet's ``n`` nodes down at once, so every subnet keeps
the quorum it needs to make progress. A node counts as down while its process is not
running, until its restarted process's addresses are in the registry again, and while it
carries a hold (``control/hold/<node>``): the operator wants it down, so chaos spends none
of the subnet's budget beside it. A subnet of fewer than four nodes (``f = 0``) is never hit.

The decision is a pure function, ``decide``: from the random generator's state, the time,
the subnets' nodes and who is down, it returns the next state and the victim (if a kill is
due and some node may die). The same seed and the same sequence of inputs give the same
kills. ``Chaos`` is the shell: it asks the launcher's ``Supervisor`` (``replica.processes.supervisor``) who is down, kills the
victim through it (logged in the node's log and the launcher's output, not counted toward
the restart limit) and counts kills per subnet for the summary at the end.
"""

from __future__ import annotations

import collections
import random
import time
from dataclasses import dataclass, replace
from typing import AbstractSet, Any, Mapping, Sequence

__all__ = ["DEFAULT_CHAOS_SEED", "MAX_LAG_S", "ChaosState", "Decision", "fault_tolerance", "killable",
           "initial_state", "decide", "Chaos"]

#: ``--chaos-seed`` when none is given: runs are repeatable unless asked otherwise.
DEFAULT_CHAOS_SEED = 0
#: After a stall of the launcher loop, kills due more than this long ago are not caught up.
MAX_LAG_S = 1.0


def fault_tolerance(nodes: int) -> int:
    """``f = (n - 1) // 3``: how many of a subnet's ``n`` nodes may be down at once."""
    return max(0, (nodes - 1) // 3)


@dataclass(frozen=True)
class ChaosState:
    """Everything ``decide`` needs besides its inputs: the rate, the random generator's state
    (``random.Random.getstate()``) and the monotonic time the next kill is due."""

    rate_per_s: float
    rng_state: Any
    next_at: float


@dataclass(frozen=True)
class Decision:
    state: ChaosState
    #: A kill was due at ``now`` (whether or not a node could be killed).
    due: bool
    #: The node to kill, or ``None`` (not due, or every subnet already at ``f`` down).
    victim: str | None


def killable(subnets: Mapping[str, Sequence[str]], down: AbstractSet[str]) -> list[str]:
    """The nodes whose death leaves at most ``f`` of their subnet down, in the given order."""
    candidates: list[str] = []
    for nodes in subnets.values():
        already = sum(1 for node in nodes if node in down)
        if already + 1 <= fault_tolerance(len(nodes)):
            candidates.extend(node for node in nodes if node not in down)
    return candidates


def initial_state(rate_per_s: float, seed: int, now: float) -> ChaosState:
    """The state of a chaos run starting at ``now`` (the first kill one exponential gap later)."""
    if not rate_per_s > 0:
        raise ValueError(f"a chaos rate must be positive, got {rate_per_s!r}")
    rng = random.Random(seed)
    next_at = now + rng.expovariate(rate_per_s)
    return ChaosState(rate_per_s, rng.getstate(), next_at)


def decide(state: ChaosState, now: float, subnets: Mapping[str, Sequence[str]], down: AbstractSet[str]) -> Decision:
    """One decision (module docstring). Not due: the state unchanged, no victim. Due: the
    next kill is scheduled one exponential gap after this one (not before ``now - MAX_LAG_S``)
    and the victim drawn among ``killable(subnets, down)`` (``None`` when that is empty: the
    kill is skipped, not postponed). Call again with the victim added to ``down`` until a
    decision is not due."""
    if now < state.next_at:
        return Decision(state, False, None)
    rng = random.Random()
    rng.setstate(state.rng_state)
    candidates = killable(subnets, down)
    victim = candidates[rng.randrange(len(candidates))] if candidates else None
    next_at = max(state.next_at, now - MAX_LAG_S) + rng.expovariate(state.rate_per_s)
    return Decision(replace(state, rng_state=rng.getstate(), next_at=next_at), True, victim)


class Chaos:
    """The shell around ``decide``: ``tick()`` once per launcher loop kills what is due.

    ``supervisor`` is the launcher's ``Supervisor`` (``replica.processes.supervisor``) (node model): its ``nodes_by_subnet``,
    ``down_units()`` and ``kill(node, cause)``."""

    def __init__(self, supervisor, rate_per_s: float, seed: int = DEFAULT_CHAOS_SEED, *,
                 now: float | None = None) -> None:
        self.supervisor = supervisor
        self.seed = seed
        self.state = initial_state(rate_per_s, seed, time.monotonic() if now is None else now)
        #: Kills per subnet, and kills that were due while no node could die.
        self.kills: collections.Counter[str] = collections.Counter()
        self.skipped = 0
        self._subnet_of = {node: subnet for subnet, nodes in supervisor.nodes_by_subnet.items() for node in nodes}

    def tick(self, now: float | None = None) -> list[str]:
        """Kill every node whose kill is due by ``now``; return them."""
        now = time.monotonic() if now is None else now
        killed: list[str] = []
        while True:
            decision = decide(self.state, now, self.supervisor.nodes_by_subnet, self.supervisor.down_units())
            self.state = decision.state
            if not decision.due:
                return killed
            if decision.victim is None:
                self.skipped += 1
            elif self.supervisor.kill(decision.victim, "chaos"):
                self.kills[self._subnet_of[decision.victim]] += 1
                killed.append(decision.victim)

    def summary(self) -> str:
        per_subnet = ", ".join(f"{subnet} {self.kills[subnet]}" for subnet in self.supervisor.nodes_by_subnet)
        skipped = f"; {self.skipped} due while every subnet had f nodes down (skipped)" if self.skipped else ""
        return (f"chaos (rate {self.state.rate_per_s:g}/s, seed {self.seed}): {sum(self.kills.values())} kills "
                f"({per_subnet}){skipped}")
