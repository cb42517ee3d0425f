"""The certification hash tree of the IC interface specification.

A hash tree is one of ``Empty``, ``Fork(left, right)``, ``Labeled(label, subtree)``,
``Leaf(value)`` or ``Pruned(digest)``. Its root digest is::

    reconstruct(Empty)          = H(domain_sep("ic-hashtree-empty"))
    reconstruct(Fork(l, r))     = H(domain_sep("ic-hashtree-fork") · reconstruct(l) · reconstruct(r))
    reconstruct(Labeled(l, t))  = H(domain_sep("ic-hashtree-labeled") · l · reconstruct(t))
    reconstruct(Leaf(v))        = H(domain_sep("ic-hashtree-leaf") · v)
    reconstruct(Pruned(d))      = d

with ``H`` = SHA-256 and ``domain_sep(s)`` = one byte ``len(s)`` followed by ``s``. A witness
is the same tree with some subtrees replaced by ``Pruned`` of their digest, so it has the
same root. Every walk here uses an explicit stack: remote trees may be deep.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Union

from state_manager.errors import StateManagerError
from state_manager.sha256 import sha256_of

__all__ = [
    "HashTreeError",
    "NotATreeError",
    "LabelTypeError",
    "LeafValueTypeError",
    "DigestError",
    "DomainSeparatorError",
    "PathError",
    "MalformedTreeError",
    "UnsortedLabelsError",
    "DuplicateLabelError",
    "LeafNotAloneError",
    "Empty",
    "Fork",
    "Labeled",
    "Leaf",
    "Pruned",
    "HashTree",
    "empty",
    "fork",
    "labeled",
    "leaf",
    "pruned",
    "domain_sep",
    "hash_empty",
    "hash_fork",
    "hash_labeled",
    "hash_leaf",
    "reconstruct",
    "flatten_forks",
    "Found",
    "Absent",
    "Unknown",
    "LookupResult",
    "ABSENT",
    "UNKNOWN",
    "find_label",
    "lookup_path",
    "validate_well_formed",
    "is_well_formed",
    "trees_equal",
]

DIGEST_LENGTH = 32


# --------------------------------------------------------------------------- errors


class HashTreeError(StateManagerError, ValueError):
    """Base of every error raised by this module."""


class NotATreeError(HashTreeError):
    """A child of a node is not a hash tree node."""


class LabelTypeError(HashTreeError):
    """A label is not ``bytes``."""


class LeafValueTypeError(HashTreeError):
    """A leaf value is not ``bytes``."""


class DigestError(HashTreeError):
    """A digest is not 32 ``bytes``."""


class DomainSeparatorError(HashTreeError):
    """A domain separator longer than 255 bytes."""


class PathError(HashTreeError):
    """A lookup path is not a sequence of ``bytes`` labels."""


class MalformedTreeError(HashTreeError):
    """A tree violates the well-formedness rules of a fork group."""


class UnsortedLabelsError(MalformedTreeError):
    """Labels of a fork group decrease somewhere."""


class DuplicateLabelError(MalformedTreeError):
    """A label occurs twice in one fork group."""


class LeafNotAloneError(MalformedTreeError):
    """A leaf shares its fork group with other nodes."""


# --------------------------------------------------------------------------- nodes


def _check_digest(digest: object) -> None:
    if not isinstance(digest, bytes):
        raise DigestError(f"digest must be bytes, got {type(digest).__name__}")
    if len(digest) != DIGEST_LENGTH:
        raise DigestError(f"digest must be {DIGEST_LENGTH} bytes, got {len(digest)}")


class _Node:
    """Common base: structural equality without recursion (trees can be deep)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Node):
            return NotImplemented
        return trees_equal(self, other)  # type: ignore[arg-type]

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, slots=True, eq=False)
class Empty(_Node):
    """The empty tree."""


@dataclass(frozen=True, slots=True, eq=False)
class Fork(_Node):
    """Two subtrees side by side; ``left`` holds the smaller labels."""

    left: HashTree
    right: HashTree

    def __post_init__(self) -> None:
        if not isinstance(self.left, _Node) or not isinstance(self.right, _Node):
            raise NotATreeError("fork children must be hash trees")


@dataclass(frozen=True, slots=True, eq=False)
class Labeled(_Node):
    """A subtree under a label."""

    label: bytes
    subtree: HashTree

    def __post_init__(self) -> None:
        if not isinstance(self.label, bytes):
            raise LabelTypeError(f"label must be bytes, got {type(self.label).__name__}")
        if not isinstance(self.subtree, _Node):
            raise NotATreeError("labeled subtree must be a hash tree")


@dataclass(frozen=True, slots=True, eq=False)
class Leaf(_Node):
    """A value."""

    value: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.value, bytes):
            raise LeafValueTypeError(f"leaf value must be bytes, got {type(self.value).__name__}")


