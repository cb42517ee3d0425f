"""TLS material for node-to-node channels: identities, fingerprints, target names.

``xnet`` sits below ``consensus_stub`` (which makes node identities), so it names what it
needs from an identity as a Protocol instead of importing the class.
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Protocol

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID

from xnet.errors import TlsConfigError

__all__ = ["TlsIdentity", "pem_fingerprint", "pem_fingerprints", "tls_target_name"]


class TlsIdentity(Protocol):
    """A node's TLS identity (``consensus_stub.node_keys.NodeIdentity`` fits)."""

    node_id: str

    def certificate_pem(self) -> bytes: ...

    def private_key_pem(self) -> bytes: ...


def _load(pem: bytes | str) -> x509.Certificate:
    data = pem.encode("ascii") if isinstance(pem, str) else pem
    try:
        return x509.load_pem_x509_certificate(data)
    except (ValueError, TypeError, UnicodeEncodeError) as exc:
        raise TlsConfigError(f"unreadable certificate PEM: {exc}") from exc


def pem_fingerprint(pem: bytes | str) -> str:
    """``hex(SHA-256(DER(certificate)))`` — the same fingerprint the registry lists."""
    return hashlib.sha256(_load(pem).public_bytes(serialization.Encoding.DER)).hexdigest()


def pem_fingerprints(pems: Iterable[bytes]) -> frozenset[str]:
    """Fingerprints of several PEM certificates."""
    return frozenset(pem_fingerprint(pem) for pem in pems)


def tls_target_name(pem: bytes) -> str:
    """The name to check the peer's certificate against: its first DNS SAN, else its CN.

    Peers are dialled by address, and the address need not appear in the certificate; what
    makes the channel safe is that it trusts exactly this one certificate.
    """
    certificate = _load(pem)
    try:
        san = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = san.get_values_for_type(x509.DNSName)
    except x509.ExtensionNotFound:
        names = []
    if names:
        return names[0]
    common_names = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not common_names or not isinstance(common_names[0].value, str):
        raise TlsConfigError("certificate has neither a DNS name nor a common name")
    return common_names[0].value
