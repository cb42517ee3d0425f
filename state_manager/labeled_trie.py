"""Persistent labeled maps with incremental certification hashing (DESIGN §6).

A ``LabeledTrie`` maps labels (bytes) to values: a leaf (``bytes``), ``Empty`` or a nested
``LabeledTrie``. Its hash tree is::

    to_hash_tree({})            = Empty
    to_hash_tree({l: v})        = Labeled(l, value_tree(v))
    to_hash_tree(m), |m| >= 2   = Fork(to_hash_tree(m0), to_hash_tree(m1))

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

``setup.py`` compiles this module with mypyc (the same source; it runs unchanged when not
compiled), so its annotations must hold at run time.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Optional, Union

from mypy_extensions import mypyc_attr

from state_manager import hash_tree as ht
from state_manager.hash_tree import Empty, HashTree
from state_manager.sha256 import sha256_of

# Labels and values are checked on the way in and digests are its own, so the trie applies
# hash_tree's formulas inline, without their argument checks.
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
    "InvalidSelectionError",
    "Value",
    "LabeledTrie",
    "build_from_sorted",
    "to_hash_tree",
    "value_digest",
    "Selection",
    "REVEAL_ALL",
    "REVEAL_NOTHING",
    "select_path",
    "select_range",
    "union_selections",
    "select",
    "witness",
    "reference_hash_tree",
    "reference_digest",
]


# --------------------------------------------------------------------------- errors


# Errors stay ordinary Python classes when the module is compiled (mypyc cannot compile
# LabelNotFoundError's second built-in base, and a compiled base would forbid it).
@mypyc_attr(native_class=False)
class LabeledTrieError(ValueError):
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


class InvalidSelectionError(LabeledTrieError):
    """A witness selection is malformed."""


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


class _Leaf:
    """One child of the map: ``Labeled(label, value_tree(value))``.

    Immutable by convention (plain slots: node creation is the hot path of every commit);
    only ``cached_digest`` is ever written, once, by ``_node_digest``."""

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


class _Branch:
    """``Fork(left, right)``: the labels below agree on all bits before ``bit``; those with
    bit 0 there are on the left. ``first``/``last`` are the smallest and largest label.
    Immutable by convention, like ``_Leaf``, except while the ``LabeledTrie.update`` call
    named by ``batch`` that created it is running (no other version can see it yet)."""

    __slots__ = ("bit", "left", "right", "size", "first", "last", "cached_digest", "batch")

    def __init__(self, bit: int, left: "_Node", right: "_Node", size: int, first: bytes, last: bytes,
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


_Node = Union[_Leaf, _Branch]


def _branch(bit: int, left: _Node, right: _Node, batch: Optional[_Batch] = None) -> _Branch:
    return _Branch(bit, left, right, left.size + right.size, left.first, right.last, batch)


def _rebuild(path: list[tuple[_Branch, int]], node: _Node, batch: Optional[_Batch]) -> _Node:
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


def _seal(root: Optional[_Node], batch: _Batch) -> None:
    """End ``batch``: recompute the sizes and bounds of the branches it created (children
    first; its other children are older, with correct ones) and release them."""
    stack: list[tuple[_Branch, bool]] = []
    if isinstance(root, _Branch) and root.batch is batch:
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
            if isinstance(child, _Branch) and child.batch is batch:
                stack.append((child, False))


def _walk(root: _Node, label: bytes, path: list[tuple[_Branch, int]]) -> _Leaf:
    """Follow ``label``'s own bits from ``root`` to a leaf, recording ``(branch, went_right)``."""
    node = root
    size = len(label)
    while isinstance(node, _Branch):
        index, offset = divmod(node.bit, 9)  # inlined _bit: this loop is every commit's hot path
        went_right = 0 if index >= size else 1 if offset == 0 else (label[index] >> (8 - offset)) & 1
        path.append((node, went_right))
        node = node.right if went_right else node.left
    return node


def _insert(root: Optional[_Node], label: bytes, value: Value, batch: Optional[_Batch]) -> _Node:
    new_leaf = _Leaf(label, value)
    if root is None:
        return new_leaf
    # The leaf reached by the label's own bits shares the longest encoding prefix with it.
    path: list[tuple[_Branch, int]] = []
    reached = _walk(root, label, path)
    if reached.label == label:
        return _rebuild(path, new_leaf, batch)
    # The new branch goes above the first node of that walk that splits at a later bit
    # (bits grow along any walk), i.e. where the walk leaves the shared prefix.
    crit = _crit_bit(label, reached.label)
    node: _Node = reached
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


