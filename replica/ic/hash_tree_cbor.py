"""Hash trees in the IC's CBOR encoding, to and from ``state_manager.hash_tree``.

The interface specification, *Encoding of certificates* (its CDDL)::

    hash-tree = [0]                          Empty
              / [1, hash-tree, hash-tree]    Fork
              / [2, bytes, hash-tree]        Labeled (label, subtree)
              / [3, bytes]                   Leaf (value)
              / [4, bytes .size 32]          Pruned (digest)

The project's hash trees already hash as the IC's do (``state_manager.hash_tree``), so a tree
converted either way keeps its root digest. Reading is strict: every node is an array of
exactly its arity, with the tag first and blobs where blobs belong; anything else is a
``HashTreeRefused``. Both directions walk with an explicit stack (trees can be deep; the CBOR
parser bounds the depth of what arrives).
"""

from __future__ import annotations

from typing import Any

from state_manager.hash_tree import Empty, Fork, HashTree, Labeled, Leaf, Pruned, empty

from . import cbor
from .errors import HashTreeRefused

__all__ = ["EMPTY", "FORK", "LABELED", "LEAF", "PRUNED", "tree_to_value", "tree_from_value", "encode_tree",
           "decode_tree"]

EMPTY, FORK, LABELED, LEAF, PRUNED = 0, 1, 2, 3, 4
_DIGEST_BYTES = 32


def tree_to_value(tree: HashTree) -> list[Any]:
    """The CBOR value (nested arrays) of ``tree``."""
    done: list[list[Any]] = []
    stack: list[tuple[HashTree, bool]] = [(tree, False)]
    while stack:
        node, children_done = stack.pop()
        kind = type(node)
        if kind is Fork:
            if children_done:
                right = done.pop()
                done.append([FORK, done.pop(), right])
            else:
                stack += [(node, True), (node.right, False), (node.left, False)]
        elif kind is Labeled:
            if children_done:
                done.append([LABELED, node.label, done.pop()])
            else:
                stack += [(node, True), (node.subtree, False)]
        elif kind is Leaf:
            done.append([LEAF, node.value])
        elif kind is Pruned:
            done.append([PRUNED, node.digest])
        elif kind is Empty:
            done.append([EMPTY])
        else:
            raise HashTreeRefused(f"{kind.__name__} is not a hash tree node")
    return done[0]


def _refuse(item: object) -> HashTreeRefused:
    shown = repr(item)
    return HashTreeRefused(f"not a hash tree node: {shown[:60]}{'...' if len(shown) > 60 else ''}")


def tree_from_value(value: Any) -> HashTree:
    """The hash tree a decoded CBOR value encodes (module docstring), or ``HashTreeRefused``."""
    done: list[HashTree] = []
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        item, children_done = stack.pop()
        if children_done:
            if item[0] == FORK:
                right = done.pop()
                done.append(Fork(done.pop(), right))
            else:
                done.append(Labeled(item[1], done.pop()))
            continue
        if type(item) is not list or not item or type(item[0]) is not int:
            raise _refuse(item)
        tag, arity = item[0], len(item)
        if tag == EMPTY and arity == 1:
            done.append(empty())
        elif tag == FORK and arity == 3:
            stack += [(item, True), (item[2], False), (item[1], False)]
        elif tag == LABELED and arity == 3 and type(item[1]) is bytes:
            stack += [(item, True), (item[2], False)]
        elif tag == LEAF and arity == 2 and type(item[1]) is bytes:
            done.append(Leaf(item[1]))
        elif tag == PRUNED and arity == 2 and type(item[1]) is bytes and len(item[1]) == _DIGEST_BYTES:
            done.append(Pruned(item[1]))
        else:
            raise _refuse(item)
    return done[0]


def encode_tree(tree: HashTree) -> bytes:
    """The CBOR of ``tree`` as the specification writes it (no self-describe tag)."""
    return cbor.encode(tree_to_value(tree), self_describe=False)


def decode_tree(data: bytes, *, max_bytes: int, max_depth: int = cbor.DEFAULT_MAX_DEPTH) -> HashTree:
    """The hash tree in ``data``: strict CBOR (``CborRefused``), then the tree's shape."""
    return tree_from_value(cbor.decode(data, max_bytes=max_bytes, max_depth=max_depth))
