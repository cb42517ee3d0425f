"""Refused ingress is refused out loud: every refusal of ``Subnet.submit`` reaches the caller
as its own ``IngressRefused`` subclass with a stable ``reason`` code, leaves every node's
pool as it was, and never reaches a block or the ingress history.

The subnet is alpha of the integration harness (4 nodes, canisters 0-999; beta hosts
1000-1999), stepped by hand without starting its XNet endpoints.
"""

from __future__ import annotations

import dataclasses
import itertools
import time

import pytest

from consensus_stub.ingress_pool import Admission
from examples.ledger import account_of
from replica.ic.textual_ids import canister_text
from replica.client import (
    BadIngressSignature, CanisterNotOnSubnet, DuplicateIngress, ExpiredIngress, IngressExpiryTooFar,
    IngressPoolFull, IngressRefused, IngressTooLarge, MalformedIngress, UnknownCanister, WrongRequestType,
    decode_signed_ingress, refusal_for, sign_ingress,
)
from replica.client.refusals import UnsupportedEnvelopeVersion
from replica.ic import cbor
from replica.ic.request_id import request_id
from replica.inprocess.subnet import NodeHooks
from replica.sdk import encode_value
from state_manager.encoding import encode
from state_manager.ingress_history import IngressState
from state_manager.messages import Ingress
from tests.integration.harness import ALPHA, BETA, CONFIG, LEDGER, LIMITS, USERS, canister, make_testnet

pytestmark = pytest.mark.timeout(60)

KEY = USERS["alice"]
SEC = 10**9
TTL = LIMITS.max_ingress_ttl_ns
HOME = canister(ALPHA, LEDGER)
_nonces = itertools.count(1)


def envelope(receiver: int = HOME, *, expiry: int | None = None, arg=None, nonce: int | None = None,
             request_type: str = "call") -> bytes:
    """A signed call of alice's to ``receiver`` (a harmless local transfer by default)."""
    arg = {"from": account_of(KEY.principal.raw), "to": "carol", "amount": 1} if arg is None else arg
    expiry = time.time_ns() + 60 * SEC if expiry is None else expiry
    return sign_ingress(KEY, receiver, "transfer_local", arg, next(_nonces) if nonce is None else nonce, expiry,
                        request_type=request_type)


def message_id_of(data: bytes) -> bytes:
    """The message id an envelope claims: its content's request id (also for one whose
    signature does not verify)."""
    return request_id(cbor.decode(data, max_bytes=len(data))["content"])


def with_signature(data: bytes, signature: bytes) -> bytes:
    value = cbor.decode(data, max_bytes=len(data))
    return cbor.encode(dict(value, sender_sig=signature))


@pytest.fixture
def net():
    testnet = make_testnet()
    yield testnet
    testnet.stop()


@pytest.fixture
def alpha(net):
    return net.subnets[ALPHA]


def carried(sub) -> list[bytes]:
    """The ids of the messages in every finalized block, with repetitions."""
    return [m.message_id for block in sub.block_store.blocks_from(1) for m in block.ingress]


def pooled(sub, message_id: bytes) -> list[bool]:
    return [message_id in node.ingress_pool for node in sub.nodes.values()]


def assert_refused(sub, data: bytes, error: type[IngressRefused], reason: str) -> IngressRefused:
    """``submit`` raises exactly ``error`` with ``reason``; no pool holds the message after it."""
    before = [len(node.ingress_pool) for node in sub.nodes.values()]
    with pytest.raises(IngressRefused) as info:
        sub.submit(data)
    assert type(info.value) is error and info.value.reason == reason
    assert str(info.value)  # a message saying why
    assert [len(node.ingress_pool) for node in sub.nodes.values()] == before
    return info.value


# -- one test per refusal -----------------------------------------------------------------------

def test_an_accepted_envelope_returns_its_message_and_reaches_every_pool(alpha):
    ingress = alpha.submit(envelope())
    assert ingress.receiver == HOME and pooled(alpha, ingress.message_id) == [True] * 4


def test_malformed(alpha):
    error = assert_refused(alpha, b"\x94garbage", MalformedIngress, "malformed")
    assert "cbor" in str(error)


