"""The IC's BLS variant: a mainnet signature, the standard's hash-to-curve, signing, threshold
shares and their combination, strict point parsing, fuzzing."""

from __future__ import annotations

import itertools
import json
import pathlib

import pyblst
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replica.ic import bls, cbor
from replica.ic.errors import BlsCombineError, BlsError, BlsPointError, BlsSecretKeyError
from replica.ic.hash_tree_cbor import tree_from_value
from state_manager.hash_tree import domain_sep, reconstruct
from state_manager.bls import BLS12_381_R

FIXTURE = json.loads((pathlib.Path(__file__).parent / "data" / "mainnet_certificate.json").read_text())
ROOT_KEY_DER = bytes.fromhex(FIXTURE["root_key_der"])
MESSAGE = domain_sep("ic-state-root") + bytes(range(32))


def test_the_ic_mainnets_root_key_signs_its_delegation():
    """The NNS's signature on the delegation inside a real mainnet certificate verifies."""
    outer = cbor.decode(bytes.fromhex(FIXTURE["certificate"]), max_bytes=1 << 20)
    inner = cbor.decode(outer["delegation"]["certificate"], max_bytes=1 << 20)
    root = reconstruct(tree_from_value(inner["tree"]))
    root_key = bls.public_key_from_der(ROOT_KEY_DER)
    assert bls.verify(root_key, b"\x0dic-state-root" + root, inner["signature"])
    assert not bls.verify(root_key, b"\x0dic-state-root" + bytes(32), inner["signature"])
    assert bls.public_key_to_der(root_key) == ROOT_KEY_DER


def test_hash_to_g1_is_rfc_9380s():
    """RFC 9380, J.9.1 (BLS12381G1_XMD:SHA-256_SSWU_RO_), msg "": the point's x, compressed with
    its flags. The library hashes what the ciphersuite names."""
    point = pyblst.BlstP1Element().hash_to_group(b"", b"QUUX-V01-CS02-with-BLS12381G1_XMD:SHA-256_SSWU_RO_")
    x = int("052926add2207b76ca4fa57a8734416c8dc95e24501772c814278700eed6d1e4e8cf62d9c09db0fac349612b759e79a1", 16)
    assert int.from_bytes(point.compress(), "big") & ((1 << 381) - 1) == x
    assert bls.CIPHERSUITE_DST == b"BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_"


def test_sign_and_verify():
    secret = (12345).to_bytes(32, "big")
    public_key = bls.public_key_of(secret)
    signature = bls.sign(secret, MESSAGE)
    assert len(public_key) == 96 and len(signature) == 48
    assert bls.verify(public_key, MESSAGE, signature)
    assert not bls.verify(public_key, MESSAGE + b"x", signature)
    assert not bls.verify(bls.public_key_of((54321).to_bytes(32, "big")), MESSAGE, signature)


KEYS = bls.deal_threshold_keys(4, 3, b"\x07" * 32)


def test_threshold_shares_verify_and_any_t_combine_to_the_one_signature():
    shares = {i: bls.sign_share(KEYS.secret_shares[i - 1], MESSAGE) for i in range(1, 5)}
    for i, share in shares.items():
        assert bls.verify_share(KEYS.public_key_shares[i - 1], MESSAGE, share)
        assert not bls.verify_share(KEYS.public_key_shares[i % 4], MESSAGE, share)
    combined = {bls.combine_shares({i: shares[i] for i in subset}, 3)
                for subset in itertools.combinations(range(1, 5), 3)}
    assert len(combined) == 1
    assert bls.verify(KEYS.public_key, MESSAGE, combined.pop())


def test_dealing_is_deterministic_and_reuses_the_projects_sharing():
    again = bls.deal_threshold_keys(4, 3, b"\x07" * 32)
    assert again == KEYS and "secret_shares" not in repr(KEYS)
    assert bls.deal_threshold_keys(4, 3, b"\x08" * 32).public_key != KEYS.public_key


def test_combining_refusals():
    shares = {i: bls.sign_share(KEYS.secret_shares[i - 1], MESSAGE) for i in (1, 2)}
    with pytest.raises(BlsCombineError):
        bls.combine_shares(shares, 3)
    with pytest.raises(BlsCombineError):
        bls.combine_shares({0: shares[1], 1: shares[2]}, 2)
    with pytest.raises(BlsCombineError):
        bls.combine_shares(shares, 0)
    with pytest.raises(BlsPointError):
        bls.combine_shares({1: shares[1], 2: bytes(48)}, 2)


@pytest.mark.parametrize("secret", [bytes(32), BLS12_381_R.to_bytes(32, "big"), bytes(31), "x" * 32])
def test_bad_secret_keys_are_refused(secret):
    with pytest.raises(BlsSecretKeyError):
        bls.sign(secret, MESSAGE)


def _non_subgroup_g1_point() -> bytes:
    """x = 4 is on y^2 = x^3 + 4 but (x, y) is not in the prime-order subgroup."""
    p = 0x1A0111EA397FE69A4B1BA7B6434BACD764774B84F38512BF6730D2A0F6B0F6241EABFFFEB153FFFFB9FEFFFFFFFFAAAB
    x = 4
    assert pow(x ** 3 + 4, (p - 1) // 2, p) == 1
    encoded = bytearray(x.to_bytes(48, "big"))
    encoded[0] |= 0x80
    return bytes(encoded)


def test_point_refusals():
    key = bls.public_key_of((5).to_bytes(32, "big"))
    signature = bls.sign((5).to_bytes(32, "big"), MESSAGE)
    bad_signatures = [signature[:47], b"\xc0" + bytes(47), _non_subgroup_g1_point(),
                      bytes([signature[0] & 0x1F]) + signature[1:],   # compression flag cleared
                      bytes([signature[0] ^ 0x40]) + signature[1:]]   # infinity flag on a point
    for bad in bad_signatures:
        with pytest.raises(BlsPointError):
            bls.verify(key, MESSAGE, bad)
    for bad in (key[:95], b"\xc0" + bytes(95), "key", bytes([key[0] & 0x7F]) + key[1:]):
        with pytest.raises(BlsError):
            bls.verify(bad, MESSAGE, signature)


def test_der_refusals():
    with pytest.raises(BlsPointError):
        bls.public_key_from_der(ROOT_KEY_DER[:-1])
    with pytest.raises(BlsPointError):
        bls.public_key_from_der(bytes.fromhex("302a300506032b6570032100") + bytes(32))   # Ed25519


@given(st.binary(min_size=48, max_size=48), st.binary(min_size=96, max_size=96))
@settings(max_examples=300, deadline=None)
def test_random_points_verify_false_or_are_refused(signature, key):
    try:
        assert not bls.verify(key, MESSAGE, signature)
    except BlsPointError:
        pass
