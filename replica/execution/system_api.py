"""The system API of one running message: what it may read, and the effects it buffers.

Effects are applied only if the message completes: stable-state writes go through the
``StableMap`` journal (committed or rolled back), while outgoing calls, a new certified
data value and log records wait in this object until ``commit`` (a trap simply drops them;
the system then logs the trap itself, ``log_trap``).
"""

from __future__ import annotations

from typing import Any

from message_routing.limits import DEFAULT, Limits
from replica.ic.textual_ids import canister_text
from state_manager.canister_log import LogBuffer, append_log
from state_manager.canister_state import CanisterState
from state_manager.deadlines import DeadlineError, compute_call_deadline
from state_manager.messages import Reject, RejectCode, Reply, Request, truncate_reject_message
from state_manager.stable_map import StableValueError, check_stable_value

from .canister import Canister, MethodKind
from .sandbox.meter import BYTES_PER_INSTRUCTION
from .sandbox.stable_view import check_exact_value
from .candid_methods import encode_result
from .codec import EncodingError, encode_value
from .errors import ApiUsageError, CallError

__all__ = ["SystemApi", "MAX_CERTIFIED_DATA_BYTES", "ALREADY_ANSWERED"]

MAX_CERTIFIED_DATA_BYTES = 32
MAX_CANISTER_ID = 2**64 - 1
ALREADY_ANSWERED = "the call was already answered"