def _remove(root: Optional[_Node], label: bytes, batch: Optional[_Batch]) -> Optional[_Node]:
    if root is None:
        raise LabelNotFoundError(label)
    path: list[tuple[_Branch, int]] = []
    if _walk(root, label, path).label != label:
        raise LabelNotFoundError(label)
    if not path:
        return None
    parent, went_right = path.pop()
    return _rebuild(path, parent.left if went_right else parent.right, batch)


def _node_digest(node: _Node) -> bytes:
    """Digest of a node, computing (post-order, no recursion) and caching missing ones.

    ``digest(Branch) = hash_fork(digest(left), digest(right))``;
    ``digest(Leaf) = hash_labeled(label, value_digest(value))``.
    """
    cached = node.cached_digest
    if cached is not None:
        return cached
    stack: list[_Node] = [node]
    while stack:
        current = stack[-1]
        if current.cached_digest is not None:
            stack.pop()
            continue
        if isinstance(current, _Branch):
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


def _find_leaf(root: Optional[_Node], label: bytes) -> Optional[_Leaf]:
    node = root
    if node is None:
        return None
    while isinstance(node, _Branch):
        node = node.right if _bit(label, node.bit) else node.left
    return node if node.label == label else None


def _predecessor(root: _Node, label: bytes) -> Optional[bytes]:
    """The largest label below ``label``: the right side holds one iff its first is below."""
    node = root
    while isinstance(node, _Branch):
        node = node.right if node.right.first < label else node.left
    return node.label if node.label < label else None


def _successor(root: _Node, label: bytes) -> Optional[bytes]:
    """The smallest label above ``label``: the left side holds one iff its last is above."""
    node = root
    while isinstance(node, _Branch):
        node = node.left if node.left.last > label else node.right
    return node.label if node.label > label else None


# --------------------------------------------------------------------------- the map


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class LabeledTrie:
    """An immutable map ``label -> value``; every update returns a new trie sharing nodes."""

    root: Optional[_Node] = None

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

    def get(self, label: object, default: object = None) -> object:
        """The value under ``label`` (bytes), or ``default``."""
        found = _find_leaf(self.root, _check_label(label))
        return default if found is None else found.value

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

    def first_label(self) -> Optional[bytes]:
        """The smallest label, or ``None`` when empty."""
        return None if self.root is None else self.root.first

    def last_label(self) -> Optional[bytes]:
        """The largest label, or ``None`` when empty."""
        return None if self.root is None else self.root.last

    def digest(self) -> bytes:
        """``reconstruct(to_hash_tree(self))``, reusing every cached node digest."""
        if self.root is None:
            return ht.hash_empty()
        return _node_digest(self.root)


_EMPTY_TRIE = LabeledTrie(None)


def _trie(root: Optional[_Node]) -> LabeledTrie:
    return _EMPTY_TRIE if root is None else LabeledTrie(root)


Value = Union[bytes, Empty, LabeledTrie]


def _iter_range(root: Optional[_Node], lo: Optional[bytes], hi: Optional[bytes]) -> Iterator[tuple[bytes, Value]]:
    stack: list[_Node] = [] if root is None else [root]
    while stack:
        node = stack.pop()
        if (lo is not None and node.last < lo) or (hi is not None and node.first >= hi):
            continue
        if isinstance(node, _Branch):
            stack.append(node.right)
            stack.append(node.left)
        else:
            yield node.label, node.value


def value_digest(value: object) -> bytes:
    """``reconstruct(value_tree(value))``: ``hash_leaf`` of bytes, ``hash_empty`` of Empty,
    the trie digest of a nested trie."""
    if isinstance(value, LabeledTrie):
        return value.digest()
    if isinstance(value, Empty):
        return ht.hash_empty()
    if isinstance(value, bytes):
        return ht.hash_leaf(value)
    raise InvalidValueError(f"value must be bytes, Empty or LabeledTrie, got {type(value).__name__}")


def build_from_sorted(items: Iterable[tuple[object, object]]) -> LabeledTrie:
    """A trie from pairs in strictly increasing label order, in O(n).

    The crit-bit trie of sorted labels is the Cartesian tree of the crit bits of adjacent
    labels (smallest bit at the top), built here with one stack of open left parts.
    """
    # Each entry is (bit, left subtree) of a branch whose right side is still being built.
    open_branches: list[tuple[int, _Node]] = []
    current: Optional[_Node] = None
    previous: Optional[bytes] = None
    for item_label, item_value in items:
        label = _check_label(item_label)
        new_leaf = _Leaf(label, _check_value(item_value))
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


# --------------------------------------------------------------------------- witnesses


