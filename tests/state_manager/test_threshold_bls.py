"""Threshold BLS: dealing, share signing, Lagrange combination and strict point parsing."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from blspy import BasicSchemeMPL, G1Element, G2Element, PrivateKey

from state_manager import hash_tree as ht
from state_manager import threshold_bls as bls

ROOT = bytes(range(32))
HEIGHT = 42
MESSAGE = bls.state_root_message(HEIGHT, ROOT)

# BLS12-381 base field modulus, only for building off-subgroup test points below.
P = 0x1A0111EA397FE69A4B1BA7B6434BACD764774B84F38512BF6730D2A0F6B0F6241EABFFFEB153FFFFB9FEFFFFFFFFAAAB


def _deal(n: int, tag: bytes):
    return bls.deal_threshold_key(n, bls.threshold_for(n), tag * 32)


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
    """Interpolate the secret shares at zero: ``s = sum(lambda_i * s_i) mod r``."""
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
    with pytest.raises(bls.DealError):
        bls.threshold_for(n)


@pytest.mark.parametrize(
    ("n", "t", "seed"),
    [
        (0, 1, b"s" * 32),
        (4, 0, b"s" * 32),
        (4, 5, b"s" * 32),
        (True, 1, b"s" * 32),
        (4, True, b"s" * 32),
        (4, 3, b"s" * 31),
        (4, 3, "s" * 32),
    ],
)
def test_deal_rejects_bad_parameters(n, t, seed):
    with pytest.raises(bls.DealError):
        bls.deal_threshold_key(n, t, seed)


def test_deal_is_deterministic(deal4):
    again = _deal(4, b"\x04")
    assert again == deal4
    assert _deal(4, b"\x05").public_key != deal4.public_key
    # Different parameters from the same seed give an unrelated key.
    assert bls.deal_threshold_key(4, 2, b"\x04" * 32).public_key != deal4.public_key


def test_deal_golden_public_key():
    deal = bls.deal_threshold_key(4, 3, bytes(range(32)))
    assert deal.public_key.hex() == (
        "a8c41e135a8b1dc5110088eeea73b9567d21c5b077a0e6eba351205724f18aad"
        "0dde71ade7a7f46e051b9ca586708267"
    )
    assert deal.secret_share(1).hex() == "658aa54a6bbf4d345839037848b1de104ffaa9e2c27c71eb72052d63ec95ea1a"


def test_deal_shapes_and_key_shares(deal7):
    assert (deal7.n, deal7.t) == (7, 5)
    assert len(deal7.public_key) == bls.G1_POINT_BYTES
    assert len(deal7.public_key_shares) == len(deal7.secret_shares) == 7
    for i in range(1, 8):
        share = deal7.secret_share(i)
        assert len(share) == bls.SCALAR_BYTES
        assert 0 < int.from_bytes(share, "big") < bls.BLS12_381_R
        assert deal7.public_key_share(i) == bytes(PrivateKey.from_bytes(share).get_g1())
    assert len(set(deal7.secret_shares)) == 7
    with pytest.raises(bls.ShareIndexError):
        deal7.secret_share(0)
    with pytest.raises(bls.ShareIndexError):
        deal7.public_key_share(8)


def test_deal_repr_hides_secret_shares(deal4):
    assert deal4.secret_share(1).hex() not in repr(deal4)
    assert repr(deal4.secret_share(1)) not in repr(deal4)


def test_secret_shares_interpolate_to_the_public_key(deal4, deal7):
    for deal in (deal4, deal7):
        assert bytes(PrivateKey.from_bytes(_master_secret(deal)).get_g1()) == deal.public_key


def test_lagrange_coefficients_sum_to_one():
    # Interpolating the constant polynomial 1 at zero.
    for indices in ([1], [1, 2, 3], [2, 5, 7, 11]):
        assert sum(bls.lagrange_coefficients_at_zero(indices)) % bls.BLS12_381_R == 1


# --- messages and single signatures -----------------------------------------------------


def test_state_root_message():
    assert MESSAGE == b"\x0dic-state-root" + HEIGHT.to_bytes(8, "big") + ROOT
    assert ht.domain_sep("ic-state-root") == b"\x0dic-state-root"
    for bad in (b"", b"\x00" * 31, b"\x00" * 33, "x" * 32):
        with pytest.raises(bls.MessageError):
            bls.state_root_message(HEIGHT, bad)
    for bad_height in (-1, 2**64, True, "1", 1.0):
        with pytest.raises(bls.MessageError):
            bls.state_root_message(bad_height, ROOT)


def test_shares_verify_under_their_key_share_only(deal4, shares4):
    for i, share in shares4.items():
        assert bls.verify_share(deal4.public_key_share(i), MESSAGE, share)
        other = deal4.public_key_share(i % 4 + 1)
        assert not bls.verify_share(other, MESSAGE, share)


@pytest.mark.parametrize(
    "secret",
    [b"", b"\x00" * 32, bls.BLS12_381_R.to_bytes(32, "big"), b"\xff" * 32, b"\x01" * 31, "1" * 32],
)
def test_sign_share_rejects_bad_secret_shares(secret):
    with pytest.raises(bls.SecretShareError):
        bls.sign_share(secret, MESSAGE)


# --- combining ----------------------------------------------------------------------------


def test_any_t_of_4_shares_combine(deal4, shares4):
    expected = bytes(BasicSchemeMPL.sign(PrivateKey.from_bytes(_master_secret(deal4)), MESSAGE))
    for subset in itertools.combinations(range(1, 5), 3):
        signature = bls.combine_shares({i: shares4[i] for i in subset}, 3)
        # BLS signatures are unique: every subset yields the master key's signature.
        assert signature == expected
    assert bls.verify_signature(deal4.public_key, MESSAGE, expected)


def test_any_t_of_7_shares_combine(deal7, shares7):
    subsets = [(1, 2, 3, 4, 5), (3, 4, 5, 6, 7), (1, 3, 5, 6, 7), (2, 4, 5, 6, 7)]
    signatures = {bls.combine_shares({i: shares7[i] for i in subset}, 5) for subset in subsets}
    assert len(signatures) == 1
    assert bls.verify_signature(deal7.public_key, MESSAGE, signatures.pop())


def test_combine_uses_the_t_smallest_indices(deal4, shares4):
    tampered = dict(shares4)
    tampered[4] = b"\x00" * 96  # never parsed: only indices 1, 2, 3 are used
    signature = bls.combine_shares(tampered, 3)
    assert bls.verify_signature(deal4.public_key, MESSAGE, signature)


def test_single_node_subnet():
    deal = bls.deal_threshold_key(1, 1, b"\x01" * 32)
    share = bls.sign_share(deal.secret_share(1), MESSAGE)
    assert bls.combine_shares({1: share}, 1) == share
    assert bls.verify_signature(deal.public_key, MESSAGE, share)


def test_t_minus_one_shares_are_refused(shares4, shares7):
    with pytest.raises(bls.NotEnoughSharesError):
        bls.combine_shares({1: shares4[1], 4: shares4[4]}, 3)
    with pytest.raises(bls.NotEnoughSharesError):
        bls.combine_shares({i: shares7[i] for i in (2, 3, 5, 7)}, 5)
    with pytest.raises(bls.NotEnoughSharesError):
        bls.combine_shares({}, 1)


@pytest.mark.parametrize("index", [0, -1, True, "1", bls.BLS12_381_R])
def test_combine_rejects_bad_indices(shares4, index):
    # The bad index is the only key that could collide with 1 (True == 1 as a dict key).
    shares = {index: shares4[1], 2: shares4[2], 3: shares4[3]}
    with pytest.raises(bls.ShareIndexError):
        bls.combine_shares(shares, 3)


@pytest.mark.parametrize("t", [0, -1, True, None])
def test_combine_rejects_bad_threshold(shares4, t):
    with pytest.raises(bls.CombineError):
        bls.combine_shares(shares4, t)


def test_share_from_another_subnet_is_detected(deal4, shares4, foreign4):
    foreign_share = bls.sign_share(foreign4.secret_share(2), MESSAGE)
    assert not bls.verify_share(deal4.public_key_share(2), MESSAGE, foreign_share)
    mixed = {1: shares4[1], 2: foreign_share, 3: shares4[3]}
    assert not bls.verify_signature(deal4.public_key, MESSAGE, bls.combine_shares(mixed, 3))


def test_forged_and_mismatched_signatures_are_rejected(deal4, shares4, foreign4):
    forged = bytes(BasicSchemeMPL.sign(PrivateKey.from_bytes(_master_secret(foreign4)), MESSAGE))
    assert not bls.verify_signature(deal4.public_key, MESSAGE, forged)
    genuine = bls.combine_shares(shares4, 3)
    assert not bls.verify_signature(deal4.public_key, bls.state_root_message(HEIGHT, b"\x01" * 32), genuine)
    assert not bls.verify_signature(foreign4.public_key, MESSAGE, genuine)
    # A share is not a signature under the subnet key.
    assert not bls.verify_signature(deal4.public_key, MESSAGE, shares4[1])


# --- strict point parsing -----------------------------------------------------------------


def test_identity_points_are_rejected(deal4, shares4):
    g1_identity = bytes(G1Element())
    g2_identity = bytes(G2Element())
    with pytest.raises(bls.IdentityPointError):
        bls.parse_g1(g1_identity)
    with pytest.raises(bls.IdentityPointError):
        bls.parse_g2(g2_identity)
    with pytest.raises(bls.IdentityPointError):
        bls.verify_signature(deal4.public_key, MESSAGE, g2_identity)
    with pytest.raises(bls.IdentityPointError):
        bls.verify_signature(g1_identity, MESSAGE, g2_identity)
    with pytest.raises(bls.IdentityPointError):
        bls.verify_share(g1_identity, MESSAGE, shares4[1])


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


def test_points_outside_the_subgroup_are_rejected():
    g1 = _g1_point(on_curve=True)
    g2 = _g2_point(on_curve=True)
    # Fixture sanity: the points are on the curve (the unchecked decoder takes them), so the
    # rejection below is the subgroup check. The project itself never decodes unchecked.
    G1Element.from_bytes_unchecked(g1)
    G2Element.from_bytes_unchecked(g2)
    with pytest.raises(bls.MalformedPointError):
        bls.parse_g1(g1)
    with pytest.raises(bls.MalformedPointError):
        bls.parse_g2(g2)


def test_points_off_the_curve_are_rejected():
    with pytest.raises(bls.MalformedPointError):
        bls.parse_g1(_g1_point(on_curve=False))
    with pytest.raises(bls.MalformedPointError):
        bls.parse_g2(_g2_point(on_curve=False))


def _bad_encodings(valid: bytes) -> list[bytes]:
    no_compress_flag = bytes([valid[0] & 0x7F]) + valid[1:]
    infinity_with_data = bytes([0xC0]) + valid[1:]
    identity_with_sign = bytes([0xE0]) + bytes(len(valid) - 1)
    return [bytes(len(valid)), b"\xff" * len(valid), no_compress_flag, infinity_with_data, identity_with_sign]


def test_malformed_encodings_are_rejected(deal4, shares4):
    for bad in _bad_encodings(deal4.public_key):
        with pytest.raises(bls.MalformedPointError):
            bls.parse_g1(bad)
    for bad in _bad_encodings(shares4[1]):
        with pytest.raises(bls.MalformedPointError):
            bls.parse_g2(bad)
        with pytest.raises(bls.MalformedPointError):
            bls.verify_signature(deal4.public_key, MESSAGE, bad)


def test_wrong_lengths_are_rejected(deal4, shares4):
    for bad in (b"", deal4.public_key[:-1], deal4.public_key + b"\x00", shares4[1], None, 7):
        with pytest.raises(bls.PointLengthError):
            bls.parse_g1(bad)
    for bad in (b"", shares4[1][:-1], shares4[1] + b"\x00", deal4.public_key, "x" * 96):
        with pytest.raises(bls.PointLengthError):
            bls.parse_g2(bad)
    with pytest.raises(bls.PointLengthError):
        bls.combine_shares({1: shares4[1], 2: shares4[2], 3: shares4[3][:95]}, 3)


def test_valid_points_parse(deal4, shares4):
    assert bytes(bls.parse_g1(deal4.public_key)) == deal4.public_key
    assert bytes(bls.parse_g2(shares4[1])) == shares4[1]
    assert isinstance(bls.parse_g2(bytearray(shares4[1])), G2Element)


def test_errors_share_one_hierarchy():
    for cls in (
        bls.DealError,
        bls.MessageError,
        bls.SecretShareError,
        bls.PointLengthError,
        bls.MalformedPointError,
        bls.IdentityPointError,
        bls.NotEnoughSharesError,
        bls.ShareIndexError,
    ):
        assert issubclass(cls, bls.ThresholdBlsError)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(min_size=0, max_size=100), flags=st.integers(0, 7))
def test_arbitrary_bytes_parse_or_raise_point_error(data, flags):
    # Put arbitrary flag bits on top so the fuzzing reaches past the flag checks.
    if data:
        data = bytes([(data[0] & 0x1F) | (flags << 5)]) + data[1:]
    for parse in (bls.parse_g1, bls.parse_g2):
        try:
            point = parse(data)
        except bls.PointError:
            continue
        assert bytes(point) == data
