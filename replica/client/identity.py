"""A user's identity: the IC identity that signs its requests, and the caller id it gives.

Users sign with the identities of ``replica.ic.identities``: Ed25519 by default, ECDSA on
secp256k1 as an option, as IC agents hold them. The caller canisters see (``Ingress.source``)
is the identity's self-authenticating principal (the interface specification, *Principals*)::

    source = SHA-224(DER public key) · 0x02

and the anonymous caller, who signs nothing, is ``0x04``. An identity derived from a seed is
the same key in every process (tests, examples, the demo's users).
"""

from __future__ import annotations

from typing import Union

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from replica.ic.errors import SigningKeyError
from replica.ic.identities import Ed25519Identity, Identity, Secp256k1Identity
from replica.ic.principal import ANONYMOUS_BYTES

__all__ = [
    "KEY_TYPES", "DEFAULT_KEY_TYPE", "Identity", "UserIdentity", "Ed25519Identity", "Secp256k1Identity",
    "identity_from_seed", "identity_of_private_key", "key_type_of", "source_of",
]

#: The key types a user's identity may have, by the name the command line uses.
KEY_TYPES: dict[str, type[Ed25519Identity] | type[Secp256k1Identity]] = {
    "ed25519": Ed25519Identity, "secp256k1": Secp256k1Identity,
}
DEFAULT_KEY_TYPE = "ed25519"
#: The identities this replica signs user requests with.
UserIdentity = Union[Ed25519Identity, Secp256k1Identity]


def _identity_class(key_type: str) -> type[Ed25519Identity] | type[Secp256k1Identity]:
    if key_type not in KEY_TYPES:
        raise SigningKeyError(f"key type {key_type!r} is not one of {', '.join(KEY_TYPES)}")
    return KEY_TYPES[key_type]


def identity_from_seed(seed: bytes, key_type: str = DEFAULT_KEY_TYPE) -> UserIdentity:
    """The identity of ``key_type`` derived from ``seed`` (``replica.ic.identities``)."""
    return _identity_class(key_type).from_seed(seed)


def identity_of_private_key(private_key: object) -> UserIdentity:
    """The identity of a private key object of ``cryptography`` (as read from a PEM file):
    Ed25519, or ECDSA on secp256k1; ``SigningKeyError`` for any other key."""
    if isinstance(private_key, Ed25519PrivateKey):
        return Ed25519Identity(private_key)
    if isinstance(private_key, ec.EllipticCurvePrivateKey) and isinstance(private_key.curve, ec.SECP256K1):
        return Secp256k1Identity(private_key)
    kind = (f"an ECDSA key on {private_key.curve.name}" if isinstance(private_key, ec.EllipticCurvePrivateKey)
            else f"a {type(private_key).__name__}")
    raise SigningKeyError(f"{kind}, not an Ed25519 or secp256k1 key")


def key_type_of(identity: Identity) -> str:
    """``"ed25519"`` or ``"secp256k1"``."""
    for name, cls in KEY_TYPES.items():
        if isinstance(identity, cls):
            return name
    raise SigningKeyError(f"a {type(identity).__name__} is not a user identity of this replica")


def source_of(identity: Identity | None) -> bytes:
    """The caller id of requests ``identity`` signs: its principal's bytes (``None``: the
    anonymous caller, ``0x04``)."""
    return ANONYMOUS_BYTES if identity is None else identity.principal.raw
