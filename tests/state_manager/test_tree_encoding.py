"""Canonical msgpack of hash trees: golden bytes, round trips, one test per rejection of the
one reader (``parse_tree``, under ``decode_tree``)."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from state_manager import hash_tree as ht
from state_manager import tree_encoding as te
from state_manager.errors import StateManagerError
from state_manager.hash_tree import empty, fork, labeled, leaf, pruned
from state_manager.tree_encoding import decode_tree, encode_tree
from tests.state_manager.tree_strategies import arbitrary_layout_trees, prunings

DIGEST = bytes(range(32))
LIMITS = dict(max_bytes=1 << 20, max_depth=64)


def as_lists(tree):
    """The array form of a (small) tree, for comparison with msgpack's own packer."""
    if isinstance(tree, ht.Fork):
        return [1, as_lists(tree.left), as_lists(tree.right)]
    if isinstance(tree, ht.Labeled):
        return [2, tree.label, as_lists(tree.subtree)]
    if isinstance(tree, ht.Leaf):
        return [3, tree.value]
    if isinstance(tree, ht.Pruned):
        return [4, tree.digest]
    return [0]


def decode(data: bytes, **overrides):
    return decode_tree(data, **{**LIMITS, **overrides})


# --------------------------------------------------------------------------- golden bytes


def test_golden_bytes():
    assert encode_tree(empty()).hex() == "9100"
    assert encode_tree(leaf(b"hi")).hex() == "9203c4026869"
    assert encode_tree(labeled(b"a", empty())).hex() == "9302c401619100"
    assert encode_tree(fork(empty(), leaf(b""))).hex() == "930191009203c400"
    assert encode_tree(pruned(DIGEST)) == bytes.fromhex("9204c420") + DIGEST


def test_long_values_use_the_shortest_bin_header():
    for size, header in ((255, "c4ff"), (256, "c50100"), (65535, "c5ffff"), (65536, "c600010000")):
        data = encode_tree(leaf(b"\x07" * size))
        assert data[2:].hex().startswith(header)
        assert data == msgpack.packb([3, b"\x07" * size], use_bin_type=True)
        assert decode(data) == leaf(b"\x07" * size)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_round_trip_and_msgpack_agreement(data):
    _, tree = data.draw(arbitrary_layout_trees())
    tree = data.draw(prunings(tree))
    encoded = encode_tree(tree)
    assert encoded == msgpack.packb(as_lists(tree), use_bin_type=True)
    assert decode(encoded) == tree


def chain(depth: int) -> ht.HashTree:
    """A tree of ``depth`` nested nodes: labels above a leaf."""
    tree = leaf(b"bottom")
    for _ in range(depth - 1):
        tree = labeled(b"k", tree)
    return tree


def test_encoding_deep_trees_needs_no_recursion():
    depth = 100_000
    tree = leaf(b"bottom")
    for _ in range(depth):
        tree = labeled(b"k", fork(empty(), tree))
    encoded = encode_tree(tree)
    assert encoded == b"\x93\x02\xc4\x01k\x93\x01\x91\x00" * depth + encode_tree(leaf(b"bottom"))
    assert te.encode_nested(te.parse_tree(encode_tree(chain(te.MAX_PARSE_DEPTH)))) == encode_tree(
        chain(te.MAX_PARSE_DEPTH))  # deeper than msgpack's packer goes: the explicit stack


def test_the_reader_reads_up_to_its_parse_depth():
    deepest = chain(te.MAX_PARSE_DEPTH)
    data = encode_tree(deepest)
    assert decode(data, max_depth=te.MAX_PARSE_DEPTH) == deepest
    assert ht.reconstruct(decode(data, max_depth=te.MAX_PARSE_DEPTH)) == ht.reconstruct(deepest)
    with pytest.raises(te.TreeTooDeepError):
        decode(encode_tree(chain(te.MAX_PARSE_DEPTH + 1)), max_depth=10**6)


# --------------------------------------------------------------------------- rejections


def test_rejects_non_bytes_input():
    with pytest.raises(te.InputTypeError):
        decode("9100")


def test_rejects_too_many_bytes_before_parsing():
    with pytest.raises(te.TreeTooLargeError):
        decode(b"\xc1" * 101, max_bytes=100)
    data = encode_tree(leaf(b"x" * 10))
    assert decode(data, max_bytes=len(data)) == leaf(b"x" * 10)
    with pytest.raises(te.TreeTooLargeError):
        decode(data, max_bytes=len(data) - 1)


def test_rejects_too_deep():
    tree = leaf(b"")
    for _ in range(9):
        tree = labeled(b"k", tree)  # depth 10
    data = encode_tree(tree)
    assert decode(data, max_depth=10) == tree
    with pytest.raises(te.TreeTooDeepError):
        decode(data, max_depth=9)


def test_rejects_huge_nesting_quickly():
    # A million nested fork headers: refused at the bound, long before the end.
    data = b"\x93\x01" * 1_000_000 + b"\x91\x00"
    with pytest.raises(te.TreeTooDeepError):
        decode(data, max_bytes=len(data), max_depth=1000)


def test_rejects_trailing_bytes():
    with pytest.raises(te.TrailingBytesError):
        decode(encode_tree(empty()) + b"\x00")
    with pytest.raises(te.TrailingBytesError):
        decode(encode_tree(empty()) * 2)


