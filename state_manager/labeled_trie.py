"""Persistent labeled maps with incremental certification hashing (docs/architecture.md,
*Hash trees and the certified state*).

A ``LabeledTrie`` maps labels (bytes) to values: a leaf (``bytes``), ``Empty`` or a nested
``LabeledTrie``. Its hash tree is::

    tree({})            = Empty
    tree({l: v})        = Labeled(l, value_tree(v))
    tree(m), |m| >= 2   = Fork(tree(m0), tree(m1))

    value_tree(bytes v) = Leaf(v);  value_tree(Empty) = Empty;  value_tree(trie t) = tree(t)

where ``m0``/``m1`` split ``m`` at the first bit where the *label encodings* of ``m`` stop
agreeing (``m0`` has a 0 there). A label ``b0 … b(n-1)`` is encoded as the bit string
``1·b0 1·b1 … 1·b(n-1) 0``: prefix-free, and ordered exactly like the labels, so
``"a" < "ab" < "b"`` and every fork keeps smaller labels on the left. This is a crit-bit
(Patricia) trie: its shape depends only on the set of labels, and inserting, replacing or
removing one child rebuilds only the nodes on one root-to-leaf path (O(depth), about log n
for random or sequential labels). Nodes are immutable and shared between versions; each
caches its digest the first time it is needed, so a new version rehashes only its new path.
``update`` applies many changes in one call, creating a node that several changed paths
share once rather than once per change.

The nodes are public: a ``TrieBranch`` is a ``Fork`` of the hash tree and a ``TrieLeaf`` a
``Labeled`` child, so witnesses (``trie_witness``) walk them directly. The tests hold the
definition above as an oracle built from scratch, and compare digests with it.

``setup.py`` compiles this module with mypyc (the same source; it runs unchanged when not
compiled), so its annotations must hold at run time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Optional, Union

from mypy_extensions import mypyc_attr

from state_manager import hash_tree as ht
from state_manager.errors import StateManagerError
from state_manager.hash_tree import Empty
from state_manager.sha256 import sha256_of

# Labels and values are checked on the way in and digests are its own, so ``node_digest``
# applies hash_tree's formulas inline, without their argument checks: calling ``hash_fork`` &c.
# would add ~100 ns to each of the ~100,000 hashes of one subnet's 50-batch replay (~5% of
# it). The tests compare every digest with one built by the formulas from scratch.
_FORK_SEP = ht.domain_sep("ic-hashtree-fork")
_LABELED_SEP = ht.domain_sep("ic-hashtree-labeled")
_LEAF_SEP = ht.domain_sep("ic-hashtree-leaf")
_EMPTY_DIGEST = ht.hash_empty()

__all__ = [
    "LabeledTrieError",
    "InvalidLabelError",
    "InvalidValueError",
    "LabelNotFoundError",
    "UnsortedItemsError",
    "Value",
    "TrieLeaf",
    "TrieBranch",
    "TrieNode",
    "LabeledTrie",
    "build_from_sorted",
    "node_digest",
    "pending_hashes",
]


# --------------------------------------------------------------------------- errors


# Errors stay ordinary Python classes when the module is compiled (mypyc cannot compile
# LabelNotFoundError's second built-in base, and a compiled base would forbid it).
@mypyc_attr(native_class=False)
class LabeledTrieError(StateManagerError, ValueError):
    """Base of every error raised by this module."""


class InvalidLabelError(LabeledTrieError):
    """A label is not ``bytes``."""


class InvalidValueError(LabeledTrieError):
    """A value is not ``bytes``, ``Empty`` or a ``LabeledTrie``."""


@mypyc_attr(native_class=False)
class LabelNotFoundError(LabeledTrieError, KeyError):
    """The label is not in the trie."""


class UnsortedItemsError(LabeledTrieError):
    """Bulk-build items are not in strictly increasing label order."""


# --------------------------------------------------------------------------- label bits


def _bit(label: bytes, position: int) -> int:
    """Bit ``position`` of the encoding ``1·b0 1·b1 … 1·b(n-1) 0`` (0 past its end)."""
    index, offset = divmod(position, 9)
    if index >= len(label):
        return 0
    if offset == 0:
        return 1
    return (label[index] >> (8 - offset)) & 1


def _crit_bit(a: bytes, b: bytes) -> int:
    """The first position where the encodings of two distinct labels differ."""
    n = min(len(a), len(b))
    diff = int.from_bytes(a[:n], "big") ^ int.from_bytes(b[:n], "big")
    if diff == 0:
        # One label is a prefix of the other: its terminator 0 meets the other's 1.
        return 9 * n
    leading = 8 * n - diff.bit_length()  # equal bits before the first difference
    return 9 * (leading >> 3) + 1 + (leading & 7)


# --------------------------------------------------------------------------- nodes


class TrieLeaf:
    """One child of the map: ``Labeled(label, value_tree(value))``.

    Immutable by convention (plain slots: node creation is the hot path of every commit);
    only ``cached_digest`` is ever written, once, by ``node_digest``."""

    __slots__ = ("label", "value", "cached_digest")

    def __init__(self, label: bytes, value: Value) -> None:
        self.label = label
        self.value = value
        self.cached_digest: Optional[bytes] = None

    @property
    def first(self) -> bytes:
        return self.label

    @property
    def last(self) -> bytes:
        return self.label

    @property
    def size(self) -> int:
        return 1


class TrieBranch:
    """``Fork(left, right)``: the labels below agree on all bits before ``bit``; those with
    bit 0 there are on the left. ``first``/``last`` are the smallest and largest label.
    Immutable by convention, like ``TrieLeaf``, except while the ``LabeledTrie.update`` call
    named by ``batch`` that created it is running (no other version can see it yet)."""

    __slots__ = ("bit", "left", "right", "size", "first", "last", "cached_digest", "batch")

    def __init__(self, bit: int, left: "TrieNode", right: "TrieNode", size: int, first: bytes, last: bytes,
                 batch: Optional[_Batch] = None) -> None:
        self.bit = bit
        self.left = left
        self.right = right
        self.size = size
        self.first = first
        self.last = last
        self.cached_digest: Optional[bytes] = None
        self.batch = batch


class _Batch:
    """Identifies one ``LabeledTrie.update`` call: the branches it created carry it."""

    __slots__ = ()


TrieNode = Union[TrieLeaf, TrieBranch]


def _branch(bit: int, left: TrieNode, right: TrieNode, batch: Optional[_Batch] = None) -> TrieBranch:
    return TrieBranch(bit, left, right, left.size + right.size, left.first, right.last, batch)


def _rebuild(path: list[tuple[TrieBranch, int]], node: TrieNode, batch: Optional[_Batch]) -> TrieNode:
    """Copy the branches of ``path`` (root first) bottom-up around the new ``node``.

    Within a batch, a branch the batch created is relinked in place instead: the batch
    created every branch above it too (it copied whole paths up to the root), so the path
    ends there, and nothing outside the batch can see the change. The sizes and bounds of
    the batch's branches are refreshed once, when it ends (``_seal``)."""
    for depth in range(len(path) - 1, -1, -1):
        parent, went_right = path[depth]
        if batch is not None and parent.batch is batch:
            if went_right:
                parent.right = node
            else:
                parent.left = node
            return path[0][0]
        if went_right:
            node = _branch(parent.bit, parent.left, node, batch)
        else:
            node = _branch(parent.bit, node, parent.right, batch)
    return node


