"""The IC's HTTP interface bodies: each answer both ways (a query's from the node's encoder to the
agent's decoder, signed by the node), every malformed one refused typed, any CBOR value too; canister
ids in routes round trip and parse strictly."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from message_routing.limits import DEFAULT
from replica.client.answers import QueryAnswer, decode_dry_run_answer, decode_query_answer, encode_dry_run_answer
from replica.client.envelope import canister_id_of
from replica.client.refusals import InvalidCanisterId
from replica.execution.dry_run import DryRunResult, OutgoingCall
from replica.ic import cbor
from replica.ic.errors import AnswerMalformed, QueryResponseUnsigned, QuerySignatureInvalid
from replica.ic.http_interface import (
    CallAnswer, canister_path, decode_call_answer, decode_read_state_answer, decode_status, encode_call_answer,
    encode_read_state_answer, encode_status, subnet_read_state_path,
)
from replica.ic.identities import Ed25519Identity
from replica.ic.principal import canister_principal, node_principal, principal_to_text
from replica.ic.query_response import decode_query_response, verify_query_response
from replica.node.backend import NodeBackend
from replica.node.ingress_requests import canister_of, encode_query_answer
from state_manager.messages import MANAGEMENT_CANISTER_ID, RejectCode

MAX = 1 << 20


def test_routes_are_the_interface_specifications():
    assert canister_path(3, "rwlgt-iiaaa-aaaaa-aaaaa-cai", "call") == "/api/v3/canister/rwlgt-iiaaa-aaaaa-aaaaa-cai/call"
    assert subnet_read_state_path(2, "tdb26-jop6k") == "/api/v2/subnet/tdb26-jop6k/read_state"


def test_read_state_answer_round_trips_and_carries_the_self_describe_tag():
    body = encode_read_state_answer(b"\x01\x02")
    assert body.startswith(cbor.SELF_DESCRIBE_PREFIX)
    assert decode_read_state_answer(body, MAX) == b"\x01\x02"


@pytest.mark.parametrize("answer", [
    CallAnswer("replied", certificate=b"cert"),
    CallAnswer("non_replicated_rejection", reject_code=4, reject_message="no", error_code="IC0406"),
])
def test_call_answers_round_trip(answer):
    assert decode_call_answer(encode_call_answer(answer), MAX) == answer


@pytest.mark.parametrize("value", [
    {"status": "replied"}, {"status": "replied", "certificate": "text"}, {"status": "accepted"},
    {"status": "non_replicated_rejection", "reject_code": "4", "reject_message": "x"},
    {"status": "replied", "certificate": b"", "extra": 1}, [1, 2],
])
def test_malformed_call_answers_are_refused(value):
    with pytest.raises(AnswerMalformed):
        decode_call_answer(cbor.encode(value), MAX)


def test_status_states_the_root_key():
    fields = {"root_key": b"\x30" * 133, "impl_version": "0.1.0", "replica_health_status": "healthy",
              "certified_height": 7}
    assert decode_status(encode_status(fields)) == fields
    with pytest.raises(AnswerMalformed):
        decode_status(encode_status({"impl_version": "x"}))


def test_query_answers_decode_as_the_interface_writes_them():
    replied = cbor.encode({"status": "replied", "reply": {"arg": b"DIDL\x00\x00"}, "signatures": [], "height": 3})
    assert decode_query_answer(replied, MAX) == QueryAnswer(None, reply=b"DIDL\x00\x00")
    rejected = cbor.encode({"status": "rejected", "reject_code": 5, "reject_message": "trap", "error_code": "IC0503"})
    assert decode_query_answer(rejected, MAX) == QueryAnswer(None, reject_code="CANISTER_ERROR", reject_message="trap")


def test_dry_run_answers_round_trip_without_nulls_or_booleans():
    result = DryRunResult(4, "replied", b"r", None, None, 1234, True, (OutgoingCall(9, "m", b"p", 0),), ("/a",), 0)
    body = encode_dry_run_answer(result)
    assert decode_dry_run_answer(body, MAX) == result


@given(st.binary(max_size=200))
def test_garbage_is_refused_typed(data):
    for decoder in (decode_read_state_answer, decode_call_answer, decode_query_answer, decode_dry_run_answer):
        try:
            decoder(data, MAX)
        except AnswerMalformed:
            pass


# -- what the former msgpack wire's tests checked, on the IC's interface ---------------------------

cbor_values = st.recursive(
    st.integers(-(2**64), 2**70) | st.binary(max_size=40) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=25,
)
#: Maps close to the answers' shapes, so the decoders' field checks are reached, not only the map check.
answer_like = st.fixed_dictionaries(
    {"status": st.sampled_from(["replied", "rejected", "non_replicated_rejection", "waiting", ""]) | st.text(max_size=8)},
    optional={"certificate": cbor_values, "reply": cbor_values | st.fixed_dictionaries({"arg": cbor_values}),
              "reject_code": cbor_values, "reject_message": cbor_values, "error_code": cbor_values,
              "signatures": cbor_values, "height": cbor_values, "instructions": cbor_values,
              "limit_exceeded": cbor_values, "calls": cbor_values, "changed_paths": cbor_values,
              "more_paths": cbor_values, "root_key": cbor_values},
)
DECODERS = [decode_read_state_answer, decode_call_answer, decode_query_answer, decode_dry_run_answer,
            lambda body, _max: decode_status(body)]


@settings(max_examples=300, deadline=None)
@given(decoder=st.sampled_from(DECODERS), value=cbor_values | answer_like, tagged=st.booleans(),
       max_bytes=st.sampled_from([0, 16, MAX]))
def test_decoders_raise_only_typed_refusals_for_any_cbor_value(decoder, value, tagged, max_bytes):
    """Any well-formed CBOR value (not only garbage bytes) decodes or is ``AnswerMalformed``,
    within the decoder's bound."""
    try:
        decoder(cbor.encode(value, self_describe=tagged), max_bytes)
    except AnswerMalformed:
        pass


