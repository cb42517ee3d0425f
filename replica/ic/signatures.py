"""Signatures of users and their delegations: Ed25519 and ECDSA over domain-separated payloads.

Every signature of the interface covers ``domain_sep(purpose) · message`` (the interface
specification, *Signatures*: a separator is its length byte and its ASCII name, so separators
are prefix-free). The purposes used here:

    REQUEST_DOMAIN     "\\x0Aic-request"                  · request_id       (``sender_sig``)
    DELEGATION_DOMAIN  "\\x1Aic-request-auth-delegation"  · hash_of_map(delegation)
    RESPONSE_DOMAIN    "\\x0Bic-response"                 · hash_of_map(response)  (node-signed queries)

Ed25519 signatures are the 64 bytes of RFC 8032. ECDSA signatures (SHA-256 of the payload) are
``r · s``, 32 bytes each, big-endian. On secp256k1 the IC accepts only the low-``s`` form of a
signature (``s <= n/2``, the other form being a malleable copy), so a high ``s`` is refused
there as ``MalformedSignature``; P-256 signatures may have either.
"""

from __future__ import annotations

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from state_manager.hash_tree import domain_sep

from .errors import MalformedPublicKey, MalformedSignature, UnsupportedKeyScheme
from .public_keys import KeyScheme, PublicKey, parse_der_public_key

__all__ = [
    "REQUEST_DOMAIN", "DELEGATION_DOMAIN", "RESPONSE_DOMAIN", "SECP256K1_ORDER", "P256_ORDER",
    "ED25519_SIGNATURE_BYTES", "ECDSA_SIGNATURE_BYTES", "verify_signature",
]

REQUEST_DOMAIN = domain_sep("ic-request")
DELEGATION_DOMAIN = domain_sep("ic-request-auth-delegation")
RESPONSE_DOMAIN = domain_sep("ic-response")

SECP256K1_ORDER = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
ED25519_SIGNATURE_BYTES = 64
ECDSA_SIGNATURE_BYTES = 64

_CURVES = {KeyScheme.ECDSA_SECP256K1: (ec.SECP256K1(), SECP256K1_ORDER),
           KeyScheme.ECDSA_P256: (ec.SECP256R1(), P256_ORDER)}


def verify_signature(public_key: PublicKey | bytes, signature: bytes, payload: bytes) -> bool:
    """Whether ``signature`` signs ``payload`` (separator included) under ``public_key`` (a
    ``PublicKey`` or its DER bytes). ``False`` for a well-formed signature that does not
    verify; ``MalformedSignature`` for bytes that cannot be one, ``MalformedPublicKey`` for a key
    that is not a point, ``UnsupportedKeyScheme`` for keys users cannot sign with here."""
    key = public_key if isinstance(public_key, PublicKey) else parse_der_public_key(public_key)
    if type(signature) is not bytes:
        raise MalformedSignature(f"a signature is bytes, not {type(signature).__name__}")
    if key.scheme is KeyScheme.ED25519:
        return _verify_ed25519(key.raw, signature, payload)
    if key.scheme in _CURVES:
        return _verify_ecdsa(key, signature, payload)
    raise UnsupportedKeyScheme(f"{key.scheme.value} keys do not sign requests")


def _verify_ed25519(raw: bytes, signature: bytes, payload: bytes) -> bool:
    if len(signature) != ED25519_SIGNATURE_BYTES:
        raise MalformedSignature(f"an Ed25519 signature is {ED25519_SIGNATURE_BYTES} bytes, not {len(signature)}")
    try:
        Ed25519PublicKey.from_public_bytes(raw).verify(signature, payload)
    except InvalidSignature:
        return False
    return True


def _verify_ecdsa(key: PublicKey, signature: bytes, payload: bytes) -> bool:
    curve, order = _CURVES[key.scheme]
    if len(signature) != ECDSA_SIGNATURE_BYTES:
        raise MalformedSignature(f"an ECDSA signature is r · s, {ECDSA_SIGNATURE_BYTES} bytes, not {len(signature)}")
    r, s = int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
    if not (0 < r < order and 0 < s < order):
        raise MalformedSignature("ECDSA r and s must be in [1, n)")
    if key.scheme is KeyScheme.ECDSA_SECP256K1 and s > order // 2:
        raise MalformedSignature("a secp256k1 signature must have a low s (s <= n/2)")
    try:
        verifying_key = ec.EllipticCurvePublicKey.from_encoded_point(curve, key.raw)
    except ValueError as exc:
        raise MalformedPublicKey(f"not a point of {key.scheme.value}: {exc}") from exc
    try:
        verifying_key.verify(encode_dss_signature(r, s), payload, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return False
    return True
