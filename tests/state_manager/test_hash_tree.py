"""Hash tree: spec golden vectors, lookup semantics, well-formedness, deep trees."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from state_manager import hash_tree as ht
from state_manager.hash_tree import (
    ABSENT,
    UNKNOWN,
    Found,
    empty,
    fork,
    labeled,
    leaf,
    lookup_path,
    pruned,
    reconstruct,
)
from tests.state_manager.tree_strategies import arbitrary_layout_trees, model_paths, prunings

SPEC_ROOT = "eb5c5b2195e62d996b84c9bcc8259d19a83786a2f59e0878cec84c811f669aa0"


def spec_tree():
    """The example tree of the interface spec's certification section."""
    return fork(
        fork(
            labeled(b"a", fork(fork(labeled(b"x", leaf(b"hello")), empty()), labeled(b"y", leaf(b"world")))),
            labeled(b"b", leaf(b"good")),
        ),
        fork(labeled(b"c", empty()), labeled(b"d", leaf(b"morning"))),
    )


def spec_pruned_tree():
    """The spec's pruned example: reveals a/y, the label b and d."""
    return fork(
        fork(
            labeled(
                b"a",
                fork(
                    pruned(bytes.fromhex("1b4feff9bef8131788b0c9dc6dbad6e81e524249c879e9f10f71ce3749f5a638")),
                    labeled(b"y", leaf(b"world")),
                ),
            ),
            labeled(b"b", pruned(bytes.fromhex("7b32ac0c6ba8ce35ac82c255fc7906f7fc130dab2a090f80fe12f9c2cae83ba6"))),
        ),
        fork(
            pruned(bytes.fromhex("ec8324b8a1f1ac16bd2e806edba78006479c9877fed4eb464a25485465af601d")),
            labeled(b"d", leaf(b"morning")),
        ),
    )


def all_subtree_prunings(tree):
    """Every tree obtained by pruning exactly one node of ``tree``."""

    def walk(node):
        yield pruned(reconstruct(node))
        if isinstance(node, ht.Fork):
            for left in walk(node.left):
                yield fork(left, node.right)
            for right in walk(node.right):
                yield fork(node.left, right)
        elif isinstance(node, ht.Labeled):
            for sub in walk(node.subtree):
                yield labeled(node.label, sub)

    return list(walk(tree))


# --------------------------------------------------------------------------- golden vectors


def test_spec_example_root():
    assert reconstruct(spec_tree()).hex() == SPEC_ROOT


def test_spec_pruned_example_has_same_root():
    assert reconstruct(spec_pruned_tree()).hex() == SPEC_ROOT


def test_pruning_named_subtrees_keeps_root():
    tree = spec_tree()
    a_node, b_node = tree.left.left, tree.left.right
    prune_a = fork(fork(labeled(b"a", pruned(reconstruct(a_node.subtree))), b_node), tree.right)
    prune_b = fork(fork(a_node, pruned(reconstruct(b_node))), tree.right)
    prune_left = fork(pruned(reconstruct(tree.left)), tree.right)
    for variant in (prune_a, prune_b, prune_left):
        assert reconstruct(variant).hex() == SPEC_ROOT


def test_pruning_any_single_node_keeps_root():
    variants = all_subtree_prunings(spec_tree())
    assert len(variants) == 17  # one per node
    for variant in variants:
        assert reconstruct(variant).hex() == SPEC_ROOT


def test_hash_helpers_follow_the_formulas():
    sha = lambda data: hashlib.sha256(data).digest()  # noqa: E731
    d1, d2 = sha(b"1"), sha(b"2")
    assert ht.domain_sep("ic-hashtree-fork") == b"\x10ic-hashtree-fork"
    assert ht.domain_sep("x" * 255)[0] == 255
    with pytest.raises(ht.DomainSeparatorError):  # one length byte
        ht.domain_sep("x" * 256)
    assert ht.hash_empty() == sha(b"\x11ic-hashtree-empty") == reconstruct(empty())
    assert ht.hash_fork(d1, d2) == sha(b"\x10ic-hashtree-fork" + d1 + d2)
    assert ht.hash_labeled(b"k", d1) == sha(b"\x13ic-hashtree-labeled" + b"k" + d1)
    assert ht.hash_leaf(b"v") == sha(b"\x10ic-hashtree-leaf" + b"v") == reconstruct(leaf(b"v"))
    assert reconstruct(pruned(d1)) == d1