def test_an_envelope_of_the_former_format_is_refused_naming_its_version(alpha):
    """Version 1 was the replica's own msgpack envelope ``[1, content, pubkey, signature]``."""
    former = encode([1, [HOME, "transfer_local", encode_value(None), 1, time.time_ns()], bytes(32), bytes(64)])
    error = assert_refused(alpha, former, UnsupportedEnvelopeVersion, "malformed")
    assert "version-1" in str(error) and isinstance(error, MalformedIngress)


def test_a_query_envelope_is_never_submitted_as_a_call(alpha):
    data = envelope(request_type="query")
    error = assert_refused(alpha, data, WrongRequestType, "wrong_request_type")
    assert "query" in str(error)
    alpha.step()
    assert message_id_of(data) not in carried(alpha) and alpha.ingress_status(message_id_of(data)) is None


def test_too_large(alpha):
    assert_refused(alpha, envelope(arg=b"x" * (LIMITS.max_ingress_bytes + 1)), IngressTooLarge, "too_large")


def test_bad_signature(alpha):
    assert_refused(alpha, with_signature(envelope(), bytes(64)), BadIngressSignature, "bad_signature")


def test_expired(alpha):
    error = assert_refused(alpha, envelope(expiry=time.time_ns() - SEC), ExpiredIngress, "expired")
    assert "expired" in str(error)


def test_expiry_too_far(alpha):
    error = assert_refused(alpha, envelope(expiry=time.time_ns() + TTL + 60 * SEC), IngressExpiryTooFar,
                           "expiry_too_far")
    assert "too far" in str(error)


def test_duplicate_while_pooled(alpha):
    data = envelope()
    alpha.submit(data)
    error = assert_refused(alpha, data, DuplicateIngress, "duplicate")
    assert "duplicate" in str(error)


def test_duplicate_after_it_was_executed(alpha):
    data = envelope()
    ingress = alpha.submit(data)
    alpha.step()
    assert alpha.ingress_status(ingress.message_id) is not None
    assert_refused(alpha, data, DuplicateIngress, "duplicate")


def test_unknown_canister_in_our_range(alpha):
    error = assert_refused(alpha, envelope(canister(ALPHA, 500)), UnknownCanister, "unknown_canister")
    assert canister_text(canister(ALPHA, 500)) in str(error)


def test_canister_in_no_subnets_range_is_unknown(alpha):
    assert_refused(alpha, envelope(10**9), UnknownCanister, "unknown_canister")


def test_canister_not_on_this_subnet(alpha):
    error = assert_refused(alpha, envelope(canister(BETA, LEDGER)), CanisterNotOnSubnet, "canister_not_on_subnet")
    assert f"canister {canister_text(canister(BETA, LEDGER))}" in str(error)


def test_pool_full():
    net = make_testnet(config=dataclasses.replace(CONFIG, ingress_pool_messages=2))
    try:
        alpha = net.subnets[ALPHA]
        alpha.submit(envelope())
        alpha.submit(envelope())
        assert_refused(alpha, envelope(), IngressPoolFull, "pool_full")
        alpha.step()  # the block takes both: room again
        alpha.submit(envelope())
    finally:
        net.stop()


def test_submit_ingress_raises_the_same_errors(alpha):
    ingress = Ingress(KEY.principal.raw, HOME, "transfer_local", encode_value(None), bytes(32), time.time_ns() + 60 * SEC)
    assert alpha.submit_ingress(ingress) == ingress
    with pytest.raises(DuplicateIngress):
        alpha.submit_ingress(ingress)
    huge = dataclasses.replace(ingress, method_payload=bytes(LIMITS.max_ingress_bytes), message_id=b"\x01" * 32)
    with pytest.raises(IngressTooLarge):
        alpha.submit_ingress(huge)
    expired = dataclasses.replace(ingress, message_id=b"\x02" * 32, expiry_time=time.time_ns() - SEC)
    with pytest.raises(ExpiredIngress):
        alpha.submit_ingress(expired)
    elsewhere = dataclasses.replace(ingress, message_id=b"\x03" * 32, receiver=canister(BETA, LEDGER))
    with pytest.raises(CanisterNotOnSubnet):
        alpha.submit_ingress(elsewhere)


