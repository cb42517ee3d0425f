"""The IC's BLS signatures: BLS12-381, signatures in G1 (48 bytes), public keys in G2 (96 bytes).

The interface specification, *Certification*: ``verify_bls_signature`` of the IETF BLS draft
with the ciphersuite ``BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_``: a message is hashed to G1
with that string as the domain separation tag (RFC 9380, SSWU, random oracle), so::

    sign(s, m)        = s · H(m)                              in G1
    public_key(s)     = s · g2                                in G2
    verify(pk, m, σ)  ⇔  e(σ, g2) = e(H(m), pk)                one pairing check

A certification signs ``state_root_message(root) = domain_sep("ic-state-root") · root``: the
root alone, as the IC signs it; the height is authenticated through the certified tree
(docs/architecture.md, *Certifications*).

Threshold keys: a Shamir sharing of ``s = f(0)`` with a polynomial ``f`` of degree ``t - 1``
over the scalar field ``Z_r``; node ``i`` (1-based) holds ``s_i = f(i)``, its key share is
``s_i · g2``, its signature share ``σ_i = s_i · H(m)``, and any ``t`` shares combine into
``σ = Σ λ_i · σ_i = s · H(m)`` (Lagrange at zero).

Points travel compressed (the ZCash serialisation all BLS12-381 libraries share) and are
parsed strictly: the right length, on the curve, in the prime-order subgroup, not the
identity, and canonically encoded (``BlsPointError`` otherwise). The curve arithmetic is
blst's (through pyblst); this module only sets its rules.

On the IC's wire and in its state tree (``/subnet/<id>/public_key``; a subnet's id is the
self-authenticating id of this encoding) a public key is DER: ``PUBLIC_KEY_DER_PREFIX · key``
(the interface specification, *Certification*: the OIDs 1.3.6.1.4.1.44668.5.3.1.2.1 and
1.3.6.1.4.1.44668.5.3.2.1). ``replica.ic.bls`` adds the checked conversions both ways.

Pure: no clocks, no I/O, no ambient randomness; a dealer's randomness is its ``seed``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import pyblst

from state_manager.errors import StateManagerError
from state_manager.hash_tree import domain_sep

__all__ = [
    "BLS12_381_R", "CIPHERSUITE_DST", "SIGNATURE_BYTES", "PUBLIC_KEY_BYTES", "SECRET_KEY_BYTES", "MIN_SEED_BYTES",
    "STATE_ROOT_DOMAIN", "ROOT_BYTES",
    "BlsError", "BlsPointError", "BlsSecretKeyError", "BlsCombineError", "BlsDealError",
    "ThresholdKeys", "threshold_for", "deal_threshold_keys", "state_root_message",
    "PUBLIC_KEY_DER_PREFIX", "public_key_der",
    "parse_public_key", "parse_signature", "public_key_of", "sign", "verify", "sign_share", "verify_share",
    "lagrange_coefficients_at_zero", "combine_shares",
]

#: Order r of the prime-order subgroups G1, G2 of BLS12-381 (the scalar field modulus).
BLS12_381_R = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
CIPHERSUITE_DST = b"BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_"
SIGNATURE_BYTES = 48
PUBLIC_KEY_BYTES = 96
SECRET_KEY_BYTES = 32
MIN_SEED_BYTES = 32
STATE_ROOT_DOMAIN = "ic-state-root"
ROOT_BYTES = 32
#: SEQUENCE(130) { SEQUENCE { OID ...44668.5.3.1.2.1, OID ...44668.5.3.2.1 } BIT STRING(97, 0 unused bits) }
PUBLIC_KEY_DER_PREFIX = bytes.fromhex("308182301d060d2b0601040182dc7c0503010201060c2b0601040182dc7c05030201036100")

_DEAL_SALT = b"\x15ic-threshold-bls-deal"

#: The standard generator of G2, compressed.
_G2_GENERATOR = pyblst.BlstP2Element().uncompress(bytes.fromhex(
    "93e02b6052719f607dacd3a088274f65596bd0d09920b61ab5da61bbdc7f5049334cf11213945d57e5ac7d055d042b7e"
    "024aa2b2f08f0a91260805272dc51051c6e47ad4fa403b02b4510b647ae3d1770bac0326a805bbefd48056c8c121bdb8"))
_G1_IDENTITY = pyblst.BlstP1Element()
_G2_IDENTITY = pyblst.BlstP2Element()


class BlsError(StateManagerError, ValueError):
    """Keys, signatures or shares of the IC's BLS variant that cannot be used."""

    reason = "bls_error"


