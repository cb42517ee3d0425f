"""What a node signs with its node key, and checking other nodes' signatures.

The signed bytes, one formula each (``domain_sep`` as the state manager's)::

    compute_proposal_message(h)          = domain_sep("ic-block-proposal")     ‖ h
    compute_notarization_message(n, h)   = domain_sep("ic-notarization-share") ‖ u64be(n) ‖ h
    compute_finalization_message(n, h)   = domain_sep("ic-finalization-share") ‖ u64be(n) ‖ h

(``h`` a block hash, ``n`` its height.) Separate domains keep a notarization share from ever
counting as a finalization share. Node keys are the ECDSA P-256 keys of the nodes' TLS
identities (``node_keys``); the registry lists their certificates, so a verifier is built
from the registry alone. ECDSA signing draws fresh randomness, which is why the protocol
core gets signing and checking as injected callables and never imports this module.
"""

from __future__ import annotations

from typing import Callable, Mapping

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from state_manager.hash_tree import domain_sep

from ..node_keys import NodeIdentity, NodeKeyError
from ..registry import RegistryRecord

__all__ = [
    "compute_proposal_message", "compute_notarization_message", "compute_finalization_message",
    "node_key_signer", "NodeKeyVerifier", "MemoVerifier",
]

_PROPOSAL = domain_sep("ic-block-proposal")
_NOTARIZATION = domain_sep("ic-notarization-share")
_FINALIZATION = domain_sep("ic-finalization-share")
_ECDSA = ec.ECDSA(hashes.SHA256())


def compute_proposal_message(block_hash: bytes) -> bytes:
    """``domain_sep("ic-block-proposal") ‖ block_hash``."""
    return _PROPOSAL + block_hash


def compute_notarization_message(height: int, block_hash: bytes) -> bytes:
    """``domain_sep("ic-notarization-share") ‖ u64be(height) ‖ block_hash``."""
    return _NOTARIZATION + height.to_bytes(8, "big") + block_hash


def compute_finalization_message(height: int, block_hash: bytes) -> bytes:
    """``domain_sep("ic-finalization-share") ‖ u64be(height) ‖ block_hash``."""
    return _FINALIZATION + height.to_bytes(8, "big") + block_hash


def node_key_signer(identity: NodeIdentity) -> Callable[[bytes], bytes]:
    """``sign(message) -> DER ECDSA signature`` with the node's TLS private key."""
    key = identity.private_key

    def sign(message: bytes) -> bytes:
        return key.sign(message, _ECDSA)

    return sign


class NodeKeyVerifier:
    """Checks node signatures against the certificates a registry record lists."""

    def __init__(self, certificates: Mapping[str, bytes]) -> None:
        self._keys: dict[str, ec.EllipticCurvePublicKey] = {}
        for node_id, pem in certificates.items():
            try:
                key = x509.load_pem_x509_certificate(pem).public_key()
            except (ValueError, TypeError) as exc:
                raise NodeKeyError(f"node {node_id!r}: unreadable certificate: {exc}") from exc
            if not isinstance(key, ec.EllipticCurvePublicKey):
                raise NodeKeyError(f"node {node_id!r}: not an ECDSA certificate")
            self._keys[node_id] = key

    @classmethod
    def for_subnet(cls, record: RegistryRecord, subnet_id: str) -> "NodeKeyVerifier":
        """The verifier of ``subnet_id``'s nodes at this registry version."""
        return cls({n.node_id: n.certificate_pem for n in record.nodes_of(subnet_id)})

    def is_valid_signature(self, node_id: str, message: bytes, signature: bytes) -> bool:
        """``signature`` is ``node_id``'s ECDSA signature over ``message`` (False for unknown nodes)."""
        key = self._keys.get(node_id)
        if key is None:
            return False
        try:
            key.verify(signature, message, _ECDSA)
        except (InvalidSignature, ValueError):
            return False
        return True


class MemoVerifier:
    """A ``Verifier`` that checks each ``(node, message, signature)`` once: the nodes of one
    process receive the same artifacts, and a signature check is a pure function of them.
    Bounded: the memo is emptied when it holds ``limit`` entries."""

    def __init__(self, inner, limit: int = 8192) -> None:
        self._inner = inner
        self._memo: dict[tuple[str, bytes, bytes], bool] = {}
        self._limit = limit
        self.checks = 0

    def is_valid_signature(self, node_id: str, message: bytes, signature: bytes) -> bool:
        key = (node_id, message, signature)
        verdict = self._memo.get(key)
        if verdict is None:
            self.checks += 1
            verdict = self._inner.is_valid_signature(node_id, message, signature)
            if len(self._memo) >= self._limit:
                self._memo.clear()
            self._memo[key] = verdict
        return verdict
