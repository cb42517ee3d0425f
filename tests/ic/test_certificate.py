"""Certificates: a real mainnet certificate with its NNS delegation, ours signed by threshold
shares, every refusal typed, one changed byte refused, fuzzing."""

from __future__ import annotations

import json
import pathlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replica.ic import bls, cbor
from replica.ic.canister_ranges import encode_canister_ranges, shard_canister_ranges
from replica.ic.certificate import (
    Certificate, CertificateDelegation, decode_certificate, encode_certificate, make_delegation, sign_certificate,
    state_root_message, verify_certificate,
)
from replica.ic.errors import (
    CanisterOutsideRanges, CanisterRangesMissing, CertificateMalformed, CertificateSignatureRefused,
    DelegationSubnetKeyMissing, DelegationSubnetMismatch, IcFormatError, NestedDelegation,
)
from replica.ic.principal import Principal, canister_principal, subnet_principal
from replica.ic.request_id import uleb128
from state_manager.hash_tree import reconstruct

from .trees import tree_of

FIXTURE = json.loads((pathlib.Path(__file__).parent / "data" / "mainnet_certificate.json").read_text())
MAINNET_CERT = bytes.fromhex(FIXTURE["certificate"])
MAINNET_ROOT = bls.public_key_from_der(bytes.fromhex(FIXTURE["root_key_der"]))
IN_RANGE = Principal.from_text(FIXTURE["canister_in_range"])


def test_a_real_mainnet_certificate_verifies_through_its_nns_delegation():
    verified = verify_certificate(MAINNET_CERT, root_key=MAINNET_ROOT, canister_id=IN_RANGE)
    assert verified.time_ns == FIXTURE["time_ns"]
    assert verified.subnet_id.hex() == "d77b2a2f7199b9a8aec93fe6fb588661358cf12223e9a3af7b4ebac402"
    for edge in ("00000000002000000101", "00000000002fffff0101"):
        verify_certificate(MAINNET_CERT, root_key=MAINNET_ROOT, canister_id=Principal(bytes.fromhex(edge)))


@pytest.mark.parametrize("outside", ["00000000000000020101", "00000000003000020101"])
def test_the_mainnet_delegation_does_not_cover_other_canisters(outside):
    with pytest.raises(CanisterOutsideRanges):
        verify_certificate(MAINNET_CERT, root_key=MAINNET_ROOT, canister_id=Principal(bytes.fromhex(outside)))


def test_the_mainnet_certificate_with_any_one_byte_changed_is_refused():
    for position in range(len(MAINNET_CERT)):
        changed = bytearray(MAINNET_CERT)
        changed[position] ^= 0x01
        with pytest.raises(IcFormatError):
            verify_certificate(bytes(changed), root_key=MAINNET_ROOT, canister_id=IN_RANGE)


def test_the_mainnet_certificate_under_another_root_key_is_refused():
    with pytest.raises(CertificateSignatureRefused):
        verify_certificate(MAINNET_CERT, root_key=bls.public_key_of((3).to_bytes(32, "big")), canister_id=IN_RANGE)


def test_encoding_round_trips_the_mainnet_certificate():
    certificate = decode_certificate(MAINNET_CERT)
    assert decode_certificate(encode_certificate(certificate)) == certificate


# -- a network of our own: a root subnet and a subnet, each with threshold keys ---------------

ROOT_KEYS = bls.deal_threshold_keys(4, 3, b"\x01" * 32)
SUBNET_KEYS = bls.deal_threshold_keys(4, 3, b"\x02" * 32)
ROOT_SUBNET = subnet_principal(bls.public_key_to_der(ROOT_KEYS.public_key))
SUBNET = subnet_principal(bls.public_key_to_der(SUBNET_KEYS.public_key))
RANGES = ((canister_principal(100), canister_principal(199)),)
NOW = 1_700_000_000_000_000_000


def threshold_certify(tree, keys, delegation=None) -> Certificate:
    """As nodes do: t shares of the root's message, combined."""
    message = state_root_message(reconstruct(tree))
    shares = {i: bls.sign_share(keys.secret_shares[i - 1], message) for i in (2, 3, 4)}
    return Certificate(tree, bls.combine_shares(shares, keys.t), delegation)


