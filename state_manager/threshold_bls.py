"""Threshold BLS signatures over BLS12-381: dealing, signing shares, combining, verifying.

Public keys live in G1 (48-byte compressed points), signatures in G2 (96-byte compressed
points). Signing and verification use blspy's *basic* scheme (``BasicSchemeMPL``), i.e. the
plain relation ``e(pk, H(m)) == e(g1, sigma)``. The augmented scheme would prepend each
signer's own public key to the message, so shares made under different key shares would sign
different messages and could not be combined.

A subnet key is a Shamir sharing of a secret ``s = f(0)`` with a polynomial ``f`` of degree
``t - 1`` over the scalar field ``Z_r``; node ``i`` (1-based) holds ``s_i = f(i)``. Any ``t``
signature shares ``sigma_i = s_i * H(m)`` combine into ``sigma = sum(lambda_i * sigma_i)``,
which equals ``s * H(m)`` by Lagrange interpolation at zero.

Conventions for remote bytes (``certification`` turns these into its signature errors):

* ``parse_g1`` / ``parse_g2`` raise a ``PointError`` subclass for bytes that are not a valid,
  canonical, non-identity point of the prime-order subgroup.
* ``verify_signature`` / ``verify_share`` raise that same ``PointError`` when either the key
  or the signature bytes are not a valid point, and return ``False`` for well-formed points
  that simply are not a signature on the message under the key.

Pure: no clocks, no I/O, no ambient randomness; the dealer's randomness is the ``seed``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from blspy import BasicSchemeMPL, G1Element, G2Element, PrivateKey

from state_manager.encoding import is_u64
from state_manager.errors import StateManagerError
from state_manager.hash_tree import domain_sep

__all__ = [
    "BLS12_381_R",
    "G1_POINT_BYTES",
    "G2_POINT_BYTES",
    "SCALAR_BYTES",
    "MIN_SEED_BYTES",
    "STATE_ROOT_DOMAIN",
    "HEIGHT_BYTES",
    "ROOT_BYTES",
    "ThresholdBlsError",
    "DealError",
    "MessageError",
    "SecretShareError",
    "PointError",
    "PointLengthError",
    "MalformedPointError",
    "IdentityPointError",
    "CombineError",
    "NotEnoughSharesError",
    "ShareIndexError",
    "ThresholdKeyDeal",
    "threshold_for",
    "deal_threshold_key",
    "state_root_message",
    "parse_g1",
    "parse_g2",
    "sign_share",
    "verify_points",
    "verify_share",
    "verify_signature",
    "lagrange_coefficients_at_zero",
    "combine_shares",
]

# Order r of the prime-order subgroups G1, G2 of BLS12-381 (the scalar field modulus).
BLS12_381_R = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001

G1_POINT_BYTES = 48
G2_POINT_BYTES = 96
SCALAR_BYTES = 32
MIN_SEED_BYTES = 32
STATE_ROOT_DOMAIN = "ic-state-root"
ROOT_BYTES = 32
HEIGHT_BYTES = 8

# Width of the fixed windows in the interleaved double-and-add (see _g2_linear_combination).
_WINDOW_BITS = 4
_WINDOW_MASK = (1 << _WINDOW_BITS) - 1

_DEAL_SALT = b"\x15ic-threshold-bls-deal"


class ThresholdBlsError(StateManagerError, ValueError):
    """Base class of every error raised by this module."""


class DealError(ThresholdBlsError):
    """Invalid dealing parameters (``n``, ``t`` or ``seed``)."""


class MessageError(ThresholdBlsError):
    """A message or state root that is not bytes of the required shape."""


class SecretShareError(ThresholdBlsError):
    """A secret share that is not a 32-byte big-endian scalar in ``[1, r)``."""


class PointError(ThresholdBlsError):
    """Bytes that are not a valid group element for a key or signature."""


class PointLengthError(PointError):
    """Point bytes of the wrong length (or not bytes at all)."""


class MalformedPointError(PointError):
    """Bad encoding, not on the curve, not in the prime-order subgroup, or non-canonical."""


class IdentityPointError(PointError):
    """The point at infinity, which is never an acceptable key or signature."""


class CombineError(ThresholdBlsError):
    """Signature shares that cannot be combined."""


class NotEnoughSharesError(CombineError):
    """Fewer than ``t`` distinct shares."""


class ShareIndexError(CombineError):
    """A node index that is not an integer in ``[1, r)``."""


@dataclass(frozen=True, slots=True)
class ThresholdKeyDeal:
    """Output of the dealer: the subnet key and every node's share of it.

    Position ``i - 1`` of ``public_key_shares`` / ``secret_shares`` belongs to node index ``i``.
    """

    n: int
    t: int
    public_key: bytes
    public_key_shares: tuple[bytes, ...]
    # Kept out of repr so a logged deal does not leak the key.
    secret_shares: tuple[bytes, ...] = field(repr=False)

    def public_key_share(self, node_index: int) -> bytes:
        """G1 public key share of node ``node_index`` (1-based)."""
        return self.public_key_shares[self._position(node_index)]

    def secret_share(self, node_index: int) -> bytes:
        """Secret scalar share of node ``node_index`` (1-based)."""
        return self.secret_shares[self._position(node_index)]

    def _position(self, node_index: int) -> int:
        if not _is_int(node_index) or not 1 <= node_index <= self.n:
            raise ShareIndexError(f"node index {node_index!r} is not in [1, {self.n}]")
        return node_index - 1


def _is_int(value: object) -> bool:
    # bool is an int subclass; a True node index or threshold is a bug, not a 1.
    return isinstance(value, int) and not isinstance(value, bool)


def _require_bytes(value: object, what: str) -> bytes:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise MessageError(f"{what} must be bytes, got {type(value).__name__}")
    return bytes(value)


def threshold_for(n: int) -> int:
    """Signing threshold for a subnet of ``n`` nodes: ``f = (n - 1) // 3``, ``t = 2f + 1``."""
    if not _is_int(n) or n < 1:
        raise DealError(f"subnet size must be an integer >= 1, got {n!r}")
    f = (n - 1) // 3
    return 2 * f + 1


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
    non-zero over ``k = 0, 1, ...``.

    64 bytes (twice the size of r) make the reduction mod r statistically uniform.
    """
    k = 0
    while True:
        info = b"".join(v.to_bytes(4, "big") for v in (n, t, attempt, j, k))
        value = int.from_bytes(_hkdf_sha256(seed, _DEAL_SALT, info, 64), "big") % BLS12_381_R
        if value != 0:
            return value
        k += 1


def _evaluate(coefficients: Sequence[int], x: int) -> int:
    """``f(x) = sum(a_j * x^j) mod r`` by Horner's rule."""
    acc = 0
    for a in reversed(coefficients):
        acc = (acc * x + a) % BLS12_381_R
    return acc


