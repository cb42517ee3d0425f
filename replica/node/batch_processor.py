"""The batch processor: one finalized height, from block to committed state
(docs/architecture.md, *The round as data*).

    batch  = to_batch(block, decoded XNet payload, block hash)
    state  = execute_round(state(h - 1), batch, topology at the batch's registry version)
    trees  = state_manager.commit(state)            certified root + full state hash

This is the one way a batch reaches the replicated state — for a live node, and for the
determinism audit's simulated replicas, which load canister code by module name with
``canister_classes``, run it with ``canister_executor`` and replay recorded batches with
``process_batch``.
"""

from __future__ import annotations

import importlib
from typing import Callable, Sequence

from consensus_stub.block import Block, to_batch
from message_routing.batch import Batch
from message_routing.executor import Executor
from message_routing.limits import Limits
from message_routing.state_machine import execute_round
from replica.errors import ReplicaError
from replica.execution import CanisterRegistry, ExecutionEnvironment
from state_manager.replicated_state import ReplicatedState
from state_manager.routing_table import NetworkTopology
from state_manager.state_manager import StateManager
from state_manager.state_tree import StateTrees
from xnet.xnet_payload import DecodedXNetPayload

__all__ = ["CanisterCodeNotFound", "canister_classes", "canister_executor", "process_batch", "process_block"]


class CanisterCodeNotFound(ReplicaError, LookupError):
    """A canister module named by a run or a testnet cannot be imported in this process."""


def canister_classes(module_names: Sequence[str]) -> tuple[type, ...]:
    """Import ``"package.module:Class"`` names, in order (a run's or testnet's canister code)."""
    classes = []
    for name in module_names:
        module_name, _, qualname = name.partition(":")
        if not module_name or not qualname:
            raise CanisterCodeNotFound(f"canister module {name!r} is not 'package.module:Class'")
        try:
            target = importlib.import_module(module_name)
            for part in qualname.split("."):
                target = getattr(target, part)
        except (ImportError, AttributeError) as exc:
            raise CanisterCodeNotFound(
                f"canister module {name!r} cannot be loaded ({exc}); put the directory that holds "
                f"{module_name.split('.')[0]!r} on PYTHONPATH") from exc
        classes.append(target)
    return tuple(classes)


def canister_executor(classes: Sequence[type]) -> ExecutionEnvironment:
    """The execution environment that runs ``classes`` (registered in the order given)."""
    return ExecutionEnvironment(CanisterRegistry(classes))


def process_batch(state_manager: StateManager, batch: Batch, topology: NetworkTopology, executor: Executor,
                  limits: Limits, *, fault: Callable[[ReplicatedState], None] | None = None,
                  ) -> tuple[ReplicatedState, StateTrees]:
    """``execute_round`` on the state manager's tip, then ``commit``: the new state and its
    trees. ``fault`` (fault injection only: ``replica.node.faults``) changes the state
    between the two."""
    state = execute_round(state_manager.take_tip(), batch, topology, executor, limits)
    if fault is not None:
        fault(state)
    return state, state_manager.commit(state)


def process_block(state_manager: StateManager, block: Block, block_hash: bytes, decoded: DecodedXNetPayload,
                  topology: NetworkTopology, executor: Executor, limits: Limits, *,
                  fault: Callable[[ReplicatedState], None] | None = None,
                  ) -> tuple[Batch, ReplicatedState, StateTrees]:
    """A finalized block (its XNet payload already decoded and validated) → batch → ``process_batch``."""
    batch = to_batch(block, decoded, block_hash)
    state, trees = process_batch(state_manager, batch, topology, executor, limits, fault=fault)
    return batch, state, trees