def _seal(root: Optional[TrieNode], batch: _Batch) -> None:
    """End ``batch``: recompute the sizes and bounds of the branches it created (children
    first; its other children are older, with correct ones) and release them."""
    stack: list[tuple[TrieBranch, bool]] = []
    if isinstance(root, TrieBranch) and root.batch is batch:
        stack.append((root, False))
    while stack:
        node, children_done = stack.pop()
        if children_done:
            node.size = node.left.size + node.right.size
            node.first = node.left.first
            node.last = node.right.last
            node.batch = None
            continue
        stack.append((node, True))
        for child in (node.left, node.right):
            if isinstance(child, TrieBranch) and child.batch is batch:
                stack.append((child, False))


def _walk(root: TrieNode, label: bytes, path: list[tuple[TrieBranch, int]]) -> TrieLeaf:
    """Follow ``label``'s own bits from ``root`` to a leaf, recording ``(branch, went_right)``."""
    node = root
    while isinstance(node, TrieBranch):
        went_right = _bit(label, node.bit)
        path.append((node, went_right))
        node = node.right if went_right else node.left
    return node


def _insert(root: Optional[TrieNode], label: bytes, value: Value, batch: Optional[_Batch]) -> TrieNode:
    new_leaf = TrieLeaf(label, value)
    if root is None:
        return new_leaf
    # The leaf reached by the label's own bits shares the longest encoding prefix with it.
    path: list[tuple[TrieBranch, int]] = []
    reached = _walk(root, label, path)
    if reached.label == label:
        return _rebuild(path, new_leaf, batch)
    # The new branch goes above the first node of that walk that splits at a later bit
    # (bits grow along any walk), i.e. where the walk leaves the shared prefix.
    crit = _crit_bit(label, reached.label)
    node: TrieNode = reached
    depth = 0
    while depth < len(path) and path[depth][0].bit < crit:
        depth += 1
    if depth < len(path):
        node = path[depth][0]
        del path[depth:]
    if _bit(label, crit):
        replacement = _branch(crit, node, new_leaf, batch)
    else:
        replacement = _branch(crit, new_leaf, node, batch)
    return _rebuild(path, replacement, batch)


