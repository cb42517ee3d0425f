"""Hypothesis strategies and model helpers shared by the hash tree tests.

A *model* is a plain nested dict: label bytes -> bytes (leaf) | EMPTY | nested dict.
"""

from __future__ import annotations

from hypothesis import strategies as st

from state_manager import hash_tree as ht
from state_manager.labeled_trie import LabeledTrie

EMPTY = ht.empty()

# A small alphabet makes shared prefixes, prefix labels and collisions common.
labels = st.lists(st.sampled_from([0x00, 0x01, 0x61, 0x62, 0x7F, 0x80, 0xFF]), max_size=3).map(bytes)
leaf_values = st.binary(max_size=4)
values = st.recursive(
    st.one_of(leaf_values, st.just(EMPTY)),
    lambda inner: st.dictionaries(labels, inner, max_size=5),
    max_leaves=25,
)
models = st.dictionaries(labels, values, max_size=8)


def trie_from_model(model: dict, order: list[int] | None = None) -> LabeledTrie:
    """Insert the model's children (nested tries first) in the given permutation of its
    sorted labels, or sorted when ``order`` is None."""
    keys = sorted(model)
    if order is not None:
        keys = [keys[i] for i in order]
    trie = LabeledTrie.empty()
    for key in keys:
        value = model[key]
        trie = trie.insert(key, trie_from_model(value) if isinstance(value, dict) else value)
    return trie


def model_paths(model: dict, prefix: tuple = ()) -> list[tuple[tuple[bytes, ...], object]]:
    """Every (path, value) of the model, parents before children, in label order."""
    out = []
    for key in sorted(model):
        value = model[key]
        path = prefix + (key,)
        out.append((path, value))
        if isinstance(value, dict):
            out.extend(model_paths(value, path))
    return out


def value_tree(value: object) -> ht.HashTree:
    """The full hash tree of one model value (via the from-scratch reference layout)."""
    from tests.state_manager.trie_reference import reference_hash_tree

    if isinstance(value, dict):
        return reference_hash_tree(value)
    if isinstance(value, bytes):
        return ht.leaf(value)
    return EMPTY


@st.composite
def arbitrary_layout_trees(draw, model_strategy=models):
    """A well-formed hash tree of a random model with randomly chosen fork shapes and
    stray Empty nodes (any layout is valid for verifiers). Returns (model, tree)."""
    model = draw(model_strategy)

    def group(items):
        if not items:
            return EMPTY
        if len(items) == 1:
            label, value = items[0]
            node = ht.labeled(label, convert(value))
            pad = draw(st.sampled_from(["none", "none", "left", "right"]))
            if pad == "left":
                return ht.fork(EMPTY, node)
            if pad == "right":
                return ht.fork(node, EMPTY)
            return node
        split = draw(st.integers(1, len(items) - 1))
        return ht.fork(group(items[:split]), group(items[split:]))

    def convert(value):
        if isinstance(value, dict):
            return group(sorted(value.items()))
        if isinstance(value, bytes):
            return ht.leaf(value)
        return EMPTY

    return model, group(sorted(model.items()))


@st.composite
def prunings(draw, tree):
    """``tree`` with a random set of subtrees replaced by ``Pruned`` of their digest."""

    def walk(node):
        if draw(st.integers(0, 4)) == 0:
            return ht.pruned(ht.reconstruct(node))
        if isinstance(node, ht.Fork):
            return ht.fork(walk(node.left), walk(node.right))
        if isinstance(node, ht.Labeled):
            return ht.labeled(node.label, walk(node.subtree))
        return node

    return walk(tree)
