"""A node process loads its Ed25519 signing key from its secrets, hands it to the ingress API's
backend, and signs query answers that verify under the key the registry lists for it."""

from __future__ import annotations

import dataclasses
import stat

import pytest

from consensus_stub.genesis import decode_node_secrets, encode_node_secrets
from consensus_stub.node_signing_key import derive_signing_key
from consensus_stub.registry import decode_registry
from replica.ic.principal import Principal
from replica.ic.query_response import (
    QueryReplied, QueryResponse, decode_query_response, encode_query_response, sign_query_response,
    verify_query_response,
)
from replica.node.process import NodeProcess
from replica.node.process_config import NodeConfigError, NodeProcessConfig
from replica.testnet import launcher as tn

NODE = "subnet-0-node-2"
REQUEST_ID = bytes(range(32))


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    return tn.create_testnet(tmp_path_factory.mktemp("signing") / "net", 1, 2, seed=b"\x05" * 32,
                             genesis_apps=False, process_model="node")


def test_the_secrets_file_holding_the_key_is_the_nodes_alone(layout):
    assert stat.S_IMODE(layout.secrets(NODE).stat().st_mode) == 0o600
    secrets = decode_node_secrets(layout.secrets(NODE).read_bytes())
    assert secrets.signing_key == derive_signing_key(b"\x05" * 32, NODE)


def test_a_node_process_signs_query_answers_with_the_key_the_registry_lists(layout):
    process = NodeProcess(NodeProcessConfig(str(layout.root), NODE, "subnet-0", tick_s=0.1))   # not started
    try:
        backend = process.node.backend(lambda ingress: None, lambda action: action())
        registry = decode_registry(layout.registry.read_bytes())
        listed = registry.latest().node(NODE)
        assert backend.node_signer is process.node.signing_identity
        assert backend.node_signer.der_public_key == listed.signing_key
        assert backend.node_signer.principal.raw == listed.node_principal

        outcome = QueryReplied(b"DIDL\x00\x00")
        signature = sign_query_response(outcome, REQUEST_ID, backend.clock(), backend.node_signer)
        answer = decode_query_response(encode_query_response(QueryResponse(outcome, (signature,))), max_bytes=1 << 16)
        node_keys = {Principal(n.node_principal): n.signing_key for n in registry.latest().nodes_of("subnet-0")}
        verify_query_response(answer, REQUEST_ID, node_keys)
    finally:
        process.stop()


def test_a_node_process_refuses_secrets_whose_key_the_registry_does_not_list(tmp_path):
    layout = tn.create_testnet(tmp_path / "net", 1, 1, seed=b"\x06" * 32, genesis_apps=False, process_model="node")
    node = "subnet-0-node-1"
    secrets = decode_node_secrets(layout.secrets(node).read_bytes())
    tn.write_atomically(layout.secrets(node),
                        encode_node_secrets(dataclasses.replace(secrets, signing_key=b"\x01" * 32)), mode=0o600)
    with pytest.raises(NodeConfigError, match="another signing key than the registry lists"):
        NodeProcess(NodeProcessConfig(str(layout.root), node, "subnet-0", tick_s=0.1))
