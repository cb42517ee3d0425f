"""Certificates as the IC encodes, signs and verifies them.

The interface specification, *Certification* and *Encoding of certificates*::

    certificate = #6.55799({tree: hash-tree, signature: bytes, ? delegation: delegation})
    delegation  = {subnet_id: bytes, certificate: bytes}      the certificate is CBOR itself

    verify_cert(cert) = check_delegation(cert.delegation)
                        ∧ verify_bls(delegation_key(cert.delegation), cert.signature,
                                     "\\x0Dic-state-root" · reconstruct(cert.tree))

A certificate of the root subnet has no delegation and is signed by the root key. Another
subnet's certificate carries a delegation: a certificate of the root subnet that states
``/subnet/<subnet_id>/public_key`` (the DER key that signs the outer certificate) and the
subnet's canister ranges (``replica.ic.canister_ranges``, either layout). ``verify_certificate``
checks, in order, each refusal typed:

1. the bytes are a certificate (``CertificateMalformed``, or the CBOR refusal);
2. with a delegation: its certificate has none itself (``NestedDelegation``), is signed by the
   root key (``CertificateSignatureRefused``), states the subnet's key (``DelegationSubnetKeyMissing``),
   is for the subnet asked, if one is (``DelegationSubnetMismatch``), and — when a canister is
   asked — shows the canister in the subnet's ranges (``CanisterRangesMissing``, ``CanisterOutsideRanges``);
3. the signature over the tree's root verifies under the root or the subnet key (``CertificateSignatureRefused``);
4. the tree reveals ``/time`` (a LEB128 nat), returned for the caller's freshness policy.

Verification is one pairing check per certificate in the chain; a caller that passes the same
``delegation_cache`` dict again pays the delegation's once (it holds only verified results).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

from state_manager.hash_tree import Found, HashTree, Leaf, domain_sep, lookup_path, reconstruct, validate_well_formed
from state_manager.hash_tree import MalformedTreeError
from state_manager.bls import state_root_message   # what a certificate's signature signs: the one formula
from state_manager.certification import SignatureMemo

from . import bls, cbor
from .canister_ranges import check_canister_in_ranges
from .errors import (
    BlsError, CertificateMalformed, CertificateSignatureRefused, DelegationSubnetKeyMissing, DelegationSubnetMismatch,
    HashTreeRefused, NestedDelegation, UnhashableValue,
)
from .hash_tree_cbor import tree_from_value, tree_to_value
from .principal import MAX_PRINCIPAL_BYTES, Principal
from .request_id import decode_uleb128

__all__ = [
    "STATE_ROOT_DOMAIN", "DEFAULT_MAX_CERTIFICATE_BYTES", "CertificateDelegation", "Certificate",
    "VerifiedCertificate", "state_root_message", "certificate_from_value", "decode_certificate",
    "encode_certificate", "sign_certificate", "make_delegation", "verify_certificate",
]

STATE_ROOT_DOMAIN = domain_sep("ic-state-root")
DEFAULT_MAX_CERTIFICATE_BYTES = 1 << 22


@dataclass(frozen=True, slots=True)
class CertificateDelegation:
    """The root subnet's word that ``subnet_id`` may certify: ``certificate`` is CBOR bytes."""

    subnet_id: bytes
    certificate: bytes


@dataclass(frozen=True, slots=True)
class Certificate:
    tree: HashTree
    signature: bytes
    delegation: CertificateDelegation | None = None

    def to_value(self) -> dict[str, Any]:
        value: dict[str, Any] = {"tree": tree_to_value(self.tree), "signature": self.signature}
        if self.delegation is not None:
            value["delegation"] = {"subnet_id": self.delegation.subnet_id, "certificate": self.delegation.certificate}
        return value


@dataclass(frozen=True, slots=True)
class VerifiedCertificate:
    """A certificate that passed every check: its tree, its ``/time`` and the subnet that
    signed it (``None``: the root subnet, through the root key)."""

    tree: HashTree
    time_ns: int
    subnet_id: bytes | None


def certificate_from_value(value: object) -> Certificate:
    """A certificate from its decoded CBOR value, its shape checked (``CertificateMalformed``)."""
    if type(value) is not dict or not {"tree", "signature"} <= value.keys() <= {"tree", "signature", "delegation"}:
        raise CertificateMalformed("a certificate is {tree, signature, delegation?}")
    if type(value["signature"]) is not bytes:
        raise CertificateMalformed("a certificate's signature is a blob")
    try:
        tree = tree_from_value(value["tree"])
    except HashTreeRefused as exc:
        raise CertificateMalformed(f"a certificate's tree: {exc}") from exc
    delegation = None
    if "delegation" in value:
        d = value["delegation"]
        if (type(d) is not dict or d.keys() != {"subnet_id", "certificate"} or type(d["subnet_id"]) is not bytes
                or len(d["subnet_id"]) > MAX_PRINCIPAL_BYTES or type(d["certificate"]) is not bytes):
            raise CertificateMalformed("a delegation is {subnet_id: principal, certificate: blob}")
        delegation = CertificateDelegation(d["subnet_id"], d["certificate"])
    return Certificate(tree, value["signature"], delegation)


