"""The strict CBOR of the IC interface: what it accepts, each refusal's type, fuzzed."""

from __future__ import annotations

import cbor2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replica.ic.cbor import DEFAULT_MAX_DEPTH, SELF_DESCRIBE_PREFIX, decode, encode
from replica.ic.errors import (
    CborMalformed, CborRefused, CborTooDeep, CborTooLarge, CborTrailingBytes, CborTypeRefused,
)

LIMIT = 1 << 20

#: Values the interface uses: ints (nats as bignums above u64), blobs, text, arrays, text-keyed maps.
values = st.recursive(
    st.integers(min_value=-(1 << 64), max_value=1 << 80) | st.binary(max_size=40) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=30,
)


def test_the_specifications_example_decodes():
    """The interface specification's CBOR example: ``82 61 61 a1 61 62 61 63`` is ``["a", {"b": "c"}]``."""
    assert decode(bytes.fromhex("826161a161626163"), max_bytes=LIMIT) == ["a", {"b": "c"}]


@given(values)
@settings(max_examples=300, deadline=None)
def test_what_we_encode_we_decode_and_it_carries_the_self_describe_tag(value):
    data = encode(value)
    assert data.startswith(SELF_DESCRIBE_PREFIX)
    assert decode(data, max_bytes=LIMIT) == value


@given(values)
@settings(max_examples=100, deadline=None)
def test_the_self_describe_tag_is_optional_on_input(value):
    assert decode(encode(value)[len(SELF_DESCRIBE_PREFIX):], max_bytes=LIMIT) == value


def test_encoding_is_canonical_map_order():
    assert encode({"bb": 1, "a": 2}) == encode({"a": 2, "bb": 1})


def test_size_is_refused_before_parsing():
    # Not even CBOR: the bound is checked first.
    with pytest.raises(CborTooLarge):
        decode(b"\xff" * 101, max_bytes=100)
    assert decode(b"\x58\x62" + b"x" * 98, max_bytes=100) == b"x" * 98


def test_depth_bound_is_the_number_of_nested_containers():
    assert decode(b"\x81" * 7 + b"\x01", max_bytes=LIMIT, max_depth=7) == [[[[[[[1]]]]]]]
    with pytest.raises(CborTooDeep):
        decode(b"\x81" * 8 + b"\x01", max_bytes=LIMIT, max_depth=7)
    with pytest.raises(CborTooDeep):
        decode(b"\x81" * (DEFAULT_MAX_DEPTH + 1) + b"\x01", max_bytes=LIMIT)


@pytest.mark.parametrize("data, error", [
    (b"", CborMalformed),
    (SELF_DESCRIBE_PREFIX, CborMalformed),
    (b"\x82\x01", CborMalformed),                       # truncated array
    (b"\x9b\x7f\xff\xff\xff\xff\xff\xff\xff", CborMalformed),   # claims 2**63 items
    (b"\x5b\x7f\xff\xff\xff\xff\xff\xff\xff", CborMalformed),   # claims 2**63 bytes
    (b"\x62\xff\xfe", CborMalformed),                   # bad UTF-8
    (b"\x9f\x01\xff", CborMalformed),                   # indefinite-length array
    (b"\x5f\x41\x01\xff", CborMalformed),               # indefinite-length byte string
    (b"\xa2\x61a\x01\x61a\x02", CborMalformed),         # duplicate key
    (b"\x01\x02", CborTrailingBytes),
    (SELF_DESCRIBE_PREFIX + b"\x01\x00", CborTrailingBytes),
    (b"\xf9\x3c\x00", CborTypeRefused),                 # half float
    (b"\xfb" + bytes(8), CborTypeRefused),              # double
    (b"\xf4", CborTypeRefused),                         # false
    (b"\xf6", CborTypeRefused),                         # null
    (b"\xf7", CborTypeRefused),                         # undefined
    (b"\xf0", CborTypeRefused),                         # simple value 16
    (b"\xa1\x01\x02", CborTypeRefused),                 # integer map key
    (b"\xa1\x41k\x02", CborTypeRefused),                # byte-string map key
    (b"\xc0\x74" + b"2013-03-21T20:04:00Z", CborTypeRefused),   # tag 0, a date
    (b"\xd8\x64\x01", CborTypeRefused),                 # tag 100
    (b"\xd8\x1c\x81\xd8\x1d\x00", CborTypeRefused),     # shared references
    (b"\xc3\x49\x01" + bytes(8), CborTypeRefused),      # negative bignum
    (b"\xc2\x41\x01", CborTypeRefused),                 # a bignum that fits u64
    (b"\xc2\x01", CborTypeRefused),                     # a bignum that is not a byte string
    (b"\x81" + SELF_DESCRIBE_PREFIX + b"\x01", CborTypeRefused),  # self-describe, not outermost
    (SELF_DESCRIBE_PREFIX * 2 + b"\x01", CborTypeRefused),
])
def test_each_refusal_has_its_type(data, error):
    with pytest.raises(error):
        decode(data, max_bytes=LIMIT)


def test_a_bignum_above_u64_is_a_nat():
    assert decode(b"\xc2\x49\x01" + bytes(8), max_bytes=LIMIT) == 1 << 64


def test_non_bytes_input_is_refused():
    with pytest.raises(CborTypeRefused):
        decode("text", max_bytes=LIMIT)


@pytest.mark.parametrize("value", [1.5, True, None, {1: 2}, {b"k": 1}, [set()], -(1 << 64) - 1])
def test_encode_refuses_what_decode_would_refuse(value):
    with pytest.raises(CborTypeRefused):
        encode(value)


@given(st.binary(max_size=200))
@settings(max_examples=2000, deadline=None)
def test_garbage_raises_only_typed_refusals(data):
    try:
        decode(data, max_bytes=150, max_depth=16)
    except CborRefused:
        pass


@given(values, st.data())
@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
def test_mutated_encodings_raise_only_typed_refusals(value, data):
    encoded = bytearray(encode(value))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(encoded) - 1))
        encoded[position] = data.draw(st.integers(0, 255))
    try:
        decoded = decode(bytes(encoded), max_bytes=LIMIT, max_depth=16)
    except CborRefused:
        return
    # Whatever is accepted re-encodes to an equivalent value (no foreign types slipped through).
    assert decode(encode(decoded), max_bytes=LIMIT) == decoded


def test_a_refusal_is_also_a_value_error_with_a_reason():
    with pytest.raises(ValueError) as caught:
        decode(b"\x01\x02", max_bytes=LIMIT)
    assert caught.value.reason == "cbor_trailing_bytes"


def test_cbor2_would_accept_trailing_bytes_on_its_own():
    """Why ``decode`` tracks where the item ends: the library's own ``loads`` ignores the rest."""
    assert cbor2.loads(b"\x01\x02") == 1