def delegation_tree(*, flat=True, sharded=False, key=None, subnet=SUBNET, extra=None):
    subnet_info = {b"public_key": bls.public_key_to_der(key or SUBNET_KEYS.public_key)}
    if flat:
        subnet_info[b"canister_ranges"] = encode_canister_ranges(RANGES)
    children = {b"subnet": {subnet.raw: subnet_info}, b"time": uleb128(NOW - 10**12)}
    if sharded:
        children[b"canister_ranges"] = {subnet.raw: shard_canister_ranges(RANGES)}
    children.update(extra or {})
    return tree_of(children)


def subnet_certificate(delegation, time=NOW) -> Certificate:
    tree = tree_of({b"request_status": {b"\x07" * 32: {b"status": b"replied", b"reply": b"DIDL\x00\x00"}},
                    b"time": uleb128(time)})
    return threshold_certify(tree, SUBNET_KEYS, delegation)


def delegation_of(tree, keys=ROOT_KEYS, subnet=SUBNET) -> CertificateDelegation:
    return make_delegation(subnet, threshold_certify(tree, keys))


@pytest.mark.parametrize("layout", [{"flat": True}, {"flat": False, "sharded": True}, {"sharded": True}])
def test_a_delegated_certificate_verifies_with_either_ranges_layout(layout):
    certificate = subnet_certificate(delegation_of(delegation_tree(**layout)))
    verified = verify_certificate(encode_certificate(certificate), root_key=ROOT_KEYS.public_key,
                                  canister_id=canister_principal(150), subnet_id=SUBNET.raw)
    assert verified.time_ns == NOW and verified.subnet_id == SUBNET.raw
    with pytest.raises(CanisterOutsideRanges):
        verify_certificate(certificate, root_key=ROOT_KEYS.public_key, canister_id=canister_principal(200))


def test_a_root_subnet_certificate_needs_no_delegation():
    tree = tree_of({b"time": uleb128(NOW)})
    verified = verify_certificate(threshold_certify(tree, ROOT_KEYS), root_key=ROOT_KEYS.public_key)
    assert verified.subnet_id is None and verified.time_ns == NOW
    assert verify_certificate(sign_certificate(tree, (9).to_bytes(32, "big")),
                              root_key=bls.public_key_of((9).to_bytes(32, "big"))).time_ns == NOW


def test_delegation_refusals():
    with pytest.raises(CanisterRangesMissing):
        verify_certificate(subnet_certificate(delegation_of(delegation_tree(flat=False))),
                           root_key=ROOT_KEYS.public_key, canister_id=canister_principal(150))
    # Without a canister asked (a subnet read_state), the ranges are not needed.
    verify_certificate(subnet_certificate(delegation_of(delegation_tree(flat=False))), root_key=ROOT_KEYS.public_key)
    with pytest.raises(DelegationSubnetKeyMissing):
        other = subnet_principal(b"another subnet")
        verify_certificate(subnet_certificate(delegation_of(delegation_tree(subnet=other), subnet=SUBNET)),
                           root_key=ROOT_KEYS.public_key)
    with pytest.raises(CertificateSignatureRefused):   # the delegation not signed by the root
        verify_certificate(subnet_certificate(delegation_of(delegation_tree(), keys=SUBNET_KEYS)),
                           root_key=ROOT_KEYS.public_key)
    with pytest.raises(CertificateSignatureRefused):   # a delegation to another key than the signer's
        verify_certificate(subnet_certificate(delegation_of(delegation_tree(key=ROOT_KEYS.public_key))),
                           root_key=ROOT_KEYS.public_key)
    with pytest.raises(DelegationSubnetMismatch):
        verify_certificate(subnet_certificate(delegation_of(delegation_tree())), root_key=ROOT_KEYS.public_key,
                           subnet_id=ROOT_SUBNET.raw)
    with pytest.raises(CertificateMalformed):          # the stated key is not a BLS key
        verify_certificate(subnet_certificate(delegation_of(delegation_tree(
            extra={b"subnet": {SUBNET.raw: {b"public_key": b"\x30\x00"}}}))), root_key=ROOT_KEYS.public_key)


def test_a_nested_delegation_is_refused():
    inner = threshold_certify(delegation_tree(), ROOT_KEYS, delegation_of(delegation_tree()))
    with pytest.raises(NestedDelegation):
        verify_certificate(subnet_certificate(make_delegation(SUBNET, inner)), root_key=ROOT_KEYS.public_key)


def test_a_certificate_without_time_is_refused():
    tree = tree_of({b"status": b"x"})
    with pytest.raises(CertificateMalformed):
        verify_certificate(threshold_certify(tree, ROOT_KEYS), root_key=ROOT_KEYS.public_key)
    bad_time = tree_of({b"time": b"\x80"})
    with pytest.raises(CertificateMalformed):
        verify_certificate(threshold_certify(bad_time, ROOT_KEYS), root_key=ROOT_KEYS.public_key)


