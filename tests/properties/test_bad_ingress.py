"""Bad ingress never crashes anything and changes nothing but its own status.

At the API, ``decode_signed_ingress`` turns every malformed IC envelope into a typed
``IngressRefused`` with an envelope-level reason (and a fuzzer finds no other exception, no
mutation of a valid envelope that is accepted as another message, and no well-formed but
hostile envelope that gets through); ``Subnet.submit``'s other refusals are tested in
``tests/integration/test_ingress_refusals.py``. At induction, every invalid message in a batch gets a typed VSR
failure and a ``rejected`` status (a duplicate leaves the existing status alone), and a full
``execute_round`` changes nothing else: the encoded state equals the one of the same round
without the bad message, up to that status and the ``ingress_rejected`` counter.
"""

from __future__ import annotations

import cbor2
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from examples.counter import Counter
from message_routing.batch import Batch
from message_routing.demux import demux
from message_routing.limits import MINIMAL
from message_routing.state_machine import execute_round
from message_routing.valid_set_rule import IngressInductionFailure as F
from message_routing.valid_set_rule import induct_ingress
from replica.execution import ExecutionEnvironment, install_canister, stop_canister
from replica.client import (
    BadIngressSignature, Ed25519Identity, IngressRefused, IngressTooLarge, MalformedIngress, Secp256k1Identity,
    UnknownCanister, WrongRequestType, decode_signed_ingress, sign_ingress, sign_request, source_of,
)
from replica.client.envelope import request_content
from replica.client.refusals import UnsupportedEnvelopeVersion
from replica.ic import cbor
from replica.ic.delegations import sign_delegation
from replica.ic.envelope import encode_envelope, sign_envelope
from replica.ic.principal import Principal, canister_principal
from replica.ic.request_id import request_id
from replica.sdk import encode_value
from state_manager.encoding import encode
from state_manager.ingress_history import IngressState
from state_manager.messages import MANAGEMENT_CANISTER_ID, Ingress
from state_manager.replicated_state import ReplicatedState
from state_manager.state_codec import decode_state, encode_state, state_to_value
from tests.builders import A, topology

MAX = 1024
KEY = Ed25519Identity.from_seed(b"alice")
OTHER = Ed25519Identity.from_seed(b"mallory")
EXPIRY = 2 * 10**18
NOW = EXPIRY - 10**12
ENVELOPE_REFUSALS = (MalformedIngress, IngressTooLarge, BadIngressSignature, WrongRequestType, UnknownCanister)

FUZZ = settings(max_examples=300, deadline=None, derandomize=True, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow])


def envelope(receiver=1, method="increment", arg=3, nonce=7, expiry=EXPIRY, key=KEY, request_type="call") -> bytes:
    return sign_ingress(key, receiver, method, arg, nonce, expiry, request_type=request_type)


def decoded(data: bytes, max_bytes: int = MAX, **options) -> Ingress:
    return decode_signed_ingress(data, max_bytes, now_ns=NOW, **options)


def content(changes=None, *, key=KEY) -> dict:
    """The content map of ``envelope()`` with ``changes`` (a ``None`` value removes the field)."""
    fields = request_content(key.principal, 1, "increment", encode_value(3), expiry=EXPIRY, nonce=7)
    fields.update(changes or {})
    return {name: value for name, value in fields.items() if value is not None}


def raw(value) -> bytes:
    """Any value as CBOR behind the self-describe tag, also what ``replica.ic.cbor`` would refuse."""
    return cbor.SELF_DESCRIBE_PREFIX + cbor2.dumps(value, canonical=True)


def signed(fields: dict, key=KEY, **envelope_fields) -> bytes:
    """An envelope of ``fields`` signed by ``key`` (over their request id), fields replaced at will."""
    value = sign_envelope(fields, key).to_value()
    value.update(envelope_fields)
    return raw({name: field for name, field in value.items() if field is not None})


# -- the API boundary -----------------------------------------------------------------------------

