"""The scheduler: which canister runs next, and which of its queues it reads from.

Across canisters (per round): the canisters with input are taken in id order, rotated to
start at index ``batch_number mod n`` (n = number of such canisters); each in turn executes
up to ``max_messages_per_canister_per_round`` messages while the subnet's
``max_messages_per_round`` lasts. The rotation moves the head of the line every round, so a
canister flooded with messages cannot keep others waiting for more than n rounds.

Within a canister: round-robin over its ingress queue and its input queues (in remote
canister id order), cyclically ``ingress → input(r₁) → input(r₂) → … → ingress``, skipping
empty ones. The position — the remote served last, or None for ingress — is
``CanisterQueues.input_schedule``, part of the replicated state.
"""

from __future__ import annotations

from state_manager.messages import CanisterId, Ingress, RequestOrResponse
from state_manager.queues import CanisterQueues
from state_manager.replicated_state import ReplicatedState

__all__ = ["canister_schedule", "pop_next_input"]


def canister_schedule(state: ReplicatedState) -> list[CanisterId]:
    """Canisters with input, in id order rotated to start at ``batch_number mod n``."""
    active = [canister_id for canister_id, canister in state.canisters.items() if canister.queues.has_input()]
    if not active:
        return active
    start = state.metadata.batch_number % len(active)
    return active[start:] + active[:start]


def _next_input_queue(queues: CanisterQueues, after: CanisterId | None) -> CanisterId | None:
    """The smallest remote id > ``after`` (any id if None) with a non-empty input queue."""
    waiting = [remote for remote, queue in queues.input_queues.unordered_items()
               if queue.elements and (after is None or remote > after)]
    return min(waiting) if waiting else None


def pop_next_input(queues: CanisterQueues) -> Ingress | RequestOrResponse | None:
    """Pop the next message in the round-robin order (module docstring); None if no input."""
    cursor = queues.input_schedule
    remote = _next_input_queue(queues, cursor)
    if remote is None:
        if queues.ingress_queue.elements:
            queues.input_schedule = None
            return queues.pop_ingress()
        if cursor is not None:
            remote = _next_input_queue(queues, None)  # wrap around to the lowest remote id
        if remote is None:
            return None
    queues.input_schedule = remote
    return queues.pop_input(remote)
