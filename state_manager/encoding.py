"""Canonical msgpack: the one byte encoding used for leaves, slices and wire bodies.

Canonical means: arrays in declared field order, integers in their shortest form, no floats,
maps only with sorted keys, ``bin`` for bytes and ``str`` for text. Decoding is strict: the
input must be exactly one object with nothing trailing, and re-encoding the decoded object
must give back the same bytes (so every value has exactly one accepted encoding).
"""

from __future__ import annotations

from typing import Any

import msgpack
from mypy_extensions import mypyc_attr

from .errors import StateManagerError

__all__ = ["EncodingError", "encode", "decode", "packb", "is_u64", "MAX_DECODE_BYTES", "MIN_INT", "MAX_INT", "PLAIN_SCALARS"]

MAX_DECODE_BYTES = 64 * 1024 * 1024
#: The integers msgpack has an encoding for.
MIN_INT, MAX_INT = -(2**63), 2**64 - 1
#: The exact scalar types values are made of (what decoding yields and apps build); checks
#: accept them with one set lookup and leave subclasses to the slower ``isinstance`` path.
PLAIN_SCALARS = frozenset((type(None), bool, int, str, bytes))
_U64_END = 2**64


def is_u64(value: object) -> bool:
    """``value`` is an ``int`` in ``[0, 2**64)`` — exactly ``int``: ``True`` is no index."""
    return type(value) is int and 0 <= value < _U64_END


# An ordinary Python class even when this module is compiled (see setup.py): callers
# subclass, pickle and match it like any exception.
@mypyc_attr(native_class=False)
class EncodingError(StateManagerError, ValueError):
    """Bytes that are not the canonical encoding of a value."""


_MAX_DEPTH = 64


def _check_value(value: Any, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise EncodingError("value nested deeper than 64 levels")
    kind = type(value)
    if kind in PLAIN_SCALARS:
        return
    if kind is tuple or kind is list:
        _check_items(value, depth + 1)
        return
    if kind is dict:
        _check_map(value, depth + 1)
        return
    # Subclasses of the built-in types, and the errors.
    if isinstance(value, (bool, int, bytes, str)):
        return
    if isinstance(value, float):
        raise EncodingError("floats have no canonical encoding")
    if isinstance(value, (list, tuple)):
        _check_items(value, depth + 1)
        return
    if isinstance(value, dict):
        _check_map(value, depth + 1)
        return
    raise EncodingError(f"type {type(value).__name__} has no canonical encoding")


def _check_items(items: Any, depth: int) -> None:
    """Check an array's items at ``depth``; plain scalars are accepted without a call."""
    if depth > _MAX_DEPTH:
        for item in items:
            _check_value(item, depth)  # raises: too deep
        return
    for item in items:
        if type(item) not in PLAIN_SCALARS:
            _check_value(item, depth)


def _check_map(value: Any, depth: int) -> None:
    """Check a map: keys sorted (and comparable), then each key and value at ``depth``."""
    keys = list(value)
    try:
        ordered = sorted(keys)
    except TypeError as exc:
        raise EncodingError("map keys of mixed types") from exc
    if keys != ordered:
        raise EncodingError("map keys are not sorted")
    deep = depth > _MAX_DEPTH
    for key, item in value.items():
        if deep or type(key) not in PLAIN_SCALARS:
            _check_value(key, depth)
        if deep or type(item) not in PLAIN_SCALARS:
            _check_value(item, depth)


_Packer = msgpack.Packer


def packb(value: Any) -> bytes:
    """``msgpack.packb(value, use_bin_type=True)`` at about half the cost for small values:
    that function is a Python wrapper whose keyword handling and 256 KiB buffer are most of
    a short encode. A fresh ``Packer`` with a small (growing) buffer gives the same bytes
    and, made per call, shares no state between calls or threads."""
    return _Packer(use_bin_type=True, buf_size=256).pack(value)


def encode(value: Any) -> bytes:
    """Canonical msgpack bytes of ``value`` (tuples become arrays)."""
    _check_value(value, 0)
    return encode_unchecked(value)


def encode_unchecked(value: Any) -> bytes:
    """Same bytes as ``encode`` for values the caller built canonically (hot paths)."""
    try:
        return packb(value)
    except OverflowError:  # the one thing the value checks leave to the packer
        raise EncodingError(f"an integer outside {MIN_INT}..{MAX_INT} has no encoding") from None


def decode(data: Any, *, max_bytes: int = MAX_DECODE_BYTES) -> Any:
    """Decode exactly one canonical msgpack value; raise ``EncodingError`` otherwise.

    Arrays decode as tuples so decoded values are immutable.
    """
    if type(data) is not bytes:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise EncodingError(f"expected bytes, got {type(data).__name__}")
        data = bytes(data)
    if len(data) > max_bytes:
        raise EncodingError(f"{len(data)} bytes exceed the limit of {max_bytes}")
    try:
        value = msgpack.unpackb(data, use_list=False, raw=False, strict_map_key=False)
    except msgpack.ExtraData as exc:
        raise EncodingError(f"{len(exc.extra)} trailing bytes") from None
    except Exception as exc:  # noqa: BLE001 - truncated ("incomplete input"), reserved bytes, nesting, keys
        raise EncodingError(f"malformed msgpack: {exc}") from None
    _check_value(value, 0)
    if packb(value) != data:
        raise EncodingError("non-canonical msgpack encoding")
    return value
