"""Running one canister method and applying the reply rules to its outcome.

``run_method`` executes a method on a fresh instance inside a stable-state transaction and
turns any exception into a trap. ``finish_method`` then decides the message's answer and
commits or discards its effects:

* trap → effects discarded; answer ``Reject(CANISTER_ERROR, "Canister <id> trapped: …")``
  unless the call was answered by an earlier message;
* no explicit ``reply``/``reject``, return value counts, and no calls made → the return
  value is the reply (an unencodable return value is a trap);
* read-only (queries) → effects discarded, answer kept; otherwise effects committed.
"""

from __future__ import annotations

from typing import Any

from state_manager.messages import Reject, RejectCode, Reply, truncate_reject_message

from .canister import MethodSpec, new_instance
from .codec import EncodingError, encode_value
from .errors import Trap
from .system_api import SystemApi

__all__ = ["run_method", "finish_method", "trap_message", "trap_reject"]


def trap_message(canister_id: int, description: str) -> str:
    """``"Canister <id> trapped: <description>"``, cut to the reject message limit."""
    return truncate_reject_message(f"Canister {canister_id} trapped: {description}")


def trap_reject(canister_id: int, description: str) -> Reject:
    return Reject(RejectCode.CANISTER_ERROR, trap_message(canister_id, description))


def _describe(exc: Exception) -> str:
    # A Trap's text is the canister's own words; other exceptions also name their type.
    text = str(exc)
    if isinstance(exc, Trap):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def run_method(api: SystemApi, cls: type, spec: MethodSpec, args: tuple) -> tuple[bool, Any]:
    """Start the stable transaction and run ``spec`` on a fresh instance of ``cls``.
    Returns ``(True, return value)`` or ``(False, trap description)``."""
    api.stable.begin_transaction()
    instance = new_instance(cls, api)
    try:
        return True, spec.function(instance, *args)
    except Exception as exc:  # every exception a canister raises is a trap
        return False, _describe(exc)


def finish_method(
    api: SystemApi,
    ok: bool,
    result: Any,
    call_context_id: int | None,
    *,
    return_is_reply: bool,
    read_only: bool = False,
    may_answer_trap: bool = True,
) -> Reply | Reject | None:
    """Apply the reply rules (module docstring); return the answer this message gives."""
    if ok and return_is_reply and api.answer is None and not api.calls:
        try:
            api.answer = Reply(encode_value(result))
        except EncodingError as exc:
            ok, result = False, f"reply value cannot be encoded: {exc}"
    if not ok:
        api.discard()
        return trap_reject(api.canister_id, result) if may_answer_trap else None
    if read_only:
        api.discard()
    else:
        api.commit(call_context_id)
    return api.answer
