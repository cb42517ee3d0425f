"""The IC's BLS variant (``state_manager.bls``): dealing, share signing, Lagrange combination
and strict point parsing. Signatures are G1 points (48 bytes), public keys G2 points (96 bytes).
The variant's interoperability with the IC (a mainnet signature, RFC 9380's hash-to-curve) is
tested in ``tests/ic/test_bls.py``."""

from __future__ import annotations

import itertools

import pyblst
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from state_manager import bls
from state_manager import hash_tree as ht

ROOT = bytes(range(32))
MESSAGE = bls.state_root_message(ROOT)

# BLS12-381 base field modulus, only for building off-subgroup test points below.
P = 0x1A0111EA397FE69A4B1BA7B6434BACD764774B84F38512BF6730D2A0F6B0F6241EABFFFEB153FFFFB9FEFFFFFFFFAAAB


def _deal(n: int, tag: bytes):
    return bls.deal_threshold_keys(n, bls.threshold_for(n), tag * 32)


@pytest.fixture(scope="module")
def deal4():
    return _deal(4, b"\x04")


@pytest.fixture(scope="module")
def deal7():
    return _deal(7, b"\x07")


@pytest.fixture(scope="module")
def foreign4():
    return _deal(4, b"\xf0")


def _shares(deal, message=MESSAGE):
    return {i: bls.sign_share(deal.secret_share(i), message) for i in range(1, deal.n + 1)}


@pytest.fixture(scope="module")
def shares4(deal4):
    return _shares(deal4)


@pytest.fixture(scope="module")
def shares7(deal7):
    return _shares(deal7)


def _master_secret(deal) -> bytes:
    """Interpolate the secret shares at zero: ``s = Σ λ_i · s_i mod r``."""
    indices = list(range(1, deal.t + 1))
    lambdas = bls.lagrange_coefficients_at_zero(indices)
    secret = sum(lam * int.from_bytes(deal.secret_share(i), "big") for lam, i in zip(lambdas, indices))
    return (secret % bls.BLS12_381_R).to_bytes(32, "big")


# --- parameters and dealing -------------------------------------------------------------


@pytest.mark.parametrize(("n", "t"), [(1, 1), (2, 1), (3, 1), (4, 3), (6, 3), (7, 5), (10, 7), (13, 9)])
def test_threshold_for(n, t):
    assert bls.threshold_for(n) == t


@pytest.mark.parametrize("n", [0, -1, True, 4.0, "4"])
def test_threshold_for_rejects_bad_sizes(n):
    with pytest.raises(bls.BlsDealError):
        bls.threshold_for(n)


@pytest.mark.parametrize(("n", "t", "seed"), [
    (0, 1, b"s" * 32), (4, 0, b"s" * 32), (4, 5, b"s" * 32), (True, 1, b"s" * 32), (4, True, b"s" * 32),
    (4, 3, b"s" * 31), (4, 3, "s" * 32),
])
def test_deal_rejects_bad_parameters(n, t, seed):
    with pytest.raises(bls.BlsDealError):
        bls.deal_threshold_keys(n, t, seed)


def test_deal_is_deterministic(deal4):
    assert _deal(4, b"\x04") == deal4
    assert _deal(4, b"\x05").public_key != deal4.public_key
    # Different parameters from the same seed give an unrelated key.
    assert bls.deal_threshold_keys(4, 2, b"\x04" * 32).public_key != deal4.public_key


def test_deal_golden_key_and_share():
    """The secret shares are the ones the project dealt before it signed in the IC's variant
    (the same Shamir sharing, so node secrets dealt then hold the same shares); the public key
    is now ``s · g2``."""
    deal = bls.deal_threshold_keys(4, 3, bytes(range(32)))
    assert deal.secret_share(1).hex() == "658aa54a6bbf4d345839037848b1de104ffaa9e2c27c71eb72052d63ec95ea1a"
    assert deal.public_key.hex() == (
        "9138fed05e7d88d995506a3911e2a818c76d6051ba19208242f8d1379cceec3d63743a30f0b5b52312a043dbc8b6d1db"
        "0d0d1633ba517c68c85d3571e7e0b29013c503a5415b7c217fa10d3d2e6c8d0f810a06847b8287d1f5b378dcd42b1966")


