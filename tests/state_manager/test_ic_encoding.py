"""The IC's formulas the certified tree states (state_manager.ic_encoding, state_manager.cbor):
principals order as their numbers, shards cover the ranges in order, and values the IC's CBOR
does not carry are refused with the package's typed error."""

from __future__ import annotations

import hashlib

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from state_manager import cbor, ic_encoding
from state_manager.errors import StateManagerError

u64 = st.integers(min_value=0, max_value=(1 << 64) - 1)


@given(u64, u64)
def test_canister_principals_order_as_their_numbers(a, b):
    assert (ic_encoding.canister_principal_bytes(a) < ic_encoding.canister_principal_bytes(b)) == (a < b)
    assert ic_encoding.canister_principal_bytes(a)[8:] == ic_encoding.CANISTER_SUFFIX


@pytest.mark.parametrize("bad", [-1, 1 << 64, True, "7"])
def test_a_canister_number_is_a_u64(bad):
    with pytest.raises(ic_encoding.IcEncodingError):
        ic_encoding.canister_principal_bytes(bad)


@settings(max_examples=200, deadline=None)
@given(st.lists(u64, max_size=40, unique=True))
def test_shards_hold_every_range_in_order_at_most_five_a_leaf(numbers):
    points = sorted(numbers)
    ranges = [(ic_encoding.canister_principal_bytes(lo), ic_encoding.canister_principal_bytes(lo))
              for lo in points]
    shards = ic_encoding.shard_canister_ranges(ranges)
    labels = list(shards)
    assert labels == sorted(labels)
    decoded = [cbor_ranges(value) for value in shards.values()]
    assert all(len(chunk) <= ic_encoding.MAX_RANGES_PER_LEAF for chunk in decoded)
    assert [r for chunk in decoded for r in chunk] == [list(r) for r in ranges]
    if not ranges:
        assert labels == [ic_encoding.EMPTY_RANGES_LABEL] and decoded == [[]]
    else:
        assert labels == [chunk[0][0] for chunk in decoded]


def cbor_ranges(value: bytes) -> list:
    assert value.startswith(cbor.SELF_DESCRIBE_PREFIX)
    return cbor2.loads(value[len(cbor.SELF_DESCRIBE_PREFIX):])


@pytest.mark.parametrize("value", [True, None, 1.5, {1: b""}, [b"", {"k": False}], -(1 << 64) - 1])
def test_cbor_refuses_what_the_interface_does_not_carry(value):
    with pytest.raises(cbor.CborValueError) as refused:
        cbor.encode(value)
    assert isinstance(refused.value, StateManagerError)


def test_the_self_authenticating_id_is_sha224_then_0x02():
    assert ic_encoding.self_authenticating_id(b"der") == hashlib.sha224(b"der").digest() + b"\x02"
    with pytest.raises(ic_encoding.IcEncodingError):
        ic_encoding.self_authenticating_id("der")  # type: ignore[arg-type]
