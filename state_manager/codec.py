"""Canonical values of state objects (``*_to_value``) and strict decoders (``*_from_value``).

Every leaf of the state tree, every checkpoint and every batch log is built from these
values and encoded with ``encoding.encode``. Decoders check every field's type and range
and raise ``CodecError`` with the field's name: they read bytes from peers and disks.

Bounded-wait calls (issue 17) add a deadline to requests, responses, callbacks and call
origins. Their values end with it only when it is non-zero, and their leaves are written at
``BOUNDED_WAIT_LEAF_VERSION`` (2); everything without a deadline keeps version 1 and its
bytes. So each value has exactly one encoding (a version-2 leaf without a deadline, or a
version-1 leaf with one, is refused), version-1 leaves still decode, and the state hashes of
runs without bounded-wait calls are unchanged.
"""

from __future__ import annotations

from typing import Any

import msgpack
from mypy_extensions import mypyc_attr

from .canister_state import CallContext, Callback, CanisterOrigin, IngressOrigin
from .encoding import EncodingError, decode, encode, is_u64, packb
from .errors import StateManagerError
from .ingress_history import IngressState, IngressStatus
from .messages import Ingress, Reject, RejectCode, Reply, Request, Response
from .stable_map import StableValueError, check_stable_value
from .streams import RejectReason, RejectSignal, StreamHeader

__all__ = [
    "CodecError", "LEAF_VERSION", "message_to_value", "message_from_value", "encode_message_leaf",
    "decode_message_leaf", "header_to_value", "header_from_value", "encode_header_leaf",
    "decode_header_leaf", "ingress_to_value", "ingress_from_value", "ingress_status_to_value",
    "ingress_status_from_value", "check_u64", "check_bytes", "check_str", "check_tuple", "decode_typed",
    "BOUNDED_WAIT_LEAF_VERSION", "leaf_version_for", "message_leaf_value", "call_context_leaf_value",
    "callback_leaf_value",
]

LEAF_VERSION = 1
#: The leaf version of values that carry a non-zero deadline (bounded-wait calls).
BOUNDED_WAIT_LEAF_VERSION = 2
U64 = 2**64


# An ordinary Python class even when this module is compiled (see setup.py): callers
# subclass, pickle and match it like any exception.
@mypyc_attr(native_class=False)
class CodecError(StateManagerError, ValueError):
    """A value that is not the canonical form of the expected state object."""


def check_u64(value: Any, what: str) -> int:
    if not is_u64(value):
        raise CodecError(f"{what}: expected u64, got {value!r}")
    return value


def check_bytes(value: Any, what: str, size: int | None = None) -> bytes:
    if not isinstance(value, bytes) or (size is not None and len(value) != size):
        raise CodecError(f"{what}: expected {size or 'some'} bytes")
    return value


def check_str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise CodecError(f"{what}: expected text")
    return value


def check_tuple(value: Any, what: str, arity: int | None = None) -> tuple:
    if not isinstance(value, tuple) or (arity is not None and len(value) != arity):
        raise CodecError(f"{what}: expected an array of {arity if arity is not None else 'any'} items")
    return value


def _is_int(value: Any, expected: int) -> bool:
    """``value == expected`` for a true int (``True`` is not ``1`` on the wire)."""
    return type(value) is int and value == expected


_MEMBERS = {cls: {member.value: member for member in cls} for cls in (IngressState, RejectCode, RejectReason)}


def _enum(enum_cls, value: Any, what: str):
    """The member of ``enum_cls`` with u64 value ``value`` (a dict lookup: calling the enum
    class costs several times more, and a checkpoint decodes one per ingress status)."""
    member = _MEMBERS[enum_cls].get(check_u64(value, what))
    if member is None:
        raise CodecError(f"{what}: unknown value {value!r}")
    return member


# -- deadlines --------------------------------------------------------------------------------

def leaf_version_for(deadline: int) -> int:
    """``BOUNDED_WAIT_LEAF_VERSION`` if ``deadline ≠ 0``, else ``LEAF_VERSION``."""
    return LEAF_VERSION if deadline == 0 else BOUNDED_WAIT_LEAF_VERSION


def _with_deadline(value: tuple, deadline: int) -> tuple:
    """A value ends with its deadline only when the deadline is non-zero."""
    return value if deadline == 0 else value + (deadline,)


def _deadline(value: Any, what: str) -> int:
    """A trailing deadline field: a u64 ≥ 1 (a zero deadline is written by leaving it out)."""
    deadline = check_u64(value, what)
    if deadline == 0:
        raise CodecError(f"{what}: a zero deadline is encoded by omitting it")
    return deadline


# -- messages ----------------------------------------------------------------------------------

