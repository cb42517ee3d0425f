"""Canonical msgpack: the one byte encoding used for leaves, slices and wire bodies.

Canonical means: arrays in declared field order, integers in their shortest form, no floats,
maps only with sorted keys, ``bin`` for bytes and ``str`` for text. Decoding is strict: the
input must be exactly one object with nothing trailing, and re-encoding the decoded object
must give back the same bytes (so every value has exactly one accepted encoding).
"""

from __future__ import annotations

from typing import Any

import msgpack

__all__ = ["EncodingError", "encode", "decode", "MAX_DECODE_BYTES"]

MAX_DECODE_BYTES = 64 * 1024 * 1024


class EncodingError(ValueError):
    """Bytes that are not the canonical encoding of a value."""


def _check_value(value: Any, depth: int) -> None:
    if depth > 64:
        raise EncodingError("value nested deeper than 64 levels")
    if value is None or isinstance(value, (bool, int, bytes, str)):
        return
    if isinstance(value, float):
        raise EncodingError("floats have no canonical encoding")
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_value(item, depth + 1)
        return
    if isinstance(value, dict):
        keys = list(value)
        try:
            ordered = sorted(keys)
        except TypeError as exc:
            raise EncodingError("map keys of mixed types") from exc
        if keys != ordered:
            raise EncodingError("map keys are not sorted")
        for key, item in value.items():
            _check_value(key, depth + 1)
            _check_value(item, depth + 1)
        return
    raise EncodingError(f"type {type(value).__name__} has no canonical encoding")


def encode(value: Any) -> bytes:
    """Canonical msgpack bytes of ``value`` (tuples become arrays)."""
    _check_value(value, 0)
    return msgpack.packb(value, use_bin_type=True)


def encode_unchecked(value: Any) -> bytes:
    """Same bytes as ``encode`` for values the caller built canonically (hot paths)."""
    return msgpack.packb(value, use_bin_type=True)


def decode(data: bytes, *, max_bytes: int = MAX_DECODE_BYTES) -> Any:
    """Decode exactly one canonical msgpack value; raise ``EncodingError`` otherwise.

    Arrays decode as tuples so decoded values are immutable.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise EncodingError(f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) > max_bytes:
        raise EncodingError(f"{len(data)} bytes exceed the limit of {max_bytes}")
    # One-shot unpackb (same size limits, exactly one object) is several times cheaper than
    # an Unpacker; on any failure the Unpacker below runs to name the problem.
    try:
        value = msgpack.unpackb(data, use_list=False, raw=False, strict_map_key=False)
    except Exception:  # noqa: BLE001 - the slow path raises the precise error
        value = _unpack_one(data)
    _check_value(value, 0)
    if msgpack.packb(value, use_bin_type=True) != data:
        raise EncodingError("non-canonical msgpack encoding")
    return value


def _unpack_one(data: bytes) -> Any:
    """The one object ``data`` holds, or ``EncodingError`` saying why it is not one."""
    unpacker = msgpack.Unpacker(
        raw=False,
        use_list=False,
        strict_map_key=False,
        max_buffer_size=max(len(data), 1),
    )
    unpacker.feed(data)
    try:
        value = unpacker.unpack()
    except msgpack.OutOfData as exc:
        raise EncodingError("truncated msgpack") from exc
    except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError, TypeError) as exc:
        raise EncodingError(f"malformed msgpack: {exc}") from exc
    if unpacker.tell() != len(data):
        raise EncodingError(f"{len(data) - unpacker.tell()} trailing bytes")
    return value
