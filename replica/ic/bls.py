"""The IC's BLS signatures: BLS12-381, signatures in G1 (48 bytes), public keys in G2 (96 bytes).

The interface specification, *Certification*: ``verify_bls_signature`` of the IETF BLS draft
with the ciphersuite ``BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_``: a message is hashed to G1
with that string as the domain separation tag (RFC 9380, SSWU, random oracle), so::

    sign(s, m)        = s · H(m)                              in G1
    public_key(s)     = s · g2                                in G2
    verify(pk, m, σ)  ⇔  e(σ, g2) = e(H(m), pk)                one pairing check

Points travel compressed (the ZCash serialisation all BLS12-381 libraries share) and are
parsed strictly: the right length, on the curve, in the prime-order subgroup, not the
identity, and canonically encoded (``BlsPointError`` otherwise). A public key's DER encoding
is ``replica.ic.public_keys``' ``BLS12_381_G2`` prefix followed by its 96 bytes.

Threshold signing works as in ``state_manager.threshold_bls`` (the project's other variant,
signatures in G2), whose dealing this module reuses: a Shamir sharing of ``s`` over ``Z_r``,
node ``i`` signs ``σ_i = s_i · H(m)``, and any ``t`` shares combine into
``σ = Σ λ_i · σ_i = s · H(m)`` (Lagrange at zero). Here shares are G1 points and key shares G2
points. The curve arithmetic is blst's (through pyblst); this module only sets its rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

import pyblst

from state_manager.threshold_bls import BLS12_381_R, deal_threshold_key, lagrange_coefficients_at_zero

from .errors import BlsCombineError, BlsError, BlsPointError, BlsSecretKeyError, PublicKeyError
from .public_keys import KeyScheme, der_encode, parse_der_public_key

__all__ = [
    "CIPHERSUITE_DST", "SIGNATURE_BYTES", "PUBLIC_KEY_BYTES", "SECRET_KEY_BYTES", "ThresholdKeys",
    "parse_public_key", "parse_signature", "public_key_of", "public_key_to_der", "public_key_from_der",
    "sign", "verify", "sign_share", "verify_share", "combine_shares", "deal_threshold_keys",
]

CIPHERSUITE_DST = b"BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_"
SIGNATURE_BYTES = 48
PUBLIC_KEY_BYTES = 96
SECRET_KEY_BYTES = 32

#: The standard generator of G2, compressed.
_G2_GENERATOR = pyblst.BlstP2Element().uncompress(bytes.fromhex(
    "93e02b6052719f607dacd3a088274f65596bd0d09920b61ab5da61bbdc7f5049334cf11213945d57e5ac7d055d042b7e"
    "024aa2b2f08f0a91260805272dc51051c6e47ad4fa403b02b4510b647ae3d1770bac0326a805bbefd48056c8c121bdb8"))
_G1_IDENTITY = pyblst.BlstP1Element()
_G2_IDENTITY = pyblst.BlstP2Element()


def _parse_point(data: object, size: int, identity, what: str):
    if type(data) is not bytes or len(data) != size:
        shown = len(data) if isinstance(data, (bytes, bytearray)) else type(data).__name__
        raise BlsPointError(f"{what} is {size} bytes, not {shown}")
    try:
        # uncompress checks the curve equation and the subgroup.
        point = type(identity)().uncompress(data)
    except ValueError as exc:
        raise BlsPointError(f"{what} is not a point of the prime-order subgroup: {exc}") from exc
    if point == identity:
        raise BlsPointError(f"{what} is the identity point")
    if point.compress() != data:   # one accepted encoding per point
        raise BlsPointError(f"{what} is not canonically encoded")
    return point


def parse_public_key(raw: bytes) -> pyblst.BlstP2Element:
    """A 96-byte public key as a G2 point (remembered: the same few keys verify everything)."""
    if type(raw) is not bytes:
        raise BlsPointError(f"a BLS public key is bytes, not {type(raw).__name__}")
    return _parse_public_key(raw)


@lru_cache(maxsize=256)
def _parse_public_key(raw: bytes) -> pyblst.BlstP2Element:
    return _parse_point(raw, PUBLIC_KEY_BYTES, _G2_IDENTITY, "a BLS public key")


def parse_signature(raw: bytes) -> pyblst.BlstP1Element:
    """A 48-byte signature as a G1 point."""
    return _parse_point(raw, SIGNATURE_BYTES, _G1_IDENTITY, "a BLS signature")


def _secret_scalar(secret: object) -> int:
    if type(secret) is not bytes or len(secret) != SECRET_KEY_BYTES:
        raise BlsSecretKeyError(f"a secret key is {SECRET_KEY_BYTES} bytes")
    scalar = int.from_bytes(secret, "big")
    if not 0 < scalar < BLS12_381_R:
        raise BlsSecretKeyError("a secret key is a scalar in [1, r)")
    return scalar


def _hash_to_g1(message: bytes) -> pyblst.BlstP1Element:
    if not isinstance(message, bytes):
        raise BlsError(f"a message is bytes, not {type(message).__name__}")
    return pyblst.BlstP1Element().hash_to_group(message, CIPHERSUITE_DST)


def public_key_of(secret: bytes) -> bytes:
    """``s · g2``, compressed."""
    return _G2_GENERATOR.scalar_mul(_secret_scalar(secret)).compress()


def public_key_to_der(raw: bytes) -> bytes:
    """The DER encoding of a 96-byte public key (the IC's root key is given this way)."""
    parse_public_key(raw)
    return der_encode(KeyScheme.BLS12_381_G2, raw)


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


def sign(secret: bytes, message: bytes) -> bytes:
    """``s · H(m)``, compressed (48 bytes)."""
    return _hash_to_g1(message).scalar_mul(_secret_scalar(secret)).compress()


def verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """``e(σ, g2) = e(H(m), pk)``; ``BlsPointError`` if either is not a valid point, ``False``
    for valid points that are no signature of ``message`` under ``public_key``."""
    key, sigma = parse_public_key(public_key), parse_signature(signature)
    return bool(pyblst.final_verify(pyblst.miller_loop(sigma, _G2_GENERATOR),
                                    pyblst.miller_loop(_hash_to_g1(message), key)))


def sign_share(secret_share: bytes, message: bytes) -> bytes:
    """Node ``i``'s share ``σ_i = s_i · H(m)``: a signature under its key share."""
    return sign(secret_share, message)


def verify_share(public_key_share: bytes, message: bytes, signature_share: bytes) -> bool:
    """Whether a share is node ``i``'s signature of ``message`` under its key share ``s_i · g2``."""
    return verify(public_key_share, message, signature_share)


def combine_shares(shares: Mapping[int, bytes], t: int) -> bytes:
    """``σ = Σ λ_i · σ_i`` over the ``t`` smallest node indices present (deterministic).
    The result is not verified here; callers verify it under the subnet's key."""
    if type(t) is not int or t < 1:
        raise BlsCombineError(f"a threshold is an integer >= 1, not {t!r}")
    for index in shares:
        if type(index) is not int or not 0 < index < BLS12_381_R:
            raise BlsCombineError(f"node index {index!r} is not an integer in [1, r)")
    if len(shares) < t:
        raise BlsCombineError(f"{len(shares)} distinct shares, need {t}")
    chosen = sorted(shares)[:t]
    total = pyblst.BlstP1Element()
    for index, coefficient in zip(chosen, lagrange_coefficients_at_zero(chosen)):
        total = total + parse_signature(shares[index]).scalar_mul(coefficient)
    return total.compress()


@dataclass(frozen=True, slots=True)
class ThresholdKeys:
    """A ``t``-of-``n`` key: the public key, node ``i``'s key share at position ``i - 1``."""

    n: int
    t: int
    public_key: bytes
    public_key_shares: tuple[bytes, ...]
    secret_shares: tuple[bytes, ...] = field(repr=False)   # out of repr: a logged key leaks nothing


def deal_threshold_keys(n: int, t: int, seed: bytes) -> ThresholdKeys:
    """Deal a ``t``-of-``n`` key from ``seed`` (the same Shamir sharing ``state_manager.
    threshold_bls.deal_threshold_key`` deals), with public key and key shares in G2. The
    public key is ``s · g2`` for ``s = Σ λ_i s_i`` over shares ``1..t``: the dealt secret."""
    deal = deal_threshold_key(n, t, seed)
    first = list(range(1, t + 1))
    secret = sum(lam * int.from_bytes(deal.secret_share(i), "big")
                 for i, lam in zip(first, lagrange_coefficients_at_zero(first))) % BLS12_381_R
    return ThresholdKeys(n, t, public_key_of(secret.to_bytes(SECRET_KEY_BYTES, "big")),
                         tuple(public_key_of(share) for share in deal.secret_shares), deal.secret_shares)