@pytest.mark.parametrize("make", [Ed25519Identity.from_seed, Secp256k1Identity.from_seed], ids=["ed25519", "secp256k1"])
def test_a_valid_envelope_decodes_to_the_authenticated_ingress(make):
    key = make(b"alice")
    data = envelope(key=key)
    assert data.startswith(cbor.SELF_DESCRIBE_PREFIX)
    assert decoded(data) == Ingress(source_of(key), 1, "increment", encode_value(3), request_id(content(key=key)),
                                    EXPIRY)
    assert source_of(key) == __import__("hashlib").sha224(key.der_public_key).digest() + b"\x02"


def test_the_specifications_request_id_through_our_signing_path():
    """The interface specification's example (*Request ids*): an anonymous call of ``hello`` with
    the Candid argument ``DIDL\\x00\\xFD*`` to canister ``0x00000000000004D2``. Our signing path
    gives it the specification's request id; the replica refuses it as a canister it does not
    have (its canister ids are ``u64 · 0x01 0x01``). The same call to a canister of ours decodes
    to an ``Ingress`` whose message id is its request id."""
    spec_id = "1d1091364d6bb8a6c16b203ee75467d59ead468f523eb058880ae8ec80e2b101"
    expiry = 1685570400000000000
    spec = sign_request(None, Principal(bytes.fromhex("00000000000004D2")), "hello", b"DIDL\x00\xfd*", expiry=expiry)
    assert spec.message_id.hex() == spec_id
    assert cbor.decode(spec.envelope, max_bytes=MAX) == {"content": {
        "request_type": "call", "sender": b"\x04", "ingress_expiry": expiry,
        "canister_id": bytes.fromhex("00000000000004D2"), "method_name": "hello", "arg": b"DIDL\x00\xfd*"}}
    with pytest.raises(UnknownCanister, match="ngj2t-fiaaa-aaaaa-aatja"):
        decode_signed_ingress(spec.envelope, MAX, now_ns=expiry)
    ours = sign_request(None, 1234, "hello", b"DIDL\x00\xfd*", expiry=expiry)
    ingress = decode_signed_ingress(ours.envelope, MAX, now_ns=expiry)
    assert ingress == Ingress(b"\x04", 1234, "hello", b"DIDL\x00\xfd*", ours.message_id, expiry)
    assert ingress.message_id == request_id({"request_type": "call", "sender": b"\x04", "ingress_expiry": expiry,
                                             "canister_id": canister_principal(1234).raw, "method_name": "hello",
                                             "arg": b"DIDL\x00\xfd*"})


def test_the_management_canister_is_the_empty_principal():
    data = envelope(receiver=MANAGEMENT_CANISTER_ID, method="create_canister", arg=None)
    assert cbor.decode(data, max_bytes=MAX)["content"]["canister_id"] == b""
    assert decoded(data).receiver == MANAGEMENT_CANISTER_ID
    with pytest.raises(UnknownCanister):   # its number as a canister id is no canister
        decoded(signed(content({"canister_id": canister_principal(MANAGEMENT_CANISTER_ID).raw})))


def test_the_anonymous_sender_signs_nothing():
    data = envelope(key=None)
    assert set(cbor.decode(data, max_bytes=MAX)) == {"content"}
    assert decoded(data).source == b"\x04"


@pytest.mark.parametrize("expected, sent", [("call", "query"), ("query", "call")])
def test_a_request_of_another_type_is_refused(expected, sent):
    with pytest.raises(WrongRequestType, match=f"a {sent} request where a {expected}"):
        decoded(envelope(request_type=sent), request_type=expected)
    assert decoded(envelope(request_type=expected), request_type=expected).receiver == 1


def test_a_read_state_envelope_is_no_call():
    fields = {"request_type": "read_state", "sender": KEY.principal.raw, "ingress_expiry": EXPIRY, "paths": []}
    with pytest.raises(WrongRequestType):
        decoded(encode_envelope(sign_envelope(fields, KEY)))


