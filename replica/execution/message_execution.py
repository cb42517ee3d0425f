"""Executing one inducted message: an ingress message, a request or a response.

* Ingress and requests open a call context (``IngressOrigin`` / ``CanisterOrigin``) and run
  an ``@update`` method (a request may also run a ``@query`` method, read-only). Ingress to a
  query method is rejected: users call queries through the query interface. A message that
  cannot run (canister not running, no such method, undecodable argument, code unavailable)
  is answered at once with a ``CANISTER_ERROR`` reject and opens no call context (an empty
  canister — created, no code installed yet — with ``DESTINATION_INVALID``).
* A response resumes the callback registered for ``originator_reply_callback`` (unknown →
  dropped and counted): ``on_reply(value, context)`` or ``on_reject((code, message), context)``
  runs in the original call context, which answers only explicitly (a callback's return
  value is ignored).
"""

from __future__ import annotations

from message_routing.limits import Limits
from replica.ic.textual_ids import canister_text
from state_manager.canister_state import CanisterOrigin, CanisterState, CanisterStatus, IngressOrigin
from state_manager.ingress_history import IngressState, IngressStatus
from state_manager.messages import Ingress, Reject, RejectCode, Reply, Request, Response, truncate_reject_message
from state_manager.replicated_state import ReplicatedState

from .call_contexts import deliver_answer, reject_ingress, settle_call_context
from .candid_methods import decode_arguments
from .canister import MethodKind, MethodSpec
from .codec import EncodingError, decode_payload
from .runtime import finish_method, run_method, trap_reject
from .system_api import ALREADY_ANSWERED, SystemApi

__all__ = ["execute_ingress", "execute_request", "execute_response", "MessageUsage", "instructions_counter"]

_QUERY_CANNOT_CALL = "a query cannot make calls"


def instructions_counter(canister_id: int) -> str:
    """The ``metadata.counters`` name of the instructions executed for ``canister_id`` on
    this subnet (its messages, callbacks, installs and upgrades; not its queries, which are
    not replicated), which ``canister_status`` reports. It enters the counters at the
    canister's first metered instruction, so a state that never ran metered code hashes as
    before; it leaves them when the canister is deleted (a later canister may get its id)."""
    return f"canister_instructions_executed:{canister_id}"


class MessageUsage:
    """What executing one message used, for observers outside the replicated state (a
    node's metrics, ``replica trace``): ``kind`` — ``"update"``, ``"query"`` (a query method
    run by a canister's call, or by a user's query), ``"callback"`` or ``"install"``
    (``management.InstallUsage``) —, the instructions
    it used (0 for a builtin canister and for a message answered without running), and
    whether it trapped on its instruction limit."""

    __slots__ = ("kind", "instructions", "limit_exceeded")

    def __init__(self, kind: str = "update") -> None:
        self.kind = kind
        self.instructions = 0
        self.limit_exceeded = False

    def record(self, api: SystemApi) -> int:
        self.instructions = api.instructions
        self.limit_exceeded = api.limit_exceeded
        return api.instructions


def _error(text: str) -> Reject:
    return Reject(RejectCode.CANISTER_ERROR, truncate_reject_message(text))


def _unavailable(state: ReplicatedState, canister: CanisterState) -> str:
    # The replica lacks the installed code: every replica should have it, so this is critical.
    state.metadata.count("critical_errors")
    return f"the code of canister {canister_text(canister.canister_id)} ({canister.module_name}) is not available"


def _entry_point(
    state: ReplicatedState, canister: CanisterState, cls: type | None, method: str, payload: bytes, *, allow_query: bool
) -> tuple[MethodSpec, tuple] | Reject:
    """The method a call runs and its arguments, or the reject that answers the call."""
    canister_id = canister.canister_id
    if canister.status is not CanisterStatus.RUNNING:
        return _error(f"Canister {canister_text(canister_id)} is {canister.status.name.lower()}")
    if not canister.module_hash:
        return Reject(RejectCode.DESTINATION_INVALID,
                      f"Canister {canister_text(canister_id)} is empty: no code is installed")
    if cls is None:
        return _error(_unavailable(state, canister))
    spec = cls.__canister_methods__.get(method)
    if spec is None or spec.kind is MethodKind.CALLBACK:
        return _error(f"Canister {canister_text(canister_id)} has no update method {method!r}")
    if spec.kind is MethodKind.QUERY and not allow_query:
        return _error(f"Canister {canister_text(canister_id)}: {method!r} is a query method; call it as a query")
    if spec.candid is None and not spec.takes_arg:
        return spec, ()
    try:
        if spec.candid is not None:
            return spec, decode_arguments(spec.candid, payload)
        return spec, (decode_payload(payload),)
    except EncodingError as exc:
        return _error(f"Canister {canister_text(canister_id)}: invalid argument for {method!r}: {exc}")


