"""Bounded-wait calls in time: per-round expiry and the rule for accepting their responses.

Every round, before induction (``state_machine.pre_process``), with the batch time ``now``
and ``is_expired(deadline, now) = deadline ≠ 0 ∧ deadline < ⌊now / 1 s⌋``:

1. ``time_out_messages``: an expired request still in an output queue (not yet routed)
   never leaves; its caller gets the local reject ``SYS_TRANSIENT "request timed out"``. An
   expired request in an input queue is dropped before it executes, and an expired response
   in an output queue is dropped: their callers learn the outcome from rule 2.
2. ``time_out_callbacks``: an expired callback with no response waiting for it gets
   ``SYS_UNKNOWN "call deadline has expired"`` in its canister's input queue.
3. Induction then accepts a bounded-wait response only if ``is_response_expected``: its
   callback exists, has the response's respondent and deadline, and has no response waiting
   yet. Anything else is late or a duplicate and is dropped (the signal is still an accept).

The guarantee (tested in ``tests/properties/test_bounded_wait.py``): a bounded-wait call gets
**at most one** response into its caller's input queue, and **exactly one** — a reply, a
reject, or ``SYS_UNKNOWN`` — by the end of the first round in which it is expired. That response resumes the callback exactly once, in input-queue order (so by
deadline + 1 round when the canister's execution budget is not exhausted). Guaranteed-response
calls (deadline 0) never expire and are untouched here.
"""

from __future__ import annotations

from state_manager.canister_state import CanisterState
from state_manager.deadlines import is_expired
from state_manager.messages import Reject, RejectCode, Request, Response
from state_manager.replicated_state import ReplicatedState

__all__ = ["REQUEST_TIMED_OUT", "DEADLINE_EXPIRED", "time_out_messages", "time_out_callbacks",
           "is_response_expected", "timed_out_response"]

REQUEST_TIMED_OUT = "request timed out"
DEADLINE_EXPIRED = "call deadline has expired"


def timed_out_response(request: Request, code: RejectCode, message: str) -> Response:
    """The caller-side answer to ``request``: ``Reject(code, message)`` with its deadline."""
    return Response(request.sender, request.receiver, request.sender_reply_callback, Reject(code, message),
                    request.deadline)


def _time_out_queue(state: ReplicatedState, canister: CanisterState, remote: int, outbound: bool, now: int) -> None:
    queues = canister.queues
    queue = (queues.output_queues if outbound else queues.input_queues)[remote]
    expired = [k for k, m in enumerate(queue.elements) if is_expired(m.deadline, now)
               and (type(m) is Request or outbound)]
    if not expired:
        return
    timed_out = [queue.elements[k] for k in expired]
    queues.dirty = True
    queue.remove_where(expired)
    queues.drop_idle_queue(queues.output_queues if outbound else queues.input_queues, remote)
    for message in timed_out:
        if type(message) is Request and outbound:
            state.metadata.count("bounded_wait_requests_timed_out")
            queues.push_input_response(timed_out_response(message, RejectCode.SYS_TRANSIENT, REQUEST_TIMED_OUT))
        else:
            state.metadata.count("bounded_wait_messages_expired")


def _has_expired(messages, now: int) -> bool:
    for message in messages:
        if message.deadline and is_expired(message.deadline, now):
            return True
    return False


def time_out_messages(state: ReplicatedState) -> None:
    """Rule 1 of the module docstring, canisters in id order, queues in remote id order."""
    now = state.metadata.batch_time
    for canister in state.canisters.values():
        queues = canister.queues
        for outbound, queue_map in ((True, queues.output_queues), (False, queues.input_queues)):
            for remote in [r for r, q in queue_map.items() if _has_expired(q.elements, now)]:
                _time_out_queue(state, canister, remote, outbound, now)


def time_out_callbacks(state: ReplicatedState) -> None:
    """Rule 2 of the module docstring: ``SYS_UNKNOWN`` for every expired callback that has no
    response waiting (callbacks in id order)."""
    now = state.metadata.batch_time
    for canister in state.canisters.values():
        if not canister.callbacks:
            continue
        queues = canister.queues
        for callback in canister.callbacks.values():
            if not is_expired(callback.deadline, now):
                continue
            if queues.has_enqueued_response(callback.respondent, callback.callback_id):
                continue
            state.metadata.count("bounded_wait_callbacks_expired")
            queues.push_input_response(Response(
                canister.canister_id, callback.respondent, callback.callback_id,
                Reject(RejectCode.SYS_UNKNOWN, DEADLINE_EXPIRED), callback.deadline))


def is_response_expected(canister: CanisterState, response: Response) -> bool:
    """Rule 3: ``callback(response) exists ∧ respondent and deadline match ∧ no response for it
    is waiting`` — for a response with a deadline or to a callback with one; any other
    (guaranteed-response) response is always accepted."""
    callback = canister.callbacks.get(response.originator_reply_callback)
    if response.deadline == 0 and (callback is None or callback.deadline == 0):
        return True
    return (callback is not None and callback.respondent == response.respondent
            and callback.deadline == response.deadline
            and not canister.queues.has_enqueued_response(response.respondent, callback.callback_id))