@dataclass(frozen=True, slots=True)
class Selection:
    """What a witness reveals of one value.

    ``reveal_all``: the whole value. ``children``: ``(label, Selection)`` pairs in strictly
    increasing label order; a present child is revealed as its selection says, a missing
    one is proven absent by revealing its neighbours' labels. ``ranges``: ``(lo, hi)``
    pairs; every child with ``lo <= label < hi`` (``hi`` ``None`` = unbounded) is revealed
    whole. Everything else becomes ``Pruned``.
    """

    reveal_all: bool = False
    children: tuple[tuple[bytes, Selection], ...] = ()
    ranges: tuple[tuple[bytes, Optional[bytes]], ...] = ()

    def __post_init__(self) -> None:
        previous: Optional[bytes] = None
        for entry in self.children:
            if not (isinstance(entry, tuple) and len(entry) == 2):
                raise InvalidSelectionError("children must be (label, Selection) pairs")
            label, sub = entry
            if not isinstance(label, bytes):
                raise InvalidSelectionError(f"child label must be bytes, got {type(label).__name__}")
            if not isinstance(sub, Selection):
                raise InvalidSelectionError(f"child selection must be a Selection, got {type(sub).__name__}")
            if previous is not None and label <= previous:
                raise InvalidSelectionError("child labels must be strictly increasing")
            previous = label
        for range_entry in self.ranges:
            if not (isinstance(range_entry, tuple) and len(range_entry) == 2):
                raise InvalidSelectionError("ranges must be (lo, hi) pairs")
            lo, hi = range_entry
            if not isinstance(lo, bytes) or not (hi is None or isinstance(hi, bytes)):
                raise InvalidSelectionError("range bounds must be bytes (hi may be None)")
            if hi is not None and hi < lo:
                raise InvalidSelectionError(f"range [{lo!r}, {hi!r}) has hi below lo")

    def is_nothing(self) -> bool:
        """True when nothing is revealed."""
        return not (self.reveal_all or self.children or self.ranges)


REVEAL_ALL = Selection(reveal_all=True)
REVEAL_NOTHING = Selection()


def _check_path(path: Sequence[bytes]) -> None:
    if isinstance(path, (bytes, str)):
        raise InvalidSelectionError("path must be a sequence of labels, not a single label")
    for label in path:
        if not isinstance(label, bytes):
            raise InvalidSelectionError(f"path labels must be bytes, got {type(label).__name__}")


def _under_path(path: Sequence[bytes], selection: Selection) -> Selection:
    _check_path(path)
    for label in reversed(path):
        selection = Selection(children=((label, selection),))
    return selection


def select_path(path: Sequence[bytes]) -> Selection:
    """Reveal the value at ``path`` whole (or prove the path absent)."""
    return _under_path(path, REVEAL_ALL)


def select_range(path: Sequence[bytes], lo: bytes, hi: Optional[bytes]) -> Selection:
    """Reveal whole every child with ``lo <= label < hi`` of the trie at ``path``."""
    return _under_path(path, Selection(ranges=((lo, hi),)))


def _range_key(entry: tuple[bytes, Optional[bytes]]) -> tuple[bytes, bool, bytes]:
    lo, hi = entry
    return (lo, hi is None, b"" if hi is None else hi)


def union_selections(a: Selection, b: Selection) -> Selection:
    """A selection revealing everything that ``a`` or ``b`` reveals."""
    if a.reveal_all or b.reveal_all:
        return REVEAL_ALL
    merged: dict[bytes, Selection] = dict(a.children)
    for label, sub in b.children:
        merged[label] = union_selections(merged[label], sub) if label in merged else sub
    children = tuple((label, merged[label]) for label in sorted(merged))
    ranges = tuple(sorted(set(a.ranges) | set(b.ranges), key=_range_key))
    return Selection(children=children, ranges=ranges)


def select(
    paths: Iterable[Sequence[bytes]] = (),
    ranges: Iterable[tuple[Sequence[bytes], bytes, Optional[bytes]]] = (),
) -> Selection:
    """The union of ``select_path`` over ``paths`` and ``select_range`` over ``(path, lo, hi)``."""
    result = REVEAL_NOTHING
    for path in paths:
        result = union_selections(result, select_path(path))
    for path, lo, hi in ranges:
        result = union_selections(result, select_range(path, lo, hi))
    return result