class BlsPointError(BlsError):
    """Bytes that are not a canonical, non-identity point of the prime-order subgroup
    (48-byte G1 signatures, 96-byte G2 public keys)."""

    reason = "bls_point_invalid"


class BlsSecretKeyError(BlsError):
    """A secret key or share that is not a 32-byte big-endian scalar in ``[1, r)``."""

    reason = "bls_secret_key_invalid"


class BlsCombineError(BlsError):
    """Signature shares that cannot be combined (too few, bad node indices)."""

    reason = "bls_combine_refused"


class BlsDealError(BlsError):
    """Invalid dealing parameters (``n``, ``t`` or ``seed``)."""

    reason = "bls_deal_refused"


def _is_int(value: object) -> bool:
    # bool is an int subclass; a True node index or threshold is a bug, not a 1.
    return isinstance(value, int) and not isinstance(value, bool)


# -- points and keys ---------------------------------------------------------------------------

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
    """A 48-byte signature (or signature share) as a G1 point."""
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


def public_key_der(raw: bytes) -> bytes:
    """``PUBLIC_KEY_DER_PREFIX · raw``: the DER encoding of a public key. Not checked to be a
    point: the registry checks the keys it lists, and the state tree states a topology's key
    as it is (``replica.ic.bls.public_key_to_der`` is the checked form)."""
    if type(raw) is not bytes:
        raise BlsPointError(f"a BLS public key is bytes, not {type(raw).__name__}")
    return PUBLIC_KEY_DER_PREFIX + raw


def public_key_of(secret: bytes) -> bytes:
    """``s · g2``, compressed."""
    return _G2_GENERATOR.scalar_mul(_secret_scalar(secret)).compress()


# -- signing and verifying ---------------------------------------------------------------------

def state_root_message(root: bytes) -> bytes:
    """What a certification signs: ``domain_sep("ic-state-root") · root``."""
    if type(root) is not bytes or len(root) != ROOT_BYTES:
        raise BlsError(f"a state root is {ROOT_BYTES} bytes")
    return domain_sep(STATE_ROOT_DOMAIN) + root


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


def lagrange_coefficients_at_zero(indices: Sequence[int]) -> tuple[int, ...]:
    """``λ_i = Π_{j ≠ i} j / (j - i) mod r`` for each ``i`` in ``indices``."""
    result = []
    for i in indices:
        numerator = 1
        denominator = 1
        for j in indices:
            if j != i:
                numerator = numerator * j % BLS12_381_R
                denominator = denominator * (j - i) % BLS12_381_R
        result.append(numerator * pow(denominator, -1, BLS12_381_R) % BLS12_381_R)
    return tuple(result)


def combine_shares(shares: Mapping[int, bytes], t: int) -> bytes:
    """``σ = Σ λ_i · σ_i`` over the ``t`` smallest node indices present (deterministic).
    The result is not verified here; callers verify it under the subnet's key."""
    if not _is_int(t) or t < 1:
        raise BlsCombineError(f"a threshold is an integer >= 1, not {t!r}")
    for index in shares:
        if not _is_int(index) or not 0 < index < BLS12_381_R:
            raise BlsCombineError(f"node index {index!r} is not an integer in [1, r)")
    if len(shares) < t:
        raise BlsCombineError(f"{len(shares)} distinct shares, need {t}")
    chosen = sorted(shares)[:t]
    total = pyblst.BlstP1Element()
    for index, coefficient in zip(chosen, lagrange_coefficients_at_zero(chosen)):
        total = total + parse_signature(shares[index]).scalar_mul(coefficient)
    return total.compress()


