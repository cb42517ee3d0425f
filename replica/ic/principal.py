"""Principals: the IC's ids of users, canisters, subnets and nodes, and their textual form.

A principal is at most 29 bytes (the interface specification, *Principals*). Its classes, by
their last byte (``H`` = SHA-224, ``·`` concatenation)::

    self-authenticating  H(der_public_key) · 0x02        users; subnets and nodes too (below)
    anonymous            0x04                            the anonymous caller
    canister             u64 id, 8 bytes big-endian · 0x01 · 0x01    (an opaque id)
    management canister  the empty blob                  aaaaa-aa

The IC derives a subnet's id from the DER encoding of the subnet's threshold public key as
it was at genesis, and a node's id from the DER encoding of its Ed25519 signing key, both as
self-authenticating ids (so the root subnet's id, tdb26-jop6k-…, is ``H`` of the IC's root key
· 0x02; the tests check both against public vectors).

The textual form is ``Grouped(Base32(CRC32(b) · b))``: CRC-32 (ISO 3309) big-endian, RFC 4648
base32 without padding, lower case, a dash after every five characters. Parsing is
case-insensitive and refuses, each with its type, text longer than any principal's (63
characters), characters outside the alphabet or another grouping, and a wrong checksum.
Principals order as their bytes do, which is how canister ranges compare them.

The byte formulas of self-authenticating and canister ids are ``state_manager.ic_encoding``'s
(the state tree labels canisters and subnets with them); this module adds the ``Principal``
value, the typed refusals and the textual form.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from dataclasses import dataclass

from state_manager.ic_encoding import (
    CANISTER_SUFFIX, SELF_AUTHENTICATING_SUFFIX, IcEncodingError, canister_principal_bytes, self_authenticating_id,
)

from .errors import (
    MalformedPublicKey, NotACanisterPrincipal, PrincipalChecksumMismatch, PrincipalTextMalformed, PrincipalTextTooLong,
    PrincipalTooLong,
)

__all__ = [
    "MAX_PRINCIPAL_BYTES", "MAX_TEXT_LENGTH", "SELF_AUTHENTICATING_SUFFIX", "ANONYMOUS_BYTES",
    "CANISTER_SUFFIX", "Principal", "principal_to_text", "principal_from_text", "self_authenticating",
    "subnet_principal", "node_principal", "canister_principal", "canister_number",
]

MAX_PRINCIPAL_BYTES = 29
#: 29 bytes and a 4-byte checksum are 53 base32 characters, grouped by five: 63 with dashes.
MAX_TEXT_LENGTH = 63
ANONYMOUS_BYTES = b"\x04"
_CANISTER_BYTES = 10
_GROUP = 5
_ALPHABET = frozenset("abcdefghijklmnopqrstuvwxyz234567-")


@dataclass(frozen=True, order=True, slots=True)
class Principal:
    """A principal by its bytes; ``str()`` is its textual form."""

    raw: bytes

    def __post_init__(self) -> None:
        if type(self.raw) is not bytes:
            raise PrincipalTooLong(f"a principal is bytes, not {type(self.raw).__name__}")
        if len(self.raw) > MAX_PRINCIPAL_BYTES:
            raise PrincipalTooLong(f"{len(self.raw)} bytes; a principal has at most {MAX_PRINCIPAL_BYTES}")

    @classmethod
    def from_text(cls, text: str) -> "Principal":
        return cls(principal_from_text(text))

    @classmethod
    def anonymous(cls) -> "Principal":
        return cls(ANONYMOUS_BYTES)

    @classmethod
    def management_canister(cls) -> "Principal":
        return cls(b"")

    @property
    def is_anonymous(self) -> bool:
        return self.raw == ANONYMOUS_BYTES

    def to_text(self) -> str:
        return principal_to_text(self.raw)

    def __str__(self) -> str:
        return principal_to_text(self.raw)


def principal_to_text(raw: bytes) -> str:
    """``Grouped(Base32(CRC32(raw) · raw))`` in lower case (``0xABCD01`` is ``em77e-bvlzu-aq``)."""
    Principal(raw)   # the length check
    checksum = zlib.crc32(raw).to_bytes(4, "big")
    letters = base64.b32encode(checksum + raw).decode("ascii").rstrip("=").lower()
    return "-".join(letters[i:i + _GROUP] for i in range(0, len(letters), _GROUP))


def principal_from_text(text: str) -> bytes:
    """The bytes of the principal ``text`` names (case-insensitive); the module docstring's
    refusals in the order: length, characters and base32, checksum, canonical grouping."""
    if not isinstance(text, str):
        raise PrincipalTextMalformed(f"a principal's text is a string, not {type(text).__name__}")
    if len(text) > MAX_TEXT_LENGTH:
        raise PrincipalTextTooLong(f"{len(text)} characters; a principal's text has at most {MAX_TEXT_LENGTH}")
    lowered = text.lower()
    if not lowered or not set(lowered) <= _ALPHABET:
        raise PrincipalTextMalformed(f"{text!r} is not base32 letters and digits 2-7 grouped by dashes")
    compact = lowered.replace("-", "")
    try:
        decoded = base64.b32decode(compact.upper() + "=" * (-len(compact) % 8))
    except binascii.Error as exc:
        raise PrincipalTextMalformed(f"{text!r} is not base32: {exc}") from exc
    if len(decoded) < 4:
        raise PrincipalTextMalformed(f"{text!r} is too short to hold a checksum")
    checksum, raw = decoded[:4], decoded[4:]
    if len(raw) > MAX_PRINCIPAL_BYTES:
        raise PrincipalTextTooLong(f"{text!r} names {len(raw)} bytes; a principal has at most {MAX_PRINCIPAL_BYTES}")
    if zlib.crc32(raw).to_bytes(4, "big") != checksum:
        raise PrincipalChecksumMismatch(f"{text!r}: the checksum does not match (a typo?)")
    if principal_to_text(raw) != lowered:
        raise PrincipalTextMalformed(f"{text!r} is not in canonical form; it is {principal_to_text(raw)!r}")
    return raw


def self_authenticating(der_public_key: bytes) -> Principal:
    """``H(der_public_key) · 0x02``, ``H`` = SHA-224: the principal a key authenticates."""
    try:
        return Principal(self_authenticating_id(der_public_key))
    except IcEncodingError as exc:
        raise MalformedPublicKey(str(exc)) from exc


def subnet_principal(der_genesis_public_key: bytes) -> Principal:
    """A subnet's id: self-authenticating from the DER encoding of its genesis threshold key."""
    return self_authenticating(der_genesis_public_key)


def node_principal(der_signing_key: bytes) -> Principal:
    """A node's id: self-authenticating from the DER encoding of its Ed25519 signing key."""
    return self_authenticating(der_signing_key)


def canister_principal(number: int) -> Principal:
    """Canister ``number``'s id: ``number`` as 8 bytes big-endian, then ``0x01 0x01``."""
    try:
        return Principal(canister_principal_bytes(number))
    except IcEncodingError as exc:
        raise NotACanisterPrincipal(str(exc)) from exc


def canister_number(principal: Principal) -> int:
    """The u64 of a canister id; ``NotACanisterPrincipal`` for any other principal."""
    raw = principal.raw
    if len(raw) != _CANISTER_BYTES or not raw.endswith(CANISTER_SUFFIX):
        raise NotACanisterPrincipal(f"{principal} is not a canister id (8 bytes, then 0x01 0x01)")
    return int.from_bytes(raw[:8], "big")