def test_delegations_expire_at_the_time_the_caller_gives():
    """The same bytes, judged at two times given as arguments: no clock is read."""
    session = Secp256k1Identity.from_seed(b"alice's session")
    delegation = sign_delegation(KEY, session.der_public_key, NOW, targets=[canister_principal(1).raw])
    data = encode_envelope(sign_envelope(content(), session, sender_pubkey=KEY.der_public_key,
                                         delegations=[delegation]))
    assert decode_signed_ingress(data, MAX, now_ns=NOW).source == source_of(KEY)
    with pytest.raises(BadIngressSignature, match="delegation_expired"):
        decode_signed_ingress(data, MAX, now_ns=NOW + 1)
    elsewhere = encode_envelope(sign_envelope(content({"canister_id": canister_principal(2).raw}), session,
                                              sender_pubkey=KEY.der_public_key, delegations=[delegation]))
    with pytest.raises(BadIngressSignature, match="delegation_target_refused"):
        decode_signed_ingress(elsewhere, MAX, now_ns=NOW)


@pytest.mark.parametrize("data", [
    b"", b"\xc1", b"garbage", b"\xff" * 40, cbor.encode("not an envelope"), cbor.encode({"a": 1}),
    cbor.encode([1, 2, 3]), raw(None), raw(1.5), cbor.SELF_DESCRIBE_PREFIX, encode({"content": {}}),
], ids=lambda d: d[:8].hex() or "empty")
def test_garbage_is_malformed(data):
    with pytest.raises(MalformedIngress):
        decoded(data)


def test_an_envelope_of_the_former_format_is_refused_by_its_version():
    former = encode([1, [1, "increment", encode(3), 7, EXPIRY], bytes(32), bytes(64)])
    with pytest.raises(UnsupportedEnvelopeVersion, match="version-1"):
        decoded(former)


def test_every_truncation_is_malformed():
    data = envelope()
    for n in range(len(data)):
        with pytest.raises(MalformedIngress):
            decoded(data[:n])


@pytest.mark.parametrize("tail", [b"\x00", b"\xf6", envelope()])
def test_trailing_bytes_are_malformed(tail):
    with pytest.raises(MalformedIngress):
        decoded(envelope() + tail)


def test_not_bytes_is_malformed():
    with pytest.raises(MalformedIngress):
        decoded("text")  # type: ignore[arg-type]


def test_oversized_is_too_large_before_anything_is_parsed():
    data = envelope(arg=b"x" * 2000)
    with pytest.raises(IngressTooLarge):
        decoded(data)
    with pytest.raises(IngressTooLarge):
        decoded(b"\xc1" * (MAX + 1))  # garbage, but too large first
    assert decoded(data, len(data)).method_payload == encode_value(b"x" * 2000)


SIGNATURE = sign_envelope(content(), KEY).sender_sig
BAD_SIGNATURES = {
    "zero-signature": lambda: signed(content(), sender_sig=bytes(64)),
    "other-signer": lambda: signed(content(), sender_sig=sign_envelope(content(), OTHER).sender_sig),
    "content-changed": lambda: raw({"content": content({"arg": encode_value(4)}), "sender_pubkey": KEY.der_public_key,
                                    "sender_sig": SIGNATURE}),
    "other-key": lambda: signed(content(), sender_pubkey=OTHER.der_public_key),   # claims OTHER's key
    "sender-not-the-key": lambda: signed(content(key=OTHER)),                     # OTHER's principal, KEY's key
    "no-signature": lambda: signed(content(), sender_sig=None),
    "no-key": lambda: signed(content(), sender_pubkey=None),
    "anonymous-with-key": lambda: signed(content({"sender": b"\x04"})),
    "short-signature": lambda: signed(content(), sender_sig=bytes(63)),
    "raw-key": lambda: signed(content(), sender_pubkey=KEY.der_public_key[12:]),
    "unsupported-key": lambda: signed(content(), sender_pubkey=b"\x30\x05" + bytes(40)),
    "delegation-unsigned": lambda: signed(content(), sender_delegation=[
        {"delegation": {"pubkey": OTHER.der_public_key, "expiration": EXPIRY}, "signature": bytes(64)}]),
    "too-many-delegations": lambda: signed(content(), sender_delegation=[
        {"delegation": {"pubkey": OTHER.der_public_key, "expiration": EXPIRY}, "signature": bytes(64)}] * 21),
}


