"""Running one canister method and applying the reply rules to its outcome.

``run_method`` executes a method on a fresh instance inside a stable-state transaction and
turns any exception into a trap. A sandboxed canister (one installed from source) runs with
its module's instruction meter (``sandbox``): ``run_method`` starts it with the message's
instruction limit, and it keeps running through ``finish_method`` (encoding the reply may
run canister code too), which stops it and records ``api.instructions``. ``finish_method``
then decides the message's answer and commits or discards its effects:

* trap → effects discarded (log records included) and the trap logged by the system
  (``SystemApi.log_trap``; not for read-only messages); answer ``Reject(CANISTER_ERROR,
  "Canister <id> trapped: …")`` unless the call was answered by an earlier message; a
  message over its instruction limit is rejected with ``"Canister <id> exceeded the
  instruction limit for single message execution"`` (the IC's words), whatever canister
  code did after the limit was reached;
* any ``BaseException`` canister code raises (``SystemExit``, ``GeneratorExit``, ...) is a
  trap; only ``KeyboardInterrupt`` — which canister code cannot raise, so it is the host's —
  goes on up;
* no explicit ``reply``/``reject``, return value counts, and no calls made → the return
  value is the reply (an unencodable return value is a trap);
* a commit that would take the canister's stable state over ``max_stable_state_bytes``
  encoded bytes is a trap;
* read-only (queries) → effects discarded, answer kept; otherwise effects committed.
"""

from __future__ import annotations

from typing import Any

from message_routing.limits import DEFAULT, Limits
from replica.ic.textual_ids import canister_text
from state_manager.messages import Reject, RejectCode, Reply, truncate_reject_message

from .canister import MethodSpec, new_instance
from .codec import EncodingError
from .errors import Trap
from .sandbox import InstructionLimitExceeded, Sandbox, SandboxFault, StableView, stable_state_bytes
from .sandbox.loader import describe_exception
from .sandbox.metering import METER
from .system_api import SystemApi

__all__ = ["run_method", "finish_method", "trap_message", "trap_reject", "sandbox_of", "instruction_limit_message"]


def trap_message(canister_id: int, description: str) -> str:
    """``"Canister <id> trapped: <description>"``, cut to the reject message limit."""
    return truncate_reject_message(f"Canister {canister_text(canister_id)} trapped: {description}")


def instruction_limit_message(canister_id: int) -> str:
    return f"Canister {canister_text(canister_id)} exceeded the instruction limit for single message execution"


def trap_reject(canister_id: int, description: str) -> Reject:
    return Reject(RejectCode.CANISTER_ERROR, trap_message(canister_id, description))


class _Fault:
    """A trap by the sandbox (a limit), not by canister code."""

    __slots__ = ("fault",)

    def __init__(self, fault: SandboxFault) -> None:
        self.fault = fault


def _describe(exc: BaseException) -> str:
    # A Trap's text is the canister's own words; other exceptions also name their type.
    text = str(exc)
    if isinstance(exc, Trap):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def sandbox_of(spec: MethodSpec) -> Sandbox | None:
    """The meter of a sandboxed canister's method; None for a builtin class."""
    namespace = getattr(spec.function, "__globals__", None)
    meter = None if namespace is None else namespace.get(METER)
    return meter if isinstance(meter, Sandbox) else None


def _cached_stable_size(sandbox: Sandbox, api: SystemApi) -> int:
    """The canister's stable size before this message if the sandbox's cache knows it for
    this very map, else -1 (a query's older state, a restart: measured only if needed)."""
    stable = api.canister.stable
    entry = sandbox.stable_sizes.get(api.canister_id)
    if entry is None or entry[0] is not stable or entry[2] != len(stable):
        return -1
    return entry[1]


def _stable_size_after(api: SystemApi, growth: int) -> int:
    """The stable size with this message's writes: from the cache, or measured."""
    if api.stable_before >= 0:
        return api.stable_before + growth
    return stable_state_bytes(api.canister.stable)


