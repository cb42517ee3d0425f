"""Canister ranges in both of the IC's layouts, a real delegation's ranges, strict decoding."""

from __future__ import annotations

import json
import pathlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replica.ic import cbor
from replica.ic.canister_ranges import (
    EMPTY_RANGES_LABEL, MAX_RANGES_PER_LEAF, check_canister_in_ranges, decode_canister_ranges, encode_canister_ranges,
    ranges_contain, revealed_ranges, shard_canister_ranges,
)
from replica.ic.errors import CanisterOutsideRanges, CanisterRangesMissing, CertificateMalformed, IcFormatError
from replica.ic.hash_tree_cbor import tree_from_value
from replica.ic.principal import Principal, canister_principal
from state_manager.hash_tree import pruned

from .trees import tree_of

FIXTURE = json.loads((pathlib.Path(__file__).parent / "data" / "mainnet_certificate.json").read_text())
SUBNET = b"\x05" * 29
RANGES = tuple((canister_principal(10 * i), canister_principal(10 * i + 5)) for i in range(12))


def test_a_mainnet_delegation_states_its_ranges_flat():
    outer = cbor.decode(bytes.fromhex(FIXTURE["certificate"]), max_bytes=1 << 20)
    inner = cbor.decode(outer["delegation"]["certificate"], max_bytes=1 << 20)
    ranges = revealed_ranges(tree_from_value(inner["tree"]), outer["delegation"]["subnet_id"])
    assert [(s.raw.hex(), e.raw.hex()) for s, e in ranges] == [tuple(r) for r in FIXTURE["canister_ranges"]]


def test_the_encoding_is_the_ics():
    """The mainnet leaf's bytes are what we encode for the same ranges."""
    outer = cbor.decode(bytes.fromhex(FIXTURE["certificate"]), max_bytes=1 << 20)
    ranges = [(Principal(bytes.fromhex(s)), Principal(bytes.fromhex(e))) for s, e in FIXTURE["canister_ranges"]]
    assert encode_canister_ranges(ranges) in outer["delegation"]["certificate"]
    assert decode_canister_ranges(encode_canister_ranges(ranges)) == tuple(ranges)


def test_shards_hold_at_most_five_ranges_labelled_by_their_first_start():
    shards = shard_canister_ranges(RANGES)
    assert list(shards) == [RANGES[0][0].raw, RANGES[5][0].raw, RANGES[10][0].raw]
    assert all(len(decode_canister_ranges(v)) <= MAX_RANGES_PER_LEAF for v in shards.values())
    assert shard_canister_ranges(()) == {EMPTY_RANGES_LABEL: encode_canister_ranges(())}


@pytest.mark.parametrize("layout", ["flat", "sharded", "both"])
def test_either_layout_authorizes(layout):
    flat = {b"subnet": {SUBNET: {b"canister_ranges": encode_canister_ranges(RANGES)}}}
    sharded = {b"canister_ranges": {SUBNET: shard_canister_ranges(RANGES)}}
    tree = tree_of({"flat": flat, "sharded": sharded, "both": {**flat, **sharded}}[layout])
    assert revealed_ranges(tree, SUBNET) == RANGES or layout == "both"
    check_canister_in_ranges(tree, SUBNET, canister_principal(113))
    check_canister_in_ranges(tree, SUBNET, canister_principal(0))
    with pytest.raises(CanisterOutsideRanges):
        check_canister_in_ranges(tree, SUBNET, canister_principal(7))
    with pytest.raises(CanisterRangesMissing):
        check_canister_in_ranges(tree, b"\x06" * 29, canister_principal(113))


def test_a_pruned_shard_authorizes_nothing_but_a_revealed_one_does():
    shards = shard_canister_ranges(RANGES)
    labels = list(shards)
    revealed = {labels[0]: shards[labels[0]]}
    tree = tree_of({b"canister_ranges": {SUBNET: revealed}})
    check_canister_in_ranges(tree, SUBNET, canister_principal(3))
    with pytest.raises(CanisterOutsideRanges):
        check_canister_in_ranges(tree, SUBNET, canister_principal(113))   # its shard is not revealed
    only_pruned = tree_of({b"canister_ranges": {SUBNET: {}}})
    assert revealed_ranges(only_pruned, SUBNET) is None
    assert revealed_ranges(pruned(bytes(32)), SUBNET) is None


def test_an_empty_subnet_contains_nothing():
    tree = tree_of({b"canister_ranges": {SUBNET: shard_canister_ranges(())}})
    assert revealed_ranges(tree, SUBNET) == ()
    with pytest.raises(CanisterOutsideRanges):
        check_canister_in_ranges(tree, SUBNET, canister_principal(0))


@given(st.integers(0, 200))
@settings(deadline=None)
def test_containment_is_closed_ranges(n):
    expected = any(10 * i <= n <= 10 * i + 5 for i in range(12))
    assert ranges_contain(RANGES, canister_principal(n)) == expected


@pytest.mark.parametrize("value", [
    {}, [[b"a"]], [[b"a", b"b", b"c"]], [[b"b", b"a"]], [[bytes(30), bytes(30)]], [["a", "b"]], [b"ab"],
])
def test_malformed_ranges_are_refused(value):
    with pytest.raises(CertificateMalformed):
        decode_canister_ranges(cbor.encode(value))
    with pytest.raises(CertificateMalformed):
        decode_canister_ranges(b"\xff")


@given(st.binary(max_size=80))
@settings(deadline=None, max_examples=500)
def test_garbage_leaves_raise_only_typed_refusals(blob):
    try:
        decode_canister_ranges(blob)
    except IcFormatError:
        pass
