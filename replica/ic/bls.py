"""The IC's BLS variant as the wire carries it: the primitive plus the keys' DER encoding.

The variant itself (signatures in G1, public keys in G2, the ciphersuite
``BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_``, threshold shares and their combination)
is ``state_manager.bls``, the one implementation the subnet's certifications use too; this
module re-exports it for the IC's wire and adds the checked DER conversions: a public key's DER
encoding is ``state_manager.bls.PUBLIC_KEY_DER_PREFIX`` (``replica.ic.public_keys``'
``BLS12_381_G2`` prefix) followed by its 96 bytes.
"""

from __future__ import annotations

from state_manager.bls import (
    CIPHERSUITE_DST, PUBLIC_KEY_BYTES, SECRET_KEY_BYTES, SIGNATURE_BYTES, ThresholdKeys, combine_shares,
    deal_threshold_keys, parse_public_key, parse_signature, public_key_of, sign, sign_share, verify, verify_share,
)
from state_manager.bls import BlsPointError, public_key_der

from .errors import PublicKeyError
from .public_keys import KeyScheme, parse_der_public_key

__all__ = [
    "CIPHERSUITE_DST", "SIGNATURE_BYTES", "PUBLIC_KEY_BYTES", "SECRET_KEY_BYTES", "ThresholdKeys",
    "parse_public_key", "parse_signature", "public_key_of", "public_key_to_der", "public_key_from_der",
    "sign", "verify", "sign_share", "verify_share", "combine_shares", "deal_threshold_keys",
]


def public_key_to_der(raw: bytes) -> bytes:
    """The DER encoding of a 96-byte public key (the IC's root key is given this way)."""
    parse_public_key(raw)
    return public_key_der(raw)


def public_key_from_der(der: bytes) -> bytes:
    """The 96 bytes of a DER-encoded IC BLS public key, checked to be a point."""
    try:
        key = parse_der_public_key(der)
    except PublicKeyError as exc:
        raise BlsPointError(f"not a DER-encoded BLS public key: {exc}") from exc
    if key.scheme is not KeyScheme.BLS12_381_G2:
        raise BlsPointError(f"a {key.scheme.value} key is not a BLS public key")
    parse_public_key(key.raw)
    return key.raw
