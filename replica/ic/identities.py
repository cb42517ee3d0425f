"""Signing identities of users: Ed25519 and ECDSA secp256k1 keys, as IC agents hold them.

An identity has a DER public key (``replica.ic.public_keys``), the self-authenticating
principal of that key, and ``sign(payload)`` over a payload that already carries its domain
separator (``replica.ic.signatures``). Signing is deterministic: Ed25519 is, and ECDSA uses
RFC 6979 nonces, normalised to the low-``s`` form the IC requires on secp256k1. Keys come from
their private bytes or are derived from a seed the caller supplies (no ambient randomness).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Protocol

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from .errors import SigningKeyError
from .principal import Principal, self_authenticating
from .public_keys import KeyScheme, der_encode
from .signatures import SECP256K1_ORDER

__all__ = ["Identity", "Ed25519Identity", "Secp256k1Identity", "PRIVATE_KEY_BYTES"]

PRIVATE_KEY_BYTES = 32


class Identity(Protocol):
    """What signs requests and delegations."""

    @property
    def der_public_key(self) -> bytes: ...

    @property
    def principal(self) -> Principal: ...

    def sign(self, payload: bytes) -> bytes: ...


def _private_bytes(value: object) -> bytes:
    if type(value) is not bytes or len(value) != PRIVATE_KEY_BYTES:
        raise SigningKeyError(f"a private key is {PRIVATE_KEY_BYTES} bytes")
    return value


def _seed_bytes(seed: object) -> bytes:
    if type(seed) is not bytes or not seed:
        raise SigningKeyError("a seed is non-empty bytes")
    return seed


@dataclass(frozen=True)
class Ed25519Identity:
    """An Ed25519 key (RFC 8032)."""

    private_key: Ed25519PrivateKey = field(repr=False)

    @classmethod
    def from_private_bytes(cls, private: bytes) -> "Ed25519Identity":
        return cls(Ed25519PrivateKey.from_private_bytes(_private_bytes(private)))

    @classmethod
    def from_seed(cls, seed: bytes) -> "Ed25519Identity":
        """The key whose private bytes are ``SHA-256(seed)``."""
        return cls.from_private_bytes(hashlib.sha256(_seed_bytes(seed)).digest())

    @property
    def der_public_key(self) -> bytes:
        raw = self.private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return der_encode(KeyScheme.ED25519, raw)

    @property
    def principal(self) -> Principal:
        return self_authenticating(self.der_public_key)

    def sign(self, payload: bytes) -> bytes:
        return self.private_key.sign(payload)


@dataclass(frozen=True)
class Secp256k1Identity:
    """An ECDSA key on secp256k1 (SHA-256, ``r · s`` signatures with a low ``s``)."""

    private_key: ec.EllipticCurvePrivateKey = field(repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.private_key.curve, ec.SECP256K1):
            raise SigningKeyError(f"a secp256k1 identity needs a secp256k1 key, not {self.private_key.curve.name}")

    @classmethod
    def from_private_bytes(cls, private: bytes) -> "Secp256k1Identity":
        scalar = int.from_bytes(_private_bytes(private), "big")
        if not 0 < scalar < SECP256K1_ORDER:
            raise SigningKeyError("a secp256k1 private key is a scalar in [1, n)")
        return cls(ec.derive_private_key(scalar, ec.SECP256K1()))

    @classmethod
    def from_seed(cls, seed: bytes) -> "Secp256k1Identity":
        """The key ``1 + (SHA-256(seed) mod (n - 1))``: always in ``[1, n)``."""
        scalar = 1 + int.from_bytes(hashlib.sha256(_seed_bytes(seed)).digest(), "big") % (SECP256K1_ORDER - 1)
        return cls.from_private_bytes(scalar.to_bytes(PRIVATE_KEY_BYTES, "big"))

    @property
    def der_public_key(self) -> bytes:
        raw = self.private_key.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
        return der_encode(KeyScheme.ECDSA_SECP256K1, raw)

    @property
    def principal(self) -> Principal:
        return self_authenticating(self.der_public_key)

    def sign(self, payload: bytes) -> bytes:
        """``r · s`` of a deterministic (RFC 6979) signature of SHA-256(payload), ``s`` made low."""
        der = self.private_key.sign(payload, ec.ECDSA(hashes.SHA256(), deterministic_signing=True))
        r, s = decode_dss_signature(der)
        s = min(s, SECP256K1_ORDER - s)
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")
