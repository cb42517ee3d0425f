"""Envelopes: call, query and read_state requests built and signed by each client library with
its own identities (Ed25519, secp256k1, delegation chains) authenticate with
``replica.ic.envelope``; each library derives the principal we derive from the same key; and
the endpoints each library posts to are the ones named here (the server must serve them)."""

from __future__ import annotations

import hashlib
import time

import cbor2
import pytest
from icp_agent.agent import Agent, to_request_id
from icp_identity import DelegateIdentity, Identity

from replica.ic.delegations import Delegation
from replica.ic.envelope import authenticate, decode_envelope
from replica.ic.errors import DelegationTargetRefused, SenderSignatureInvalid
from replica.ic.identities import Ed25519Identity, Secp256k1Identity
from replica.ic.principal import canister_principal
from replica.ic.signatures import DELEGATION_DOMAIN

CANISTER = canister_principal(150)
OTHER_CANISTER = canister_principal(151)
PATHS = [[b"time"], [b"request_status", bytes(range(32))]]
MAX_BODY = 1 << 20


def secret(label: str) -> bytes:
    return hashlib.sha256(label.encode()).digest()


def ours(kind: str, key: bytes):
    return (Ed25519Identity if kind == "ed25519" else Secp256k1Identity).from_private_bytes(key)


def authenticated(body: bytes, **kwargs):
    return authenticate(decode_envelope(body, max_bytes=MAX_BODY), now_ns=time.time_ns(), **kwargs)


# -- @dfinity/agent ---------------------------------------------------------------------------

def js_identity(kind: str, key: bytes) -> dict:
    return {"kind": kind, "secret": key.hex()}


def js_envelopes(js, identities):
    return js("envelopes.mjs", {
        "identities": identities, "canister_id": str(CANISTER), "method": "echo", "arg": b"hello".hex(),
        "paths": [[label.hex() for label in path] for path in PATHS],
    })["results"]


@pytest.mark.parametrize("kind", ["ed25519", "secp256k1"])
def test_agent_js_envelopes_authenticate_and_principals_agree(js, kind):
    key = secret(f"agent-js {kind}")
    [sent] = js_envelopes(js, [js_identity(kind, key)])
    mine = ours(kind, key)
    assert sent["principal"] == str(mine.principal)
    assert bytes.fromhex(sent["der_public_key"]) == mine.der_public_key
    for request_type in ("call", "query", "read_state"):
        who = authenticated(bytes.fromhex(sent[request_type]["body"]))
        assert who.sender == mine.principal and who.content.request_type == request_type
        # 3.4.3 puts a nonce into calls only (its query nonce option changes no body).
        assert (who.content.nonce is not None) == (request_type == "call")
    call = authenticated(bytes.fromhex(sent["call"]["body"]))
    assert call.request_id.hex() == sent["call"]["request_id"]
    assert (call.content.canister_id, call.content.method_name, call.content.arg) == (CANISTER, "echo", b"hello")
    assert authenticated(bytes.fromhex(sent["read_state"]["body"])).content.paths == tuple(map(tuple, PATHS))


def test_agent_js_endpoints(js):
    """@dfinity/agent 3.4.3: calls to /api/v3 (synchronous; /api/v2 only after a 404 there),
    queries and read_state to /api/v2, all under the effective canister id."""
    [sent] = js_envelopes(js, [js_identity("ed25519", secret("endpoints"))])
    assert sent["call"]["url"] == f"/api/v3/canister/{CANISTER}/call"
    assert sent["query"]["url"] == f"/api/v2/canister/{CANISTER}/query"
    assert sent["read_state"]["url"] == f"/api/v2/canister/{CANISTER}/read_state"


def delegation_spec(inner_kind, links, targets=None):
    far = int(time.time() * 1000) + 3_600_000
    return {"kind": "delegation", "inner": js_identity(inner_kind, secret(f"inner {inner_kind}")),
            "chain": [{"signer": js_identity(kind, secret(f"link {i} {kind}")), "expiration_ms": far,
                       "targets": targets if i == 0 else None} for i, kind in enumerate(links)]}


@pytest.mark.parametrize("inner_kind, links", [
    ("ed25519", ["ed25519"]), ("secp256k1", ["ed25519"]), ("ed25519", ["secp256k1", "ed25519", "secp256k1"]),
])
def test_agent_js_delegation_identities_authenticate(js, inner_kind, links):
    [sent] = js_envelopes(js, [delegation_spec(inner_kind, links)])
    sender = ours(links[0], secret(f"link 0 {links[0]}"))
    assert sent["principal"] == str(sender.principal)
    for request_type in ("call", "query", "read_state"):
        body = bytes.fromhex(sent[request_type]["body"])
        assert authenticated(body).sender == sender.principal
        assert len(decode_envelope(body, max_bytes=MAX_BODY).sender_delegation) == len(links)