def _run_call(
    state: ReplicatedState, canister: CanisterState, cls: type, spec: MethodSpec, args: tuple,
    call_context_id: int, caller: bytes | int, limits: Limits, deadline: int = 0, usage: MessageUsage | None = None,
) -> int:
    read_only = spec.kind is MethodKind.QUERY
    api = SystemApi(canister, caller, state.metadata.batch_time, limits,
                    call_refusal=_QUERY_CANNOT_CALL if read_only else None, deadline=deadline)
    api.candid = spec.candid
    ok, result = run_method(api, cls, spec, args, limits)
    answer = finish_method(api, ok, result, call_context_id, return_is_reply=True, read_only=read_only)
    settle_call_context(state, canister, call_context_id, answer, limits)
    if usage is None:
        return api.instructions
    if read_only:
        usage.kind = "query"
    return usage.record(api)


def execute_ingress(state: ReplicatedState, canister: CanisterState, cls: type | None, ingress: Ingress, limits: Limits,
                    usage: MessageUsage | None = None) -> int:
    """Run a user's update call: status ``processing``, then ``replied``/``rejected`` once
    answered. Returns the instructions it used (as the other ``execute_*`` do); ``usage``,
    if given, receives what it used (``MessageUsage``)."""
    entry = _entry_point(state, canister, cls, ingress.method_name, ingress.method_payload, allow_query=False)
    if type(entry) is Reject:
        reject_ingress(state, ingress.message_id, canister.canister_id, ingress.source, entry)
        return 0
    spec, args = entry
    history = state.ingress_history
    received = history.get(ingress.message_id)
    # Most calls are answered within this message, and the answer's status overwrites
    # ``processing`` at once; so write ``processing`` after the run, if still unanswered.
    # Same outcome: the answer takes its expiry from the ``received`` status instead, which
    # is the ingress expiry too (checked, since hand-built states may lack that status).
    deferred = received is not None and received.expiry_time == ingress.expiry_time
    if not deferred:
        _mark_processing(state, canister, ingress)
    call_context = canister.new_call_context(IngressOrigin(ingress.message_id, ingress.source), ingress.method_name)
    used = _run_call(state, canister, cls, spec, args, call_context.call_context_id, ingress.source, limits,
                     usage=usage)
    if deferred and history.get(ingress.message_id) is received:
        _mark_processing(state, canister, ingress)
    return used


def _mark_processing(state: ReplicatedState, canister: CanisterState, ingress: Ingress) -> None:
    state.ingress_history.set(ingress.message_id, IngressStatus(
        IngressState.PROCESSING, canister.canister_id, ingress.source, state.metadata.batch_time, ingress.expiry_time))


def execute_request(state: ReplicatedState, canister: CanisterState, cls: type | None, request: Request, limits: Limits,
                    usage: MessageUsage | None = None) -> int:
    """Run a canister's call; the answer goes to the output slot reserved at induction."""
    origin = CanisterOrigin(request.sender, request.sender_reply_callback, request.deadline)
    entry = _entry_point(state, canister, cls, request.method_name, request.method_payload, allow_query=True)
    if type(entry) is Reject:
        deliver_answer(state, canister, origin, entry, limits)
        return 0
    spec, args = entry
    call_context = canister.new_call_context(origin, request.method_name)
    return _run_call(state, canister, cls, spec, args, call_context.call_context_id, request.sender, limits,
                     request.deadline, usage)


def execute_response(state: ReplicatedState, canister: CanisterState, cls: type | None, response: Response,
                     limits: Limits, usage: MessageUsage | None = None) -> int:
    """Resume the callback waiting for ``response``, then settle its call context."""
    callback = canister.callbacks.get(response.originator_reply_callback)
    if callback is None or callback.respondent != response.respondent:
        state.metadata.count("dropped_responses_without_callback")
        return 0
    canister.take_callback(callback.callback_id)
    call_context = canister.call_contexts.get(callback.call_context_id)
    if call_context is None:
        state.metadata.count("critical_errors")  # a callback always belongs to an open context
        return 0
    canister_id = canister.canister_id
    origin = call_context.origin
    caller = origin.canister if type(origin) is CanisterOrigin else origin.source
    api = SystemApi(canister, caller, state.metadata.batch_time, limits,
                    answer_refusal=ALREADY_ANSWERED if call_context.responded else None, deadline=callback.deadline)
    payload = response.response_payload
    is_reply = type(payload) is Reply
    name = callback.on_reply if is_reply else callback.on_reject
    spec = None if cls is None else cls.__canister_methods__.get(name)
    if cls is not None:   # the call being answered replies in its method's encoding
        answered = cls.__canister_methods__.get(call_context.method_name)
        api.candid = None if answered is None else answered.candid
    trap = value = None
    if cls is None:
        trap = _unavailable(state, canister)
    elif spec is None or spec.kind is not MethodKind.CALLBACK:
        trap = f"no @callback method {name!r}"
    elif not is_reply:
        value = (int(payload.code), payload.message)
    else:
        try:
            value = decode_payload(payload.data)
        except EncodingError as exc:
            trap = f"undecodable reply from canister {canister_text(response.respondent)}: {exc}"
    if trap is None:
        ok, result = run_method(api, cls, spec, (value, callback.context), limits)
        answer = finish_method(api, ok, result, call_context.call_context_id,
                               return_is_reply=False, may_answer_trap=not call_context.responded)
    else:
        answer = None if call_context.responded else trap_reject(canister_id, trap)
    settle_call_context(state, canister, call_context.call_context_id, answer, limits)
    return api.instructions if usage is None else usage.record(api)
