"""A run log made ready to replay: batches decoded once, shared by every replica.

Decoded batches are immutable values (frozen dataclasses of frozen messages), so the
replicas of one process read the same ``Batch`` objects the way replicas of one subnet
read the same agreed blocks; each replica still decodes its own start state and executes
every batch itself. ``prepare_run`` is pure; ``RunInputs.replay`` is ``replay.replay``
with this run's inputs filled in.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterator, Mapping

from message_routing.batch import Batch, decode_batch
from state_manager.codec import CodecError
from state_manager.replicated_state import ReplicatedState
from state_manager.state_tree import StateTrees

from .errors import RunLogError
from .perturbation import Perturbation
from .replay import ReplayContext, ReplayStep, load_canister_classes, replay, replay_states
from .run_log import RunLog, SubnetLog

__all__ = ["SubnetInputs", "RunInputs", "prepare_run", "decode_batches", "context_for"]


@dataclass(frozen=True)
class SubnetInputs:
    subnet_id: str
    genesis: bytes
    batches: tuple[Batch, ...]
    checkpoints: Mapping[int, bytes]
    hashes: tuple[tuple[int, bytes, bytes], ...]

    @property
    def height(self) -> int:
        return len(self.batches)


def decode_batches(log: SubnetLog) -> tuple[Batch, ...]:
    """The subnet's batches, checked to be heights 1..n in order."""
    batches = []
    for position, data in enumerate(log.batches):
        try:
            batch = decode_batch(data)
        except CodecError as exc:
            raise RunLogError(f"subnet {log.subnet_id}: batch {position + 1} does not decode: {exc}") from exc
        if batch.batch_number != position + 1:
            raise RunLogError(f"subnet {log.subnet_id}: batch {position + 1} has number {batch.batch_number}")
        batches.append(batch)
    return tuple(batches)


def context_for(log: RunLog) -> ReplayContext:
    return ReplayContext(load_canister_classes(log.canister_modules), log.limits, log.topologies)


@dataclass(frozen=True)
class RunInputs:
    context: ReplayContext
    subnets: Mapping[str, SubnetInputs]

    def subnet(self, subnet_id: str) -> SubnetInputs:
        inputs = self.subnets.get(subnet_id)
        if inputs is None:
            raise RunLogError(f"the run has no subnet {subnet_id!r}")
        return inputs

    def replay(self, subnet_id: str, perturbation: Perturbation, until: int | None = None) -> Iterator[ReplayStep]:
        s = self.subnet(subnet_id)
        return replay(s.genesis, s.batches, perturbation, self.context, s.checkpoints, until)

    def replay_states(self, subnet_id: str, perturbation: Perturbation,
                      until: int | None = None) -> Iterator[tuple[int, ReplicatedState, StateTrees]]:
        s = self.subnet(subnet_id)
        return replay_states(s.genesis, s.batches, perturbation, self.context, s.checkpoints, until)


def prepare_run(log: RunLog, subnets: tuple[str, ...] | None = None) -> RunInputs:
    """Decode the batches of ``subnets`` (default: all) and load the canister classes."""
    wanted = log.subnet_ids() if subnets is None else subnets
    prepared = {}
    for subnet_id in wanted:
        s = log.subnet(subnet_id)
        prepared[subnet_id] = SubnetInputs(subnet_id, s.genesis, decode_batches(s),
                                           MappingProxyType(dict(s.checkpoints)), s.hashes)
    return RunInputs(context_for(log), MappingProxyType(prepared))