@dataclass(frozen=True, slots=True, eq=False)
class Pruned(_Node):
    """A subtree known only by its digest."""

    digest: bytes

    def __post_init__(self) -> None:
        _check_digest(self.digest)


HashTree = Union[Empty, Fork, Labeled, Leaf, Pruned]

_EMPTY = Empty()


def empty() -> Empty:
    """The empty tree."""
    return _EMPTY


def fork(left: HashTree, right: HashTree) -> Fork:
    """``Fork(left, right)``."""
    return Fork(left, right)


def labeled(label: bytes, subtree: HashTree) -> Labeled:
    """``Labeled(label, subtree)``."""
    return Labeled(label, subtree)


def leaf(value: bytes) -> Leaf:
    """``Leaf(value)``."""
    return Leaf(value)


def pruned(digest: bytes) -> Pruned:
    """``Pruned(digest)``; the digest must be 32 bytes."""
    return Pruned(digest)


# --------------------------------------------------------------------------- hashing


def domain_sep(name: str) -> bytes:
    """``domain_sep(s) = byte(len(s)) · s`` (``s`` ASCII, at most 255 bytes): the prefix of
    every domain-separated hash and signed message of the state manager."""
    raw = name.encode("ascii")
    if len(raw) > 255:
        raise DomainSeparatorError(f"domain separator of {len(raw)} bytes; at most 255 fit its length byte")
    return bytes((len(raw),)) + raw


_EMPTY_SEP = domain_sep("ic-hashtree-empty")
_FORK_SEP = domain_sep("ic-hashtree-fork")
_LABELED_SEP = domain_sep("ic-hashtree-labeled")
_LEAF_SEP = domain_sep("ic-hashtree-leaf")
_EMPTY_DIGEST = sha256_of(_EMPTY_SEP)


def hash_empty() -> bytes:
    """``H(domain_sep("ic-hashtree-empty"))``."""
    return _EMPTY_DIGEST


def hash_fork(left_digest: bytes, right_digest: bytes) -> bytes:
    """``H(domain_sep("ic-hashtree-fork") · left_digest · right_digest)``."""
    if (
        type(left_digest) is not bytes
        or type(right_digest) is not bytes
        or len(left_digest) != DIGEST_LENGTH
        or len(right_digest) != DIGEST_LENGTH
    ):
        _check_digest(left_digest)
        _check_digest(right_digest)
    return sha256_of(_FORK_SEP, left_digest, right_digest)


def hash_labeled(label: bytes, subtree_digest: bytes) -> bytes:
    """``H(domain_sep("ic-hashtree-labeled") · label · subtree_digest)``."""
    if type(label) is not bytes and not isinstance(label, bytes):
        raise LabelTypeError(f"label must be bytes, got {type(label).__name__}")
    if type(subtree_digest) is not bytes or len(subtree_digest) != DIGEST_LENGTH:
        _check_digest(subtree_digest)
    return sha256_of(_LABELED_SEP, label, subtree_digest)


def hash_leaf(value: bytes) -> bytes:
    """``H(domain_sep("ic-hashtree-leaf") · value)``."""
    if type(value) is not bytes and not isinstance(value, bytes):
        raise LeafValueTypeError(f"leaf value must be bytes, got {type(value).__name__}")
    return sha256_of(_LEAF_SEP, value)


def reconstruct(tree: HashTree) -> bytes:
    """The root digest of ``tree`` (formulas in the module docstring), without recursion."""
    if not isinstance(tree, _Node):
        raise NotATreeError(f"expected a hash tree, got {type(tree).__name__}")
    # Post-order walk: a node is pushed once to expand and once (marked) to combine.
    digests: list[bytes] = []
    stack: list[tuple[HashTree, bool]] = [(tree, False)]
    while stack:
        node, children_done = stack.pop()
        kind = type(node)
        if kind is Fork:
            if children_done:
                right = digests.pop()
                digests.append(hash_fork(digests.pop(), right))
            else:
                stack.append((node, True))
                stack.append((node.right, False))
                stack.append((node.left, False))
        elif kind is Labeled:
            if children_done:
                digests.append(hash_labeled(node.label, digests.pop()))
            else:
                stack.append((node, True))
                stack.append((node.subtree, False))
        elif kind is Leaf:
            digests.append(hash_leaf(node.value))
        elif kind is Pruned:
            digests.append(node.digest)
        else:
            digests.append(_EMPTY_DIGEST)
    return digests[0]


# --------------------------------------------------------------------------- lookup


def flatten_forks(tree: HashTree) -> list[HashTree]:
    """``flatten_forks(Empty) = []; flatten_forks(Fork(l, r)) = flatten_forks(l) · flatten_forks(r);
    flatten_forks(t) = [t]`` — the fork group of ``tree``, left to right."""
    out: list[HashTree] = []
    stack: list[HashTree] = [tree]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is Fork:
            stack.append(node.right)
            stack.append(node.left)
        elif kind is not Empty:
            out.append(node)
    return out


