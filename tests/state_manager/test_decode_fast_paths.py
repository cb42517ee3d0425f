"""The decoders' fast paths (msgpack's C unpacker plus a canonical re-encoding check) accept
exactly what the checking decoders accept, and decode it to the same value. (Hash trees have
one reader, ``tree_encoding.parse_tree``: see test_tree_encoding.)"""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from state_manager import codec
from state_manager.encoding import EncodingError, decode, encode_unchecked, packb
from state_manager.messages import Reject, RejectCode, Request, Response
from state_manager.state_codec import decode_state, encode_state, state_from_value, state_to_value

LEAVES = [
    codec.encode_message_leaf(Request(1, 2, "method", b"p" * 20, 7)),
    codec.encode_message_leaf(Response(3, 4, 5, Reject(RejectCode.CANISTER_ERROR, "no"))),
]


def _mutations(base: bytes, position: int, byte: int, noise: bytes):
    mutated = bytearray(base)
    mutated[position % len(base)] = byte
    return (bytes(mutated), base + noise, noise, base[: position % len(base)], bytes(mutated) + noise)


def _strict_message(data: bytes):
    try:
        return codec.message_from_value(codec._versioned(decode(data), "message leaf"))
    except (EncodingError, codec.CodecError):
        return None


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(LEAVES), st.integers(0, 10_000), st.integers(0, 255), st.binary(max_size=20))
def test_message_leaf_fast_decode_matches_the_strict_decoder(base, position, byte, noise):
    for data in _mutations(base, position, byte, noise):
        try:
            fast = codec.decode_message_leaf(data)
        except codec.CodecError:
            fast = None
        assert fast == _strict_message(data)


def _state_bytes() -> bytes:
    from tests.state_manager.test_state_codec_and_store import busy_state

    return encode_state(busy_state())


STATE = _state_bytes()


def _strict_state(data: bytes):
    try:
        return state_from_value(decode(data, max_bytes=max(len(data), 1)))
    except (EncodingError, codec.CodecError):
        return None


def _fast_state(data: bytes):
    try:
        return decode_state(data)
    except codec.CodecError:
        return None


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10**6), st.integers(0, 255), st.binary(max_size=20))
def test_state_fast_decode_matches_the_strict_decoder(position, byte, noise):
    for data in _mutations(STATE, position, byte, noise):
        assert _fast_state(data) == _strict_state(data)


@pytest.mark.parametrize("value", [1.5, {"a": 1}, {b"k": 2}])
def test_state_fast_decode_refuses_values_without_a_canonical_type(value):
    # A float or a map where the stable state holds a value: the generic walk of ``decode``
    # is skipped, so the field checks must refuse it.
    state = decode_state(STATE)
    canister = next(iter(state.canisters.values()))
    encoded = state_to_value(state)
    canisters = list(encoded[7])
    row = list(canisters[0])
    row[14] = row[14] + (("zz", value),)
    canisters[0] = tuple(row)
    tampered = encode_unchecked(encoded[:7] + (tuple(canisters),) + encoded[8:])
    assert canister.canister_id == row[0]
    assert _strict_state(tampered) is None
    with pytest.raises(codec.CodecError):
        decode_state(tampered)


_SCALARS = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=40) | st.binary(max_size=300)
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=8).map(tuple)
                       | st.dictionaries(st.text(max_size=8), inner, max_size=6), max_leaves=40)


@settings(max_examples=400, deadline=None)
@given(_VALUES)
def test_packb_gives_msgpacks_own_bytes(value):
    """``encoding.packb`` (a fresh small-buffer Packer) is ``msgpack.packb(use_bin_type=True)``,
    including values that outgrow the initial buffer."""
    assert packb(value) == msgpack.packb(value, use_bin_type=True)
    assert packb((value, b"z" * 5000)) == msgpack.packb((value, b"z" * 5000), use_bin_type=True)


def test_packb_refuses_what_msgpack_refuses():
    for bad in (2**64, -(2**63) - 1):
        with pytest.raises(OverflowError):
            packb(bad)
    with pytest.raises(TypeError):
        packb(object())
    assert packb((1, "x")) == b"\x92\x01\xa1x"  # nothing left over from the failures
