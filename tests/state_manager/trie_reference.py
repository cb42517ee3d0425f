"""Test oracles for ``LabeledTrie``: its layout built from scratch by the definition in the
``labeled_trie`` module docstring, the hash tree of a trie's actual nodes, and witnesses
revealing chosen leaf positions (through the product's one walker, ``trie_witness``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from state_manager import hash_tree as ht
from state_manager.hash_tree import Empty, HashTree
from state_manager.labeled_trie import LabeledTrie, TrieBranch
from state_manager.trie_witness import PRUNED_VALUE, WitnessPlan, witness_tree


def encoding_bits(label: bytes) -> str:
    """The label encoding ``1·b0 1·b1 … 1·b(n-1) 0`` as a string of '0'/'1'."""
    return "".join("1" + format(byte, "08b") for byte in label) + "0"


def reference_hash_tree(mapping: Mapping) -> HashTree:
    """The hash tree of a plain nested mapping, built from scratch by the definition
    (independent of the trie code). Values: ``bytes`` (leaf), ``Empty``, or a nested
    ``Mapping`` (an empty one is ``Empty``). Explicit stack: models may be deep."""
    out: list[HashTree] = []
    tasks: list[tuple] = [("value", mapping)]
    while tasks:
        task = tasks.pop()
        op = task[0]
        if op == "value":
            value = task[1]
            if isinstance(value, bytes):
                out.append(ht.leaf(value))
            elif isinstance(value, Empty):
                out.append(ht.empty())
            elif isinstance(value, Mapping):
                if value:
                    tasks.append(("group", sorted((encoding_bits(k), k, v) for k, v in value.items())))
                else:
                    out.append(ht.empty())
            else:
                raise TypeError(f"reference values must be bytes, Empty or Mapping, got {type(value).__name__}")
        elif op == "group":
            entries = task[1]
            if len(entries) == 1:
                _, label, value = entries[0]
                tasks.append(("labeled", label))
                tasks.append(("value", value))
                continue
            low, high = entries[0][0], entries[-1][0]
            split_bit = 0
            while low[split_bit] == high[split_bit]:
                split_bit += 1
            split = next(i for i, entry in enumerate(entries) if entry[0][split_bit] == "1")
            tasks.append(("fork",))
            tasks.append(("group", entries[split:]))
            tasks.append(("group", entries[:split]))
        elif op == "labeled":
            out.append(ht.labeled(task[1], out.pop()))
        else:
            right = out.pop()
            out.append(ht.fork(out.pop(), right))
    return out[0]


def reference_digest(mapping: Mapping) -> bytes:
    """``reconstruct(reference_hash_tree(mapping))``."""
    return ht.reconstruct(reference_hash_tree(mapping))


def trie_hash_tree(trie: LabeledTrie) -> HashTree:
    """The full hash tree of ``trie``'s actual nodes (a branch is a fork, a leaf node a
    labeled child), nothing pruned. Explicit stack."""
    out: list[HashTree] = []
    tasks: list[tuple] = [("value", trie)]
    while tasks:
        op, item = tasks.pop()
        if op == "value":
            if isinstance(item, LabeledTrie):
                if item.root is None:
                    out.append(ht.empty())
                else:
                    tasks.append(("node", item.root))
            elif isinstance(item, Empty):
                out.append(ht.empty())
            else:
                out.append(ht.leaf(item))
        elif op == "node":
            if isinstance(item, TrieBranch):
                tasks.append(("fork", None))
                tasks.append(("node", item.right))
                tasks.append(("node", item.left))
            else:
                tasks.append(("labeled", item.label))
                tasks.append(("value", item.value))
        elif op == "labeled":
            out.append(ht.labeled(item, out.pop()))
        else:
            right = out.pop()
            out.append(ht.fork(out.pop(), right))
    return out[0]


def leaf_digest_plan(paths: Iterable[Sequence[bytes]]) -> WitnessPlan:
    """The plan revealing the leaf at each path as ``Labeled(label, Pruned(hash_leaf(v)))``."""
    nested: dict = {}
    for path in paths:
        node = nested
        for label in path[:-1]:
            node = node.setdefault(label, {})
        node[path[-1]] = PRUNED_VALUE

    def plan(children: dict) -> WitnessPlan:
        return WitnessPlan({k: v if v is PRUNED_VALUE else plan(v) for k, v in children.items()})

    return plan(nested)


def leaf_digest_witness(trie: LabeledTrie, paths: Iterable[Sequence[bytes]]) -> HashTree:
    """The witness of ``trie`` revealing the leaves at ``paths`` by their digests."""
    return witness_tree(trie, leaf_digest_plan(paths))