def test_agent_js_delegation_targets_are_enforced(js):
    [sent] = js_envelopes(js, [delegation_spec("ed25519", ["ed25519"], targets=[str(CANISTER)])])
    call = bytes.fromhex(sent["call"]["body"])
    assert authenticated(call).sender == ours("ed25519", secret("link 0 ed25519")).principal
    with pytest.raises(DelegationTargetRefused):
        authenticated(call, target=OTHER_CANISTER.raw)
    # The agent polls with read_state under the same identity: a read_state has no canister_id,
    # so it authenticates only when the server names the effective canister of its URL.
    read_state = bytes.fromhex(sent["read_state"]["body"])
    assert authenticated(read_state, target=CANISTER.raw).content.request_type == "read_state"
    with pytest.raises(DelegationTargetRefused):
        authenticated(read_state)


def test_a_changed_agent_js_envelope_is_refused(js):
    [sent] = js_envelopes(js, [js_identity("secp256k1", secret("tamper"))])
    envelope = decode_envelope(bytes.fromhex(sent["call"]["body"]), max_bytes=MAX_BODY)
    envelope.content["arg"] = b"hellO"
    with pytest.raises(SenderSignatureInvalid):
        authenticate(envelope, now_ns=time.time_ns())


# -- icp-py-core ------------------------------------------------------------------------------

class Captured(Exception):
    """The recording client's way of stopping the agent after it built a request."""


class RecordingClient:
    """Stands where icp-py-core's HTTP ``Client`` stands; keeps what the agent would post."""

    def __init__(self):
        self.sent: dict[str, tuple[str, bytes]] = {}

    def _record(self, kind, canister_id, data):
        self.sent[kind] = (str(canister_id), data)
        raise Captured(kind)

    def call(self, canister_id, data, **_):
        self._record("call", canister_id, data)

    def query(self, canister_id, data, **_):
        self._record("query", canister_id, data)

    def read_state(self, canister_id, data, **_):
        self._record("read_state", canister_id, data)


def icp_envelopes(identity, *, nonce=None):
    client = RecordingClient()
    agent = Agent(identity, client, nonce_factory=(lambda: nonce) if nonce else None)
    for send in (lambda: agent.update_raw(str(CANISTER), "echo", b"hello"),
                 lambda: agent.query_raw(str(CANISTER), "echo", b"hello"),
                 lambda: agent.read_state_raw(str(CANISTER), PATHS)):
        with pytest.raises(Captured):
            send()
    return client.sent


@pytest.mark.parametrize("kind", ["ed25519", "secp256k1"])
def test_icp_py_core_envelopes_authenticate_and_principals_agree(kind):
    key = secret(f"icp-py-core {kind}")
    identity = Identity(privkey=key.hex(), type=kind)
    mine = ours(kind, key)
    assert identity.sender().to_str() == str(mine.principal)
    assert identity.der_pubkey == mine.der_public_key
    sent = icp_envelopes(identity, nonce=b"\x01" * 16)
    for request_type, (target, body) in sent.items():
        assert target == str(CANISTER)
        who = authenticated(body)
        assert who.sender == mine.principal and who.content.request_type == request_type
        assert who.request_id == to_request_id(dict(cbor2.loads(body)["content"]))
    assert authenticated(sent["read_state"][1]).content.paths == tuple(map(tuple, PATHS))


def icp_delegation(signer: Identity, to_der: bytes, expiration: int) -> dict:
    """A delegation signed with icp-py-core's own pieces: its identity signs its own hash of
    the delegation map under the delegation domain (the library has no function for it)."""
    delegation = {"pubkey": to_der, "expiration": expiration}
    _, signature = signer.sign(DELEGATION_DOMAIN + to_request_id(delegation))
    return {"delegation": delegation, "signature": signature}


@pytest.mark.parametrize("sender_kind, inner_kind", [("ed25519", "ed25519"), ("secp256k1", "ed25519"),
                                                     ("ed25519", "secp256k1")])
def test_icp_py_core_delegate_identity_authenticates(sender_kind, inner_kind):
    sender = Identity(privkey=secret(f"py sender {sender_kind}").hex(), type=sender_kind)
    inner = Identity(privkey=secret(f"py inner {inner_kind}").hex(), type=inner_kind)
    expiration = time.time_ns() + 3600 * 10**9
    delegate = DelegateIdentity(inner, {"publicKey": sender.der_pubkey,
                                        "delegations": [icp_delegation(sender, inner.der_pubkey, expiration)]})
    assert delegate.sender().to_str() == sender.sender().to_str()
    for _, body in icp_envelopes(delegate).values():
        envelope = decode_envelope(body, max_bytes=MAX_BODY)
        assert envelope.sender_delegation[0].delegation == Delegation(inner.der_pubkey, expiration)
        assert authenticated(body).sender.to_text() == sender.sender().to_str()


def test_icp_py_core_endpoints():
    """icp-py-core 2.3.1's HTTP client: calls to /api/v4, queries and read_state to /api/v3,
    the status to /api/v2 (read from its source: a request needs a server to see)."""
    import inspect

    from icp_agent.client import Client
    assert "/api/v4/canister/{canister_id}/call" in inspect.getsource(Client.call)
    assert "/api/v3/canister/{canister_id}/query" in inspect.getsource(Client.query)
    assert "/api/v3/canister/{canister_id}/read_state" in inspect.getsource(Client.read_state)
    assert "/api/v3/subnet/{subnet_id}/read_state" in inspect.getsource(Client.read_state_subnet)
    assert "/api/v2/status" in inspect.getsource(Client.status)
