"""The IC's encodings of what its state tree states: nats, principals, canister ranges.

The state tree (``state_manager.state_tree``) states these values as the IC interface
specification does, so that IC agents read them; this module is the one implementation of each
formula, and ``replica.ic`` (principals, request ids, canister ranges) builds on it, adding its
typed refusals and the principals' textual form. ``H`` is SHA-224, ``·`` concatenation::

    uleb128(n)                  unsigned LEB128, shortest form (0 is 0x00)
    self-authenticating id      H(der_public_key) · 0x02
    canister id                 n as 8 bytes big-endian · 0x01 · 0x01
    subnet id                   the self-authenticating id of the DER of the subnet's threshold
                                key (``state_manager.bls.public_key_der``)
    canister_ranges             #6.55799([* [principal, principal]])     closed ranges, in order
    its shards                  at most 5 ranges per leaf, each leaf labelled by the first
                                principal it covers; no ranges: one empty leaf labelled by canister 0

(the specification's *Principals*, *Representation-independent hashing* and *Subnet
information*). Pure.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from .bls import public_key_der
from .cbor import encode
from .errors import StateManagerError

__all__ = [
    "SELF_AUTHENTICATING_SUFFIX", "CANISTER_SUFFIX", "MAX_RANGES_PER_LEAF", "EMPTY_RANGES_LABEL", "IcEncodingError",
    "uleb128", "decode_uleb128", "self_authenticating_id", "canister_principal_bytes", "subnet_principal_bytes",
    "encode_canister_ranges", "shard_canister_ranges",
]

SELF_AUTHENTICATING_SUFFIX = b"\x02"
CANISTER_SUFFIX = b"\x01\x01"
MAX_RANGES_PER_LEAF = 5
_U64_LIMIT = 1 << 64


class IcEncodingError(StateManagerError, ValueError):
    """A value these formulas do not take, or bytes that are not one LEB128 nat
    (``replica.ic`` reports each as its own typed refusal)."""


def uleb128(n: int) -> bytes:
    """Unsigned LEB128, shortest form: 7 bits per byte, least significant first, the high bit
    set on every byte but the last (``624485`` is ``E5 8E 26``)."""
    if type(n) is not int or n < 0:
        raise IcEncodingError(f"uleb128 takes a natural number, not {n!r}")
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        if n == 0:
            out.append(low)
            return bytes(out)
        out.append(low | 0x80)


def decode_uleb128(data: bytes) -> int:
    """The natural number ``data`` encodes in shortest-form unsigned LEB128 (state tree leaves
    such as ``/time`` hold nats this way); ``IcEncodingError`` for any other bytes."""
    if type(data) is not bytes or not data or data[-1] & 0x80 or any(not b & 0x80 for b in data[:-1]):
        raise IcEncodingError("not one unsigned LEB128 number")
    if len(data) > 1 and data[-1] == 0:
        raise IcEncodingError("unsigned LEB128 not in shortest form")
    return sum((byte & 0x7F) << (7 * i) for i, byte in enumerate(data))


def self_authenticating_id(der_public_key: bytes) -> bytes:
    """``H(der_public_key) · 0x02``, ``H`` = SHA-224: the principal a key authenticates."""
    if type(der_public_key) is not bytes:
        raise IcEncodingError(f"a public key is bytes, not {type(der_public_key).__name__}")
    return hashlib.sha224(der_public_key).digest() + SELF_AUTHENTICATING_SUFFIX


def canister_principal_bytes(number: int) -> bytes:
    """Canister ``number``'s principal: ``number`` as 8 bytes big-endian, then ``0x01 0x01``."""
    if type(number) is not int or not 0 <= number < _U64_LIMIT:
        raise IcEncodingError(f"a canister number is a u64, not {number!r}")
    return number.to_bytes(8, "big") + CANISTER_SUFFIX


def subnet_principal_bytes(public_key: bytes) -> bytes:
    """A subnet's principal from its raw 96-byte threshold public key: the self-authenticating
    id of the key's DER encoding."""
    return self_authenticating_id(public_key_der(public_key))


EMPTY_RANGES_LABEL = canister_principal_bytes(0)


def encode_canister_ranges(ranges: Sequence[tuple[bytes, bytes]]) -> bytes:
    """The leaf value of closed ranges ``(start, end)`` of principal bytes: the self-describe
    tag, then ``[[start, end], ...]``."""
    return encode([[start, end] for start, end in ranges])


def shard_canister_ranges(ranges: Sequence[tuple[bytes, bytes]]) -> dict[bytes, bytes]:
    """The sharded layout's leaves of one subnet's ranges (in order): label → value, labels in
    ascending order (each the first start of its leaf)."""
    if not ranges:
        return {EMPTY_RANGES_LABEL: encode_canister_ranges(())}
    chunks = [ranges[i:i + MAX_RANGES_PER_LEAF] for i in range(0, len(ranges), MAX_RANGES_PER_LEAF)]
    return {chunk[0][0]: encode_canister_ranges(chunk) for chunk in chunks}