def message_to_value(message: Request | Response) -> tuple:
    """Request: ``[0, sender, receiver, method, payload, callback(, deadline)]``; Response:
    ``[1, originator, respondent, callback, [0, data] | [1, code, text](, deadline)]``; the
    deadline only when non-zero."""
    if isinstance(message, Request):
        return _with_deadline((0, message.sender, message.receiver, message.method_name, message.method_payload,
                               message.sender_reply_callback), message.deadline)
    payload = message.response_payload
    body = (0, payload.data) if isinstance(payload, Reply) else (1, int(payload.code), payload.message)
    return _with_deadline((1, message.originator, message.respondent, message.originator_reply_callback, body),
                          message.deadline)


def message_from_value(value: Any) -> Request | Response:
    value = check_tuple(value, "message")
    if not value:
        raise CodecError("message: empty array")
    kind = value[0]
    if _is_int(kind, 0) and len(value) in (6, 7):
        sender, receiver, method, payload, callback = value[1:6]
        deadline = _deadline(value[6], "request deadline") if len(value) == 7 else 0
        return Request(check_u64(sender, "sender"), check_u64(receiver, "receiver"), check_str(method, "method"),
                       check_bytes(payload, "payload"), check_u64(callback, "callback"), deadline)
    if _is_int(kind, 1) and len(value) in (5, 6):
        originator, respondent, callback, body = value[1:5]
        deadline = _deadline(value[5], "response deadline") if len(value) == 6 else 0
        body = check_tuple(body, "response payload")
        if len(body) == 2 and _is_int(body[0], 0):
            payload = Reply(check_bytes(body[1], "reply"))
        elif len(body) == 3 and _is_int(body[0], 1):
            payload = Reject(_enum(RejectCode, body[1], "reject code"), check_str(body[2], "reject message"))
        else:
            raise CodecError("response payload: expected [0, data] or [1, code, message]")
        return Response(check_u64(originator, "originator"), check_u64(respondent, "respondent"),
                        check_u64(callback, "callback"), payload, deadline)
    raise CodecError(f"message: unknown kind {kind!r} or arity {len(value)}")


def message_leaf_value(message: Request | Response) -> tuple:
    """``[leaf_version_for(deadline), message_to_value(message)]``: what a message leaf encodes."""
    return (leaf_version_for(message.deadline), message_to_value(message))


def _versioned(value: Any, what: str) -> Any:
    value = check_tuple(value, what, 2)
    if not _is_int(value[0], LEAF_VERSION):
        raise CodecError(f"{what}: unknown encoding version {value[0]!r}")
    return value[1]


def _versioned_message(value: Any) -> Request | Response:
    """A message leaf's value: version 1 without a deadline, version 2 with one — no other."""
    version, inner = check_tuple(value, "message leaf", 2)
    if not (_is_int(version, LEAF_VERSION) or _is_int(version, BOUNDED_WAIT_LEAF_VERSION)):
        raise CodecError(f"message leaf: unknown encoding version {version!r}")
    message = message_from_value(inner)
    if leaf_version_for(message.deadline) != version:
        raise CodecError(f"message leaf: version {version} does not match deadline {message.deadline}")
    return message


def _decode(data: Any, what: str) -> Any:
    try:
        return decode(data)
    except EncodingError as exc:
        raise CodecError(f"{what}: {exc}") from exc


def encode_message_leaf(message: Request | Response) -> bytes:
    """The leaf under ``/streams/<dst>/messages/<index>``: ``encode([1, message])``, or
    ``encode([2, message])`` for a message with a deadline."""
    return encode(message_leaf_value(message))


def decode_typed(data: Any, what: str) -> Any:
    """``decode(data)`` for values whose decoder checks every field's type afterwards (so no
    float or map can pass): msgpack's C unpacker plus the canonical re-encoding check, without
    ``encoding.decode``'s generic value walk. Same accepted inputs, same error class."""
    if not isinstance(data, bytes):
        raise CodecError(f"{what}: expected bytes, got {type(data).__name__}")
    try:
        value = msgpack.unpackb(data, use_list=False, raw=False, strict_map_key=False)
        canonical = packb(value) == data
    except Exception as exc:  # noqa: BLE001 - every unpacker failure means: not canonical msgpack
        raise CodecError(f"{what}: malformed msgpack: {exc}") from None
    if not canonical:
        raise CodecError(f"{what}: non-canonical msgpack encoding")
    return value


def decode_message_leaf(data: Any) -> Request | Response:
    """Inverse of ``encode_message_leaf`` (the fields' types are all checked, so the fast
    ``decode_typed`` applies)."""
    return _versioned_message(decode_typed(data, "message leaf"))


# -- stream headers -------------------------------------------------------------------------

def header_to_value(header: StreamHeader) -> tuple:
    """``[begin, end, signals_end, [[index, reason], ...]]``."""
    return (header.begin, header.end, header.signals_end,
            tuple((s.index, int(s.reason)) for s in header.reject_signals))


def header_from_value(value: Any) -> StreamHeader:
    begin, end, signals_end, signals = check_tuple(value, "stream header", 4)
    reject_signals = []
    for item in check_tuple(signals, "reject signals"):
        index, reason = check_tuple(item, "reject signal", 2)
        reject_signals.append(RejectSignal(check_u64(index, "signal index"), _enum(RejectReason, reason, "reject reason")))
    return StreamHeader(check_u64(begin, "begin"), check_u64(end, "end"), check_u64(signals_end, "signals_end"),
                        tuple(reject_signals))


