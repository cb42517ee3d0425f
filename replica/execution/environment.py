"""``ExecutionEnvironment``: the execution layer behind ``message_routing``'s Protocol.

One round = the scheduler's canister order (see ``scheduler``), each canister consuming
its inducted messages one by one through ``message_execution``. Everything a round does is
a function of the state, the limits and the registered code: no clock, no randomness
beyond the round's, no iteration over unordered containers.
"""

from __future__ import annotations

from typing import Any

from message_routing.limits import Limits
from state_manager.messages import Ingress, Reject, Reply, Request, Response
from state_manager.replicated_state import ReplicatedState

from .message_execution import execute_ingress, execute_request, execute_response
from .query import run_query
from .registry import CanisterRegistry, RegistryLike, as_registry
from .scheduler import canister_schedule, pop_next_input

__all__ = ["ExecutionEnvironment", "execute_canister_messages"]


def execute_canister_messages(
    state: ReplicatedState, registry: CanisterRegistry, canister_id: int, budget: int, limits: Limits
) -> int:
    """Execute up to ``budget`` of the canister's inducted messages; return how many ran."""
    canister = state.canisters[canister_id]
    cls = registry.resolve(canister)
    queues = canister.queues
    executed = 0
    while executed < budget:
        message = pop_next_input(queues)
        if message is None:
            break
        kind = type(message)
        if kind is Request:
            execute_request(state, canister, cls, message, limits)
        elif kind is Response:
            execute_response(state, canister, cls, message, limits)
        elif kind is Ingress:
            execute_ingress(state, canister, cls, message, limits)
        else:
            state.metadata.count("critical_errors")  # queues hold nothing else
        executed += 1
    return executed


class ExecutionEnvironment:
    """Runs registered canister classes (see ``CanisterRegistry``) on a subnet's state."""

    __slots__ = ("registry",)

    def __init__(self, canisters: RegistryLike = ()) -> None:
        self.registry = as_registry(canisters)

    def execute_round(self, state: ReplicatedState, randomness: bytes, limits: Limits) -> ReplicatedState:
        """Execute at most ``max_messages_per_round`` messages, at most
        ``max_messages_per_canister_per_round`` per canister, in the scheduler's order.
        (``randomness`` is accepted per the Protocol; no canister API exposes it yet.)"""
        remaining = limits.max_messages_per_round
        per_canister = limits.max_messages_per_canister_per_round
        for canister_id in canister_schedule(state):
            if remaining <= 0:
                break
            remaining -= execute_canister_messages(
                state, self.registry, canister_id, min(per_canister, remaining), limits)
        return state

    def run_query(
        self, state: ReplicatedState, canister_id: int, method: str, arg: Any = None, caller: bytes | int = b""
    ) -> Reply | Reject:
        """``query.run_query`` with this environment's registry."""
        return run_query(self.registry, state, canister_id, method, arg, caller)
