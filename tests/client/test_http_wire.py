"""The HTTP API's wire decoders are total: any input decodes to what was encoded or raises
``WireError`` (never another exception), within their bounds."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replica.client.http_wire import (
    MAX_LABEL_BYTES, MAX_PATH_LABELS, MAX_PATHS, MAX_READ_STATE_BYTES, QueryAnswer, WireError, canister_url,
    decode_certificate, decode_query_answer, decode_read_state_request, encode_query_answer,
    encode_read_state_request, parse_canister_id,
)

values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.binary(max_size=40) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=25,
)
DECODERS = [decode_read_state_request, decode_certificate, lambda body: decode_query_answer(body, 10**6)]


@settings(max_examples=200, deadline=None)
@given(decoder=st.sampled_from(DECODERS), body=st.binary(max_size=200) | values.map(
    lambda v: msgpack.packb(v, use_bin_type=True)))
def test_decoders_raise_only_wire_errors(decoder, body):
    try:
        decoder(body)
    except WireError:
        pass


@given(paths=st.lists(st.lists(st.binary(max_size=MAX_LABEL_BYTES), min_size=1, max_size=MAX_PATH_LABELS),
                      min_size=1, max_size=MAX_PATHS))
def test_read_state_requests_round_trip_within_their_bound(paths):
    body = encode_read_state_request(paths)
    assert len(body) <= MAX_READ_STATE_BYTES
    assert decode_read_state_request(body) == tuple(tuple(p) for p in paths)


@pytest.mark.parametrize("paths", [[], [[]], [[b"x"]] * (MAX_PATHS + 1), [[b"x"] * (MAX_PATH_LABELS + 1)],
                                   [[b"x" * (MAX_LABEL_BYTES + 1)]], [["text"]]])
def test_read_state_requests_out_of_bounds(paths):
    with pytest.raises(WireError):
        decode_read_state_request(encode_read_state_request(paths))


@given(answer=st.builds(QueryAnswer, st.integers(0, 2**64 - 1), reply=st.binary(max_size=50)) | st.builds(
    QueryAnswer, st.integers(0, 2**64 - 1), reject_code=st.text(max_size=20), reject_message=st.text(max_size=40)))
def test_query_answers_round_trip(answer):
    assert decode_query_answer(encode_query_answer(answer), 10**6) == answer


@given(st.integers(0, 2**64 - 1))
def test_canister_ids_round_trip(canister):
    assert parse_canister_id(canister_url(canister, "call").split("/")[4]) == canister


@given(st.text(max_size=30))
def test_canister_ids_parse_strictly(text):
    try:
        value = parse_canister_id(text)
    except WireError:
        return
    assert str(value) == text and 0 <= value < 2**64