# --------------------------------------------------------------------------- constructors


def test_constructors_reject_bad_types():
    with pytest.raises(ht.LabelTypeError):
        labeled("a", empty())
    with pytest.raises(ht.NotATreeError):
        labeled(b"a", b"not a tree")
    with pytest.raises(ht.LeafValueTypeError):
        leaf("text")
    with pytest.raises(ht.NotATreeError):
        fork(empty(), None)
    with pytest.raises(ht.DigestError):
        pruned(b"\x00" * 31)
    with pytest.raises(ht.DigestError):
        pruned("00" * 16)
    with pytest.raises(ht.NotATreeError):
        reconstruct(b"\x00" * 32)


def test_hash_helpers_reject_bad_digests():
    with pytest.raises(ht.DigestError):
        ht.hash_fork(b"\x00" * 32, b"\x00" * 33)
    with pytest.raises(ht.DigestError):
        ht.hash_labeled(b"a", b"")
    with pytest.raises(ht.LabelTypeError):
        ht.hash_labeled("a", b"\x00" * 32)
    with pytest.raises(ht.LeafValueTypeError):
        ht.hash_leaf(1)


def test_nodes_are_immutable_and_compare_structurally():
    tree = spec_tree()
    assert tree == spec_tree()
    assert tree != spec_pruned_tree()
    assert leaf(b"x") != labeled(b"x", empty())
    with pytest.raises(AttributeError):
        tree.left = empty()  # type: ignore[misc]
    with pytest.raises(TypeError):
        hash(tree)


def test_all_errors_share_one_base():
    for name in ht.__all__:
        obj = getattr(ht, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, ht.HashTreeError)


# --------------------------------------------------------------------------- lookup


def test_lookup_in_full_spec_tree():
    tree = spec_tree()
    assert lookup_path(tree, [b"a", b"x"]) == Found(leaf(b"hello"))
    assert lookup_path(tree, [b"a", b"y"]) == Found(leaf(b"world"))
    assert lookup_path(tree, [b"d"]) == Found(leaf(b"morning"))
    assert lookup_path(tree, [b"c"]) == Found(empty())
    assert lookup_path(tree, []) == Found(tree)
    for missing in ([b""], [b"0"], [b"aa"], [b"bb"], [b"e"], [b"a", b"z"], [b"a", b"w"], [b"c", b"x"]):
        assert lookup_path(tree, missing) == ABSENT, missing
    # Below a leaf nothing exists.
    assert lookup_path(tree, [b"d", b"x"]) == ABSENT


def test_lookup_in_spec_pruned_tree():
    tree = spec_pruned_tree()
    assert lookup_path(tree, [b"a", b"y"]) == Found(leaf(b"world"))
    assert lookup_path(tree, [b"d"]) == Found(leaf(b"morning"))
    # Pruned positions are never reported absent.
    assert lookup_path(tree, [b"a", b"x"]) == UNKNOWN
    assert lookup_path(tree, [b"b"]) == UNKNOWN
    assert lookup_path(tree, [b"c"]) == UNKNOWN
    assert lookup_path(tree, [b"ba"]) == UNKNOWN
    assert lookup_path(tree, [b"a", b"a"]) == UNKNOWN
    # Revealed neighbours or boundaries still prove absence.
    assert lookup_path(tree, [b"aa"]) == ABSENT
    assert lookup_path(tree, [b"0"]) == ABSENT
    assert lookup_path(tree, [b"e"]) == ABSENT
    assert lookup_path(tree, [b"a", b"z"]) == ABSENT


def test_lookup_corner_cases():
    assert lookup_path(empty(), [b"a"]) == ABSENT
    assert lookup_path(pruned(b"\x00" * 32), []) == UNKNOWN
    assert lookup_path(pruned(b"\x00" * 32), [b"a"]) == UNKNOWN
    assert lookup_path(leaf(b"v"), [b"a"]) == ABSENT
    with pytest.raises(ht.PathError):
        lookup_path(empty(), b"a")
    with pytest.raises(ht.PathError):
        lookup_path(empty(), ["a"])


