"""A user's identity: an Ed25519 key and the self-authenticating user id derived from it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

__all__ = ["UserKey", "source_of"]


def source_of(public_key: bytes) -> bytes:
    """``source = SHA-256(pubkey)[:29] ‖ 0x02`` (a self-authenticating user id)."""
    return hashlib.sha256(public_key).digest()[:29] + b"\x02"



@dataclass(frozen=True)
class UserKey:
    """A user's Ed25519 key (shell side; tests and examples derive it from a seed)."""

    private_key: Ed25519PrivateKey

    @classmethod
    def from_seed(cls, seed: bytes) -> "UserKey":
        return cls(Ed25519PrivateKey.from_private_bytes(hashlib.sha256(seed).digest()))

    @property
    def public_key(self) -> bytes:
        return self.private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)

    @property
    def source(self) -> bytes:
        return source_of(self.public_key)