@pytest.mark.parametrize("name", sorted(BAD_SIGNATURES))
def test_bad_signatures(name):
    with pytest.raises(BadIngressSignature):
        decoded(BAD_SIGNATURES[name](), 8 * MAX)


WRONG_CONTENT = {
    "request-type-unknown": {"request_type": "install"},
    "request-type-bytes": {"request_type": b"call"},
    "sender-too-long": {"sender": bytes(30)},
    "sender-text": {"sender": "alice"},
    "expiry-negative": {"ingress_expiry": -1},
    "expiry-above-u64": {"ingress_expiry": 1 << 64},
    "expiry-missing": {"ingress_expiry": None},
    "expiry-bool": {"ingress_expiry": True},
    "expiry-float": {"ingress_expiry": 1.5},
    "nonce-too-long": {"nonce": bytes(33)},
    "nonce-int": {"nonce": 7},
    "canister-missing": {"canister_id": None},
    "canister-text": {"canister_id": "aaaaa-aa"},
    "method-empty": {"method_name": ""},
    "method-too-long": {"method_name": "m" * 129},
    "method-bytes": {"method_name": b"increment"},
    "arg-text": {"arg": "3"},
    "arg-missing": {"arg": None},
    "unknown-field": {"extra": 1},
    "paths-in-a-call": {"paths": []},
}


@pytest.mark.parametrize("name", sorted(WRONG_CONTENT))
def test_wrong_content_is_malformed(name):
    with pytest.raises(MalformedIngress):
        decoded(raw({"content": content(WRONG_CONTENT[name])}))


@pytest.mark.parametrize("value", [
    [], {"sender_pubkey": b"k"}, {"content": []}, {"content": content(), "sender_sig": "sig"},
    {"content": content(), "other": b""}, {"content": content(), "sender_delegation": {}},
    {"content": content(), "sender_pubkey": None},
])
def test_wrong_envelope_shapes_are_malformed(value):
    with pytest.raises(MalformedIngress):
        decoded(raw(value))


@pytest.mark.parametrize("canister_id", [bytes.fromhex("00000000000004D2"), b"\x04", KEY.principal.raw,
                                         bytes(8) + b"\x01\x02", bytes(9) + b"\x01\x01"])
def test_a_principal_that_is_no_canister_of_ours_is_an_unknown_canister(canister_id):
    with pytest.raises(UnknownCanister):
        decoded(signed(content({"canister_id": canister_id})))


def _decodes_or_typed_error(data: bytes, max_bytes: int) -> Ingress | None:
    try:
        return decode_signed_ingress(data, max_bytes, now_ns=NOW)
    except IngressRefused as refusal:  # anything else propagates and fails the test
        assert isinstance(refusal, ENVELOPE_REFUSALS), refusal
        assert refusal.reason in ("malformed", "too_large", "bad_signature", "wrong_request_type", "unknown_canister")
        return None


@FUZZ
@given(data=st.binary(max_size=400), max_bytes=st.sampled_from((0, 64, MAX)))
@example(data=b"\x94" + b"\xc0" * 4, max_bytes=MAX)
@example(data=b"\x9b\xff\xff\xff\xff\xff\xff\xff\xff", max_bytes=MAX)   # an array claiming 2**64 items
@example(data=b"\x81" * 200 + b"\xf6", max_bytes=MAX)   # nested deeper than the decoder allows
@example(data=b"\xd9\xd9\xf7\xd9\xd9\xf7\xa0", max_bytes=MAX)   # the self-describe tag twice
@example(data=b"\xfb" + bytes(8), max_bytes=MAX)         # a float
@example(data=b"\xa1\x80\xf6", max_bytes=MAX)          # a map keyed by an array
@example(data=b"\xbf\x61a\x01\xff", max_bytes=MAX)    # an indefinite-length map
@example(data=b"\xa2\x61a\x01\x61a\x02", max_bytes=MAX)   # a duplicate key
def test_fuzz_arbitrary_bytes_raise_only_ingress_errors(data, max_bytes):
    assert _decodes_or_typed_error(data, max_bytes) is None


