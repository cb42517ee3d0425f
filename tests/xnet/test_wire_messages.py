"""XNet wire bodies: round trips, each rejected field, and fuzzed decoders (typed errors only)."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from state_manager.encoding import encode
from xnet.errors import BadRequest, MalformedResponse, ResponseTooLarge, XNetError
from xnet.grpc import messages as m

LIMITS = m.RequestLimits(max_msg_limit=100, max_byte_limit=1000)
GOOD = m.GetStreamSliceRequest("subnet-b", 3, 5, 10, 500)


def raw(*items) -> bytes:
    return encode(list(items))


def test_request_round_trip_and_golden_bytes():
    data = m.encode_get_stream_slice_request(GOOD)
    assert data == bytes.fromhex("96") + b"\x01\xa8subnet-b\x03\x05\x0a\xcd\x01\xf4"
    assert m.decode_get_stream_slice_request(data, LIMITS) == GOOD
    edge = m.GetStreamSliceRequest("x" * 64, 0, 2**64 - 1, 100, 1000)
    assert m.decode_get_stream_slice_request(m.encode_get_stream_slice_request(edge), LIMITS) == edge


@pytest.mark.parametrize(
    "data",
    [
        raw(2, "s", 0, 0, 1, 1),                  # unknown version
        raw(True, "s", 0, 0, 1, 1),               # version must be an int, not a bool
        raw(1, "s", 0, 0, 1),                     # too few items
        raw(1, "s", 0, 0, 1, 1, 0),               # too many items
        raw(1, "", 0, 0, 1, 1),                   # empty subnet
        raw(1, "s" * 65, 0, 0, 1, 1),             # subnet too long
        raw(1, "a\nb", 0, 0, 1, 1),               # control character in subnet
        raw(1, b"s", 0, 0, 1, 1),                 # subnet as bytes
        raw(1, "s", -1, 0, 1, 1),                 # negative witness_begin
        raw(1, "s", 0, -1, 1, 1),                 # negative msg_begin
        raw(1, "s", 0, 0, True, 1),               # bool msg_limit
        raw(1, "s", 6, 5, 1, 1),                  # witness_begin > msg_begin
        raw(1, "s", 0, 0, 0, 1),                  # msg_limit zero
        raw(1, "s", 0, 0, 101, 1),                # msg_limit above the server maximum
        raw(1, "s", 0, 0, 1, 0),                  # byte_limit zero
        raw(1, "s", 0, 0, 1, 1001),               # byte_limit above the server maximum
        raw(1, "s", 0, 0, 1, None),               # byte_limit missing
        encode({"v": 1}),                         # not an array
        b"",                                      # empty body
        m.encode_get_stream_slice_request(GOOD) + b"\x00",         # trailing byte
        bytes.fromhex("96") + b"\x01\xa1s\xcc\x00\x00\x01\x01",    # non-canonical int (0 as uint8)
        b"\x96" + b"\x01" * 1100,                                  # oversized body
    ],
)
def test_bad_requests_are_rejected(data):
    with pytest.raises(BadRequest):
        m.decode_get_stream_slice_request(data, LIMITS)


def test_encoder_checks_fields_too():
    with pytest.raises(BadRequest):
        m.encode_get_stream_slice_request(m.GetStreamSliceRequest("s", 0, 0, 0, 1))
    with pytest.raises(BadRequest):
        m.encode_get_stream_slice_request(m.GetStreamSliceRequest("s", 0, 2**64, 1, 1))
    with pytest.raises(BadRequest):
        m.encode_get_stream_slice_request(m.GetStreamSliceRequest("\ud800", 0, 0, 1, 1))


def test_slice_response_round_trip_and_caps():
    body = m.encode_get_stream_slice_response(b"certified")
    assert body == b"\x92\x01\xc4\x09certified"
    assert m.decode_get_stream_slice_response(body, 9) == b"certified"
    with pytest.raises(ResponseTooLarge):
        m.decode_get_stream_slice_response(body, 8)
    big = m.encode_get_stream_slice_response(b"x" * 100_000)
    with pytest.raises(ResponseTooLarge):
        m.decode_get_stream_slice_response(big, 1000)  # refused before parsing
    for bad in (raw(2, b"x"), raw(1, "x"), raw(1), raw(1, b"x", b"y"), b"\x92\x01", raw(1, b"x") + b"\x00"):
        with pytest.raises(MalformedResponse):
            m.decode_get_stream_slice_response(bad, 1000)


def test_list_streams_bodies():
    assert m.encode_list_streams_request() == b"\x91\x01"
    m.decode_list_streams_request(b"\x91\x01")
    for bad in (b"\x91\x02", b"\x92\x01\x01", b"\x90", b""):
        with pytest.raises(BadRequest):
            m.decode_list_streams_request(bad)
    body = m.encode_list_streams_response(["b", "a", "b"])
    assert m.decode_list_streams_response(body, 1000) == ["a", "b"]
    for bad in (raw(1, ["b", "a"]), raw(1, ["a", "a"]), raw(1, [""]), raw(1, [1]), raw(1, "a"), raw(2, [])):
        with pytest.raises(MalformedResponse):
            m.decode_list_streams_response(bad, 1000)
    with pytest.raises(ValueError):
        m.encode_list_streams_response(["ok", 7])


# -- fuzzing: arbitrary input gives a value or a typed error, never anything else ----------

msgpack_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.binary(max_size=40) | st.text(max_size=70),
    lambda children: st.lists(children, max_size=7) | st.dictionaries(st.text(max_size=4), children, max_size=4),
    max_leaves=20,
)
request_like = st.tuples(
    st.sampled_from([1, 1, 1, 0, 2, True]),
    st.text(max_size=70) | st.binary(max_size=8) | st.none(),
    st.integers(min_value=-2, max_value=2**64 - 1),
    st.integers(min_value=-2, max_value=2**64 - 1),
    st.integers(min_value=-2, max_value=200),
    st.integers(min_value=-2, max_value=2000),
).map(list)


def _packed(value) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def _decode_all(data: bytes) -> None:
    for decode in (
        lambda d: m.decode_get_stream_slice_request(d, LIMITS),
        m.decode_list_streams_request,
        lambda d: m.decode_get_stream_slice_response(d, 64),
        lambda d: m.decode_list_streams_response(d, 4096),
    ):
        try:
            decode(data)
        except XNetError:
            pass


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_decoders_on_arbitrary_bytes(data):
    _decode_all(data)


@settings(max_examples=400, deadline=None)
@given(msgpack_values | request_like)
def test_decoders_on_arbitrary_msgpack(value):
    _decode_all(_packed(value))


@settings(max_examples=200, deadline=None)
@given(request_like)
def test_decoded_requests_are_always_in_range(value):
    try:
        request = m.decode_get_stream_slice_request(_packed(value), LIMITS)
    except BadRequest:
        return
    assert 0 < len(request.subnet) <= 64 and request.witness_begin <= request.msg_begin
    assert 0 < request.msg_limit <= 100 and 0 < request.byte_limit <= 1000
    assert m.encode_get_stream_slice_request(request) == _packed(value)
