"""Bad ingress never crashes anything and changes nothing but its own status.

At the API, ``decode_signed_ingress`` turns every malformed envelope into a typed
``IngressRefused`` with an envelope-level reason (and a fuzzer finds no other exception, and
no mutation of a valid envelope that is still accepted); ``Subnet.submit``'s other refusals
are tested in ``tests/integration/test_ingress_refusals.py``. At induction, every invalid message in a batch gets a typed VSR
failure and a ``rejected`` status (a duplicate leaves the existing status alone), and a full
``execute_round`` changes nothing else: the encoded state equals the one of the same round
without the bad message, up to that status and the ``ingress_rejected`` counter.
"""

from __future__ import annotations

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
    BadIngressSignature, IngressRefused, IngressTooLarge, MalformedIngress, UserKey, compute_message_id,
    decode_signed_ingress, sign_ingress, source_of,
)
from replica.sdk import encode_value
from state_manager.encoding import decode, encode
from state_manager.ingress_history import IngressState
from state_manager.messages import Ingress
from state_manager.replicated_state import ReplicatedState
from state_manager.state_codec import decode_state, encode_state, state_to_value
from tests.builders import A, topology

MAX = 1024
KEY = UserKey.from_seed(b"alice")
OTHER = UserKey.from_seed(b"mallory")
EXPIRY = 2 * 10**18

FUZZ = settings(max_examples=300, deadline=None, derandomize=True, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow])


def envelope(receiver=1, method="increment", arg=3, nonce=7, expiry=EXPIRY, key=KEY) -> bytes:
    return sign_ingress(key, receiver, method, arg, nonce, expiry)


def raw(version=1, content=None, public_key=None, signature=None) -> bytes:
    """An envelope with arbitrary field values (signature over the given content if None)."""
    content = (1, "increment", encode(3), 7, EXPIRY) if content is None else content
    public_key = KEY.public_key if public_key is None else public_key
    if signature is None:
        signature = KEY.private_key.sign(compute_message_id(tuple(content), KEY.public_key))
    return encode([version, list(content) if isinstance(content, tuple) else content, public_key, signature])


# -- the API boundary -----------------------------------------------------------------------------

def test_a_valid_envelope_decodes_to_the_authenticated_ingress():
    ingress = decode_signed_ingress(envelope(), MAX)
    assert ingress == Ingress(source_of(KEY.public_key), 1, "increment", encode_value(3),
                              compute_message_id((1, "increment", encode_value(3), 7, EXPIRY), KEY.public_key), EXPIRY)


@pytest.mark.parametrize("data", [
    b"", b"\xc1", b"garbage", b"\xff" * 40, encode("not an envelope"), encode(None), encode({"a": 1}),
    encode([1, 2, 3]), encode([1, 2, 3, 4, 5]),
], ids=lambda d: d[:8].hex() or "empty")
def test_garbage_is_malformed(data):
    with pytest.raises(MalformedIngress):
        decode_signed_ingress(data, MAX)


def test_every_truncation_is_malformed():
    data = envelope()
    for n in range(len(data)):
        with pytest.raises(MalformedIngress):
            decode_signed_ingress(data[:n], MAX)


@pytest.mark.parametrize("tail", [b"\x00", b"\xc0", envelope()])
def test_trailing_bytes_are_malformed(tail):
    with pytest.raises(MalformedIngress):
        decode_signed_ingress(envelope() + tail, MAX)


def test_non_canonical_encoding_is_malformed():
    data = envelope()
    assert data[0] == 0x94  # fixarray of 4; the same array as array16 is not canonical
    with pytest.raises(MalformedIngress):
        decode_signed_ingress(b"\xdc\x00\x04" + data[1:], MAX)


def test_not_bytes_is_malformed():
    with pytest.raises(MalformedIngress):
        decode_signed_ingress("text", MAX)  # type: ignore[arg-type]


