"""Hash trees in the IC's CBOR: the specification's example trees both ways, strictness, fuzzing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replica.ic import cbor
from replica.ic.errors import HashTreeRefused, IcFormatError
from replica.ic.hash_tree_cbor import decode_tree, encode_tree, tree_from_value, tree_to_value
from state_manager.hash_tree import (
    ABSENT, UNKNOWN, Found, Leaf, empty, fork, labeled, leaf, lookup_path, pruned, reconstruct,
)

LIMIT = 1 << 20

#: The interface specification's example (*Encoding of certificates*, *Example*).
SPEC_TREE_CBOR = bytes.fromhex(
    "8301830183024161830183018302417882034568656c6c6f810083024179820345776f726c6483024162820344676f6f6483018302"
    "41638100830241648203476d6f726e696e67")
SPEC_PRUNED_CBOR = bytes.fromhex(
    "83018301830241618301820458201b4feff9bef8131788b0c9dc6dbad6e81e524249c879e9f10f71ce3749f5a6388302417982"
    "0345776f726c6483024162820458207b32ac0c6ba8ce35ac82c255fc7906f7fc130dab2a090f80fe12f9c2cae83ba683018204"
    "5820ec8324b8a1f1ac16bd2e806edba78006479c9877fed4eb464a25485465af601d830241648203476d6f726e696e67")
SPEC_ROOT = "eb5c5b2195e62d996b84c9bcc8259d19a83786a2f59e0878cec84c811f669aa0"

SPEC_TREE = fork(
    fork(labeled(b"a", fork(fork(labeled(b"x", leaf(b"hello")), empty()), labeled(b"y", leaf(b"world")))),
         labeled(b"b", leaf(b"good"))),
    fork(labeled(b"c", empty()), labeled(b"d", leaf(b"morning"))))


def test_the_specifications_tree_decodes_to_our_tree_and_has_its_root():
    tree = decode_tree(SPEC_TREE_CBOR, max_bytes=LIMIT)
    assert tree == SPEC_TREE
    assert reconstruct(tree).hex() == SPEC_ROOT
    assert encode_tree(SPEC_TREE) == SPEC_TREE_CBOR


def test_the_specifications_pruned_tree_has_the_same_root_and_lookups():
    tree = decode_tree(SPEC_PRUNED_CBOR, max_bytes=LIMIT)
    assert reconstruct(tree).hex() == SPEC_ROOT
    assert encode_tree(tree) == SPEC_PRUNED_CBOR
    assert lookup_path(tree, [b"a", b"a"]) == UNKNOWN
    assert lookup_path(tree, [b"a", b"y"]) == Found(Leaf(b"world"))
    assert lookup_path(tree, [b"aa"]) == ABSENT
    assert lookup_path(tree, [b"ax"]) == ABSENT
    assert lookup_path(tree, [b"b"]) == UNKNOWN
    assert lookup_path(tree, [b"bb"]) == UNKNOWN
    assert lookup_path(tree, [b"d"]) == Found(Leaf(b"morning"))
    assert lookup_path(tree, [b"e"]) == ABSENT


def test_self_described_tree_bytes_decode_too():
    assert decode_tree(cbor.SELF_DESCRIBE_PREFIX + SPEC_TREE_CBOR, max_bytes=LIMIT) == SPEC_TREE


trees = st.recursive(
    st.just(empty()) | st.binary(max_size=20).map(leaf) | st.binary(min_size=32, max_size=32).map(pruned),
    lambda children: st.tuples(children, children).map(lambda p: fork(*p))
    | st.tuples(st.binary(max_size=10), children).map(lambda p: labeled(*p)),
    max_leaves=40)


@given(trees)
@settings(max_examples=300, deadline=None)
def test_any_tree_round_trips_with_its_digest(tree):
    decoded = decode_tree(encode_tree(tree), max_bytes=LIMIT)
    assert decoded == tree and reconstruct(decoded) == reconstruct(tree)


def test_a_deep_tree_converts_without_recursion():
    tree = leaf(b"v")
    for i in range(5000):
        tree = labeled(b"l", tree) if i % 2 else fork(tree, empty())
    assert tree_from_value(tree_to_value(tree)) == tree


@pytest.mark.parametrize("value", [
    [], [5], [0, 0], [1, [0]], [1, [0], [0], [0]], [2, "label", [0]], [2, b"l"], [3, "value"], [3, b"v", b"w"],
    [4, bytes(31)], [4, bytes(33)], [-1], ["0"], 0, b"", {"tree": [0]}, [1, [0], [2, b"l", [9]]],
])
def test_malformed_trees_are_refused(value):
    with pytest.raises(HashTreeRefused):
        tree_from_value(value)


@given(st.binary(max_size=200))
@settings(max_examples=1500, deadline=None)
def test_garbage_raises_only_typed_refusals(data):
    try:
        decode_tree(data, max_bytes=150, max_depth=32)
    except IcFormatError:
        pass


@given(st.recursive(st.integers(-2, 6) | st.binary(max_size=33) | st.text(max_size=3),
                    lambda c: st.lists(c, max_size=4), max_leaves=30))
@settings(max_examples=1500, deadline=None)
def test_well_formed_cbor_that_is_no_tree_raises_only_typed_refusals(value):
    try:
        tree_from_value(value)
    except HashTreeRefused:
        pass