def test_rejects_every_truncation():
    data = encode_tree(fork(labeled(b"ab", leaf(b"xyz")), pruned(DIGEST)))
    for cut in range(len(data)):
        with pytest.raises(te.TruncatedError):
            decode(data[:cut])


def test_rejects_non_canonical_integer_tag():
    # Tag 0 as uint8 (cc 00) instead of fixint 00.
    with pytest.raises(te.NonCanonicalError):
        decode(bytes.fromhex("91cc00"))
    with pytest.raises(te.NonCanonicalError):
        decode(bytes.fromhex("92d003c400"))  # tag 3 as int8


def test_rejects_non_canonical_array_header():
    with pytest.raises(te.NonCanonicalError):
        decode(bytes.fromhex("dc000100"))
    with pytest.raises(te.NonCanonicalError):
        decode(bytes.fromhex("dd0000000100"))


def test_rejects_non_canonical_bin_header():
    with pytest.raises(te.NonCanonicalError):
        decode(bytes.fromhex("9203c5000168"))
    with pytest.raises(te.NonCanonicalError):
        decode(bytes.fromhex("9203c60000000168"))


def test_rejects_unknown_tag():
    with pytest.raises(te.UnknownTagError):
        decode(bytes.fromhex("9105"))
    with pytest.raises(te.UnknownTagError):
        decode(bytes.fromhex("91ff"))  # -1
    with pytest.raises(te.UnknownTagError):
        decode(bytes.fromhex("91ccc8"))  # 200, canonical uint8
    with pytest.raises(te.UnknownTagError):
        decode(bytes.fromhex("91c400"))  # a bin where the tag belongs


def test_rejects_wrong_arity():
    with pytest.raises(te.ArityError):
        decode(bytes.fromhex("90"))  # no tag at all
    with pytest.raises(te.ArityError):
        decode(bytes.fromhex("920000"))  # empty with an extra element
    with pytest.raises(te.ArityError):
        decode(bytes.fromhex("92019100"))  # fork with one child
    with pytest.raises(te.ArityError):
        decode(bytes.fromhex("9303c400c400"))  # leaf with two values


def test_rejects_bad_digest_length():
    with pytest.raises(te.DigestLengthError):
        decode(bytes.fromhex("9204c41f") + DIGEST[:31])
    with pytest.raises(te.DigestLengthError):
        decode(bytes.fromhex("9204c421") + DIGEST + b"\x00")


def test_rejects_non_bytes_label_and_leaf():
    with pytest.raises(te.ExpectedBytesError):
        decode(msgpack.packb([2, "a", [0]], use_bin_type=True))
    with pytest.raises(te.ExpectedBytesError):
        decode(msgpack.packb([3, "text"], use_bin_type=True))
    with pytest.raises(te.ExpectedBytesError):
        decode(msgpack.packb([4, 7], use_bin_type=True))


def test_rejects_maps_strings_and_extension_types_by_name():
    with pytest.raises(te.ExpectedNodeError):
        decode(msgpack.packb([1, [0], {"a": 1}], use_bin_type=True))
    with pytest.raises(te.ExpectedBytesError):
        decode(bytes.fromhex("9203d6ff00000000"))  # a timestamp extension as the leaf value
    with pytest.raises(te.ArityError):
        decode(msgpack.packb([1, [0], [0], [0]], use_bin_type=True))
    with pytest.raises(te.ExpectedNodeError):
        decode(bytes.fromhex("c1"))  # msgpack's reserved byte
    with pytest.raises(te.ExpectedNodeError):
        decode(bytes.fromhex("c0"))  # nil at the root


def test_rejects_non_node_where_node_expected():
    with pytest.raises(te.ExpectedNodeError):
        decode(msgpack.packb({"t": 0}))
    with pytest.raises(te.ExpectedNodeError):
        decode(msgpack.packb([1, [0], 5], use_bin_type=True))
    with pytest.raises(te.ExpectedNodeError):
        decode(msgpack.packb([2, b"a", b"raw"], use_bin_type=True))


def test_unsorted_and_duplicate_labels_are_caught_by_well_formedness():
    unsorted = encode_tree(fork(labeled(b"b", empty()), labeled(b"a", empty())))
    duplicate = encode_tree(fork(labeled(b"a", empty()), labeled(b"a", empty())))
    with pytest.raises(ht.UnsortedLabelsError):
        ht.validate_well_formed(decode(unsorted))
    with pytest.raises(ht.DuplicateLabelError):
        ht.validate_well_formed(decode(duplicate))


def test_error_classes_are_distinct_and_share_a_base():
    classes = [getattr(te, name) for name in te.__all__ if name.endswith("Error")]
    assert len(set(classes)) == len(classes)
    for cls in classes:
        assert issubclass(cls, te.TreeDecodeError) and issubclass(cls, StateManagerError)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40))
def test_arbitrary_bytes_decode_or_raise_typed_errors(data):
    try:
        tree = decode(data)
    except te.TreeDecodeError:
        return
    assert encode_tree(tree) == data


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_encodings_decode_canonically_or_raise_typed_errors(data):
    _, tree = data.draw(arbitrary_layout_trees())
    encoded = bytearray(encode_tree(tree))
    position = data.draw(st.integers(0, len(encoded) - 1))
    encoded[position] = data.draw(st.integers(0, 255))
    try:
        decoded = decode(bytes(encoded))
    except te.TreeDecodeError:
        return
    assert encode_tree(decoded) == bytes(encoded)
