"""Answering call contexts and closing them.

A call context is answered at most once: a user's call in the ingress history, a canister's
call with a response into the output-queue slot reserved when its request was accepted. It
closes once it awaits no callbacks; if it was never answered by then, the caller gets
``Reject(CANISTER_ERROR, "Canister <id> did not reply to the call")``. A STOPPING canister
becomes STOPPED when its last call context closes.
"""

from __future__ import annotations

from message_routing.limits import Limits
from replica.ic.textual_ids import canister_text
from state_manager.canister_state import CanisterOrigin, CanisterState, CanisterStatus, CallOrigin
from state_manager.ingress_history import IngressState, IngressStatus
from state_manager.messages import (
    MESSAGE_OVERHEAD_BYTES, Reject, RejectCode, Reply, Response, truncate_reject_message,
)
from state_manager.queues import NoReservedSlotError
from state_manager.replicated_state import ReplicatedState

__all__ = ["deliver_answer", "settle_call_context", "reject_ingress", "answer_ingress", "did_not_reply"]


def did_not_reply(canister_id: int) -> Reject:
    return Reject(RejectCode.CANISTER_ERROR, f"Canister {canister_text(canister_id)} did not reply to the call")


def _bounded(canister_id: int, answer: Reply | Reject, limits: Limits) -> Reply | Reject:
    """A reply is sent only if ``MESSAGE_OVERHEAD_BYTES + |data| ≤ max_inter_canister_payload_bytes``
    (the size rule requests obey); a larger one becomes a ``CANISTER_ERROR`` reject."""
    if type(answer) is Reply:
        size = MESSAGE_OVERHEAD_BYTES + len(answer.data)
        if size > limits.max_inter_canister_payload_bytes:
            return Reject(RejectCode.CANISTER_ERROR, truncate_reject_message(
                f"Canister {canister_text(canister_id)} replied with {size} bytes, over the limit of "
                f"{limits.max_inter_canister_payload_bytes} bytes"))
    return answer


def reject_ingress(state: ReplicatedState, message_id: bytes, receiver: int, source: bytes, reject: Reject) -> None:
    """Record the terminal status ``rejected`` for an ingress message (keeping its expiry)."""
    _set_terminal(state, message_id, receiver, source, reject)


def answer_ingress(state: ReplicatedState, message_id: bytes, receiver: int, source: bytes, answer: Reply | Reject) -> None:
    """Record the terminal status ``replied`` or ``rejected`` for an ingress message (keeping its expiry)."""
    _set_terminal(state, message_id, receiver, source, answer)


def _set_terminal(state: ReplicatedState, message_id: bytes, receiver: int, source: bytes, answer: Reply | Reject) -> None:
    history = state.ingress_history
    previous = history.get(message_id)
    now = state.metadata.batch_time
    expiry = now if previous is None else previous.expiry_time
    if type(answer) is Reply:
        status = IngressStatus(IngressState.REPLIED, receiver, source, now, expiry, reply=answer.data)
    else:
        status = IngressStatus(IngressState.REJECTED, receiver, source, now, expiry,
                               reject_code=answer.code, reject_message=answer.message)
    history.set(message_id, status)


def deliver_answer(state: ReplicatedState, canister: CanisterState, origin: CallOrigin, answer: Reply | Reject, limits: Limits) -> None:
    """Send ``answer`` to the call's origin (size-bounded, see ``_bounded``)."""
    answer = _bounded(canister.canister_id, answer, limits)
    if type(origin) is CanisterOrigin:
        response = Response(origin.canister, canister.canister_id, origin.callback_id, answer, origin.deadline)
        try:
            canister.queues.push_output_response(response)
        except NoReservedSlotError:
            state.metadata.count("critical_errors")  # induction always reserves the slot
        return
    _set_terminal(state, origin.message_id, canister.canister_id, origin.source, answer)


def settle_call_context(
    state: ReplicatedState, canister: CanisterState, call_context_id: int, answer: Reply | Reject | None, limits: Limits
) -> None:
    """After a message ran in the call context: deliver ``answer`` if there is one, then
    close the context if no callbacks remain (answering "did not reply" if never answered)."""
    call_context = canister.call_contexts[call_context_id]
    responded = call_context.responded
    if answer is not None:
        deliver_answer(state, canister, call_context.origin, answer, limits)
        responded = True
    if call_context.outstanding_callbacks == 0:
        if not responded:
            deliver_answer(state, canister, call_context.origin, did_not_reply(canister.canister_id), limits)
        del canister.call_contexts[call_context_id]
        if canister.status is CanisterStatus.STOPPING and not canister.call_contexts:
            canister.status = CanisterStatus.STOPPED
    elif responded and not call_context.responded:
        canister.call_contexts[call_context_id] = call_context.as_responded()