def _remove(root: Optional[TrieNode], label: bytes, batch: Optional[_Batch]) -> Optional[TrieNode]:
    if root is None:
        raise LabelNotFoundError(label)
    path: list[tuple[TrieBranch, int]] = []
    if _walk(root, label, path).label != label:
        raise LabelNotFoundError(label)
    if not path:
        return None
    parent, went_right = path.pop()
    return _rebuild(path, parent.left if went_right else parent.right, batch)


def node_digest(node: TrieNode) -> bytes:
    """Digest of a node, computing (post-order, no recursion) and caching missing ones.

    ``digest(Branch) = hash_fork(digest(left), digest(right))``;
    ``digest(Leaf) = hash_labeled(label, reconstruct(value_tree(value)))``.
    """
    cached = node.cached_digest
    if cached is not None:
        return cached
    stack: list[TrieNode] = [node]
    while stack:
        current = stack[-1]
        if current.cached_digest is not None:
            stack.pop()
            continue
        if isinstance(current, TrieBranch):
            left, right = current.left.cached_digest, current.right.cached_digest
            if left is None or right is None:
                if right is None:
                    stack.append(current.right)
                if left is None:
                    stack.append(current.left)
                continue
            current.cached_digest = sha256_of(_FORK_SEP, left, right)
        else:
            value = current.value
            if isinstance(value, LabeledTrie):
                root = value.root
                if root is None:
                    inner = _EMPTY_DIGEST
                elif root.cached_digest is None:
                    stack.append(root)
                    continue
                else:
                    inner = root.cached_digest
            elif isinstance(value, Empty):
                inner = _EMPTY_DIGEST
            else:
                inner = sha256_of(_LEAF_SEP, value)  # hash_leaf, inlined
            current.cached_digest = sha256_of(_LABELED_SEP, current.label, inner)
        stack.pop()
    cached = node.cached_digest
    if cached is None:  # unreachable: the walk ends by caching ``node`` itself
        raise LabeledTrieError("digest walk ended before the root")
    return cached


# Public entry points take ``object`` and check it here: compiled code would otherwise
# reject a wrong type with a bare TypeError instead of this module's typed errors.
def _check_label(label: object) -> bytes:
    if not isinstance(label, bytes):
        raise InvalidLabelError(f"label must be bytes, got {type(label).__name__}")
    return label