def deal_threshold_key(n: int, t: int, seed: bytes) -> ThresholdKeyDeal:
    """Deterministically deal a ``t``-of-``n`` BLS key from ``seed``.

    ``f(x) = a_0 + a_1 x + ... + a_{t-1} x^{t-1}`` over ``Z_r`` with ``a_j`` expanded from the
    seed; secret share ``s_i = f(i)`` for ``i = 1..n``; public key ``s * g1`` with
    ``s = f(0) = a_0``; public key share ``s_i * g1``. In the (negligible) event that some
    ``s_i == 0`` the polynomial is redrawn with the next attempt counter.
    """
    if not _is_int(n) or n < 1:
        raise DealError(f"n must be an integer >= 1, got {n!r}")
    if not _is_int(t) or not 1 <= t <= n:
        raise DealError(f"t must be an integer in [1, n={n}], got {t!r}")
    if n >= 2**32:
        raise DealError(f"n must be below 2**32, got {n}")
    if not isinstance(seed, (bytes, bytearray)) or len(seed) < MIN_SEED_BYTES:
        raise DealError(f"seed must be at least {MIN_SEED_BYTES} bytes")
    seed = bytes(seed)
    attempt = 0
    while True:
        coefficients = [_coefficient(seed, n, t, attempt, j) for j in range(t)]
        shares = [_evaluate(coefficients, i) for i in range(1, n + 1)]
        if all(shares):
            break
        attempt += 1
    secret = PrivateKey.from_bytes(coefficients[0].to_bytes(SCALAR_BYTES, "big"))
    secret_shares = tuple(s.to_bytes(SCALAR_BYTES, "big") for s in shares)
    public_key_shares = tuple(bytes(PrivateKey.from_bytes(s).get_g1()) for s in secret_shares)
    return ThresholdKeyDeal(
        n=n,
        t=t,
        public_key=bytes(secret.get_g1()),
        public_key_shares=public_key_shares,
        secret_shares=secret_shares,
    )


def state_root_message(height: int, root: bytes) -> bytes:
    """Message signed by certifications: ``domain_sep("ic-state-root") || height || root``,
    the height as 8 bytes big-endian, so that the height consumers rely on is signed too."""
    if not is_u64(height):
        raise MessageError(f"height must be an integer in [0, 2**64), got {height!r}")
    root = _require_bytes(root, "state root")
    if len(root) != ROOT_BYTES:
        raise MessageError(f"state root must be {ROOT_BYTES} bytes, got {len(root)}")
    return domain_sep(STATE_ROOT_DOMAIN) + height.to_bytes(HEIGHT_BYTES, "big") + root


