"""The replay engine: one simulated replica, as a pure function of its inputs.

``replay(genesis, batches, perturbation, context)`` yields ``(height, full_state_hash,
certified_root)`` for the start height and every height after it. It runs the replica's
own code and nothing else: the node's batch processor (``replica.node.batch_processor``:
``execute_round`` with the replica's ``ExecutionEnvironment``, committed through
``state_manager.StateManager``, the incremental state-tree hashing every replica uses), with state decoding from
``state_manager.state_codec``. There is no second implementation of any of it here.

What a replica with perturbation ``p`` executes:

1. its start state: genesis, or the recorded checkpoint of height ``p.start`` (decoded,
   then hashed from scratch — the row for the start height);
2. every batch of heights ``p.start + 1 ..`` in order: the fault of ``p`` applied to its
   batch, XNet slices presented shuffled under ``shuffle``; ``execute_round``; ``commit``
   (hashes of that height);
3. at ``p.restart_at``: ``encode_state``, decode again (shuffled under ``shuffle``), a fresh
   state manager that hashes the reloaded state from scratch; that hash is the row of the
   restart height, and the next commit chains on it.

``hashseed`` cannot be applied from inside a process: callers run such replicas in a
subprocess (``isolation``), which calls this same function. Nothing here reads a clock,
a file or the environment; shuffling draws from ``random.Random`` seeded by text.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterator, Mapping, NamedTuple, Sequence

from message_routing.batch import Batch
from message_routing.executor import Executor
from message_routing.limits import Limits
from replica.node.batch_processor import CanisterCodeNotFound, canister_classes, canister_executor, process_batch
from state_manager.codec import CodecError
from state_manager.replicated_state import ReplicatedState
from state_manager.routing_table import NetworkTopology
from state_manager.state_codec import decode_state, encode_state
from state_manager.state_manager import StateManager
from state_manager.state_tree import StateTrees

from .errors import RecordError, ReplayError, RunLogError
from .faults import apply_fault
from .perturbation import NONE, Perturbation
from .shuffle import present_xnet_payload, shuffled, shuffled_state

__all__ = ["ReplayContext", "ReplayStep", "ReplicaRun", "replay", "replay_states", "verified_checkpoints", "load_canister_classes",
           "shuffle_rng"]


class ReplayStep(NamedTuple):
    height: int
    full_hash: bytes
    certified_root: bytes


def load_canister_classes(module_names: Sequence[str]) -> tuple[type, ...]:
    """The run's canister classes by module name (``RunLogError`` if one cannot be imported)."""
    try:
        return canister_classes(module_names)
    except CanisterCodeNotFound as exc:
        raise RunLogError(str(exc)) from exc


@dataclass(frozen=True)
class ReplayContext:
    """What every replica of a run shares: its code (canister classes), limits and the
    registry's topologies by version."""

    classes: tuple[type, ...]
    limits: Limits
    topologies: tuple[NetworkTopology, ...]

    def topology(self, registry_version: int) -> NetworkTopology:
        for topology in self.topologies:
            if topology.registry_version == registry_version:
                return topology
        raise ReplayError(f"no topology of registry version {registry_version} in the run")

    def environment(self, rng: random.Random | None = None) -> Executor:
        """The execution environment; its registry filled in a shuffled order if ``rng``."""
        classes = self.classes if rng is None else shuffled(self.classes, rng)
        return canister_executor(classes)


def shuffle_rng(seed: int, purpose: str, height: int = 0) -> random.Random:
    """A generator for one shuffling decision (text seeds hash the same in every process)."""
    return random.Random(f"audit-shuffle/{seed}/{purpose}/{height}")


def _load(data: bytes, perturbation: Perturbation, height: int, purpose: str) -> ReplicatedState:
    try:
        if perturbation.shuffle_seed is None:
            state = decode_state(data)
        else:
            state = shuffled_state(data, shuffle_rng(perturbation.shuffle_seed, purpose, height))
    except CodecError as exc:
        raise ReplayError(f"the state of height {height} does not decode: {exc}") from exc
    if state.metadata.batch_number != height:
        raise ReplayError(f"the state loaded for height {height} is of height {state.metadata.batch_number}")
    return state