def run_method(api: SystemApi, cls: type, spec: MethodSpec, args: tuple, limits: Limits = DEFAULT,
               instruction_limit: int | None = None) -> tuple[bool, Any]:
    """Start the stable transaction and run ``spec`` on a fresh instance of ``cls``.
    Returns ``(True, return value)`` or ``(False, trap description)``; a sandboxed method
    runs metered with ``instruction_limit`` (default: ``limits.max_instructions_per_message``)."""
    api.stable.begin_transaction()
    instance = new_instance(cls, api)
    sandbox = sandbox_of(spec)
    if sandbox is None:
        try:
            return True, spec.function(instance, *args)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - every exception a canister raises is a trap
            return False, _describe(exc)
    api.sandbox = sandbox
    api.stable_limit = limits.max_stable_state_bytes
    api.stable_before = _cached_stable_size(sandbox, api)
    api.stable_view = StableView(api.stable, sandbox)
    limit = limits.max_instructions_per_message if instruction_limit is None else instruction_limit
    sandbox.begin(max(limit, 0), limits.max_message_memory_bytes)
    sandbox.log = api.log
    try:
        return True, spec.function(instance, *args)
    except SandboxFault as fault:
        return False, _Fault(fault)
    except KeyboardInterrupt:
        api.instructions = sandbox.end()
        sandbox.log = None
        raise
    except BaseException as exc:  # noqa: BLE001 - SystemExit, GeneratorExit, ...: all traps
        try:
            return False, describe_exception(exc)
        except SandboxFault as fault:
            return False, _Fault(fault)


def _outcome(api: SystemApi, ok: bool, result: Any, return_is_reply: bool, read_only: bool) -> tuple[bool, Any]:
    """Encode the reply (metered, for a sandboxed canister) and check the sandbox's limits."""
    if ok and return_is_reply and api.answer is None and not api.calls:
        try:
            api.answer = Reply(api.encode_reply(result))
        except EncodingError as exc:
            ok, result = False, f"reply value cannot be encoded: {exc}"
    sandbox = api.sandbox
    if sandbox is not None:
        if sandbox.left < 0 or sandbox.fault is not None:   # ``exhausted()``, tested inline first
            return False, _Fault(sandbox.exhausted())
        view = api.stable_view
        growth = 0 if view is None else view._sandbox_growth   # ``growth``, without the property
        if ok and not read_only and growth > 0:
            size = _stable_size_after(api, growth)
            api.stable_before = size - growth   # known now, for the cache at commit
            if size > api.stable_limit:
                return False, f"stable state of {size} bytes exceeds the limit of {api.stable_limit} bytes"
    return ok, result


def _trap_description(result: Any) -> str:
    """What trapped: the canister's exception, or the sandbox's limit."""
    if not isinstance(result, _Fault):
        return result
    if isinstance(result.fault, InstructionLimitExceeded):
        return "exceeded the instruction limit for single message execution"
    return result.fault.description


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
    sandbox = api.sandbox
    try:
        ok, result = _outcome(api, ok, result, return_is_reply, read_only)
    except SandboxFault as fault:
        ok, result = False, _Fault(fault)
    finally:
        if sandbox is not None and sandbox.running:
            api.instructions = sandbox.end()
            sandbox.log = None
    if not ok:
        api.discard()
        description = _trap_description(result)
        if not read_only:
            api.log_trap(description)
        if isinstance(result, _Fault) and isinstance(result.fault, InstructionLimitExceeded):
            api.limit_exceeded = True
        if not may_answer_trap:
            return None
        if api.limit_exceeded:
            return Reject(RejectCode.CANISTER_ERROR, instruction_limit_message(api.canister_id))
        return trap_reject(api.canister_id, description)
    if read_only:
        api.discard()
    else:
        view = api.stable_view
        if sandbox is not None and view is not None and api.stable_before >= 0:
            stable = api.canister.stable
            sandbox.stable_sizes[api.canister_id] = (stable, api.stable_before + view._sandbox_growth, len(stable))
        api.commit(call_context_id)
    return api.answer
