"""DER public keys, signature checks and signing identities, against independent encoders
(cryptography's own DER) and vectors from @dfinity/agent's tests."""

from __future__ import annotations

import hashlib

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from hypothesis import given, settings
from hypothesis import strategies as st

from replica.ic.errors import (
    IcFormatError, MalformedPublicKey, MalformedSignature, SigningKeyError, UnsupportedKeyScheme,
)
from replica.ic.identities import Ed25519Identity, Secp256k1Identity
from replica.ic.public_keys import DER_PREFIXES, KeyScheme, PublicKey, der_encode, parse_der_public_key
from replica.ic.signatures import (
    DELEGATION_DOMAIN, REQUEST_DOMAIN, RESPONSE_DOMAIN, SECP256K1_ORDER, verify_signature,
)

PAYLOAD = REQUEST_DOMAIN + bytes(range(32))


def test_domain_separators_are_the_specifications():
    assert REQUEST_DOMAIN == b"\x0Aic-request"
    assert DELEGATION_DOMAIN == b"\x1Aic-request-auth-delegation" and len(DELEGATION_DOMAIN) == 27
    assert RESPONSE_DOMAIN == b"\x0Bic-response"


@pytest.mark.parametrize("identity", [Ed25519Identity.from_seed(b"x"), Secp256k1Identity.from_seed(b"x")],
                         ids=["ed25519", "secp256k1"])
def test_our_der_is_cryptographys_der(identity):
    """The fixed prefixes equal what an independent DER encoder writes for the same key."""
    spki = identity.private_key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert identity.der_public_key == spki


def test_p256_der_is_cryptographys_der():
    key = ec.derive_private_key(12345, ec.SECP256R1()).public_key()
    spki = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    raw = key.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    assert der_encode(KeyScheme.ECDSA_P256, raw) == spki
    assert parse_der_public_key(spki) == PublicKey(KeyScheme.ECDSA_P256, raw)


def test_agent_js_der_vectors():
    ed_raw = bytes.fromhex("B3997656BA51FF6DA37B61D8D549EC80717266ECF48FB5DA52B654412634844C")
    assert der_encode(KeyScheme.ED25519, ed_raw).hex().upper() == (
        "302A300506032B6570032100B3997656BA51FF6DA37B61D8D549EC80717266ECF48FB5DA52B654412634844C")
    k1_raw = bytes.fromhex("0401ec030acd7d1199f73ae3469329c114944e0693c89502f850bcc6bad397a5956767c79b410c29ac6"
                           "f587eec84878020fdb54ba002a79b02aa153fe47b6ffd33")
    assert der_encode(KeyScheme.ECDSA_SECP256K1, k1_raw).hex() == "3056301006072a8648ce3d020106052b8104000a034200" + k1_raw.hex()


def test_agent_js_secp256k1_identities():
    """A secret key and its public key, and a PEM key and its principal, from @dfinity/agent's tests."""
    identity = Secp256k1Identity.from_private_bytes(
        bytes.fromhex("8caa0410fa5955c05d6877801806f627e5dd313957a59c70f8d8ef252a482fb2"))
    assert parse_der_public_key(identity.der_public_key).raw.hex() == (
        "04e2abe3b762fe0553f690d25f5100259b7eaeb3e476df6bd3dfc1d27e5dae56dad5a84f70bd87acc95ad54af0285f28c2be"
        "1e3b2f62a28a2fbad9fe44c84dc904")
    pem = (b"-----BEGIN EC PRIVATE KEY-----\n"
           b"MHQCAQEEIGfKHuyoCCCbEXb0789MIdWiCIpZo1LaKApv95SSIaWPoAcGBSuBBAAK\n"
           b"oUQDQgAEahC99Avid7r8D6kIeLjjxJ8kwdJRy5nPrN9o18P7xHT95i0JPr5ivc9v\n"
           b"CB8vG2s97NB0re2MhqvdWgradJZ8Ow==\n"
           b"-----END EC PRIVATE KEY-----\n")
    key = serialization.load_pem_private_key(pem, password=None)
    assert str(Secp256k1Identity(key).principal) == "42gbo-uiwfn-oq452-ql6yp-4jsqn-a6bxk-n7l4z-ni7os-yptq6-3htob-vqe"


