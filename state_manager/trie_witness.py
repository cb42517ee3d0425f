"""Witnesses of a ``LabeledTrie``: the one walker that prunes a trie to what a plan reveals.

A plan says what the witness reveals of one trie (``WitnessPlan``): ``children`` maps
labels to a target, and when ``lo`` is set every label in the non-empty range ``[lo, hi)``
is ``PRUNED_VALUE`` too. Targets:

* ``PRUNED_VALUE`` — the label, its value pruned to its digest (a certified slice reveals
  its leaf positions so: the receiver holds the data and compares digests);
* ``REVEAL``       — the label and its whole value (``read_state`` answers);
* a nested ``WitnessPlan`` — the label and the witness of the subtree under it (a leaf value
  is revealed whole: it proves the deeper labels absent).

A planned label the trie lacks is proven absent: its neighbours are revealed as
``PRUNED_VALUE`` (unless planned themselves), so a verifier sees two adjacent labels around
it (``hash_tree.find_label``). Everything else is pruned::

    witness(node)  = Pruned(digest(node))                  if the plan names no label below node
    witness(fork)  = Fork(witness(left), witness(right))   otherwise
    witness(leaf)  = Labeled(l, value witness per target)
    witness(empty trie) = Empty

so ``reconstruct(witness(t, plan)) == t.digest()``.

The walker reads the trie's nodes (``labeled_trie.TrieBranch``/``TrieLeaf``) and their
cached digests directly, and builds the witness in the nested-array form of
``tree_encoding`` (``(TAG_FORK, l, r)``, ...), which ``tree_encoding.encode_nested`` writes;
``witness_tree`` gives it as a ``HashTree``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Optional, Union

from state_manager.hash_tree import Empty, HashTree, hash_empty, hash_leaf
from state_manager.labeled_trie import LabeledTrie, TrieBranch, TrieLeaf, TrieNode, Value, node_digest
from state_manager.tree_encoding import TAG_EMPTY, TAG_FORK, TAG_LABELED, TAG_LEAF, TAG_PRUNED, tree_from_nested_arrays

__all__ = ["PRUNED_VALUE", "REVEAL", "WitnessPlan", "plan_paths", "witness", "witness_tree"]


class _Target:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


PRUNED_VALUE = _Target("PRUNED_VALUE")
REVEAL = _Target("REVEAL")
Target = Union["WitnessPlan", _Target]


@dataclass(frozen=True, slots=True)
class WitnessPlan:
    """What a witness reveals of one trie (module docstring)."""

    children: dict[bytes, Target] = field(default_factory=dict)
    lo: Optional[bytes] = None
    hi: Optional[bytes] = None


def plan_paths(paths: Iterable[Sequence[bytes]]) -> WitnessPlan:
    """The plan revealing the value at each path whole (or proving the path absent); a path
    that is a prefix of another reveals everything below it."""
    root: dict = {}
    for path in paths:
        if not path:
            raise ValueError("a path has at least one label")
        node = root
        for label in path[:-1]:
            below = node.get(label)
            if below is REVEAL:
                break
            node = node.setdefault(label, {})
        else:
            node[path[-1]] = REVEAL

    def plan(children: dict) -> WitnessPlan:
        return WitnessPlan({label: REVEAL if target is REVEAL else plan(target)
                            for label, target in sorted(children.items())})

    return plan(root)


def _value_digest(value: Value) -> bytes:
    if isinstance(value, LabeledTrie):
        return value.digest()
    if isinstance(value, Empty):
        return hash_empty()
    return hash_leaf(value)


@dataclass(frozen=True, slots=True)
class _Level:
    """A plan prepared against one trie: the targets of the labels it reveals."""

    targets: dict[bytes, Target]
    labels: list[bytes]  # sorted keys of targets, for overlap tests
    lo: Optional[bytes]
    hi: Optional[bytes]

    def overlaps(self, first: bytes, last: bytes) -> bool:
        """Whether the level reveals a label in ``[first, last]``."""
        if self.lo is not None and self.hi is not None and self.lo <= last and first < self.hi:
            return True
        index = bisect_left(self.labels, first)
        return index < len(self.labels) and self.labels[index] <= last

    def covers(self, first: bytes, last: bytes) -> bool:
        """Whether ``[first, last]`` lies inside the range and the level reveals nothing else."""
        return (not self.labels and self.lo is not None and self.hi is not None
                and self.lo <= first and last < self.hi)

    def target(self, label: bytes) -> Target:
        return self.targets.get(label, PRUNED_VALUE)


def _prepare(trie: LabeledTrie, plan: WitnessPlan) -> _Level:
    """The targets of ``plan`` in ``trie``: absent labels replaced by their neighbours."""
    targets: dict[bytes, Target] = {}
    for label, target in plan.children.items():
        if label in trie:
            targets[label] = target
    for label in plan.children:
        if label not in trie:
            for neighbour in (trie.label_before(label), trie.label_after(label)):
                if neighbour is not None and neighbour not in targets:
                    targets[neighbour] = PRUNED_VALUE
    return _Level(targets, sorted(targets), plan.lo, plan.hi)


def _pruned_value(leaf: TrieLeaf) -> tuple:
    value = leaf.value
    digest = hash_leaf(value) if type(value) is bytes else _value_digest(value)
    return (TAG_LABELED, leaf.label, (TAG_PRUNED, digest))


def _all_pruned_values(node: TrieNode) -> tuple:
    """``witness`` of a node whose every label the plan reveals as ``PRUNED_VALUE`` (a run of
    messages): the same result without asking the plan at every node."""
    out: list = []
    stack: list = [node]
    while stack:
        current = stack.pop()
        if current is None:  # both children of a branch are done
            right = out.pop()
            out[-1] = (TAG_FORK, out[-1], right)
        elif type(current) is TrieBranch:
            stack.append(None)
            stack.append(current.right)
            stack.append(current.left)
        else:  # _pruned_value, inlined: one call per leaf of the run fewer
            value = current.value
            digest = hash_leaf(value) if type(value) is bytes else _value_digest(value)
            out.append((TAG_LABELED, current.label, (TAG_PRUNED, digest)))
    return out[0]


# Task codes of the walker's explicit stack.
_VALUE, _NODE, _LABEL, _FORK = range(4)


def witness(trie: LabeledTrie, plan: WitnessPlan) -> tuple:
    """The witness of ``trie`` under ``plan`` in nested-array form (module docstring).
    Explicit stack: tries nest deeply."""
    out: list = []
    tasks: list[tuple] = [(_VALUE, trie, plan)]
    while tasks:
        task = tasks.pop()
        op = task[0]
        if op == _NODE:
            node, level = task[1], task[2]
            if level is None:  # revealed whole
                if type(node) is TrieBranch:
                    tasks.append((_FORK,))
                    tasks.append((_NODE, node.right, None))
                    tasks.append((_NODE, node.left, None))
                else:
                    tasks.append((_LABEL, node.label))
                    tasks.append((_VALUE, node.value, REVEAL))
            elif not level.overlaps(node.first, node.last):
                out.append((TAG_PRUNED, node_digest(node)))
            elif level.covers(node.first, node.last):
                out.append(_all_pruned_values(node))
            elif type(node) is TrieBranch:
                tasks.append((_FORK,))
                tasks.append((_NODE, node.right, level))
                tasks.append((_NODE, node.left, level))
            else:
                target = level.target(node.label)
                if target is PRUNED_VALUE:
                    out.append(_pruned_value(node))
                else:
                    tasks.append((_LABEL, node.label))
                    tasks.append((_VALUE, node.value, target))
        elif op == _VALUE:
            value, target = task[1], task[2]
            if isinstance(value, LabeledTrie):
                root = value.root
                if root is None:
                    out.append((TAG_EMPTY,))
                else:
                    tasks.append((_NODE, root, None if target is REVEAL else _prepare(value, target)))
            elif isinstance(value, Empty):
                out.append((TAG_EMPTY,))
            else:
                out.append((TAG_LEAF, value))
        elif op == _FORK:
            right = out.pop()
            out.append((TAG_FORK, out.pop(), right))
        else:
            out.append((TAG_LABELED, task[1], out.pop()))
    return out[0]


def witness_tree(trie: LabeledTrie, plan: WitnessPlan) -> HashTree:
    """``witness`` as a ``HashTree``."""
    return tree_from_nested_arrays(witness(trie, plan))