NODE = Ed25519Identity.from_seed(b"answering node")
CLOCK = 1_700_000_000 * 10**9


def _backend(signer):
    return NodeBackend("alpha", "alpha-node-1", DEFAULT, lambda ingress: None, lambda *args: None, lambda: None,
                       dict, clock=lambda: CLOCK, node_signer=signer)


query_answers = st.builds(QueryAnswer, st.integers(0, 2**64 - 1), reply=st.binary(max_size=50)) | st.builds(
    QueryAnswer, st.integers(0, 2**64 - 1), reject_code=st.sampled_from([code.name for code in RejectCode]),
    reject_message=st.text(max_size=40))


@settings(max_examples=100, deadline=None)
@given(answer=query_answers, request=st.binary(min_size=32, max_size=32))
def test_query_answers_round_trip_from_the_node_to_the_agent(answer, request):
    """The node's answer (``encode_query_answer``) is what the agent reads back, less the height
    (the IC's answer has none), and the node's signature over it verifies under its key."""
    expected = QueryAnswer(None, answer.reply, answer.reject_code, answer.reject_message)
    signed = encode_query_answer(answer, request, _backend(NODE))
    assert decode_query_answer(signed, MAX) == expected
    response = decode_query_response(signed, max_bytes=MAX)
    (signature,) = response.signatures
    assert signature.timestamp == CLOCK and signature.identity == node_principal(NODE.der_public_key)
    verify_query_response(response, request, {signature.identity: NODE.der_public_key})
    with pytest.raises(QuerySignatureInvalid):   # signed for this query only
        verify_query_response(response, bytes(32) if request != bytes(32) else b"\x01" * 32,
                              {signature.identity: NODE.der_public_key})
    unsigned = encode_query_answer(answer, request, _backend(None))
    assert decode_query_answer(unsigned, MAX) == expected
    with pytest.raises(QueryResponseUnsigned):
        decode_query_response(unsigned, max_bytes=MAX)


@given(st.integers(0, 2**64 - 2))
def test_canister_ids_in_routes_round_trip(number):
    text = principal_to_text(canister_principal(number).raw)
    assert canister_path(2, text, "call").split("/")[4] == text
    assert canister_of(text) == number


def test_the_management_canister_has_one_id_in_routes():
    assert canister_of("aaaaa-aa") == MANAGEMENT_CANISTER_ID
    with pytest.raises(InvalidCanisterId):   # the canister principal of its number is no canister
        canister_of(principal_to_text(canister_principal(MANAGEMENT_CANISTER_ID).raw))


@pytest.mark.parametrize("text", ["", "7", "-1", "aaaaa-aa ", "2vxsx-fae", "rwlgt-iiaaa-aaaaa-aaaaa-cai-",
                                  principal_to_text(Ed25519Identity.from_seed(b"user").principal.raw)])
def test_route_ids_that_are_no_canister_are_refused(text):
    with pytest.raises(InvalidCanisterId):
        canister_of(text)


@given(st.text(max_size=70) | st.sampled_from([principal_to_text(canister_principal(n).raw) for n in (0, 5, 2**40)]))
def test_route_ids_parse_strictly(text):
    """A route's id is a canister's textual id (any case) or refused, never anything else."""
    try:
        number = canister_of(text)
    except InvalidCanisterId:
        return
    assert principal_to_text(canister_id_of(number).raw) == text.lower()