@pytest.mark.parametrize("der, error", [
    (DER_PREFIXES[KeyScheme.ED25519] + bytes(31), MalformedPublicKey),
    (DER_PREFIXES[KeyScheme.ECDSA_SECP256K1] + b"\x02" + bytes(64), MalformedPublicKey),   # not uncompressed
    (DER_PREFIXES[KeyScheme.BLS12_381_G2] + bytes(95), MalformedPublicKey),
    (bytes.fromhex("305e300c060a2b0601040183b8430101034e00") + bytes(78), UnsupportedKeyScheme),   # WebAuthn
    (bytes.fromhex("303c300c060a2b0601040183b8430102032c00") + bytes(44), UnsupportedKeyScheme),   # canister sig
    (b"", UnsupportedKeyScheme),
    (b"\x30\x00", UnsupportedKeyScheme),
    ("not bytes", MalformedPublicKey),
])
def test_der_refusals(der, error):
    with pytest.raises(error):
        parse_der_public_key(der)


@pytest.mark.parametrize("make", [Ed25519Identity.from_seed, Secp256k1Identity.from_seed], ids=["ed25519", "secp256k1"])
def test_signatures_verify_and_only_over_their_payload(make):
    identity = make(b"user")
    signature = identity.sign(PAYLOAD)
    assert verify_signature(identity.der_public_key, signature, PAYLOAD)
    assert not verify_signature(identity.der_public_key, signature, PAYLOAD[:-1] + b"\x00")
    assert not verify_signature(make(b"other").der_public_key, signature, PAYLOAD)
    assert identity.sign(PAYLOAD) == signature          # deterministic
    assert identity.principal.raw == hashlib.sha224(identity.der_public_key).digest() + b"\x02"


def test_secp256k1_signatures_are_low_s_and_high_s_is_refused():
    identity = Secp256k1Identity.from_seed(b"user")
    for i in range(20):
        payload = PAYLOAD + bytes([i])
        signature = identity.sign(payload)
        s = int.from_bytes(signature[32:], "big")
        assert s <= SECP256K1_ORDER // 2
        high = signature[:32] + (SECP256K1_ORDER - s).to_bytes(32, "big")
        with pytest.raises(MalformedSignature):
            verify_signature(identity.der_public_key, high, payload)


def test_p256_signatures_verify_with_either_s():
    key = ec.derive_private_key(777, ec.SECP256R1())
    r, s = decode_dss_signature(key.sign(PAYLOAD, ec.ECDSA(hashes.SHA256())))
    der = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    order = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
    for s_form in (s, order - s):
        assert verify_signature(der, r.to_bytes(32, "big") + s_form.to_bytes(32, "big"), PAYLOAD)


def test_signature_refusals():
    ed = Ed25519Identity.from_seed(b"a")
    k1 = Secp256k1Identity.from_seed(b"a")
    with pytest.raises(MalformedSignature):
        verify_signature(ed.der_public_key, bytes(63), PAYLOAD)
    with pytest.raises(MalformedSignature):
        verify_signature(k1.der_public_key, bytes(64), PAYLOAD)      # r = s = 0
    with pytest.raises(MalformedSignature):
        verify_signature(k1.der_public_key, "sig", PAYLOAD)  # type: ignore[arg-type]
    off_curve = der_encode(KeyScheme.ECDSA_SECP256K1, b"\x04" + bytes(63) + b"\x01")
    with pytest.raises(MalformedPublicKey):
        verify_signature(off_curve, k1.sign(PAYLOAD), PAYLOAD)
    bls_key = der_encode(KeyScheme.BLS12_381_G2, bytes(96))
    with pytest.raises(UnsupportedKeyScheme):
        verify_signature(bls_key, bytes(48), PAYLOAD)


@pytest.mark.parametrize("make", [Ed25519Identity.from_private_bytes, Secp256k1Identity.from_private_bytes])
@pytest.mark.parametrize("private", [bytes(31), "x" * 32, None])
def test_bad_private_keys_are_refused(make, private):
    with pytest.raises(SigningKeyError):
        make(private)


def test_secp256k1_scalars_out_of_range_are_refused():
    for scalar in (0, SECP256K1_ORDER):
        with pytest.raises(SigningKeyError):
            Secp256k1Identity.from_private_bytes(scalar.to_bytes(32, "big"))
    with pytest.raises(SigningKeyError):
        Secp256k1Identity.from_seed(b"")


@given(st.sampled_from(list(KeyScheme)), st.binary(max_size=100), st.binary(max_size=80))
@settings(max_examples=500, deadline=None)
def test_any_key_and_signature_bytes_verify_or_are_refused_with_a_type(scheme, raw, signature):
    der = DER_PREFIXES[scheme] + raw
    try:
        assert verify_signature(der, signature, PAYLOAD) in (True, False)
    except IcFormatError:
        pass


@given(st.binary(min_size=64, max_size=64))
@settings(max_examples=300, deadline=None)
def test_random_signatures_do_not_verify(signature):
    for identity in (Ed25519Identity.from_seed(b"a"), Secp256k1Identity.from_seed(b"a")):
        try:
            assert not verify_signature(identity.der_public_key, signature, PAYLOAD)
        except MalformedSignature:
            pass
