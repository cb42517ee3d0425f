"""The IC's HTTP interface bodies: each answer both ways, and every malformed one refused typed."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from replica.client.answers import QueryAnswer, decode_dry_run_answer, decode_query_answer, encode_dry_run_answer
from replica.execution.dry_run import DryRunResult, OutgoingCall
from replica.ic import cbor
from replica.ic.errors import AnswerMalformed
from replica.ic.http_interface import (
    CallAnswer, canister_path, decode_call_answer, decode_read_state_answer, decode_status, encode_call_answer,
    encode_read_state_answer, encode_status, subnet_read_state_path,
)

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
