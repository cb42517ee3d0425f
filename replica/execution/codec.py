"""Argument and reply values on the wire: canonical msgpack of canonical values.

Canisters exchange plain values (None, bool, int, str, bytes, tuples/lists and maps with
sortable keys). On the wire a value is ``state_manager.encoding.encode(value)``; this module
first puts maps in sorted-key order so apps may build them in any order.
"""

from __future__ import annotations

from typing import Any

from state_manager.encoding import EncodingError, decode, encode

__all__ = ["canonicalize", "encode_value", "decode_payload", "EncodingError"]

_SCALARS = (type(None), bool, int, str, bytes)


def canonicalize(value: Any, depth: int = 0) -> Any:
    """The canonical form of ``value``: maps with sorted keys, lists as tuples, recursively."""
    if type(value) in _SCALARS:
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
    if type(value) in _SCALARS:
        return encode(value)
    return encode(canonicalize(value))


def decode_payload(payload: bytes) -> Any:
    """The value a payload carries: the empty payload means None, anything else must be
    canonical msgpack (``EncodingError`` otherwise)."""
    if not payload:
        return None
    return decode(payload)
