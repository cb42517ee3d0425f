"""CBOR encoding of the IC interface's values: the one encoder, for the state tree and the wire.

The interface uses a small part of CBOR (RFC 8949): unsigned and negative integers (nats above
``2**64 - 1`` as tag-2 bignums), byte strings, UTF-8 text, arrays and maps with text keys, the
whole data item behind the self-describe tag 55799 (the interface specification, *CBOR
encoding of requests and responses*). ``encode`` writes the tag, then the value with map keys in
canonical order (RFC 8949, 4.2.1), so one value has one encoding; a value the interface does
not use is refused (``CborValueError``), so nothing is written that its decoders would refuse.

The state tree's CBOR leaves (a canister's controllers, a subnet's canister ranges) are made
here; ``replica.ic.cbor`` re-exports the encoder and adds the strict, bounded decoder of what
arrives over the wire. The encoding is cbor2's; this module only says what may be encoded.
"""

from __future__ import annotations

from typing import Any

import cbor2

from .errors import StateManagerError

__all__ = ["SELF_DESCRIBE_TAG", "SELF_DESCRIBE_PREFIX", "CborValueError", "check_value", "encode"]

SELF_DESCRIBE_TAG = 55799
SELF_DESCRIBE_PREFIX = b"\xd9\xd9\xf7"   # tag 55799: major type 6, two-byte argument 0xd9f7

_NEGATIVE_LIMIT = -(1 << 64)


class CborValueError(StateManagerError, ValueError):
    """A value the IC interface's CBOR does not carry (``replica.ic.cbor`` reports it as
    ``CborTypeRefused``)."""


def check_value(value: Any) -> None:
    """Raise ``CborValueError`` unless ``value`` is built only of ``int`` (not ``bool``; at
    least ``-2**64``, the smallest negative integer without a bignum), ``bytes``, ``str``,
    ``list``/``tuple`` and ``dict`` with ``str`` keys. Explicit stack: the depth of what is
    checked is not bounded by Python's recursion limit."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is bytes or kind is str:
            continue
        if kind is int:
            if item < _NEGATIVE_LIMIT:   # would need a negative bignum (tag 3)
                raise CborValueError(f"integer {item} is below the interface's range")
            continue
        if kind is list or kind is tuple:
            stack.extend(item)
        elif kind is dict:
            for key in item:
                if type(key) is not str:
                    raise CborValueError(f"map keys must be text, found {type(key).__name__}")
            stack.extend(item.values())
        else:
            raise CborValueError(f"{kind.__name__} values are not used by the IC interface")


def encode(value: Any, *, self_describe: bool = True) -> bytes:
    """``value`` as the self-describe tag (unless ``self_describe`` is false: a value embedded
    in another, like a hash tree) followed by its CBOR, map keys in canonical order;
    ``CborValueError`` for a value the interface does not use."""
    check_value(value)
    encoded = cbor2.dumps(value, canonical=True)
    return SELF_DESCRIBE_PREFIX + encoded if self_describe else encoded
