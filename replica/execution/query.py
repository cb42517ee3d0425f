"""Queries: read-only method calls answered from a state, outside of consensus.

A query runs a ``@query`` method exactly like a call, except that its stable-state writes
are rolled back, its certified-data change is dropped and ``call`` raises ``CallError``.
The state is left as it was found. Update methods cannot be run as queries.
"""

from __future__ import annotations

from typing import Any, Protocol

from message_routing.limits import DEFAULT, Limits
from replica.ic.textual_ids import canister_text
from state_manager.canister_state import CanisterState, CanisterStatus
from state_manager.messages import Reject, RejectCode, Reply, truncate_reject_message
from state_manager.replicated_state import ReplicatedState

from .candid_methods import decode_arguments
from .canister import Canister, MethodKind
from .codec import EncodingError, decode_payload, encode_value
from .message_execution import MessageUsage
from .runtime import finish_method, run_method
from .system_api import SystemApi

__all__ = ["run_query", "CodeResolver"]


class CodeResolver(Protocol):
    """Finds the class that runs a canister (``CanisterRegistry``, ``ExecutionEnvironment``)."""

    def resolve(self, canister: CanisterState) -> type[Canister] | None: ...


def _error(code: RejectCode, text: str) -> Reject:
    return Reject(code, truncate_reject_message(text))


def run_query(
    code: CodeResolver, state: ReplicatedState, canister_id: int, method: str, arg: Any = None,
    caller: bytes | int = b"", limits: Limits = DEFAULT, usage: MessageUsage | None = None,
) -> Reply | Reject:
    """Run query ``method`` of ``canister_id`` with ``arg`` (a value, passed through the wire
    encoding so the method sees exactly what a call would deliver); a sandboxed canister's
    query may use ``limits.max_instructions_per_query`` instructions."""
    canister = state.canisters.get(canister_id)
    if canister is None:
        return _error(RejectCode.DESTINATION_INVALID, f"Canister {canister_text(canister_id)} not found")
    if canister.status is CanisterStatus.STOPPED:
        return _error(RejectCode.CANISTER_ERROR, f"Canister {canister_text(canister_id)} is stopped")
    if not canister.module_hash:
        return _error(RejectCode.DESTINATION_INVALID,
                      f"Canister {canister_text(canister_id)} is empty: no code is installed")
    cls = code.resolve(canister)
    if cls is None:
        return _error(RejectCode.CANISTER_ERROR,
                      f"the code of canister {canister_text(canister_id)} ({canister.module_name}) is not available")
    spec = cls.__canister_methods__.get(method)
    if spec is None or spec.kind is not MethodKind.QUERY:
        return _error(RejectCode.CANISTER_ERROR,
                      f"Canister {canister_text(canister_id)} has no query method {method!r}")
    try:
        payload = encode_value(arg)
        if spec.candid is not None:   # ``arg`` is the Candid message, as a ``RawPayload``
            args = decode_arguments(spec.candid, payload)
        else:
            args = (decode_payload(payload),) if spec.takes_arg else ()
    except EncodingError as exc:
        return _error(RejectCode.CANISTER_ERROR, f"invalid query argument: {exc}")
    api = SystemApi(canister, caller, state.metadata.batch_time, None, call_refusal="a query cannot make calls")
    api.candid = spec.candid
    ok, result = run_method(api, cls, spec, args, limits, limits.max_instructions_per_query)
    answer = finish_method(api, ok, result, None, return_is_reply=True, read_only=True)
    if usage is not None:
        usage.record(api)
    return answer if answer is not None else _error(RejectCode.CANISTER_ERROR, "the query did not answer")