def test_deal_shapes_and_key_shares(deal7):
    assert (deal7.n, deal7.t) == (7, 5)
    assert len(deal7.public_key) == bls.PUBLIC_KEY_BYTES
    assert len(deal7.public_key_shares) == len(deal7.secret_shares) == 7
    for i in range(1, 8):
        share = deal7.secret_share(i)
        assert len(share) == bls.SECRET_KEY_BYTES
        assert 0 < int.from_bytes(share, "big") < bls.BLS12_381_R
        assert deal7.public_key_share(i) == bls.public_key_of(share)
    assert len(set(deal7.secret_shares)) == 7
    with pytest.raises(bls.BlsDealError):
        deal7.secret_share(0)
    with pytest.raises(bls.BlsDealError):
        deal7.public_key_share(8)


def test_deal_repr_hides_secret_shares(deal4):
    assert deal4.secret_share(1).hex() not in repr(deal4)
    assert repr(deal4.secret_share(1)) not in repr(deal4)


def test_secret_shares_interpolate_to_the_public_key(deal4, deal7):
    for deal in (deal4, deal7):
        assert bls.public_key_of(_master_secret(deal)) == deal.public_key


def test_lagrange_coefficients_sum_to_one():
    # Interpolating the constant polynomial 1 at zero.
    for indices in ([1], [1, 2, 3], [2, 5, 7, 11]):
        assert sum(bls.lagrange_coefficients_at_zero(indices)) % bls.BLS12_381_R == 1


# --- messages and single signatures -----------------------------------------------------


def test_state_root_message():
    """The IC's: ``domain_sep("ic-state-root") · root``, no height."""
    assert MESSAGE == b"\x0dic-state-root" + ROOT
    assert ht.domain_sep("ic-state-root") == b"\x0dic-state-root"
    for bad in (b"", b"\x00" * 31, b"\x00" * 33, "x" * 32, bytearray(32)):
        with pytest.raises(bls.BlsError):
            bls.state_root_message(bad)


def test_shares_verify_under_their_key_share_only(deal4, shares4):
    for i, share in shares4.items():
        assert len(share) == bls.SIGNATURE_BYTES
        assert bls.verify_share(deal4.public_key_share(i), MESSAGE, share)
        assert not bls.verify_share(deal4.public_key_share(i % 4 + 1), MESSAGE, share)


@pytest.mark.parametrize(
    "secret", [b"", b"\x00" * 32, bls.BLS12_381_R.to_bytes(32, "big"), b"\xff" * 32, b"\x01" * 31, "1" * 32])
def test_sign_share_rejects_bad_secret_shares(secret):
    with pytest.raises(bls.BlsSecretKeyError):
        bls.sign_share(secret, MESSAGE)


# --- combining ----------------------------------------------------------------------------


def test_any_t_of_4_shares_combine(deal4, shares4):
    expected = bls.sign(_master_secret(deal4), MESSAGE)
    for subset in itertools.combinations(range(1, 5), 3):
        # BLS signatures are unique: every subset yields the master key's signature.
        assert bls.combine_shares({i: shares4[i] for i in subset}, 3) == expected
    assert bls.verify(deal4.public_key, MESSAGE, expected)


def test_any_t_of_7_shares_combine(deal7, shares7):
    subsets = [(1, 2, 3, 4, 5), (3, 4, 5, 6, 7), (1, 3, 5, 6, 7), (2, 4, 5, 6, 7)]
    signatures = {bls.combine_shares({i: shares7[i] for i in subset}, 5) for subset in subsets}
    assert len(signatures) == 1
    assert bls.verify(deal7.public_key, MESSAGE, signatures.pop())


def test_combine_uses_the_t_smallest_indices(deal4, shares4):
    tampered = dict(shares4)
    tampered[4] = b"\x00" * 48  # never parsed: only indices 1, 2, 3 are used
    assert bls.verify(deal4.public_key, MESSAGE, bls.combine_shares(tampered, 3))