def _check_value(value: object) -> Value:
    if not isinstance(value, (bytes, Empty, LabeledTrie)):
        raise InvalidValueError(f"value must be bytes, Empty or LabeledTrie, got {type(value).__name__}")
    return value


def _find_leaf(root: Optional[TrieNode], label: bytes) -> Optional[TrieLeaf]:
    node = root
    if node is None:
        return None
    while isinstance(node, TrieBranch):
        node = node.right if _bit(label, node.bit) else node.left
    return node if node.label == label else None


# --------------------------------------------------------------------------- the map


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class LabeledTrie:
    """An immutable map ``label -> value``; every update returns a new trie sharing nodes."""

    root: Optional[TrieNode] = None

    @classmethod
    def empty(cls) -> LabeledTrie:
        """The map with no children (hash tree ``Empty``)."""
        return _EMPTY_TRIE

    def __repr__(self) -> str:
        return f"LabeledTrie(<{len(self)} children>)"

    def __len__(self) -> int:
        return 0 if self.root is None else self.root.size

    def __contains__(self, label: object) -> bool:
        return isinstance(label, bytes) and _find_leaf(self.root, label) is not None

    def get_leaf(self, label: object) -> Optional[bytes]:
        """The leaf value under ``label`` (bytes); ``None`` if the label is absent or holds
        a subtree or ``Empty``."""
        found = _find_leaf(self.root, _check_label(label))
        if found is None:
            return None
        value = found.value
        return value if isinstance(value, bytes) else None

    def get_subtree(self, label: object) -> Optional[LabeledTrie]:
        """The subtree under ``label`` (bytes), ``Empty`` being the empty trie (both hash to
        ``Empty``); ``None`` if the label is absent or holds a leaf."""
        found = _find_leaf(self.root, _check_label(label))
        if found is None:
            return None
        value = found.value
        if isinstance(value, LabeledTrie):
            return value
        return _EMPTY_TRIE if isinstance(value, Empty) else None

    def __getitem__(self, label: object) -> Value:
        found = _find_leaf(self.root, _check_label(label))
        if found is None:
            raise LabelNotFoundError(label)
        return found.value

    def insert(self, label: object, value: object) -> LabeledTrie:
        """The map with ``label`` (bytes) set to ``value`` (a ``Value``), added or replaced,
        in O(depth) new nodes."""
        return LabeledTrie(_insert(self.root, _check_label(label), _check_value(value), None))

    def remove(self, label: object) -> LabeledTrie:
        """The map without ``label``; its sibling takes the parent's place."""
        return _trie(_remove(self.root, _check_label(label), None))

    def update(self, changes: Iterable[tuple[object, object]]) -> LabeledTrie:
        """The map after each ``(label, value)`` change in turn: ``insert`` it, or ``remove``
        the label when ``value`` is ``None``. The same map as one call per change, but a
        node on the paths of several changes is created once per ``update``, not once per
        change."""
        batch = _Batch()
        root = self.root
        for label, value in changes:
            if value is None:
                root = _remove(root, _check_label(label), batch)
            else:
                root = _insert(root, _check_label(label), _check_value(value), batch)
        _seal(root, batch)
        return _trie(root)

    def items(self) -> Iterator[tuple[bytes, Value]]:
        """All ``(label, value)`` pairs in increasing label order."""
        return self.range_items(None, None)

    def range_items(self, lo: object = None, hi: object = None) -> Iterator[tuple[bytes, Value]]:
        """Pairs with ``lo <= label < hi`` (bytes, ``None`` = unbounded), in label order,
        visiting only subtrees that overlap the range."""
        return _iter_range(self.root, None if lo is None else _check_label(lo),
                           None if hi is None else _check_label(hi))

    def label_before(self, label: object) -> Optional[bytes]:
        """The largest label below ``label`` (bytes), or ``None``: descend right exactly when
        the right side's smallest label is below it."""
        bound = _check_label(label)
        node = self.root
        if node is None:
            return None
        while isinstance(node, TrieBranch):
            node = node.right if node.right.first < bound else node.left
        return node.label if node.label < bound else None

    def label_after(self, label: object) -> Optional[bytes]:
        """The smallest label above ``label`` (bytes), or ``None``: descend left exactly when
        the left side's largest label is above it."""
        bound = _check_label(label)
        node = self.root
        if node is None:
            return None
        while isinstance(node, TrieBranch):
            node = node.left if node.left.last > bound else node.right
        return node.label if node.label > bound else None

    def first_label(self) -> Optional[bytes]:
        """The smallest label, or ``None`` when empty."""
        return None if self.root is None else self.root.first

    def last_label(self) -> Optional[bytes]:
        """The largest label, or ``None`` when empty."""
        return None if self.root is None else self.root.last

    def digest(self) -> bytes:
        """``reconstruct(tree(self))`` (module docstring), reusing every cached node digest."""
        if self.root is None:
            return ht.hash_empty()
        return node_digest(self.root)