@dataclass(frozen=True, slots=True)
class Found:
    """The path leads to ``tree`` (a revealed subtree; a leaf value is ``Leaf``)."""

    tree: HashTree


@dataclass(frozen=True, slots=True)
class Absent:
    """The tree proves that the path does not exist."""


@dataclass(frozen=True, slots=True)
class Unknown:
    """The path runs into pruned parts: neither presence nor absence is proven."""


LookupResult = Union[Found, Absent, Unknown]
ABSENT = Absent()
UNKNOWN = Unknown()


def find_label(label: bytes, group: Sequence[HashTree]) -> LookupResult:
    """The spec's ``find_label`` over a flattened fork group, rules in priority order::

        find_label(l, _ · Labeled l1 t · _)                | l == l1     = Found t
        find_label(l, _ · Labeled l1 _ · Labeled l2 _ · _) | l1 < l < l2 = Absent
        find_label(l,     Labeled l2 _ · _)                | l < l2      = Absent
        find_label(l, _ · Labeled l1 _)                    | l1 < l      = Absent
        find_label(l, [Leaf _])                                          = Absent
        find_label(l, [])                                                = Absent
        find_label(l, _)                                                 = Unknown

    Absence needs revealed labels on both sides (or a boundary), so a pruned neighbour
    always yields ``Unknown``.
    """
    for node in group:
        if type(node) is Labeled and node.label == label:
            return Found(node.subtree)
    if not group:
        return ABSENT
    first, last = group[0], group[-1]
    if len(group) == 1 and type(first) is Leaf:
        return ABSENT
    if type(first) is Labeled and label < first.label:
        return ABSENT
    if type(last) is Labeled and last.label < label:
        return ABSENT
    for before, after in zip(group, group[1:]):
        if (
            type(before) is Labeled
            and type(after) is Labeled
            and before.label < label < after.label
        ):
            return ABSENT
    return UNKNOWN


def lookup_path(tree: HashTree, path: Sequence[bytes]) -> LookupResult:
    """Follow ``path`` from ``tree`` with ``find_label`` at every step.

    At the end of the path the reached subtree is returned as ``Found(subtree)`` — this
    generalises the spec's leaf lookup so callers can read whole revealed subtrees — except
    that a ``Pruned`` subtree is ``Unknown``. Cost: the size of each fork group on the path.
    """
    if isinstance(path, (bytes, str)):
        raise PathError("path must be a sequence of labels, not a single label")
    node = tree
    for label in path:
        if not isinstance(label, bytes):
            raise PathError(f"path labels must be bytes, got {type(label).__name__}")
        result = find_label(label, flatten_forks(node))
        if type(result) is not Found:
            return result
        node = result.tree
    if type(node) is Pruned:
        return UNKNOWN
    return Found(node)


# --------------------------------------------------------------------------- well-formedness


def validate_well_formed(tree: HashTree) -> None:
    """Raise unless, in every fork group, labels strictly increase left to right and a
    ``Leaf`` stands alone. ``Pruned`` and ``Empty`` may appear anywhere."""
    if not isinstance(tree, _Node):
        raise NotATreeError(f"expected a hash tree, got {type(tree).__name__}")
    groups: list[HashTree] = [tree]
    while groups:
        group = flatten_forks(groups.pop())
        previous: bytes | None = None
        for node in group:
            kind = type(node)
            if kind is Leaf and len(group) > 1:
                raise LeafNotAloneError("a leaf shares its fork group with other nodes")
            if kind is Labeled:
                if previous is not None:
                    if node.label == previous:
                        raise DuplicateLabelError(f"label {node.label!r} occurs twice in a fork group")
                    if node.label < previous:
                        raise UnsortedLabelsError(
                            f"label {node.label!r} follows the larger label {previous!r}"
                        )
                previous = node.label
                groups.append(node.subtree)


def is_well_formed(tree: HashTree) -> bool:
    """``validate_well_formed`` as a predicate."""
    try:
        validate_well_formed(tree)
    except MalformedTreeError:
        return False
    return True


def trees_equal(a: HashTree, b: HashTree) -> bool:
    """Structural equality of two trees, without recursion."""
    stack: list[tuple[HashTree, HashTree]] = [(a, b)]
    while stack:
        x, y = stack.pop()
        if x is y:
            continue
        kind = type(x)
        if kind is not type(y):
            return False
        if kind is Fork:
            stack.append((x.right, y.right))
            stack.append((x.left, y.left))
        elif kind is Labeled:
            if x.label != y.label:
                return False
            stack.append((x.subtree, y.subtree))
        elif kind is Leaf:
            if x.value != y.value:
                return False
        elif kind is Pruned:
            if x.digest != y.digest:
                return False
    return True
