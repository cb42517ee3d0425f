"""The execution layer as the state machine sees it: one call per round.

``replica.execution.ExecutionEnvironment`` is the implementation; the state machine knows only
this Protocol, so ``message_routing`` never imports the layer above it.
"""

from __future__ import annotations

from typing import Protocol

from state_manager.replicated_state import ReplicatedState

from .limits import Limits

__all__ = ["Executor"]


class Executor(Protocol):
    def execute_round(self, state: ReplicatedState, randomness: bytes, limits: Limits) -> ReplicatedState:
        """Run a bounded, deterministic amount of work: consume ingress and input queues,
        produce output queues and ingress statuses. Must be a function of its arguments."""
        ...