# -- the verdict-to-error mapping -----------------------------------------------------------------

def test_every_refusing_verdict_has_its_own_error_class_and_reason():
    now = time.time_ns()
    ingress = Ingress(KEY.principal.raw, HOME, "m", b"", bytes(32), now)
    assert refusal_for(Admission.ADDED, ingress, now) is None
    errors = [refusal_for(verdict, ingress, now) for verdict in Admission if verdict is not Admission.ADDED]
    assert all(isinstance(e, IngressRefused) for e in errors)
    assert [e.reason for e in errors] == [v.reason for v in Admission if v is not Admission.ADDED]
    classes = {type(e) for e in errors} | {MalformedIngress, IngressTooLarge, BadIngressSignature}
    assert len(classes) == len({c.reason for c in classes}) == 9


# -- several nodes: the first online node's verdict is the caller's -----------------------------

def test_a_node_that_already_holds_the_message_does_not_refuse_it_for_the_caller(alpha):
    data = envelope()
    ingress = decode_signed_ingress(data, LIMITS.max_ingress_bytes, now_ns=time.time_ns())
    second = list(alpha.nodes.values())[1]
    assert second.add_ingress(ingress, time.time_ns()) is Admission.ADDED
    assert alpha.submit(data) == ingress
    assert alpha.ingress_disagreements == {"duplicate": 1}
    assert pooled(alpha, ingress.message_id) == [True] * 4
    for _ in range(3):
        alpha.step()
    assert carried(alpha).count(ingress.message_id) == 1


def test_when_the_first_node_refuses_no_other_node_sees_the_message(alpha):
    data = envelope()
    ingress = decode_signed_ingress(data, LIMITS.max_ingress_bytes, now_ns=time.time_ns())
    first = next(iter(alpha.nodes.values()))
    assert first.add_ingress(ingress, time.time_ns()) is Admission.ADDED
    with pytest.raises(DuplicateIngress):
        alpha.submit(data)
    assert pooled(alpha, ingress.message_id) == [True, False, False, False]


def test_with_the_first_node_offline_the_next_online_node_decides():
    net = make_testnet(hooks={"alpha-node-1": NodeHooks(offline=True)})
    try:
        alpha = net.subnets[ALPHA]
        ingress = alpha.submit(envelope())
        assert pooled(alpha, ingress.message_id) == [False, True, True, True]
        assert_refused(alpha, envelope(expiry=time.time_ns() - SEC), ExpiredIngress, "expired")
    finally:
        net.stop()


# -- nothing refused reaches a block ---------------------------------------------------------------

def test_nothing_refused_reaches_a_block_or_the_ingress_history():
    net = make_testnet(config=dataclasses.replace(CONFIG, ingress_pool_messages=2))
    try:
        alpha = net.subnets[ALPHA]
        now = time.time_ns()
        original = envelope()
        accepted = [alpha.submit(original), alpha.submit(envelope())]
        refused = {"pool_full": envelope()}
        with pytest.raises(IngressPoolFull):
            alpha.submit(refused["pool_full"])
        refused.update({
            "expired": envelope(expiry=now - SEC),
            "expiry_too_far": envelope(expiry=now + TTL + 60 * SEC),
            "unknown_canister": envelope(canister(ALPHA, 500)),
            "not_on_subnet": envelope(canister(BETA, LEDGER)),
            "bad_signature": with_signature(envelope(), bytes(64)),
        })
        for kind in list(refused)[1:]:
            with pytest.raises(IngressRefused):
                alpha.submit(refused[kind])
        for _ in range(4):
            alpha.step()
            with pytest.raises(DuplicateIngress):  # before and after its block
                alpha.submit(original)
        assert sorted(carried(alpha)) == sorted(m.message_id for m in accepted)
        for ingress in accepted:
            assert alpha.ingress_status(ingress.message_id).state is not IngressState.REJECTED
        for kind, data in refused.items():
            assert message_id_of(data) not in carried(alpha), kind
            assert alpha.ingress_status(message_id_of(data)) is None, kind
        assert [len(node.ingress_pool) for node in alpha.nodes.values()] == [0] * 4
    finally:
        net.stop()