def test_the_delegation_cache_remembers_only_verified_delegations():
    cache: dict = {}
    certificate = subnet_certificate(delegation_of(delegation_tree()))
    verify_certificate(certificate, root_key=ROOT_KEYS.public_key, canister_id=canister_principal(150),
                       delegation_cache=cache)
    assert list(cache) == [(certificate.delegation.subnet_id, certificate.delegation.certificate)]
    # A later certificate with the same delegation: the ranges are still checked per canister.
    later = subnet_certificate(certificate.delegation, time=NOW + 1)
    assert verify_certificate(later, root_key=ROOT_KEYS.public_key, canister_id=canister_principal(101),
                              delegation_cache=cache).time_ns == NOW + 1
    with pytest.raises(CanisterOutsideRanges):
        verify_certificate(later, root_key=ROOT_KEYS.public_key, canister_id=canister_principal(5),
                           delegation_cache=cache)
    bad = subnet_certificate(delegation_of(delegation_tree(), keys=SUBNET_KEYS))
    with pytest.raises(CertificateSignatureRefused):
        verify_certificate(bad, root_key=ROOT_KEYS.public_key, delegation_cache=cache)
    assert len(cache) == 1


@pytest.mark.parametrize("value", [
    [], {}, {"tree": [0]}, {"tree": [0], "signature": "s"}, {"tree": [9], "signature": b""},
    {"tree": [0], "signature": b"", "delegation": {}}, {"tree": [0], "signature": b"", "other": 1},
    {"tree": [0], "signature": b"", "delegation": {"subnet_id": bytes(30), "certificate": b""}},
    {"tree": [0], "signature": b"", "delegation": {"subnet_id": b"", "certificate": "c"}},
])
def test_malformed_certificates_are_refused(value):
    with pytest.raises(CertificateMalformed):
        decode_certificate(cbor.encode(value))


def test_an_ill_formed_tree_is_refused():
    from state_manager.hash_tree import fork, labeled, leaf
    unsorted = fork(labeled(b"time", leaf(uleb128(NOW))), labeled(b"a", leaf(b"")))
    with pytest.raises(CertificateMalformed):
        verify_certificate(threshold_certify(unsorted, ROOT_KEYS), root_key=ROOT_KEYS.public_key)


@given(st.binary(max_size=400))
@settings(max_examples=1000, deadline=None)
def test_garbage_raises_only_typed_refusals(data):
    try:
        verify_certificate(data, root_key=MAINNET_ROOT, canister_id=IN_RANGE)
    except IcFormatError:
        pass


@given(st.data())
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
def test_mutated_mainnet_certificates_are_refused_with_a_type(data):
    changed = bytearray(MAINNET_CERT)
    for _ in range(data.draw(st.integers(1, 4))):
        changed[data.draw(st.integers(0, len(changed) - 1))] = data.draw(st.integers(0, 255))
    if bytes(changed) == MAINNET_CERT:
        return
    with pytest.raises(IcFormatError):
        verify_certificate(bytes(changed), root_key=MAINNET_ROOT, canister_id=IN_RANGE)


def test_a_memo_of_passed_pairings_skips_only_those_exact_checks():
    """A client in one process with the nodes (``replica.testing``) shares their memo of
    pairing checks passed: an honest certificate is then verified without a pairing, and a
    changed one is still refused (the memo is keyed by key, root and signature)."""
    from dataclasses import replace

    from state_manager.certification import SignatureMemo
    memo = SignatureMemo()
    honest = subnet_certificate(delegation_of(delegation_tree()))
    verify_certificate(honest, root_key=ROOT_KEYS.public_key, memo=memo)
    assert len(memo._verified) == 2   # the delegation's and the certificate's own
    flipped = honest.signature[:-1] + bytes([honest.signature[-1] ^ 1])
    with pytest.raises(CertificateSignatureRefused):
        verify_certificate(replace(honest, signature=flipped), root_key=ROOT_KEYS.public_key, memo=memo)
    other_tree = subnet_certificate(delegation_of(delegation_tree()), time=NOW - 1)
    with pytest.raises(CertificateSignatureRefused):
        verify_certificate(replace(other_tree, signature=honest.signature), root_key=ROOT_KEYS.public_key, memo=memo)
    verify_certificate(honest, root_key=ROOT_KEYS.public_key, memo=memo)
