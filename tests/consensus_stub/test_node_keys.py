"""Node TLS identities: certificate contents, PEM round trip, fingerprints, mutual TLS."""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
from concurrent import futures

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from consensus_stub import node_keys as nk

NOT_BEFORE = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)


@pytest.fixture(scope="module")
def identity():
    return nk.generate_node_identity("node-7", NOT_BEFORE)


def test_certificate_names_and_validity(identity):
    cert = identity.certificate
    cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    assert [a.value for a in cn] == ["node-7"]
    assert cert.issuer == cert.subject
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["localhost"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert cert.not_valid_before_utc == NOT_BEFORE
    assert cert.not_valid_after_utc == NOT_BEFORE + datetime.timedelta(days=365)
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    cert.verify_directly_issued_by(cert)  # self-signed with the node key


def test_key_is_p256(identity):
    assert isinstance(identity.private_key.curve, ec.SECP256R1)
    assert identity.certificate.public_key() == identity.private_key.public_key()


def test_pem_round_trip(identity):
    loaded = nk.load_node_identity(identity.certificate_pem(), identity.private_key_pem())
    assert loaded.node_id == "node-7"
    assert loaded.certificate == identity.certificate
    assert loaded.private_key_pem() == identity.private_key_pem()
    assert identity.private_key_pem().startswith(b"-----BEGIN PRIVATE KEY-----")


def test_fingerprint_is_sha256_of_der_and_stable(identity):
    pem = identity.certificate_pem()
    der = identity.certificate.public_bytes(serialization.Encoding.DER)
    fingerprint = nk.certificate_fingerprint(pem)
    assert fingerprint == hashlib.sha256(der).hexdigest()
    assert nk.certificate_fingerprint(pem) == fingerprint == identity.fingerprint()
    reloaded = nk.load_node_identity(pem, identity.private_key_pem())
    assert reloaded.fingerprint() == fingerprint
    assert nk.generate_node_identity("node-7", NOT_BEFORE).fingerprint() != fingerprint


def test_bad_inputs_are_rejected(identity):
    with pytest.raises(nk.NodeKeyError):
        nk.generate_node_identity("", NOT_BEFORE)
    with pytest.raises(nk.NodeKeyError):
        nk.generate_node_identity("node-1", datetime.datetime(2024, 1, 1))  # naive
    with pytest.raises(nk.NodeKeyError):
        nk.certificate_fingerprint(b"not a certificate")
    with pytest.raises(nk.NodeKeyError):
        nk.load_node_identity(identity.certificate_pem(), b"garbage")
    other = nk.generate_node_identity("node-8", NOT_BEFORE)
    with pytest.raises(nk.NodeKeyError):
        nk.load_node_identity(identity.certificate_pem(), other.private_key_pem())


def test_mutual_tls_trusts_exactly_the_listed_certificates():
    now = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    server_id, client_id, stranger = (nk.generate_node_identity(n, now) for n in ("srv", "cli", "who"))
    trusted = server_id.certificate_pem() + client_id.certificate_pem()

    def peer_name(request, context):
        return context.auth_context()["x509_common_name"][0]

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("t", {"Who": grpc.unary_unary_rpc_method_handler(peer_name)}),)
    )
    credentials = grpc.ssl_server_credentials(
        [(server_id.private_key_pem(), server_id.certificate_pem())],
        root_certificates=trusted,
        require_client_auth=True,
    )
    port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    try:
        results = {}
        for who in (client_id, stranger):
            channel_credentials = grpc.ssl_channel_credentials(
                root_certificates=trusted,
                private_key=who.private_key_pem(),
                certificate_chain=who.certificate_pem(),
            )
            with grpc.secure_channel(f"localhost:{port}", channel_credentials) as channel:
                try:
                    results[who.node_id] = channel.unary_unary("/t/Who")(b"", timeout=10)
                except grpc.RpcError as exc:
                    results[who.node_id] = exc.code()
    finally:
        server.stop(None)
    assert results == {"cli": b"cli", "who": grpc.StatusCode.UNAVAILABLE}