class ReplicaRun:
    """One simulated replica that can be advanced a batch at a time (module docstring): the
    offline replay drives it through a whole run, the live audit (``live_host``) keeps it
    between micro-batches. ``start`` is the state of height ``p.start`` (genesis or a
    checkpoint) as bytes; ``height``, ``state`` and ``trees`` are where the replica stands.
    ``resume`` continues a replica from a snapshot of its own state at ``height``
    (``encode_state``), decoded as its start state is (shuffled under ``shuffle``)."""

    def __init__(self, start: bytes, perturbation: Perturbation, context: ReplayContext, *,
                 height: int | None = None) -> None:
        self.perturbation = perturbation
        self.context = context
        at = perturbation.start if height is None else height
        self.state = _load(start, perturbation, at, "start" if height is None else "resume")
        self.manager = StateManager(self.state, keep_heights=1)
        shuffle = perturbation.shuffle_seed
        self.environment = context.environment(None if shuffle is None else shuffle_rng(shuffle, "registry"))
        self.height = at
        self.trees = self.manager.latest

    def step(self, batch: Batch) -> tuple[int, ReplicatedState, StateTrees]:
        """Execute the batch of the next height; its ``(height, state, trees)``."""
        height = self.height + 1
        perturbation = self.perturbation
        if batch.batch_number != height:
            raise ReplayError(f"batch {height - 1} of the log has number {batch.batch_number}")
        fault = perturbation.fault
        if fault is not None and fault.height == height:
            batch = apply_fault(batch, fault)
        shuffle = perturbation.shuffle_seed
        if shuffle is not None:
            batch = present_xnet_payload(batch, shuffle_rng(shuffle, "xnet", height))
        state, trees = process_batch(self.manager, batch, self.context.topology(batch.registry_version),
                                     self.environment, self.context.limits)
        if perturbation.restart_at == height:
            state = _load(encode_state(state), perturbation, height, "restart")
            self.manager = StateManager(state, keep_heights=1)
            trees = self.manager.latest
        self.height, self.state, self.trees = height, state, trees
        return height, state, trees


def replay_states(
    genesis: bytes,
    batches: Sequence[Batch],
    perturbation: Perturbation,
    context: ReplayContext,
    checkpoints: Mapping[int, bytes] | None = None,
    until: int | None = None,
) -> Iterator[tuple[int, ReplicatedState, StateTrees]]:
    """``(height, state, trees)`` per height (module docstring). The state is the replica's
    live state: it changes when the iteration continues."""
    start = perturbation.start
    last = len(batches) if until is None else min(until, len(batches))
    if start:
        data = (checkpoints or {}).get(start)
        if data is None:
            raise ReplayError(f"the run has no checkpoint at height {start}")
    else:
        data = genesis
    run = ReplicaRun(data, perturbation, context)
    yield start, run.state, run.trees
    for height in range(start + 1, last + 1):
        yield run.step(batches[height - 1])


def replay(
    genesis: bytes,
    batches: Sequence[Batch],
    perturbation: Perturbation,
    context: ReplayContext,
    checkpoints: Mapping[int, bytes] | None = None,
    until: int | None = None,
) -> Iterator[ReplayStep]:
    """``(height, full_state_hash, certified_root)`` of every height the replica commits."""
    for height, _, trees in replay_states(genesis, batches, perturbation, context, checkpoints, until):
        yield ReplayStep(height, trees.full_hash, trees.certified_root)


def verified_checkpoints(subnet_id: str, genesis: bytes, batches: Sequence[Batch],
                         live_hashes: Sequence[Sequence], context: ReplayContext,
                         interval: int) -> tuple[tuple[int, bytes], ...]:
    """Checkpoints of a recorded run, every ``interval`` heights: its batches replayed
    without perturbation, each height checked against the hashes the live run committed
    (``RecordError`` at the first that differs)."""
    checkpoints = []
    for height, state, trees in replay_states(genesis, batches, NONE, context):
        if height == 0:
            continue
        if (height, trees.full_hash, trees.certified_root) != tuple(live_hashes[height - 1]):
            raise RecordError(f"subnet {subnet_id}: replaying the recorded batches gives another state "
                              f"hash at height {height} than the live run committed")
        if height % interval == 0:
            checkpoints.append((height, encode_state(state)))
    return tuple(checkpoints)