# -- dealing -----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ThresholdKeys:
    """A ``t``-of-``n`` key: the public key, node ``i``'s key share at position ``i - 1``."""

    n: int
    t: int
    public_key: bytes
    public_key_shares: tuple[bytes, ...]
    secret_shares: tuple[bytes, ...] = field(repr=False)   # out of repr: a logged key leaks nothing

    def public_key_share(self, node_index: int) -> bytes:
        """The G2 key share of node ``node_index`` (1-based)."""
        return self.public_key_shares[self._position(node_index)]

    def secret_share(self, node_index: int) -> bytes:
        """The secret scalar share of node ``node_index`` (1-based)."""
        return self.secret_shares[self._position(node_index)]

    def _position(self, node_index: int) -> int:
        if not _is_int(node_index) or not 1 <= node_index <= self.n:
            raise BlsDealError(f"node index {node_index!r} is not in [1, {self.n}]")
        return node_index - 1


def threshold_for(n: int) -> int:
    """Signing threshold for a subnet of ``n`` nodes: ``f = (n - 1) // 3``, ``t = 2f + 1``."""
    if not _is_int(n) or n < 1:
        raise BlsDealError(f"subnet size must be an integer >= 1, got {n!r}")
    return 2 * ((n - 1) // 3) + 1


def _hkdf_sha256(ikm: bytes, salt: bytes, info: bytes, length: int) -> bytes:
    """RFC 5869: ``PRK = HMAC(salt, IKM)``; ``T(k) = HMAC(PRK, T(k-1) || info || k)``."""
    prk = hmac.new(salt, ikm, hashlib.sha256).digest()
    out = b""
    block = b""
    counter = 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


def _coefficient(seed: bytes, n: int, t: int, attempt: int, j: int) -> int:
    """``a_j = OS2IP(HKDF(seed, info = n || t || attempt || j || k, 64 bytes)) mod r``, first
    non-zero over ``k = 0, 1, ...``; 64 bytes (twice r's size) make the reduction uniform."""
    k = 0
    while True:
        info = b"".join(v.to_bytes(4, "big") for v in (n, t, attempt, j, k))
        value = int.from_bytes(_hkdf_sha256(seed, _DEAL_SALT, info, 64), "big") % BLS12_381_R
        if value != 0:
            return value
        k += 1


def _evaluate(coefficients: Sequence[int], x: int) -> int:
    """``f(x) = Σ a_j · x^j mod r`` by Horner's rule."""
    acc = 0
    for a in reversed(coefficients):
        acc = (acc * x + a) % BLS12_381_R
    return acc


def deal_threshold_keys(n: int, t: int, seed: bytes) -> ThresholdKeys:
    """Deterministically deal a ``t``-of-``n`` key from ``seed``.

    ``f(x) = a_0 + a_1 x + ... + a_{t-1} x^{t-1}`` over ``Z_r`` with ``a_j`` expanded from the
    seed; secret share ``s_i = f(i)`` for ``i = 1..n``; public key ``a_0 · g2``, key share
    ``s_i · g2``. Should some ``s_i`` be 0 (negligible), the polynomial is redrawn with the
    next attempt counter. The secret shares are the ones the project dealt before it signed
    in the IC's variant, so node secrets dealt then are still the same shares.
    """
    if not _is_int(n) or n < 1:
        raise BlsDealError(f"n must be an integer >= 1, got {n!r}")
    if not _is_int(t) or not 1 <= t <= n:
        raise BlsDealError(f"t must be an integer in [1, n={n}], got {t!r}")
    if n >= 2**32:
        raise BlsDealError(f"n must be below 2**32, got {n}")
    if not isinstance(seed, (bytes, bytearray)) or len(seed) < MIN_SEED_BYTES:
        raise BlsDealError(f"seed must be at least {MIN_SEED_BYTES} bytes")
    seed = bytes(seed)
    attempt = 0
    while True:
        coefficients = [_coefficient(seed, n, t, attempt, j) for j in range(t)]
        shares = [_evaluate(coefficients, i) for i in range(1, n + 1)]
        if all(shares):
            break
        attempt += 1
    secret_shares = tuple(s.to_bytes(SECRET_KEY_BYTES, "big") for s in shares)
    return ThresholdKeys(n, t, public_key_of(coefficients[0].to_bytes(SECRET_KEY_BYTES, "big")),
                         tuple(public_key_of(share) for share in secret_shares), secret_shares)