VALID = envelope()
VALID_INGRESS = decoded(VALID)


@st.composite
def mutated(draw):
    data = bytearray(VALID)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(("flip", "set", "insert", "delete", "truncate")))
        position = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "flip" and data:
            data[position] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and data:
            data[position] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[position:position] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete" and data:
            del data[position:position + draw(st.integers(1, 8))]
        elif kind == "truncate":
            del data[position:]
    return bytes(data)


@FUZZ
@given(data=mutated())
def test_fuzz_mutated_envelopes_are_rejected_with_typed_errors(data):
    result = _decodes_or_typed_error(data, MAX)
    # Whatever survives is the same message: its id is the request id of the signed content.
    assert result is None or result == VALID_INGRESS


#: Values of the CBOR the interface uses (bignums too) and, now and then, of types it never uses
#: (simple values, floats).
_values = st.recursive(
    st.integers(-(2**70), 2**70) | st.binary(max_size=40) | st.text(max_size=12)
    | st.integers(0, 19).flatmap(lambda k: st.none() | st.booleans() | st.floats(allow_nan=False) if k == 0
                                 else st.binary(max_size=8)),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=12), c, max_size=4), max_leaves=12)


def _field(name: str, good):
    """A content or envelope field: mostly the good value (so the checks after it are reached),
    else a near miss of its type, or anything."""
    near = {bytes: st.binary(max_size=70), str: st.text(max_size=140), int: st.integers(-1, 2**65)}
    return st.integers(0, 9).flatmap(
        lambda k: st.just(good) if k < 7 else near.get(type(good), _values) if k < 9 else _values)


_GOOD = sign_envelope(content(), KEY).to_value()
_DELEGATION = st.fixed_dictionaries({
    "delegation": st.fixed_dictionaries({"pubkey": _field("pubkey", OTHER.der_public_key),
                                         "expiration": _field("expiration", EXPIRY)},
                                        optional={"targets": st.lists(st.binary(max_size=30), max_size=3) | _values}),
    "signature": _field("signature", bytes(64))})


@st.composite
def hostile_envelopes(draw):
    """Well-formed CBOR envelopes whose every field may be missing, mistyped or out of bounds."""
    fields = {name: draw(_field(name, good)) for name, good in content().items() if draw(st.integers(0, 9))}
    if not draw(st.integers(0, 4)):
        fields.update(draw(st.dictionaries(st.sampled_from(["sender_info", "paths", "extra", "nonce"]), _values,
                                           max_size=2)))
    value = {"content": fields if draw(st.integers(0, 19)) else draw(_values)}
    for name in ("sender_pubkey", "sender_sig"):
        if draw(st.integers(0, 3)):
            value[name] = draw(_field(name, _GOOD[name]))
    if not draw(st.integers(0, 3)):
        value["sender_delegation"] = draw(st.lists(_DELEGATION, max_size=3) | _values)
    return raw(value)


@FUZZ
@given(data=hostile_envelopes(), request_type=st.sampled_from(("call", "query")))
def test_fuzz_well_formed_but_hostile_envelopes_raise_only_ingress_errors(data, request_type):
    try:
        result = decode_signed_ingress(data, MAX, now_ns=NOW, request_type=request_type)
    except IngressRefused as refusal:
        assert isinstance(refusal, ENVELOPE_REFUSALS), refusal
        return
    # Only an envelope that really is KEY's signed content, or an anonymous one, gets through.
    assert result.source in (KEY.principal.raw, b"\x04")
    if result.source == KEY.principal.raw:
        assert result == VALID_INGRESS


@FUZZ
@given(key=st.sampled_from([KEY, Secp256k1Identity.from_seed(b"bob"), None]),
       receiver=st.integers(0, 2**64 - 1), method=st.text(min_size=1, max_size=128),
       arg=st.binary(max_size=200), nonce=st.none() | st.binary(max_size=32) | st.integers(0, 2**64 - 1),
       expiry=st.integers(0, 2**64 - 1), request_type=st.sampled_from(("call", "query")))