def test_flatten_forks_skips_empty():
    tree = spec_tree()
    group = ht.flatten_forks(tree)
    assert [node.label for node in group] == [b"a", b"b", b"c", b"d"]
    assert ht.flatten_forks(empty()) == []
    assert [n.label for n in ht.flatten_forks(tree.left.left.subtree)] == [b"x", b"y"]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_pruned_lookups_agree_with_full_tree(data):
    model, tree = data.draw(arbitrary_layout_trees())
    ht.validate_well_formed(tree)
    witness = data.draw(prunings(tree))
    assert reconstruct(witness) == reconstruct(tree)
    ht.validate_well_formed(witness)
    probes = [path for path, _ in model_paths(model)]
    probes += [path[:-1] + (path[-1] + b"\x00",) for path in probes] + [(b"\x10",), (b"\xff\xff\xff\xff",)]
    for path in probes:
        full = lookup_path(tree, path)
        partial = lookup_path(witness, path)
        if isinstance(full, Found):
            # Present paths: found with the same digest, or unknown; never absent.
            assert partial == UNKNOWN or (
                isinstance(partial, Found) and reconstruct(partial.tree) == reconstruct(full.tree)
            )
        else:
            assert full == ABSENT
            assert partial in (ABSENT, UNKNOWN)


# --------------------------------------------------------------------------- well-formedness


def test_spec_trees_are_well_formed():
    ht.validate_well_formed(spec_tree())
    ht.validate_well_formed(spec_pruned_tree())
    assert ht.is_well_formed(spec_tree())


def test_unsorted_labels_are_rejected():
    tree = fork(labeled(b"b", empty()), labeled(b"a", empty()))
    with pytest.raises(ht.UnsortedLabelsError):
        ht.validate_well_formed(tree)
    assert not ht.is_well_formed(tree)


def test_unsorted_labels_across_nested_forks_are_rejected():
    tree = fork(fork(labeled(b"a", empty()), labeled(b"c", empty())), fork(empty(), labeled(b"b", empty())))
    with pytest.raises(ht.UnsortedLabelsError):
        ht.validate_well_formed(tree)


def test_duplicate_labels_are_rejected():
    tree = fork(labeled(b"a", empty()), fork(pruned(b"\x00" * 32), labeled(b"a", leaf(b""))))
    with pytest.raises(ht.DuplicateLabelError):
        ht.validate_well_formed(tree)


def test_bad_order_deep_inside_is_rejected():
    inner = fork(labeled(b"y", empty()), labeled(b"x", empty()))
    tree = fork(labeled(b"a", labeled(b"k", inner)), labeled(b"b", empty()))
    with pytest.raises(ht.UnsortedLabelsError):
        ht.validate_well_formed(tree)


def test_leaf_beside_other_nodes_is_rejected():
    with pytest.raises(ht.LeafNotAloneError):
        ht.validate_well_formed(fork(leaf(b"v"), labeled(b"a", empty())))
    with pytest.raises(ht.LeafNotAloneError):
        ht.validate_well_formed(labeled(b"a", fork(leaf(b"v"), pruned(b"\x00" * 32))))
    ht.validate_well_formed(labeled(b"a", fork(leaf(b"v"), empty())))


def test_same_label_in_different_groups_is_fine():
    ht.validate_well_formed(fork(labeled(b"a", labeled(b"a", empty())), labeled(b"b", labeled(b"a", empty()))))


# --------------------------------------------------------------------------- deep trees


def test_deep_trees_need_no_recursion():
    depth = 200_000
    chain = leaf(b"bottom")
    for _ in range(depth):
        chain = labeled(b"k", chain)
    spine = empty()
    for i in range(depth):
        spine = fork(spine, labeled(i.to_bytes(4, "big"), empty()))
    # Reference digest of the chain computed bottom-up by the formulas.
    expected = ht.hash_leaf(b"bottom")
    for _ in range(depth):
        expected = ht.hash_labeled(b"k", expected)
    assert reconstruct(chain) == expected
    reconstruct(spine)
    ht.validate_well_formed(chain)
    ht.validate_well_formed(spine)
    assert lookup_path(chain, [b"k"] * depth) == Found(leaf(b"bottom"))
    assert lookup_path(spine, [(depth - 1).to_bytes(4, "big")]) == Found(empty())
    assert chain == labeled(b"k", chain.subtree)