def test_single_node_subnet():
    deal = bls.deal_threshold_keys(1, 1, b"\x01" * 32)
    share = bls.sign_share(deal.secret_share(1), MESSAGE)
    assert bls.combine_shares({1: share}, 1) == share
    assert bls.verify(deal.public_key, MESSAGE, share)


def test_t_minus_one_shares_are_refused(shares4, shares7):
    with pytest.raises(bls.BlsCombineError):
        bls.combine_shares({1: shares4[1], 4: shares4[4]}, 3)
    with pytest.raises(bls.BlsCombineError):
        bls.combine_shares({i: shares7[i] for i in (2, 3, 5, 7)}, 5)
    with pytest.raises(bls.BlsCombineError):
        bls.combine_shares({}, 1)


@pytest.mark.parametrize("index", [0, -1, True, "1", bls.BLS12_381_R])
def test_combine_rejects_bad_indices(shares4, index):
    # The bad index is the only key that could collide with 1 (True == 1 as a dict key).
    with pytest.raises(bls.BlsCombineError):
        bls.combine_shares({index: shares4[1], 2: shares4[2], 3: shares4[3]}, 3)


@pytest.mark.parametrize("t", [0, -1, True, None])
def test_combine_rejects_bad_threshold(shares4, t):
    with pytest.raises(bls.BlsCombineError):
        bls.combine_shares(shares4, t)


def test_share_from_another_subnet_is_detected(deal4, shares4, foreign4):
    foreign_share = bls.sign_share(foreign4.secret_share(2), MESSAGE)
    assert not bls.verify_share(deal4.public_key_share(2), MESSAGE, foreign_share)
    mixed = {1: shares4[1], 2: foreign_share, 3: shares4[3]}
    assert not bls.verify(deal4.public_key, MESSAGE, bls.combine_shares(mixed, 3))


def test_forged_and_mismatched_signatures_are_rejected(deal4, shares4, foreign4):
    assert not bls.verify(deal4.public_key, MESSAGE, bls.sign(_master_secret(foreign4), MESSAGE))
    genuine = bls.combine_shares(shares4, 3)
    assert not bls.verify(deal4.public_key, bls.state_root_message(b"\x01" * 32), genuine)
    assert not bls.verify(foreign4.public_key, MESSAGE, genuine)
    # A share is not a signature under the subnet key.
    assert not bls.verify(deal4.public_key, MESSAGE, shares4[1])


# --- strict point parsing -----------------------------------------------------------------

G1_IDENTITY = b"\xc0" + bytes(47)
G2_IDENTITY = b"\xc0" + bytes(95)


def test_identity_points_are_rejected(deal4, shares4):
    for parse, identity in ((bls.parse_signature, G1_IDENTITY), (bls.parse_public_key, G2_IDENTITY)):
        with pytest.raises(bls.BlsPointError, match="identity"):
            parse(identity)
    with pytest.raises(bls.BlsPointError):
        bls.verify(deal4.public_key, MESSAGE, G1_IDENTITY)
    with pytest.raises(bls.BlsPointError):
        bls.verify_share(G2_IDENTITY, MESSAGE, shares4[1])