def decode_certificate(data: bytes, *, max_bytes: int = DEFAULT_MAX_CERTIFICATE_BYTES,
                       max_depth: int = cbor.DEFAULT_MAX_DEPTH) -> Certificate:
    """A certificate from CBOR bytes: strict CBOR (``CborRefused``), then its shape."""
    return certificate_from_value(cbor.decode(data, max_bytes=max_bytes, max_depth=max_depth))


def encode_certificate(certificate: Certificate) -> bytes:
    return cbor.encode(certificate.to_value())


def sign_certificate(tree: HashTree, secret_key: bytes, delegation: CertificateDelegation | None = None) -> Certificate:
    """``tree`` certified with one key (the root key of a test network, or a combined key's
    secret in tests); nodes combine shares with ``bls.combine_shares`` and build ``Certificate``."""
    return Certificate(tree, bls.sign(secret_key, state_root_message(reconstruct(tree))), delegation)


def make_delegation(subnet_id: Principal, root_certificate: Certificate) -> CertificateDelegation:
    """The delegation to ``subnet_id`` made of a root-subnet certificate (which must state the
    subnet's public key and canister ranges for agents to accept it)."""
    return CertificateDelegation(subnet_id.raw, encode_certificate(root_certificate))


def _verify_signature(certificate: Certificate, public_key: bytes, signer: str, memo: SignatureMemo | None) -> None:
    """One pairing check, skipped when ``memo`` (pairings this process passed: a node's, in one
    process with it) holds exactly this key, root and signature."""
    root = reconstruct(certificate.tree)
    known = (public_key, root, certificate.signature)
    if memo is not None and known in memo:
        return
    try:
        valid = bls.verify(public_key, state_root_message(root), certificate.signature)
    except BlsError as exc:
        raise CertificateSignatureRefused(f"the signature of {signer}: {exc}") from exc
    if not valid:
        raise CertificateSignatureRefused(f"the signature does not verify under the key of {signer}")
    if memo is not None:
        memo.add(known)


def _leaf(tree: HashTree, path: list[bytes]) -> bytes | None:
    result = lookup_path(tree, path)
    return result.tree.value if isinstance(result, Found) and isinstance(result.tree, Leaf) else None


def _delegation_key(delegation: CertificateDelegation, root_key: bytes, max_bytes: int,
                    memo: SignatureMemo | None) -> tuple[bytes, HashTree]:
    """The subnet's key and the delegation's tree, after check 2 of the module docstring."""
    inner = decode_certificate(delegation.certificate, max_bytes=max_bytes)
    if inner.delegation is not None:
        raise NestedDelegation("a delegation's certificate carries a delegation itself")
    _verify_signature(inner, root_key, "the root subnet", memo)
    der_key = _leaf(inner.tree, [b"subnet", delegation.subnet_id, b"public_key"])
    if der_key is None:
        raise DelegationSubnetKeyMissing(f"the delegation does not state the key of subnet {Principal(delegation.subnet_id)}")
    try:
        return bls.public_key_from_der(der_key), inner.tree
    except BlsError as exc:
        raise CertificateMalformed(f"the delegated subnet's key: {exc}") from exc


def verify_certificate(data: bytes | Certificate, *, root_key: bytes, canister_id: Principal | None = None,
                       subnet_id: bytes | None = None, max_bytes: int = DEFAULT_MAX_CERTIFICATE_BYTES,
                       delegation_cache: MutableMapping[tuple[bytes, bytes], tuple[bytes, HashTree]] | None = None,
                       memo: SignatureMemo | None = None) -> VerifiedCertificate:
    """The checks of the module docstring; ``root_key`` is the raw 96-byte root key,
    ``canister_id`` the canister the answer is about (its ranges are checked), ``subnet_id`` the
    subnet asked (a subnet read_state); ``memo``: pairings already passed in this process."""
    certificate = data if isinstance(data, Certificate) else decode_certificate(data, max_bytes=max_bytes)
    try:
        validate_well_formed(certificate.tree)
    except MalformedTreeError as exc:
        raise CertificateMalformed(f"the tree is not well formed: {exc}") from exc
    key, signer = root_key, None
    delegation = certificate.delegation
    if delegation is not None:
        if subnet_id is not None and delegation.subnet_id != subnet_id:
            raise DelegationSubnetMismatch(f"a delegation to {Principal(delegation.subnet_id)}, not the subnet asked")
        cache_key = (delegation.subnet_id, delegation.certificate)
        known = None if delegation_cache is None else delegation_cache.get(cache_key)
        if known is None:
            known = _delegation_key(delegation, root_key, max_bytes, memo)
            if delegation_cache is not None:
                delegation_cache[cache_key] = known
        key, delegation_tree = known
        if canister_id is not None:
            check_canister_in_ranges(delegation_tree, delegation.subnet_id, canister_id)
        signer = delegation.subnet_id
    _verify_signature(certificate, key, "the root subnet" if signer is None else f"subnet {Principal(signer)}", memo)
    time = _leaf(certificate.tree, [b"time"])
    if time is None:
        raise CertificateMalformed("the certificate does not reveal /time")
    try:
        time_ns = decode_uleb128(time)
    except UnhashableValue as exc:
        raise CertificateMalformed(f"/time is not a LEB128 nat: {exc}") from exc
    return VerifiedCertificate(certificate.tree, time_ns, signer)