def encode_header_leaf(header: StreamHeader) -> bytes:
    return encode((LEAF_VERSION, header_to_value(header)))


def decode_header_leaf(data: Any) -> StreamHeader:
    return header_from_value(_versioned(_decode(data, "header leaf"), "header leaf"))


# -- ingress ----------------------------------------------------------------------------------

def ingress_to_value(ingress: Ingress) -> tuple:
    return (ingress.source, ingress.receiver, ingress.method_name, ingress.method_payload,
            ingress.message_id, ingress.expiry_time)


def ingress_from_value(value: Any) -> Ingress:
    source, receiver, method, payload, message_id, expiry = check_tuple(value, "ingress", 6)
    return Ingress(check_bytes(source, "source"), check_u64(receiver, "receiver"), check_str(method, "method"),
                   check_bytes(payload, "payload"), check_bytes(message_id, "message id", 32),
                   check_u64(expiry, "expiry"))


def ingress_status_to_value(status: IngressStatus) -> tuple:
    return (int(status.state), status.receiver, status.source, status.time, status.expiry_time, status.reply,
            None if status.reject_code is None else int(status.reject_code), status.reject_message)


def ingress_status_from_value(value: Any) -> IngressStatus:
    state, receiver, source, time, expiry, reply, code, message = check_tuple(value, "ingress status", 8)
    return IngressStatus(
        _enum(IngressState, state, "ingress state"), check_u64(receiver, "receiver"), check_bytes(source, "source"),
        check_u64(time, "time"), check_u64(expiry, "expiry"),
        None if reply is None else check_bytes(reply, "reply"),
        None if code is None else _enum(RejectCode, code, "reject code"),
        None if message is None else check_str(message, "reject message"),
    )


# -- canister state ---------------------------------------------------------------------------

def _origin_deadline(context) -> int:
    origin = context.origin
    return origin.deadline if type(origin) is CanisterOrigin else 0


def call_context_to_value(context) -> tuple:
    """``[id, origin, method, responded, outstanding_callbacks]``; origin is
    ``[0, message_id, source]`` (ingress) or ``[1, canister, callback_id(, deadline)]``."""
    origin = context.origin
    origin_value = ((0, origin.message_id, origin.source) if type(origin) is IngressOrigin
                    else _with_deadline((1, origin.canister, origin.callback_id), origin.deadline))
    return (context.call_context_id, origin_value, context.method_name, context.responded, context.outstanding_callbacks)


def call_context_leaf_value(context) -> tuple:
    return (leaf_version_for(_origin_deadline(context)), call_context_to_value(context))


def call_context_from_value(value: Any):
    cid, origin, method, responded, outstanding = check_tuple(value, "call context", 5)
    origin = check_tuple(origin, "call origin")
    origin_obj: IngressOrigin | CanisterOrigin
    if _is_int(origin[0], 0) and len(origin) == 3:
        origin_obj = IngressOrigin(check_bytes(origin[1], "message id"), check_bytes(origin[2], "source"))
    elif _is_int(origin[0], 1) and len(origin) in (3, 4):
        deadline = _deadline(origin[3], "origin deadline") if len(origin) == 4 else 0
        origin_obj = CanisterOrigin(check_u64(origin[1], "origin canister"), check_u64(origin[2], "origin callback"),
                                    deadline)
    else:
        raise CodecError("call origin: unknown kind")
    if type(responded) is not bool:
        raise CodecError("call context: responded must be a bool")
    return CallContext(check_u64(cid, "call context id"), origin_obj, check_str(method, "method"), responded,
                       check_u64(outstanding, "outstanding callbacks"))


def callback_to_value(callback) -> tuple:
    """``[id, call_context_id, respondent, on_reply, on_reject, context(, deadline)]``."""
    return _with_deadline((callback.callback_id, callback.call_context_id, callback.respondent, callback.on_reply,
                           callback.on_reject, callback.context), callback.deadline)


def callback_leaf_value(callback) -> tuple:
    return (leaf_version_for(callback.deadline), callback_to_value(callback))


def callback_from_value(value: Any):
    value = check_tuple(value, "callback")
    if len(value) not in (6, 7):
        raise CodecError("callback: expected an array of 6 or 7 items")
    cb_id, ctx_id, respondent, on_reply, on_reject, context = value[:6]
    deadline = _deadline(value[6], "callback deadline") if len(value) == 7 else 0
    try:
        check_stable_value(context)
    except StableValueError as exc:
        raise CodecError(f"callback context: {exc}") from exc
    return Callback(check_u64(cb_id, "callback id"), check_u64(ctx_id, "call context id"),
                    check_u64(respondent, "respondent"), check_str(on_reply, "on_reply"),
                    check_str(on_reject, "on_reject"), context, deadline)
