"""The valid set rule (VSR): which ingress messages of a batch enter ingress queues.

A message is inducted iff its id is new, it has not expired (and its expiry is not too far
ahead), it fits the size limit, its receiver is a running canister of this subnet and the
canister's ingress queue has room — or its receiver is the management canister
(``MANAGEMENT_CANISTER_ID``, which every subnet hosts) and ``management_queue`` has room. A failed check never raises: it yields a typed reason
and, unless the id is a duplicate (whose existing status must stay untouched), a
``rejected`` status in the ingress history, kept until ``min(expiry, now + max_ingress_ttl)``
plus the retention period (so a far-future expiry cannot pin it). Nothing else in the state
changes.
"""

from __future__ import annotations

import enum

from state_manager.canister_state import CanisterStatus
from state_manager.ingress_history import IngressState, IngressStatus
from state_manager.messages import MANAGEMENT_CANISTER_ID, Ingress, RejectCode, truncate_reject_message
from state_manager.replicated_state import ReplicatedState

from .limits import Limits

__all__ = ["IngressInductionFailure", "induct_ingress", "compute_ingress_failure"]


class IngressInductionFailure(enum.Enum):
    DUPLICATE = ("duplicate message id", None)
    EXPIRED = ("message expired", RejectCode.SYS_TRANSIENT)
    EXPIRY_TOO_FAR = ("expiry too far in the future", RejectCode.SYS_FATAL)
    PAYLOAD_TOO_LARGE = ("message exceeds the ingress size limit", RejectCode.CANISTER_ERROR)
    CANISTER_NOT_FOUND = ("canister not found", RejectCode.DESTINATION_INVALID)
    CANISTER_ON_ANOTHER_SUBNET = ("canister is on another subnet now (it moved); send the call there",
                                  RejectCode.SYS_TRANSIENT)
    CANISTER_NOT_RUNNING = ("canister is not running", RejectCode.CANISTER_ERROR)
    QUEUE_FULL = ("canister ingress queue is full", RejectCode.SYS_TRANSIENT)

    @property
    def description(self) -> str:
        return self.value[0]

    @property
    def reject_code(self) -> RejectCode | None:
        return self.value[1]


def compute_ingress_failure(state: ReplicatedState, ingress: Ingress, limits: Limits) -> IngressInductionFailure | None:
    """The VSR predicate for one message (the spec's ``vsr_check_ingress``): the first failing
    rule, or None if ``ingress`` is accepted."""
    if ingress.message_id in state.ingress_history:
        return IngressInductionFailure.DUPLICATE
    now = state.metadata.batch_time
    if ingress.expiry_time < now:
        return IngressInductionFailure.EXPIRED
    if ingress.expiry_time > now + limits.max_ingress_ttl_ns:
        return IngressInductionFailure.EXPIRY_TOO_FAR
    if ingress.count_bytes() > limits.max_ingress_bytes:
        return IngressInductionFailure.PAYLOAD_TOO_LARGE
    if ingress.receiver == MANAGEMENT_CANISTER_ID:
        if not state.management_queue.has_room(limits.queue_capacity):
            return IngressInductionFailure.QUEUE_FULL
        return None
    routed = state.routing_table.lookup(ingress.receiver)
    if routed is not None and routed != state.own_subnet_id:
        # pooled while the canister lived here; it moved before the message made it into a block
        return IngressInductionFailure.CANISTER_ON_ANOTHER_SUBNET
    canister = state.canisters.get(ingress.receiver)
    if canister is None:
        return IngressInductionFailure.CANISTER_NOT_FOUND
    if canister.status is not CanisterStatus.RUNNING:
        return IngressInductionFailure.CANISTER_NOT_RUNNING
    if not canister.queues.ingress_queue.has_room(limits.queue_capacity):
        return IngressInductionFailure.QUEUE_FULL
    return None


def induct_ingress(state: ReplicatedState, ingress: Ingress, limits: Limits) -> IngressInductionFailure | None:
    """Apply the VSR to one message: induct it (status ``received``) or record why not."""
    failure = compute_ingress_failure(state, ingress, limits)
    now = state.metadata.batch_time
    if failure is None:
        if ingress.receiver == MANAGEMENT_CANISTER_ID:
            state.management_queue.push(ingress)
        else:
            state.canisters[ingress.receiver].queues.push_ingress(ingress)
        state.ingress_history.set(
            ingress.message_id,
            IngressStatus(IngressState.RECEIVED, ingress.receiver, ingress.source, now, ingress.expiry_time),
        )
        state.metadata.counters["ingress_inducted"] += 1
        return None
    state.metadata.counters["ingress_rejected"] += 1
    if failure is not IngressInductionFailure.DUPLICATE:
        # The status lives until its expiry plus the retention period; a claimed expiry
        # beyond the TTL must not keep it (and the history) growing for that long.
        expiry = min(ingress.expiry_time, now + limits.max_ingress_ttl_ns)
        state.ingress_history.set(
            ingress.message_id,
            IngressStatus(
                IngressState.REJECTED, ingress.receiver, ingress.source, now, expiry,
                reject_code=failure.reject_code,
                reject_message=truncate_reject_message(f"{failure.description} (canister {ingress.receiver})"),
            ),
        )
    return failure
