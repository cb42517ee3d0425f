"""Request envelopes: signing, decoding and authenticating, real agent bodies, every refusal typed."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replica.ic import cbor
from replica.ic.envelope import Envelope, authenticate, decode_envelope, encode_envelope, sign_envelope
from replica.ic.errors import (
    AnonymousWithCredentials, IcFormatError, MalformedContent, MalformedEnvelope, MissingCredentials,
    SenderKeyMismatch, SenderSignatureInvalid,
)
from replica.ic.identities import Ed25519Identity, Secp256k1Identity
from replica.ic.principal import Principal, canister_principal
from replica.ic.request_id import request_id
from replica.ic.requests import CallContent, ReadStateContent

NOW = 1_700_000_000_000_000_000
LIMIT = 1 << 20
CANISTER = canister_principal(7).raw

#: Request bodies @dfinity/agent sent (its HTTP tests record them): an anonymous query of
#: ``whoami`` and an anonymous read_state of the same canister.
AGENT_JS_QUERY = bytes.fromhex(
    "d9d9f7a167636f6e74656e74a663617267464449444c00006b63616e69737465725f69644a000000000030005701016e696e677265"
    "73735f6578706972791b178f57eae7fc46006b6d6574686f645f6e616d656677686f616d696c726571756573745f7479706565717565"
    "72796673656e6465724104")


def call_content(sender: Principal, changes=None):
    content = {"request_type": "call", "sender": sender.raw, "ingress_expiry": NOW + 60_000_000_000,
               "canister_id": CANISTER, "method_name": "inc", "arg": b"DIDL\x00\x00", "nonce": b"\x01" * 8}
    content.update(changes or {})
    return {key: value for key, value in content.items() if value is not None}


@pytest.mark.parametrize("make", [Ed25519Identity.from_seed, Secp256k1Identity.from_seed], ids=["ed25519", "secp256k1"])
def test_a_signed_call_round_trips_and_authenticates(make):
    identity = make(b"alice")
    content = call_content(identity.principal)
    body = encode_envelope(sign_envelope(content, identity))
    assert body.startswith(cbor.SELF_DESCRIBE_PREFIX)
    authenticated = authenticate(decode_envelope(body, max_bytes=LIMIT), now_ns=NOW)
    assert authenticated.sender == identity.principal
    assert authenticated.request_id == request_id(content)
    assert authenticated.content == CallContent("call", identity.principal, content["ingress_expiry"],
                                                Principal(CANISTER), "inc", b"DIDL\x00\x00", b"\x01" * 8)


def test_a_signed_read_state_authenticates():
    identity = Ed25519Identity.from_seed(b"alice")
    content = {"request_type": "read_state", "sender": identity.principal.raw, "ingress_expiry": NOW,
               "paths": [[b"request_status", bytes(32), b"reply"], [b"time"]]}
    authenticated = authenticate(decode_envelope(encode_envelope(sign_envelope(content, identity)), max_bytes=LIMIT),
                                 now_ns=NOW)
    assert authenticated.content == ReadStateContent(identity.principal, NOW, ((b"request_status", bytes(32), b"reply"),
                                                                               (b"time",)))


def test_agent_js_anonymous_query_body():
    envelope = decode_envelope(AGENT_JS_QUERY, max_bytes=LIMIT)
    authenticated = authenticate(envelope, now_ns=NOW)
    assert authenticated.sender.is_anonymous
    assert authenticated.content.request_type == "query" and authenticated.content.method_name == "whoami"
    assert str(authenticated.content.canister_id) == "ivcos-eqaaa-aaaab-qablq-cai"
    # Our encoding orders keys canonically (agent-js alphabetically): other bytes, the same request.
    again = authenticate(decode_envelope(encode_envelope(envelope), max_bytes=LIMIT), now_ns=NOW)
    assert again.request_id == authenticated.request_id


def test_agent_js_anonymous_read_state_body():
    body = bytes.fromhex(
        "d9d9f7a167636f6e74656e74a46e696e67726573735f6578706972791b178f57eae7fc46006570617468738181467375626e6574"
        "6c726571756573745f747970656a726561645f73746174656673656e6465724104")
    authenticated = authenticate(decode_envelope(body, max_bytes=LIMIT), now_ns=NOW)
    assert authenticated.sender.is_anonymous
    assert authenticated.content.paths == ((b"subnet",),)


def test_the_anonymous_sender_needs_no_signature_and_may_carry_none():
    anonymous = Principal.anonymous()
    assert authenticate(sign_envelope(call_content(anonymous), None), now_ns=NOW).sender.is_anonymous
    identity = Ed25519Identity.from_seed(b"x")
    with pytest.raises(AnonymousWithCredentials):
        authenticate(Envelope(call_content(anonymous), sender_pubkey=identity.der_public_key), now_ns=NOW)
    with pytest.raises(AnonymousWithCredentials):
        authenticate(Envelope(call_content(anonymous), sender_sig=b"sig"), now_ns=NOW)


def test_credential_refusals():
    alice, bob = Ed25519Identity.from_seed(b"alice"), Ed25519Identity.from_seed(b"bob")
    content = call_content(alice.principal)
    signed = sign_envelope(content, alice)
    with pytest.raises(MissingCredentials):
        authenticate(Envelope(content, sender_pubkey=alice.der_public_key), now_ns=NOW)
    with pytest.raises(MissingCredentials):
        authenticate(Envelope(content), now_ns=NOW)
    with pytest.raises(SenderKeyMismatch):
        authenticate(sign_envelope(content, bob), now_ns=NOW)
    with pytest.raises(SenderSignatureInvalid):   # content changed after signing
        authenticate(Envelope({**content, "arg": b"other"}, signed.sender_pubkey, signed.sender_sig), now_ns=NOW)
    with pytest.raises(SenderSignatureInvalid):
        authenticate(Envelope(content, signed.sender_pubkey, bytes(63)), now_ns=NOW)


@pytest.mark.parametrize("change", [
    {"request_type": "install"}, {"request_type": None}, {"sender": bytes(30)}, {"sender": "alice"},
    {"ingress_expiry": -1}, {"ingress_expiry": 1 << 64}, {"ingress_expiry": None}, {"nonce": bytes(33)},
    {"canister_id": None}, {"method_name": b"inc"}, {"arg": "text"}, {"extra": 1},
    {"sender_info": {"info": b"", "sig": "x"}}, {"paths": []},
])
def test_malformed_content_is_refused(change):
    identity = Ed25519Identity.from_seed(b"alice")
    with pytest.raises(MalformedContent):
        authenticate(sign_envelope(call_content(identity.principal, change), identity), now_ns=NOW)


@pytest.mark.parametrize("paths", [[[b"a"]] * 1001, [[b"a"] * 128], [["time"]], [b"time"], "time"])
def test_malformed_read_state_paths_are_refused(paths):
    content = {"request_type": "read_state", "sender": b"\x04", "ingress_expiry": NOW, "paths": paths}
    with pytest.raises(MalformedContent):
        authenticate(Envelope(content), now_ns=NOW)


@pytest.mark.parametrize("value", [
    [], {"sender_pubkey": b"k"}, {"content": []}, {"content": {}, "sender_sig": "sig"},
    {"content": {}, "sender_pubkey": 5}, {"content": {}, "other": b""}, {"content": {}, "sender_delegation": {}},
])
def test_malformed_envelopes_are_refused(value):
    with pytest.raises(MalformedEnvelope):
        decode_envelope(cbor.encode(value), max_bytes=LIMIT)


def test_a_body_nesting_deeper_than_an_envelope_can_is_refused_while_parsing():
    with pytest.raises(IcFormatError):
        decode_envelope(cbor.encode({"content": {"arg": [[[[[[[[[[[[[[[[b""]]]]]]]]]]]]]]]]}}), max_bytes=LIMIT)


@given(st.binary(max_size=300))
@settings(max_examples=1500, deadline=None)
def test_garbage_bodies_raise_only_typed_refusals(body):
    try:
        authenticate(decode_envelope(body, max_bytes=250), now_ns=NOW)
    except IcFormatError:
        pass


_IDENTITY = Ed25519Identity.from_seed(b"fuzz")
_SIGNED_BODY = encode_envelope(sign_envelope(call_content(_IDENTITY.principal), _IDENTITY))


@given(st.data())
@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
def test_mutated_signed_bodies_are_refused_with_a_type_or_still_authentic(data):
    body = bytearray(_SIGNED_BODY)
    for _ in range(data.draw(st.integers(1, 3))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    try:
        authenticated = authenticate(decode_envelope(bytes(body), max_bytes=LIMIT), now_ns=NOW)
    except IcFormatError:
        return
    # A mutation can survive only where the signature does not reach: it must not change the request.
    assert authenticated.request_id == request_id(call_content(_IDENTITY.principal))


@given(st.recursive(st.integers(-5, 2**70) | st.binary(max_size=40) | st.text(max_size=10),
                    lambda c: st.lists(c, max_size=4) | st.dictionaries(
                        st.sampled_from(["content", "sender_pubkey", "sender_sig", "sender_delegation", "delegation",
                                         "signature", "pubkey", "expiration", "targets", "request_type", "sender",
                                         "ingress_expiry", "canister_id", "method_name", "arg", "paths", "nonce"]),
                        c, max_size=6),
                    max_leaves=40))
@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
def test_well_formed_but_hostile_envelopes_raise_only_typed_refusals(value):
    try:
        authenticate(decode_envelope(cbor.encode(value), max_bytes=LIMIT), now_ns=NOW)
    except IcFormatError:
        pass