@dataclass(frozen=True, slots=True)
class _Level:
    """A selection prepared against one trie: which labels to reveal and how."""

    exact: dict  # label -> Selection, or None to reveal the label with its value pruned
    labels: list  # sorted keys of exact, for overlap tests
    ranges: tuple

    def overlaps(self, first: bytes, last: bytes) -> bool:
        index = bisect_left(self.labels, first)
        if index < len(self.labels) and self.labels[index] <= last:
            return True
        for lo, hi in self.ranges:
            if lo <= last and (hi is None or first < hi):
                return True
        return False

    def in_range(self, label: bytes) -> bool:
        for lo, hi in self.ranges:
            if lo <= label and (hi is None or label < hi):
                return True
        return False


def _prepare_level(root: _Node, selection: Selection) -> _Level:
    exact: dict[bytes, Optional[Selection]] = {}
    for label, sub in selection.children:
        if _find_leaf(root, label) is not None:
            exact[label] = sub
            continue
        # Absence proof: the neighbours become adjacent revealed labels in the witness.
        for neighbour in (_predecessor(root, label), _successor(root, label)):
            if neighbour is not None and neighbour not in exact:
                exact[neighbour] = None
    return _Level(exact, sorted(exact), selection.ranges)


# Task codes of the witness builder's explicit stack.
_VALUE, _NODE, _FULL, _LABELED, _FORK = range(5)


def witness(trie: LabeledTrie, selection: Selection) -> HashTree:
    """The hash tree of ``trie`` with everything ``selection`` does not reveal pruned, so
    ``reconstruct(witness(trie, s)) == trie.digest()``. Built without recursion."""
    if not isinstance(trie, LabeledTrie):
        raise InvalidValueError(f"expected a LabeledTrie, got {type(trie).__name__}")
    if not isinstance(selection, Selection):
        raise InvalidSelectionError(f"expected a Selection, got {type(selection).__name__}")
    out: list[HashTree] = []
    tasks: list[tuple] = [(_VALUE, trie, selection)]
    while tasks:
        task = tasks.pop()
        op = task[0]
        if op == _VALUE:
            _, value, sel = task
            if sel is None or sel.is_nothing():
                out.append(ht.pruned(value_digest(value)))
            elif isinstance(value, LabeledTrie):
                root = value.root
                if root is None:
                    out.append(ht.empty())
                elif sel.reveal_all:
                    tasks.append((_FULL, root))
                else:
                    tasks.append((_NODE, root, _prepare_level(root, sel)))
            elif isinstance(value, Empty):
                out.append(ht.empty())
            else:
                # A leaf is revealed whole; deeper selected paths are thereby proven absent.
                out.append(ht.leaf(value))
        elif op == _NODE:
            _, node, level = task
            if not level.overlaps(node.first, node.last):
                out.append(ht.pruned(_node_digest(node)))
            elif isinstance(node, _Branch):
                tasks.append((_FORK,))
                tasks.append((_NODE, node.right, level))
                tasks.append((_NODE, node.left, level))
            else:
                sub = REVEAL_ALL if level.in_range(node.label) else level.exact[node.label]
                tasks.append((_LABELED, node.label))
                tasks.append((_VALUE, node.value, sub))
        elif op == _FULL:
            node = task[1]
            if isinstance(node, _Branch):
                tasks.append((_FORK,))
                tasks.append((_FULL, node.right))
                tasks.append((_FULL, node.left))
            else:
                tasks.append((_LABELED, node.label))
                tasks.append((_VALUE, node.value, REVEAL_ALL))
        elif op == _LABELED:
            out.append(ht.labeled(task[1], out.pop()))
        else:
            right = out.pop()
            out.append(ht.fork(out.pop(), right))
    return out[0]


def to_hash_tree(trie: LabeledTrie) -> HashTree:
    """The full hash tree of ``trie`` (nothing pruned)."""
    return witness(trie, REVEAL_ALL)


# --------------------------------------------------------------------------- reference


def _encoding_bits(label: bytes) -> str:
    """The label encoding ``1·b0 1·b1 … 1·b(n-1) 0`` as a string of '0'/'1'."""
    return "".join("1" + format(byte, "08b") for byte in label) + "0"


def reference_hash_tree(mapping: Mapping) -> HashTree:
    """The hash tree of a plain nested mapping, built from scratch by the definition in
    the module docstring (independent of the trie code; for tests and audits).

    Values: ``bytes`` (leaf), ``Empty``, or a nested ``Mapping`` (an empty one is ``Empty``).
    """
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
                for label in value:
                    _check_label(label)
                if value:
                    tasks.append(("group", sorted((_encoding_bits(k), k, v) for k, v in value.items())))
                else:
                    out.append(ht.empty())
            else:
                raise InvalidValueError(f"reference values must be bytes, Empty or Mapping, got {type(value).__name__}")
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
