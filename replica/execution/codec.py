"""Argument and reply values on the wire: canonical msgpack of canonical values.

Canisters exchange plain values (None, bool, int, str, bytes, tuples/lists and maps with
sortable keys). On the wire a value is ``state_manager.encoding.encode(value)``; this module
first puts maps in sorted-key order so apps may build them in any order.

``RawPayload(data)`` is a payload already encoded (a Candid message for a method that
declares Candid types): ``encode_value`` passes its bytes through unchanged, and
``decode_reply`` gives a Candid reply back as one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from state_manager.encoding import PLAIN_SCALARS, EncodingError, decode, encode, encode_unchecked

__all__ = ["canonicalize", "encode_value", "decode_payload", "decode_reply", "RawPayload", "EncodingError"]

#: The magic of a Candid message. No canonical msgpack payload begins with it (that would be
#: the integer 68 followed by more bytes), so a reply that does is Candid.
CANDID_MAGIC = b"DIDL"


@dataclass(frozen=True, slots=True)
class RawPayload:
    """Payload bytes sent or received as they are, not as a msgpack value."""

    data: bytes

    def __post_init__(self) -> None:
        if type(self.data) is not bytes:
            raise EncodingError(f"a raw payload is bytes, not {type(self.data).__name__}")


def canonicalize(value: Any, depth: int = 0) -> Any:
    """The canonical form of ``value``: maps with sorted keys, lists as tuples, recursively."""
    if type(value) in PLAIN_SCALARS:
        return value
    if depth > 64:
        raise EncodingError("value nested deeper than 64 levels")
    if isinstance(value, dict):
        try:
            keys = sorted(value)
        except TypeError as exc:
            raise EncodingError("map keys of mixed types") from exc
        return {key: canonicalize(value[key], depth + 1) for key in keys}
    if isinstance(value, (list, tuple)):
        return tuple(canonicalize(item, depth + 1) for item in value)
    return value  # encode() rejects whatever else it is, with a precise message


def encode_value(value: Any) -> bytes:
    """``encode(canonicalize(value))``; raises ``EncodingError`` for unencodable values."""
    if type(value) in PLAIN_SCALARS:
        return encode(value)
    if type(value) is RawPayload:
        return value.data
    plain = _plain_canonical(value, 0)
    if plain is _NOT_PLAIN:
        return encode(canonicalize(value))  # subclasses, or an error to name
    # Only built-in scalars, lists, tuples and maps with sorted keys of one type, within
    # the depth limit: encode()'s check would accept it, so it need not walk it again.
    return encode_unchecked(plain)


_NOT_PLAIN = object()


def _plain_canonical(value: Any, depth: int) -> Any:
    """``canonicalize(value)`` if ``value`` is made of exact built-in types only (no
    floats, no subclasses, comparable scalar map keys, nesting well within the limit),
    else ``_NOT_PLAIN``."""
    kind = type(value)
    if kind in PLAIN_SCALARS:
        return value
    if depth >= 64:
        return _NOT_PLAIN
    if kind is dict:
        # Key types first: sorting scalars runs no app code (a key's own __lt__ could).
        for key in value:
            if type(key) not in PLAIN_SCALARS:
                return _NOT_PLAIN
        try:
            keys = sorted(value)
        except TypeError:
            return _NOT_PLAIN
        result = {}
        for key in keys:
            item = value[key]
            if type(item) not in PLAIN_SCALARS:
                item = _plain_canonical(item, depth + 1)
                if item is _NOT_PLAIN:
                    return _NOT_PLAIN
            result[key] = item
        return result
    if kind is tuple or kind is list:
        items = []
        for item in value:
            if type(item) not in PLAIN_SCALARS:
                item = _plain_canonical(item, depth + 1)
                if item is _NOT_PLAIN:
                    return _NOT_PLAIN
            items.append(item)
        return tuple(items)
    return _NOT_PLAIN


def decode_payload(payload: bytes) -> Any:
    """The value a payload carries: the empty payload means None, anything else must be
    canonical msgpack (``EncodingError`` otherwise)."""
    if not payload:
        return None
    return decode(payload)


def decode_reply(payload: bytes) -> Any:
    """A reply's value: a Candid message as a ``RawPayload`` (decode it at the method's
    result types), anything else as ``decode_payload`` reads it."""
    if payload.startswith(CANDID_MAGIC):
        return RawPayload(payload)
    return decode_payload(payload)
