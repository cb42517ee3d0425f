"""Public keys as the IC encodes them: DER ``SubjectPublicKeyInfo`` of a few schemes.

The interface specification, *Signatures*, accepts user keys of Ed25519 (RFC 8410) and ECDSA
on secp256k1 or P-256 (RFC 5480, uncompressed points ``0x04 · x · y``, no hash function in the
encoding); its *Certification* section encodes BLS12-381 public keys (96-byte G2 points) with
the OIDs 1.3.6.1.4.1.44668.5.3.1.2.1 (algorithm) and 1.3.6.1.4.1.44668.5.3.2.1 (curve). Each
scheme has exactly one encoding for a given key, so a key is recognised by its fixed DER prefix
and total length — the same bytes every agent and the IC produce.

The interface also names WebAuthn (DER-wrapped COSE) and canister-signature keys; they are
recognised by their OIDs and refused as ``UnsupportedKeyScheme``, with the scheme named.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from state_manager.bls import PUBLIC_KEY_DER_PREFIX

from .errors import MalformedPublicKey, UnsupportedKeyScheme

__all__ = ["KeyScheme", "PublicKey", "DER_PREFIXES", "RAW_KEY_BYTES", "parse_der_public_key", "der_encode"]


class KeyScheme(enum.Enum):
    ED25519 = "ed25519"
    ECDSA_SECP256K1 = "ecdsa-secp256k1"
    ECDSA_P256 = "ecdsa-p256"
    BLS12_381_G2 = "bls12-381-g2"


#: ``DER = prefix · raw key``: the SEQUENCE, the algorithm identifier, then the BIT STRING header.
DER_PREFIXES = {
    # SEQUENCE(42) { SEQUENCE { OID 1.3.101.112 } BIT STRING(33, 0 unused bits) }
    KeyScheme.ED25519: bytes.fromhex("302a300506032b6570032100"),
    # SEQUENCE(86) { SEQUENCE { OID ecPublicKey, OID 1.3.132.0.10 } BIT STRING(66) }
    KeyScheme.ECDSA_SECP256K1: bytes.fromhex("3056301006072a8648ce3d020106052b8104000a034200"),
    # SEQUENCE(89) { SEQUENCE { OID ecPublicKey, OID 1.2.840.10045.3.1.7 } BIT STRING(66) }
    KeyScheme.ECDSA_P256: bytes.fromhex("3059301306072a8648ce3d020106082a8648ce3d030107034200"),
    # the IC's BLS keys: the state tree states them too, so the prefix lives in state_manager.bls
    KeyScheme.BLS12_381_G2: PUBLIC_KEY_DER_PREFIX,
}
RAW_KEY_BYTES = {
    KeyScheme.ED25519: 32,
    KeyScheme.ECDSA_SECP256K1: 65,
    KeyScheme.ECDSA_P256: 65,
    KeyScheme.BLS12_381_G2: 96,
}
_UNCOMPRESSED_POINT = 0x04

#: Schemes of the interface recognised but not supported here, by their OID's DER encoding.
_UNSUPPORTED_OIDS = {
    bytes.fromhex("060a2b0601040183b8430101"): "WebAuthn (DER-wrapped COSE, OID 1.3.6.1.4.1.56387.1.1)",
    bytes.fromhex("060a2b0601040183b8430102"): "canister signatures (OID 1.3.6.1.4.1.56387.1.2)",
}


@dataclass(frozen=True, slots=True)
class PublicKey:
    """A public key: its scheme and its raw bytes (``der`` is what the wire carries)."""

    scheme: KeyScheme
    raw: bytes

    def __post_init__(self) -> None:
        _check_raw(self.scheme, self.raw)

    @property
    def der(self) -> bytes:
        return DER_PREFIXES[self.scheme] + self.raw


def _check_raw(scheme: KeyScheme, raw: object) -> None:
    if type(raw) is not bytes or len(raw) != RAW_KEY_BYTES[scheme]:
        size = len(raw) if isinstance(raw, bytes) else type(raw).__name__
        raise MalformedPublicKey(f"a raw {scheme.value} key is {RAW_KEY_BYTES[scheme]} bytes, not {size}")
    if scheme in (KeyScheme.ECDSA_SECP256K1, KeyScheme.ECDSA_P256) and raw[0] != _UNCOMPRESSED_POINT:
        raise MalformedPublicKey(f"{scheme.value} keys are uncompressed points (0x04 · x · y)")


def der_encode(scheme: KeyScheme, raw: bytes) -> bytes:
    """The DER encoding of the raw key ``raw`` of ``scheme``."""
    return PublicKey(scheme, raw).der


def parse_der_public_key(der: bytes) -> PublicKey:
    """The scheme and raw key of a DER public key; ``MalformedPublicKey`` when a supported
    scheme's prefix is followed by the wrong number of bytes, ``UnsupportedKeyScheme`` for
    anything else. Whether the raw bytes are a point is checked where the key is used."""
    if type(der) is not bytes:
        raise MalformedPublicKey(f"a DER public key is bytes, not {type(der).__name__}")
    for scheme, prefix in DER_PREFIXES.items():
        if der.startswith(prefix):
            return PublicKey(scheme, der[len(prefix):])
    for oid, name in _UNSUPPORTED_OIDS.items():
        if oid in der[:32]:
            raise UnsupportedKeyScheme(f"public keys of {name} are not supported")
    raise UnsupportedKeyScheme(
        f"{der[:24].hex()}{'...' if len(der) > 24 else ''} is not the DER encoding of an Ed25519, "
        "ECDSA secp256k1 or P-256, or IC BLS public key")