class SystemApi:
    """Per-message context behind ``Canister``'s properties and methods.

    ``answer_refusal``/``call_refusal`` are None when the message may answer/call, else
    the reason it may not (a query cannot call; a callback of an answered call cannot answer).
    """

    __slots__ = (
        "canister", "canister_id", "caller", "time", "stable", "limits", "answer_refusal",
        "call_refusal", "answer", "calls", "_calls_per_receiver", "_certified_data", "deadline",
        "sandbox", "stable_view", "stable_limit", "stable_before", "instructions", "log_buffer",
        "limit_exceeded", "candid",
    )

    def __init__(
        self,
        canister: CanisterState,
        caller: bytes | int,
        time: int,
        limits: Limits | None,
        *,
        answer_refusal: str | None = None,
        call_refusal: str | None = None,
        deadline: int = 0,
    ) -> None:
        self.canister = canister
        #: The deadline (whole seconds) of the call being handled or answered; 0 if none.
        self.deadline = deadline
        self.canister_id = canister.canister_id
        self.caller = caller
        self.time = time
        self.stable = canister.stable
        self.limits = limits
        self.answer_refusal = answer_refusal
        self.call_refusal = call_refusal
        self.answer: Reply | Reject | None = None
        # (receiver, method, payload, on_reply, on_reject, context, deadline), in call order
        self.calls: list[tuple] = []
        self._calls_per_receiver: dict[int, int] = {}  # lookups only, never iterated
        self._certified_data: bytes | None = None
        # A sandboxed canister's meter and charged view of ``stable`` (set by ``runtime``),
        # its stable size before the message and limit, and the instructions the message used.
        self.sandbox: Any = None
        self.stable_view: Any = None
        self.stable_limit = 0
        self.stable_before = 0
        self.instructions = 0
        #: The Candid types of the method whose call this message answers; None: msgpack.
        self.candid: Any = None
        #: Set when the message trapped on its instruction limit (``runtime.finish_method``).
        self.limit_exceeded = False
        # The records this message logged (made at its first ``log``).
        self.log_buffer: LogBuffer | None = None

    # -- certified data ----------------------------------------------------------------------

    def get_certified_data(self) -> bytes:
        data = self._certified_data
        return self.canister.certified_data if data is None else data

    def set_certified_data(self, data: bytes) -> None:
        if type(data) is not bytes or len(data) > MAX_CERTIFIED_DATA_BYTES:
            raise ApiUsageError(f"certified data must be at most {MAX_CERTIFIED_DATA_BYTES} bytes")
        self._certified_data = data

    # -- answering ---------------------------------------------------------------------------

    def reply(self, value: Any) -> None:
        """Answer with ``Reply(encode(value))``; a second answer traps."""
        if self.answer_refusal is not None:
            raise ApiUsageError(self.answer_refusal)
        try:
            data = self.encode_reply(value)
        except EncodingError as exc:
            raise ApiUsageError(f"reply value cannot be encoded: {exc}") from None
        self.answer_refusal = ALREADY_ANSWERED
        self.answer = Reply(data)

    def encode_reply(self, value: Any) -> bytes:
        """A reply's bytes: msgpack, or Candid for a method that declares its types (whose
        encoding a sandboxed canister pays for, an instruction a value)."""
        if self.candid is None:
            return encode_value(value)
        data, units = encode_result(self.candid, value)
        if self.sandbox is not None:
            self.sandbox.charge(units)
        return data

    def reject(self, message: str) -> None:
        """Answer with ``Reject(CANISTER_REJECT, message)``; a second answer traps."""
        if self.answer_refusal is not None:
            raise ApiUsageError(self.answer_refusal)
        if type(message) is not str:
            raise ApiUsageError("a reject message is text")
        self.answer_refusal = ALREADY_ANSWERED
        self.answer = Reject(RejectCode.CANISTER_REJECT, truncate_reject_message(message))

    # -- calling -----------------------------------------------------------------------------

    def call(
        self, instance: Canister, receiver: int, method: str, arg: Any, on_reply: Any, on_reject: Any, context: Any,
        timeout_s: Any = None,
    ) -> None:
        """Buffer a call after checking, in order: calls allowed here; argument types;
        ``count_bytes(request) ≤ max_inter_canister_payload_bytes``; and room for one more
        request (counting the ones already buffered) in the output queue to ``receiver``
        and, for a guaranteed-response call, for its response in the input queue from it.

        ``timeout_s`` (an int ≥ 1) makes it a bounded-wait call with
        ``deadline = compute_call_deadline(time, timeout_s)``; None, a guaranteed-response call."""
        if self.call_refusal is not None:
            raise CallError(self.call_refusal)
        if type(receiver) is not int or not 0 <= receiver <= MAX_CANISTER_ID:
            raise ApiUsageError(f"a canister id is an int in [0, 2**64), not {receiver!r}")
        if type(method) is not str:
            raise ApiUsageError("a method name is text")
        deadline = 0
        if timeout_s is not None:
            try:
                deadline = compute_call_deadline(self.time, timeout_s)
            except DeadlineError as exc:
                raise ApiUsageError(str(exc)) from None
        reply_name = _callback_name(instance, on_reply)
        reject_name = _callback_name(instance, on_reject)
        try:
            check_stable_value(context)
            if self.sandbox is not None:
                check_exact_value(context)  # no canister-defined subclasses in the state
        except StableValueError as exc:
            raise ApiUsageError(f"call context: {exc}") from None
        try:
            payload = encode_value(arg)
        except EncodingError as exc:
            raise ApiUsageError(f"call argument cannot be encoded: {exc}") from None
        limits = self.limits
        size = Request(self.canister_id, receiver, method, payload, 0).count_bytes()
        if size > limits.max_inter_canister_payload_bytes:
            raise CallError(f"request of {size} bytes exceeds the limit of {limits.max_inter_canister_payload_bytes} bytes")
        buffered = self._calls_per_receiver.get(receiver, 0)
        capacity = limits.queue_capacity
        queues = self.canister.queues
        output = queues.output_queues.get(receiver)
        input_ = queues.input_queues.get(receiver)
        room = capacity if output is None else output.available_slots(capacity)
        if not deadline:  # a guaranteed-response call also reserves its response's slot
            room = min(room, capacity if input_ is None else input_.available_slots(capacity))
        if room <= buffered:
            raise CallError(f"queues to canister {canister_text(receiver)} are full")
        self._calls_per_receiver[receiver] = buffered + 1
        self.calls.append((receiver, method, payload, reply_name, reject_name, context, deadline))

    # -- logging -----------------------------------------------------------------------------

    def _log_bound(self) -> int:
        return (self.limits or DEFAULT).max_canister_log_bytes

    def log(self, text: Any) -> None:
        """Log ``text`` (``self.log``, and what the sandbox's ``print`` writes): a record of
        the canister's log with the batch time if the message commits (dropped with the rest
        of its effects if it traps; ``state_manager.canister_log`` has the bound). A
        sandboxed canister pays one instruction per ``BYTES_PER_INSTRUCTION`` characters."""
        if type(text) is not str:
            raise ApiUsageError("a log record is text (str)")
        if self.sandbox is not None:
            self.sandbox.charge(len(text) // BYTES_PER_INSTRUCTION + 1)
        buffer = self.log_buffer
        if buffer is None:
            buffer = self.log_buffer = LogBuffer(self._log_bound())
        buffer.add(text)

    def log_trap(self, description: str) -> None:
        """The system's record of this message's trap, written after its effects were
        dropped: ``trapped: <description>``, and for a metered canister ``(<n> instructions)``."""
        text = f"trapped: {description}"
        if self.sandbox is not None:
            text = f"{text} ({self.instructions} instructions)"
        self.canister.log = append_log(self.canister.log, self.time, text, self._log_bound())

    # -- completing --------------------------------------------------------------------------

    def commit(self, call_context_id: int | None) -> int:
        """Apply the message's effects: keep its stable writes, set certified data, append
        its log records, register a callback per buffered call and queue the requests.
        Returns the number of calls. (``call_context_id`` is None only where calls are
        refused, e.g. ``init``.)"""
        canister = self.canister
        canister.stable.commit_transaction()
        if self._certified_data is not None:
            canister.certified_data = self._certified_data
        if self.log_buffer is not None:
            canister.log = self.log_buffer.merged_into(canister.log, self.time)
        calls = self.calls
        if not calls:
            return 0
        own_id = self.canister_id
        queues = canister.queues
        capacity = self.limits.queue_capacity
        for receiver, method, payload, on_reply, on_reject, context, deadline in calls:
            registered = canister.register_callback(call_context_id, receiver, on_reply, on_reject, context, deadline)
            queues.push_output_request(
                Request(own_id, receiver, method, payload, registered.callback_id, deadline), capacity)
        return len(calls)

    def discard(self) -> None:
        """Drop the message's effects: roll back its stable writes, forget its calls and log records."""
        self.canister.stable.rollback_transaction()
        self.log_buffer = None
        self.calls = []
        self._calls_per_receiver = {}
        self._certified_data = None


def _callback_name(instance: Canister, reference: Any) -> str:
    """The name of the ``@callback`` method ``reference`` (a bound method of ``instance``
    or a method name). Callbacks are stored by name so they stay serializable state."""
    function = None
    if type(reference) is str:
        name = reference
    else:
        function = getattr(reference, "__func__", None)
        if function is None or getattr(reference, "__self__", None) is not instance:
            raise ApiUsageError("on_reply/on_reject must be @callback methods of this canister (self.method)")
        name = function.__name__
    spec = type(instance).__canister_methods__.get(name)
    if spec is None or spec.kind is not MethodKind.CALLBACK or (function is not None and spec.function is not function):
        raise ApiUsageError(f"{name!r} is not a @callback method of {type(instance).__qualname__}")
    return name
