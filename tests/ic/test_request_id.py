"""Request ids: the specification's example and the LEB128 rules, vectors from IC agents."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replica.ic.errors import IcFormatError, UnhashableValue
from replica.ic.request_id import MAX_HASH_DEPTH, hash_of_map, hash_value, request_id, sleb128, uleb128

#: The interface specification's example (*Request ids*).
SPEC_CONTENT = {
    "request_type": "call", "sender": b"\x04", "ingress_expiry": 1685570400000000000,
    "canister_id": bytes.fromhex("00000000000004D2"), "method_name": "hello", "arg": b"DIDL\x00\xfd*",
}


def test_the_specifications_request_id():
    assert request_id(SPEC_CONTENT).hex() == "1d1091364d6bb8a6c16b203ee75467d59ead468f523eb058880ae8ec80e2b101"


@pytest.mark.parametrize("key, value, expected", [
    # The intermediate hashes the specification lists for its example, as key · value pairs.
    ("request_type", "call", "769e6f87bdda39c859642b74ce9763cdd37cb1cd672733e8c54efaa33ab78af9"
                             "7edb360f06acaef2cc80dba16cf563f199d347db4443da04da0c8173e3f9e4ed"),
    ("sender", b"\x04", "0a367b92cf0b037dfd89960ee832d56f7fc151681bb41e53690e776f5786998a"
                        "e52d9c508c502347344d8c07ad91cbd6068afc75ff6292f062a09ca381c89e71"),
    ("ingress_expiry", 1685570400000000000, "26cec6b6a9248a96ab24305b61b9d27e203af14a580a5b1ff2f67575cab4a868"
                                            "db8e57abc8cda1525d45fdd2637af091bc1f28b35819a40df71517d1501f2c76"),
    ("canister_id", bytes.fromhex("00000000000004D2"), "0a3eb2ba16702a387e6321066dd952db7a31f9b5cc92981e0a92dd56802d3df9"
                                                       "4d8c47c3c1c837964011441882d745f7e92d10a40cef0520447c63029eafe396"),
    ("arg", b"DIDL\x00\xfd*", "b25f03dedd69be07f356a06fe35c1b0ddc0de77dcd9066c4be0c6bbde14b23ff"
                              "6c0b2ae49718f6995c02ac5700c9c789d7b7862a0d53e6d40a73f1fcd2f70189"),
])
def test_the_specifications_field_hashes(key, value, expected):
    one_field = hash_of_map({key: value})
    assert one_field == hashlib.sha256(bytes.fromhex(expected)).digest()


def test_agent_js_vectors():
    """From @dfinity/agent's request id tests: a content without sender and expiry, and a
    delegation with targets (there marked "this is what replica wants")."""
    content = {"request_type": "call", "method_name": "hello",
               "canister_id": bytes.fromhex("00000000000004D2"), "arg": b"DIDL\x00\xfd*"}
    assert request_id(content).hex() == "8781291c347db32a9d8c10eb62b710fce5a93be676474c42babc74c51858f94b"
    delegation = {
        "expiration": 1611365875951000000,
        "pubkey": bytes.fromhex("302a300506032b6570032100819d9fe3ac251039f934cdc925da0b019848af9d650d4136fb5d955cff17f78e"),
        "targets": [bytes([0, 0, 0, 0, 0, 48, 0, 77, 1, 1]), bytes([0, 0, 0, 0, 0, 32, 0, 43, 1, 1])],
    }
    assert hash_of_map(delegation).hex() == "f0c66015041eccb5528fc7fd817bb4d0707369d7e1383d3cdaa074b2b2236824"


@pytest.mark.parametrize("n, encoded", [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"), (624485, "e58e26"),
                                        (2**64 - 1, "ffffffffffffffffff01")])
def test_uleb128_shortest_form(n, encoded):
    assert uleb128(n).hex() == encoded


@pytest.mark.parametrize("n, encoded", [(0, "00"), (-1, "7f"), (63, "3f"), (64, "c000"), (-64, "40"),
                                        (-65, "bf7f"), (-123456, "c0bb78")])
def test_sleb128_shortest_form(n, encoded):
    assert sleb128(n).hex() == encoded


def _uleb_decode(data: bytes) -> int:
    return sum((byte & 0x7F) << (7 * i) for i, byte in enumerate(data))


def _sleb_decode(data: bytes) -> int:
    value = _uleb_decode(data)
    return value - (1 << 7 * len(data)) if data[-1] & 0x40 else value


@given(st.integers(min_value=0, max_value=2**200))
@settings(deadline=None)
def test_uleb128_round_trips_and_only_the_last_byte_ends(n):
    encoded = uleb128(n)
    assert _uleb_decode(encoded) == n
    assert all(b & 0x80 for b in encoded[:-1]) and not encoded[-1] & 0x80
    assert len(encoded) == max(1, -(-n.bit_length() // 7))


@given(st.integers(min_value=-2**200, max_value=2**200))
@settings(deadline=None)
def test_sleb128_round_trips_in_shortest_form(n):
    encoded = sleb128(n)
    assert _sleb_decode(encoded) == n
    assert len(encoded) == 1 or _sleb_decode(encoded[:-2] + bytes([encoded[-2] & 0x7F])) != n


def test_nats_use_uleb_and_negative_ints_sleb():
    assert hash_value(64) == hashlib.sha256(b"\x40").digest()      # uleb128(64); sleb128 would be c000
    assert hash_value(-1) == hashlib.sha256(b"\x7f").digest()


def test_nested_maps_and_arrays_follow_the_rules():
    """The specification's nested example: hash_of_map({"reply": {"arg": ...}}) uses the inner
    map's own hash; arrays hash the concatenation of their elements' hashes."""
    h = lambda data: hashlib.sha256(data).digest()  # noqa: E731
    inner = h(h(b"arg") + h(b"DIDL\x00\x00"))
    assert hash_of_map({"reply": {"arg": b"DIDL\x00\x00"}}) == h(h(b"reply") + inner)
    assert hash_value([b"a", [b"b"]]) == h(h(b"a") + h(h(b"b")))
    assert hash_value([]) == h(b"")


@given(st.dictionaries(st.text(max_size=10), st.integers(0, 2**64) | st.binary(max_size=10), max_size=8))
@settings(deadline=None)
def test_field_order_does_not_matter(fields):
    assert request_id(dict(reversed(list(fields.items())))) == request_id(fields)


@pytest.mark.parametrize("value", [True, None, 1.5, {1: b"x"}, {"a": {b"k": 1}}, "\udc80", object()])
def test_unhashable_values_are_typed_refusals(value):
    with pytest.raises(UnhashableValue):
        hash_value(value)


def test_depth_is_bounded():
    value: object = b"x"
    for _ in range(MAX_HASH_DEPTH + 1):
        value = [value]
    with pytest.raises(UnhashableValue):
        hash_value(value)


def test_content_must_be_a_map():
    with pytest.raises(UnhashableValue):
        request_id([("request_type", "call")])


@given(st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | st.binary() | st.text(),
                    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text() | st.integers(), c, max_size=4),
                    max_leaves=20))
@settings(deadline=None, max_examples=300)
def test_any_value_hashes_or_is_refused_with_a_type(value):
    try:
        assert len(hash_value(value)) == 32
    except IcFormatError:
        pass


@given(st.integers(min_value=0, max_value=2**128))
@settings(deadline=None)
def test_decode_uleb128_inverts_uleb128(n):
    from replica.ic.request_id import decode_uleb128
    assert decode_uleb128(uleb128(n)) == n


@pytest.mark.parametrize("data", [b"", b"\x80", b"\x01\x02", b"\x80\x00", "1"])
def test_decode_uleb128_refuses_anything_but_one_shortest_number(data):
    from replica.ic.request_id import decode_uleb128
    with pytest.raises(UnhashableValue):
        decode_uleb128(data)