_EMPTY_TRIE = LabeledTrie(None)


def _trie(root: Optional[TrieNode]) -> LabeledTrie:
    return _EMPTY_TRIE if root is None else LabeledTrie(root)


Value = Union[bytes, Empty, LabeledTrie]


def _iter_range(root: Optional[TrieNode], lo: Optional[bytes], hi: Optional[bytes]) -> Iterator[tuple[bytes, Value]]:
    stack: list[TrieNode] = [] if root is None else [root]
    while stack:
        node = stack.pop()
        if (lo is not None and node.last < lo) or (hi is not None and node.first >= hi):
            continue
        if isinstance(node, TrieBranch):
            stack.append(node.right)
            stack.append(node.left)
        else:
            yield node.label, node.value


def build_from_sorted(items: Iterable[tuple[object, object]]) -> LabeledTrie:
    """A trie from pairs in strictly increasing label order, in O(n).

    The crit-bit trie of sorted labels is the Cartesian tree of the crit bits of adjacent
    labels (smallest bit at the top), built here with one stack of open left parts.
    """
    # Each entry is (bit, left subtree) of a branch whose right side is still being built.
    open_branches: list[tuple[int, TrieNode]] = []
    current: Optional[TrieNode] = None
    previous: Optional[bytes] = None
    for item_label, item_value in items:
        label = _check_label(item_label)
        new_leaf = TrieLeaf(label, _check_value(item_value))
        if current is None:
            current = new_leaf
            previous = label
            continue
        if label <= previous:  # type: ignore[operator]
            raise UnsortedItemsError(f"label {label!r} does not follow {previous!r} in strictly increasing order")
        crit = _crit_bit(previous, label)  # type: ignore[arg-type]
        while open_branches and open_branches[-1][0] > crit:
            bit, left = open_branches.pop()
            current = _branch(bit, left, current)
        open_branches.append((crit, current))
        current = new_leaf
        previous = label
    if current is None:
        return _EMPTY_TRIE
    while open_branches:
        bit, left = open_branches.pop()
        current = _branch(bit, left, current)
    return LabeledTrie(current)


def pending_hashes(trie: LabeledTrie) -> int:
    """SHA-256 computations the next ``digest()`` needs: one per node (nested tries included)
    whose digest is not cached yet, plus one per leaf value under such a node. For
    measurements: a commit should add O(changes × depth) of them, not O(size)."""
    count = 0
    stack: list[TrieNode] = [] if trie.root is None else [trie.root]
    while stack:
        node = stack.pop()
        if node.cached_digest is not None:
            continue
        count += 1
        if isinstance(node, TrieBranch):
            stack.append(node.left)
            stack.append(node.right)
        else:
            value = node.value
            if isinstance(value, LabeledTrie):
                if value.root is not None:
                    stack.append(value.root)
            elif isinstance(value, bytes):
                count += 1
    return count