def test_fuzz_every_signed_request_decodes_to_its_ingress(key, receiver, method, arg, nonce, expiry, request_type):
    signed_request = sign_request(key, receiver, method, arg, expiry=expiry, nonce=nonce, request_type=request_type)
    ingress = decode_signed_ingress(signed_request.envelope, 4 * MAX, now_ns=NOW, request_type=request_type)
    assert ingress == Ingress(source_of(key), receiver, method, arg, signed_request.message_id, expiry)
    sender = Principal.anonymous() if key is None else key.principal
    assert signed_request.message_id == request_id(request_content(sender, receiver, method, arg, expiry=expiry,
                                                                   nonce=nonce, request_type=request_type))


# -- induction through a full round -----------------------------------------------------------------

LIMITS = MINIMAL
ENV = ExecutionEnvironment([Counter])
TOPOLOGY = topology()
T0 = 1_000 * 10**9
USER = b"\x07" * 29 + b"\x02"
RUNNING, STOPPED, BUSY = 1, 2, 3  # BUSY has a full ingress queue in every test round


def _id(n: int) -> bytes:
    return n.to_bytes(32, "big")


def _ingress(n: int, receiver: int = RUNNING, *, expiry: int | None = None, payload: bytes | None = None) -> Ingress:
    payload = encode_value(1) if payload is None else payload
    return Ingress(USER, receiver, "increment", payload, _id(n), T0 + 60 * 10**9 if expiry is None else expiry)


def _next_batch(state: ReplicatedState, ingress=()) -> Batch:
    return Batch(state.metadata.batch_number + 1, state.metadata.batch_time + 10**9, TOPOLOGY.registry_version,
                 ingress=tuple(ingress))


@pytest.fixture(scope="module")
def busy_state() -> bytes:
    """A subnet with history and work in flight (encoded, so each test gets a fresh copy)."""
    state = ReplicatedState(A, TOPOLOGY)
    state.metadata.batch_time = T0
    for cid in (RUNNING, STOPPED, BUSY):
        install_canister(state, cid, Counter)
    stop_canister(state, STOPPED)
    rounds = [
        [_ingress(1), _ingress(2)],
        [_ingress(3), _ingress(4, expiry=T0 + 3 * 10**9), _ingress(5), _ingress(6)]
        + [_ingress(10 + k, BUSY) for k in range(LIMITS.queue_capacity)],
    ]
    for ingress in rounds:
        state = execute_round(state, _next_batch(state, ingress), TOPOLOGY, ENV, LIMITS)
    # BUSY executes 2 messages per round: refill its queue so it is full when the next batch arrives
    for k in range(20, 20 + LIMITS.max_messages_per_canister_per_round):
        assert induct_ingress(state, _ingress(k, BUSY), LIMITS) is None
    assert len(state.canisters[BUSY].queues.ingress_queue) == LIMITS.queue_capacity
    history = state.ingress_history
    assert history.get(_id(1)).state is history.get(_id(4)).state is IngressState.REPLIED
    assert history.get(_id(5)).state is IngressState.RECEIVED  # still queued
    return encode_state(state)


def _round(encoded: bytes, ingress) -> tuple[ReplicatedState, list]:
    """The typed VSR outcomes of ``ingress`` and the state after a full round with it."""
    state = decode_state(encoded)
    batch = _next_batch(state, ingress)
    probe = decode_state(encoded)
    probe.metadata.batch_number, probe.metadata.batch_time = batch.batch_number, batch.time
    probe.ingress_history.prune(batch.time, LIMITS.ingress_history_retention_ns)
    failures = demux(probe, (), batch.ingress, LIMITS)
    return execute_round(state, batch, TOPOLOGY, ENV, LIMITS), failures


def _without(state: ReplicatedState, message_ids, rejected: int):
    """``state_to_value`` with the given history entries removed and ``rejected`` taken off the counter."""
    value = list(state_to_value(state))
    value[6] = tuple((name, count - rejected if name == "ingress_rejected" else count) for name, count in value[6])
    value[9] = tuple(entry for entry in value[9] if entry[0] not in set(message_ids))
    return tuple(value)