def _fp_sqrt(a: int) -> int | None:
    root = pow(a, (P + 1) // 4, P)  # P = 3 mod 4
    return root if root * root % P == a % P else None


def _fp2_mul(a, b):
    return ((a[0] * b[0] - a[1] * b[1]) % P, (a[0] * b[1] + a[1] * b[0]) % P)


def _fp2_sqrt(a) -> tuple[int, int] | None:
    """Square root in Fp2 = Fp[u]/(u^2 + 1) via the norm: x0^2 = (a0 +- sqrt(a0^2 + a1^2)) / 2."""
    gamma = _fp_sqrt(a[0] * a[0] + a[1] * a[1])
    if gamma is None:
        return None
    half = pow(2, -1, P)
    for delta in ((a[0] + gamma) * half % P, (a[0] - gamma) * half % P):
        x0 = _fp_sqrt(delta)
        if x0:
            x1 = a[1] * pow(2 * x0, -1, P) % P
            if _fp2_mul((x0, x1), (x0, x1)) == (a[0] % P, a[1] % P):
                return x0, x1
    return None


def _compressed(x_words: list[int]) -> bytes:
    data = bytearray(b"".join(w.to_bytes(48, "big") for w in x_words))
    data[0] |= 0x80
    return bytes(data)


def _g1_point(on_curve: bool) -> bytes:
    """A compressed point with the smallest x for which x^3 + 4 is (or is not) a square."""
    x = 1
    while (_fp_sqrt(x**3 + 4) is not None) != on_curve:
        x += 1
    return _compressed([x])


def _g2_point(on_curve: bool) -> bytes:
    """Same on E'(Fp2): y^2 = x^3 + 4(1 + u), x = k + u; encoded as x.c1 || x.c0."""
    k = 0
    while True:
        x = (k, 1)
        rhs = _fp2_mul(_fp2_mul(x, x), x)
        rhs = ((rhs[0] + 4) % P, (rhs[1] + 4) % P)
        if (_fp2_sqrt(rhs) is not None) == on_curve:
            return _compressed([x[1], x[0]])
        k += 1


def test_points_outside_the_subgroup_or_off_the_curve_are_rejected():
    """The on-curve points here have small x and lie outside the prime-order subgroup (the
    cofactors are large), so their refusal is the subgroup check."""
    for on_curve in (True, False):
        with pytest.raises(bls.BlsPointError, match="prime-order subgroup"):
            bls.parse_signature(_g1_point(on_curve))
        with pytest.raises(bls.BlsPointError, match="prime-order subgroup"):
            bls.parse_public_key(_g2_point(on_curve))


def _bad_encodings(valid: bytes) -> list[bytes]:
    no_compress_flag = bytes([valid[0] & 0x7F]) + valid[1:]
    infinity_with_data = bytes([0xC0]) + valid[1:]
    identity_with_sign = bytes([0xE0]) + bytes(len(valid) - 1)
    return [bytes(len(valid)), b"\xff" * len(valid), no_compress_flag, infinity_with_data, identity_with_sign]


def test_malformed_encodings_are_rejected(deal4, shares4):
    for bad in _bad_encodings(deal4.public_key):
        with pytest.raises(bls.BlsPointError):
            bls.parse_public_key(bad)
    for bad in _bad_encodings(shares4[1]):
        with pytest.raises(bls.BlsPointError):
            bls.parse_signature(bad)
        with pytest.raises(bls.BlsPointError):
            bls.verify(deal4.public_key, MESSAGE, bad)


def test_wrong_lengths_are_rejected(deal4, shares4):
    for bad in (b"", deal4.public_key[:-1], deal4.public_key + b"\x00", shares4[1], None, 7, bytearray(96)):
        with pytest.raises(bls.BlsPointError):
            bls.parse_public_key(bad)
    for bad in (b"", shares4[1][:-1], shares4[1] + b"\x00", deal4.public_key, "x" * 48):
        with pytest.raises(bls.BlsPointError):
            bls.parse_signature(bad)
    with pytest.raises(bls.BlsPointError):
        bls.combine_shares({1: shares4[1], 2: shares4[2], 3: shares4[3][:47]}, 3)


def test_valid_points_parse(deal4, shares4):
    assert bls.parse_public_key(deal4.public_key).compress() == deal4.public_key
    assert bls.parse_signature(shares4[1]).compress() == shares4[1]
    assert isinstance(bls.parse_signature(shares4[1]), pyblst.BlstP1Element)


def test_errors_share_one_hierarchy():
    from state_manager.errors import StateManagerError

    for cls in (bls.BlsPointError, bls.BlsSecretKeyError, bls.BlsCombineError, bls.BlsDealError):
        assert issubclass(cls, bls.BlsError)
    assert issubclass(bls.BlsError, StateManagerError) and issubclass(bls.BlsError, ValueError)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(min_size=0, max_size=100), flags=st.integers(0, 7))
def test_arbitrary_bytes_parse_or_raise_point_error(data, flags):
    # Put arbitrary flag bits on top so the fuzzing reaches past the flag checks.
    if data:
        data = bytes([(data[0] & 0x1F) | (flags << 5)]) + data[1:]
    for parse in (bls.parse_signature, bls.parse_public_key):
        try:
            point = parse(data)
        except bls.BlsPointError:
            continue
        assert point.compress() == data
