"""What runs on an executor: replicas of one partition replayed into result rows.

``replay_partition`` and ``states_partition`` are pure functions of their inputs; the only
thing they cannot do in-process is a different hash seed, so replicas with ``hashseed:S``
are handed, per seed, to the injected ``run_isolated`` (``isolation.run_isolated`` spawns a
subprocess with ``PYTHONHASHSEED=S`` that runs these same functions). A replica whose
replay raises (its own bug, a corrupted batch, a missing checkpoint) is not lost: it
yields one row with ``error`` set at the height it failed, hashes empty.

Rows: ``(replica, subnet, height, full_hash, certified_root, error)``; ``replay_partition``
adds the ``build`` fingerprint of the process that replayed the row (``build``): its own for
in-process replicas, the child's for isolated ones.
States (drill-down): ``(request, height, full_hash, certified_root, state bytes, error)``.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

from state_manager.state_codec import encode_state

from .errors import AuditError
from .inputs import RunInputs
from .perturbation import parse_perturbation

__all__ = ["ResultRow", "StateRow", "replay_replica", "replay_partition", "replay_to_state", "states_partition",
           "hash_seed_of", "with_build"]

ResultRow = tuple  # (replica, subnet, height, full_hash | None, certified_root | None, error | None)
StateRow = tuple   # (request, height, full_hash | None, certified_root | None, state | None, error | None)
RunIsolated = Callable[[str, int, list], Iterable[tuple]]


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def hash_seed_of(perturbation_text: str) -> int | None:
    """The hash seed a replica must run under (None: the worker's own); unparsable → None."""
    try:
        return parse_perturbation(perturbation_text).hash_seed
    except AuditError:
        return None


def replay_replica(run: RunInputs, replica: int, subnet: str, perturbation_text: str) -> Iterator[ResultRow]:
    """Every row of one replica (an error row instead of the rest if its replay fails)."""
    height = -1
    try:
        perturbation = parse_perturbation(perturbation_text)
        height = perturbation.start - 1
        for step in run.replay(subnet, perturbation):
            height = step.height
            yield (replica, subnet, step.height, step.full_hash, step.certified_root, None)
    except Exception as exc:  # a replica's failure is a finding, reported as a row
        yield (replica, subnet, height + 1, None, None, _describe(exc))


def with_build(rows: Iterable[ResultRow], build: str) -> Iterator[tuple]:
    """``rows`` with the fingerprint of the build that replayed them appended."""
    for row in rows:
        yield (*row, build)


def replay_partition(specs: Iterable[tuple], run: RunInputs, run_isolated: RunIsolated,
                     build: str) -> Iterator[tuple]:
    """Rows of every ``(replica, subnet, perturbation)`` spec, each with its build: in-process
    replicas first, in the given order (``build`` is this process's), then hash-seed
    replicas, one isolated batch per seed (their rows carry the child's build)."""
    by_seed: dict[int, list[tuple]] = {}
    for replica, subnet, perturbation_text in specs:
        seed = hash_seed_of(perturbation_text)
        if seed is None:
            yield from with_build(replay_replica(run, replica, subnet, perturbation_text), build)
        else:
            by_seed.setdefault(seed, []).append((replica, subnet, perturbation_text))
    for seed in sorted(by_seed):
        yield from run_isolated("rows", seed, by_seed[seed])


def replay_to_state(run: RunInputs, request: int, subnet: str, perturbation_text: str, height: int) -> StateRow:
    """The replica's state and hashes at ``height`` (for the drill-down)."""
    reached = -1
    try:
        perturbation = parse_perturbation(perturbation_text)
        for reached, state, trees in run.replay_states(subnet, perturbation, until=height):
            if reached == height:
                return (request, height, trees.full_hash, trees.certified_root, encode_state(state), None)
        return (request, reached, None, None, None, f"the replay ended at height {reached}, before {height}")
    except Exception as exc:  # reported, like replay failures
        return (request, reached + 1, None, None, None, _describe(exc))


def states_partition(requests: Iterable[tuple], run: RunInputs, run_isolated: RunIsolated) -> Iterator[StateRow]:
    """``replay_to_state`` of every ``(request, subnet, perturbation, height)``."""
    by_seed: dict[int, list[tuple]] = {}
    for request, subnet, perturbation_text, height in requests:
        seed = hash_seed_of(perturbation_text)
        if seed is None:
            yield replay_to_state(run, request, subnet, perturbation_text, height)
        else:
            by_seed.setdefault(seed, []).append((request, subnet, perturbation_text, height))
    for seed in sorted(by_seed):
        yield from run_isolated("states", seed, by_seed[seed])
