"""Request ids: the representation-independent hash of a content map.

The interface specification, *Representation-independent hashing of structured data*, with
``H`` = SHA-256::

    hash_of_map(m) = H(concat(sort([H(key) · hash(value) for each field present in m])))
    hash(blob)     = H(blob)
    hash(text)     = H(utf8(text))
    hash(nat)      = H(uleb128(nat))                   shortest form: 0 is 0x00
    hash(int)      = H(sleb128(int))                   for negative integers
    hash(array)    = H(concat([hash(element) ...]))
    hash(map)      = hash_of_map(map)

``request_id(content) = hash_of_map(content)``: the id of a call, query or read_state request,
what its sender signs (``"\\x0Aic-request" · request_id``) and what ``/request_status/<id>``
names. Omitted optional fields are absent from the map, so they change nothing; a field that is
present is hashed whatever its name, so the id covers every field the sender sent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from state_manager.ic_encoding import IcEncodingError
from state_manager.ic_encoding import decode_uleb128 as _decode_uleb128
from state_manager.ic_encoding import uleb128 as _uleb128

from .errors import UnhashableValue

__all__ = ["REQUEST_ID_BYTES", "MAX_HASH_DEPTH", "uleb128", "decode_uleb128", "sleb128", "hash_value", "hash_of_map",
           "request_id"]

REQUEST_ID_BYTES = 32
#: Maps and arrays nested deeper than this have no hash here; the CBOR decoder bounds what
#: arrives far below it, and no request or delegation of the interface nests more than 3 deep.
MAX_HASH_DEPTH = 128


def uleb128(n: int) -> bytes:
    """Unsigned LEB128, shortest form: 7 bits per byte, least significant first, the high bit
    set on every byte but the last (``624485`` is ``E5 8E 26``); ``state_manager.ic_encoding``'s,
    which the state tree's nats (``/time``) are written with."""
    try:
        return _uleb128(n)
    except IcEncodingError as exc:
        raise UnhashableValue(str(exc)) from exc


def decode_uleb128(data: bytes) -> int:
    """The natural number ``data`` encodes in shortest-form unsigned LEB128 (state tree leaves
    such as ``/time`` hold nats this way); ``UnhashableValue`` for any other bytes."""
    try:
        return _decode_uleb128(data)
    except IcEncodingError as exc:
        raise UnhashableValue(str(exc)) from exc


def sleb128(n: int) -> bytes:
    """Signed LEB128, shortest form: 7 bits per byte, least significant first, until the rest
    is all sign bits and the last byte's bit 6 agrees with the sign (``-123456`` is ``C0 BB 78``)."""
    if type(n) is not int:
        raise UnhashableValue(f"sleb128 takes an integer, not {n!r}")
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7   # arithmetic shift: n ends at 0 or -1
        if (n == 0 and not low & 0x40) or (n == -1 and low & 0x40):
            out.append(low)
            return bytes(out)
        out.append(low | 0x80)


def _sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:   # lone surrogates: text no CBOR decoder returns
        raise UnhashableValue(f"text that is not Unicode scalar values: {exc}") from exc


def hash_value(value: Any, _depth: int = 0) -> bytes:
    """``hash(value)`` by the rules of the module docstring; ``UnhashableValue`` for anything
    else (``bool``, ``None``, floats, maps with non-text keys) or nesting beyond ``MAX_HASH_DEPTH``."""
    kind = type(value)
    if kind is bytes:
        return _sha256(value)
    if kind is str:
        return _sha256(_utf8(value))
    if kind is int:
        return _sha256(uleb128(value) if value >= 0 else sleb128(value))
    if _depth >= MAX_HASH_DEPTH:
        raise UnhashableValue(f"values nest deeper than {MAX_HASH_DEPTH}")
    if kind is list or kind is tuple:
        return _sha256(b"".join(hash_value(item, _depth + 1) for item in value))
    if isinstance(value, Mapping):
        return hash_of_map(value, _depth + 1)
    raise UnhashableValue(f"{kind.__name__} values have no representation-independent hash")


def hash_of_map(fields: Mapping[str, Any], _depth: int = 0) -> bytes:
    """``H(concat(sort([H(key) · hash(value)])))`` over the fields of ``fields``."""
    pairs = []
    for key, value in fields.items():
        if type(key) is not str:
            raise UnhashableValue(f"map keys must be text, not {type(key).__name__}")
        pairs.append(_sha256(_utf8(key)) + hash_value(value, _depth))
    pairs.sort()
    return _sha256(b"".join(pairs))


def request_id(content: Mapping[str, Any]) -> bytes:
    """The request id of a ``content`` map: ``hash_of_map(content)``, 32 bytes."""
    if not isinstance(content, Mapping):
        raise UnhashableValue(f"a request's content is a map, not {type(content).__name__}")
    return hash_of_map(content)