NEXT_TIME = T0 + 3 * 10**9  # the time of the round under test

BAD = {
    "unknown-canister": (lambda: _ingress(100, 77), F.CANISTER_NOT_FOUND),
    # only a message pooled before its canister moved away reaches a block (the notary refuses others)
    "canister-on-another-subnet": (lambda: _ingress(101, 150), F.CANISTER_ON_ANOTHER_SUBNET),
    "oversized": (lambda: _ingress(102, payload=bytes(LIMITS.max_ingress_bytes)), F.PAYLOAD_TOO_LARGE),
    "expired": (lambda: _ingress(103, expiry=NEXT_TIME - 1), F.EXPIRED),
    "expiry-too-far": (lambda: _ingress(104, expiry=NEXT_TIME + LIMITS.max_ingress_ttl_ns + 1), F.EXPIRY_TOO_FAR),
    "expiry-u64-max": (lambda: _ingress(105, expiry=2**64 - 1), F.EXPIRY_TOO_FAR),
    "stopped-canister": (lambda: _ingress(106, STOPPED), F.CANISTER_NOT_RUNNING),
    "queue-full": (lambda: _ingress(107, BUSY), F.QUEUE_FULL),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_ingress_gets_a_typed_status_and_changes_nothing_else(busy_state, name):
    make, failure = BAD[name]
    bad = make()
    baseline, no_failures = _round(busy_state, ())
    after, failures = _round(busy_state, (bad,))
    assert no_failures == [] and failures == [failure]
    status = after.ingress_history.get(bad.message_id)
    assert status.state is IngressState.REJECTED
    assert status.reject_code is failure.reject_code and failure.description in status.reject_message
    assert status.receiver == bad.receiver and status.time == NEXT_TIME
    assert NEXT_TIME <= status.expiry_time <= NEXT_TIME + LIMITS.max_ingress_ttl_ns or failure is F.EXPIRED
    assert after.metadata.counters["ingress_rejected"] == baseline.metadata.counters["ingress_rejected"] + 1
    assert _without(after, [bad.message_id], 1) == state_to_value(baseline)


@pytest.mark.parametrize("existing", [1, 5, 4, 20], ids=["replied", "in-queue", "about-to-expire", "busy"])
def test_a_duplicate_id_changes_nothing_but_the_counter(busy_state, existing):
    duplicate = _ingress(existing, RUNNING, payload=encode_value(1000))
    baseline, _ = _round(busy_state, ())
    after, failures = _round(busy_state, (duplicate,))
    assert failures == [F.DUPLICATE]
    assert after.ingress_history.get(_id(existing)) == baseline.ingress_history.get(_id(existing))
    assert _without(after, [], 1) == state_to_value(baseline)


def test_a_duplicate_within_one_batch_runs_once(busy_state):
    first = _ingress(200)
    again = _ingress(200, payload=encode_value(1000))
    once, _ = _round(busy_state, (first,))
    twice, failures = _round(busy_state, (first, again))
    assert failures == [None, F.DUPLICATE]
    assert _without(twice, [], 1) == state_to_value(once)


bad_kinds = st.sampled_from(sorted(BAD))


@settings(max_examples=25, deadline=None, derandomize=True, print_blob=True)
@given(names=st.lists(bad_kinds, min_size=1, max_size=6), valid_first=st.booleans())
def test_a_batch_of_bad_ingress_changes_only_their_statuses(busy_state, names, valid_first):
    bad = []
    for k, name in enumerate(names):
        message = BAD[name][0]()
        bad.append(Ingress(message.source, message.receiver, message.method_name, message.method_payload,
                           _id(300 + k), message.expiry_time))
    good = [_ingress(299)] if valid_first else []
    baseline, _ = _round(busy_state, good)
    after, failures = _round(busy_state, good + bad)
    assert failures == [None] * len(good) + [BAD[name][1] for name in names]
    assert _without(after, [m.message_id for m in bad], len(bad)) == state_to_value(baseline)
