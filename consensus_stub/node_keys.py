"""A node's TLS identity: an ECDSA P-256 key and a self-signed X.509 certificate.

The registry lists every node's certificate (and its fingerprint); node-to-node channels use
mutual TLS that trusts exactly those certificates. Key generation draws from the operating
system's randomness, which is why this lives in the shell, not in ``state_manager``.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from .errors import ConsensusError

__all__ = [
    "CERTIFICATE_VALIDITY",
    "NodeKeyError",
    "NodeIdentity",
    "generate_node_identity",
    "load_node_identity",
    "certificate_fingerprint",
]

CERTIFICATE_VALIDITY = datetime.timedelta(days=365)


class NodeKeyError(ConsensusError):
    """Invalid node identity inputs: node id, time, or PEM data."""


@dataclass(frozen=True, slots=True)
class NodeIdentity:
    """A node id with its TLS private key and the self-signed certificate for it."""

    node_id: str
    private_key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    def certificate_pem(self) -> bytes:
        """The certificate as PEM."""
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def private_key_pem(self) -> bytes:
        """The private key as unencrypted PKCS#8 PEM (the caller protects the file)."""
        return self.private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def fingerprint(self) -> str:
        """Hex SHA-256 of the certificate's DER encoding."""
        return certificate_fingerprint(self.certificate_pem())


def generate_node_identity(node_id: str, not_before: datetime.datetime) -> NodeIdentity:
    """Fresh P-256 key and a certificate with CN = node id, SAN = DNS:localhost, IP:127.0.0.1,
    valid from ``not_before`` for one year."""
    if not isinstance(node_id, str) or not node_id:
        raise NodeKeyError("node id must be a non-empty string")
    if not isinstance(not_before, datetime.datetime) or not_before.utcoffset() is None:
        raise NodeKeyError("not_before must be a timezone-aware datetime")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, node_id)])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_before + CERTIFICATE_VALIDITY)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        # Not a CA: peers trust each listed certificate directly, so a node must not be able
        # to issue further certificates that would chain to its own.
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    return NodeIdentity(node_id=node_id, private_key=key, certificate=certificate)


def load_node_identity(certificate_pem: bytes, private_key_pem: bytes) -> NodeIdentity:
    """Rebuild an identity from its PEM files; the node id is the certificate's CN."""
    try:
        certificate = x509.load_pem_x509_certificate(certificate_pem)
        key = serialization.load_pem_private_key(private_key_pem, password=None)
    except (ValueError, TypeError) as exc:
        raise NodeKeyError(f"unreadable PEM: {exc}") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not isinstance(key.curve, ec.SECP256R1):
        raise NodeKeyError("node key must be an ECDSA P-256 key")
    if key.public_key() != certificate.public_key():
        raise NodeKeyError("private key does not match the certificate")
    common_names = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if len(common_names) != 1 or not isinstance(common_names[0].value, str):
        raise NodeKeyError("certificate must have exactly one common name")
    return NodeIdentity(node_id=common_names[0].value, private_key=key, certificate=certificate)


def certificate_fingerprint(pem: bytes) -> str:
    """``hex(SHA-256(DER(certificate)))`` of a PEM certificate."""
    try:
        certificate = x509.load_pem_x509_certificate(pem)
    except (ValueError, TypeError) as exc:
        raise NodeKeyError(f"unreadable certificate PEM: {exc}") from exc
    return hashlib.sha256(certificate.public_bytes(serialization.Encoding.DER)).hexdigest()