def test_oversized_is_too_large_before_anything_is_parsed():
    data = envelope(arg=b"x" * 2000)
    with pytest.raises(IngressTooLarge):
        decode_signed_ingress(data, MAX)
    with pytest.raises(IngressTooLarge):
        decode_signed_ingress(b"\xc1" * (MAX + 1), MAX)  # garbage, but too large first
    assert decode_signed_ingress(data, len(data)).method_payload == encode_value(b"x" * 2000)


@pytest.mark.parametrize("data", [
    raw(signature=bytes(64)),
    raw(signature=OTHER.private_key.sign(compute_message_id((1, "increment", encode(3), 7, EXPIRY), KEY.public_key))),
    raw(content=(2, "increment", encode(3), 7, EXPIRY),
        signature=KEY.private_key.sign(compute_message_id((1, "increment", encode(3), 7, EXPIRY), KEY.public_key))),
    raw(public_key=OTHER.public_key),  # signed by KEY, claims OTHER's key
    raw(public_key=b"\xff" * 32),      # not a curve point
], ids=["zero-signature", "other-signer", "content-changed", "other-key", "bad-point"])
def test_bad_signatures(data):
    with pytest.raises(BadIngressSignature):
        decode_signed_ingress(data, MAX)


WRONG_TYPES = {
    "version-2": raw(version=2),
    "version-str": raw(version="1"),
    "version-true": raw(version=True),
    "content-map": raw(content={"receiver": 1}),
    "content-short": raw(content=(1, "increment", encode(3), 7)),
    "receiver-negative": raw(content=(-1, "increment", encode(3), 7, EXPIRY)),
    "receiver-bool": raw(content=(True, "increment", encode(3), 7, EXPIRY)),
    "receiver-str": raw(content=("1", "increment", encode(3), 7, EXPIRY)),
    "method-empty": raw(content=(1, "", encode(3), 7, EXPIRY)),
    "method-too-long": raw(content=(1, "m" * 129, encode(3), 7, EXPIRY)),
    "method-bytes": raw(content=(1, b"increment", encode(3), 7, EXPIRY)),
    "arg-str": raw(content=(1, "increment", "3", 7, EXPIRY)),
    "nonce-negative": raw(content=(1, "increment", encode(3), -7, EXPIRY)),
    "expiry-none": raw(content=(1, "increment", encode(3), 7, None)),
    "pubkey-short": raw(public_key=KEY.public_key[:31]),
    "pubkey-str": raw(public_key="key"),
    "signature-short": raw(signature=bytes(63)),
    "signature-none": raw(signature=[None]),
}


@pytest.mark.parametrize("name", sorted(WRONG_TYPES))
def test_wrong_field_types_are_malformed(name):
    with pytest.raises(MalformedIngress):
        decode_signed_ingress(WRONG_TYPES[name], MAX)


def _decodes_or_typed_error(data: bytes, max_bytes: int) -> Ingress | None:
    try:
        return decode_signed_ingress(data, max_bytes)
    except IngressRefused as refusal:  # anything else propagates and fails the test
        assert type(refusal) in (MalformedIngress, IngressTooLarge, BadIngressSignature), refusal
        assert refusal.reason in ("malformed", "too_large", "bad_signature")
        return None


@FUZZ
@given(data=st.binary(max_size=400), max_bytes=st.sampled_from((0, 64, MAX)))
@example(data=b"\x94" + b"\xc0" * 4, max_bytes=MAX)
@example(data=b"\xdd\xff\xff\xff\xff", max_bytes=MAX)   # array32 claiming 4G elements
@example(data=b"\x91" * 200 + b"\xc0", max_bytes=MAX)   # nested deeper than the decoder allows
@example(data=b"\xc7\x01\x05\x00", max_bytes=MAX)       # an ext type
@example(data=b"\xca\x00\x00\x00\x00", max_bytes=MAX)   # a float
@example(data=b"\x81\x90\xc0", max_bytes=MAX)           # a map keyed by an array
def test_fuzz_arbitrary_bytes_raise_only_ingress_errors(data, max_bytes):
    assert _decodes_or_typed_error(data, max_bytes) is None


VALID = envelope()


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
    # no malleability: the only accepted encoding of this message is the original one
    assert result is None or data == VALID


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