def _parse_point(data: object, cls: type, size: int, what: str):
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise PointLengthError(f"{what} must be bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) != size:
        raise PointLengthError(f"{what} must be {size} bytes, got {len(data)}")
    try:
        # from_bytes (never from_bytes_unchecked) checks the curve equation and subgroup.
        point = cls.from_bytes(data)
    except (ValueError, RuntimeError) as exc:
        raise MalformedPointError(f"{what} is not a valid point: {exc}") from exc
    if point == cls():
        raise IdentityPointError(f"{what} is the identity point")
    # One accepted encoding per point: no alternative flag bits or unreduced coordinates.
    if bytes(point) != data:
        raise MalformedPointError(f"{what} is not canonically encoded")
    return point


def parse_g1(data: bytes) -> G1Element:
    """Strictly parse a 48-byte compressed G1 point (public key or key share)."""
    return _parse_point(data, G1Element, G1_POINT_BYTES, "G1 point")


def parse_g2(data: bytes) -> G2Element:
    """Strictly parse a 96-byte compressed G2 point (signature or signature share)."""
    return _parse_point(data, G2Element, G2_POINT_BYTES, "G2 point")


def _parse_secret_share(secret_share: bytes) -> PrivateKey:
    if not isinstance(secret_share, (bytes, bytearray)) or len(secret_share) != SCALAR_BYTES:
        raise SecretShareError(f"secret share must be {SCALAR_BYTES} bytes")
    value = int.from_bytes(secret_share, "big")
    if not 0 < value < BLS12_381_R:
        raise SecretShareError("secret share is not a scalar in [1, r)")
    return PrivateKey.from_bytes(bytes(secret_share))


def sign_share(secret_share: bytes, message: bytes) -> bytes:
    """Signature share ``sigma_i = s_i * H(m)`` (basic scheme, 96-byte G2)."""
    key = _parse_secret_share(secret_share)
    message = _require_bytes(message, "message")
    return bytes(BasicSchemeMPL.sign(key, message))


def verify_points(public_key: G1Element, message: bytes, signature: G2Element) -> bool:
    """``e(pk, H(m)) == e(g1, sigma)`` on already parsed points (basic scheme)."""
    message = _require_bytes(message, "message")
    return bool(BasicSchemeMPL.verify(public_key, message, signature))


def verify_signature(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """Whether ``signature`` is a signature on ``message`` under ``public_key``.

    Raises ``PointError`` if either byte string is not a valid non-identity point; returns
    ``False`` if both are valid points but the pairing check fails.
    """
    return verify_points(parse_g1(public_key), message, parse_g2(signature))


def verify_share(public_key_share: bytes, message: bytes, signature_share: bytes) -> bool:
    """Whether ``signature_share`` is node ``i``'s share on ``message``: same check and error
    convention as ``verify_signature``, under the node's public key share ``s_i * g1``."""
    return verify_signature(public_key_share, message, signature_share)


def lagrange_coefficients_at_zero(indices: Sequence[int]) -> tuple[int, ...]:
    """``lambda_i = prod_{j != i} j / (j - i) mod r`` for each ``i`` in ``indices``."""
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


def _g2_linear_combination(points: Sequence[G2Element], scalars: Sequence[int]) -> G2Element:
    """``sum(k_i * P_i)`` by interleaved fixed-window double-and-add (Straus).

    blspy exposes only ``+`` on G2, so: precompute ``d * P_i`` for digits ``d < 2^w``, then
    walk the scalars' base-``2^w`` digits from the top, sharing one chain of doublings across
    all points and adding ``digit * P_i`` per non-zero digit.
    """
    tables = []
    for point in points:
        table = [point]
        for _ in range(_WINDOW_MASK - 1):
            table.append(table[-1] + point)
        tables.append(table)  # table[d - 1] == d * point
    top_bits = max((k.bit_length() for k in scalars), default=0)
    windows = -(-top_bits // _WINDOW_BITS)
    acc = None
    for window in reversed(range(windows)):
        if acc is not None:
            for _ in range(_WINDOW_BITS):
                acc = acc + acc
        shift = window * _WINDOW_BITS
        for table, k in zip(tables, scalars):
            digit = (k >> shift) & _WINDOW_MASK
            if digit:
                acc = table[digit - 1] if acc is None else acc + table[digit - 1]
    return G2Element() if acc is None else acc


def combine_shares(shares: Mapping[int, bytes], t: int) -> bytes:
    """Combine signature shares into ``sigma = sum_{i in S} lambda_i * sigma_i``.

    ``S`` is the ``t`` smallest node indices present, so the result is deterministic. The
    result is not verified here; callers verify it against the subnet public key.
    """
    if not _is_int(t) or t < 1:
        raise CombineError(f"threshold must be an integer >= 1, got {t!r}")
    for index in shares:
        if not _is_int(index) or not 0 < index < BLS12_381_R:
            raise ShareIndexError(f"node index {index!r} is not an integer in [1, r)")
    if len(shares) < t:
        raise NotEnoughSharesError(f"{len(shares)} distinct shares, need {t}")
    chosen = sorted(shares)[:t]
    points = [parse_g2(shares[i]) for i in chosen]
    coefficients = lagrange_coefficients_at_zero(chosen)
    return bytes(_g2_linear_combination(points, coefficients))
