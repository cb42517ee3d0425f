"""Canonical msgpack encoding of hash trees and witnesses.

    Empty          -> [0]
    Fork(l, r)     -> [1, l, r]
    Labeled(k, t)  -> [2, k, t]      k as msgpack bin
    Leaf(v)        -> [3, v]         v as msgpack bin
    Pruned(d)      -> [4, d]         d as 32-byte bin

The bytes are exactly what ``msgpack.packb(..., use_bin_type=True)`` gives for these nested
arrays (the *nested-array form* of a tree: tuples ``(tag, ...)``), so the canonical form of
a tree is the one msgpack writes.

Reading: ``parse_tree`` is the one reader of encoded trees (the certified-slice decoder and
``decode_tree`` both use it). msgpack's C unpacker builds the nested-array form and calls a
hook on every array as soon as it is complete (post-order), so each node is checked (and a
caller may count it against a budget) before anything above it is parsed: the first bad
node stops the parse. Arrays are capped at three items and maps, strings and extension
types at none, so nothing is built that a node could not hold; msgpack's own stack caps the
nesting at ``MAX_PARSE_DEPTH`` before any hook runs. The canonical form is checked after the
parse by re-encoding the nested arrays and comparing bytes (``validate_canonical``).

Writing: ``encode_nested`` packs the nested-array form with msgpack's packer, and falls back
to ``encode_tree``'s explicit stack for trees nested deeper than that packer goes;
``encode_tree`` writes a ``HashTree``.
"""

from __future__ import annotations

from collections.abc import Callable

import msgpack

from state_manager.encoding import packb
from state_manager.errors import StateManagerError
from state_manager.hash_tree import (
    DIGEST_LENGTH,
    Empty,
    Fork,
    HashTree,
    Labeled,
    Leaf,
    NotATreeError,
    Pruned,
)

__all__ = [
    "TAG_EMPTY",
    "TAG_FORK",
    "TAG_LABELED",
    "TAG_LEAF",
    "TAG_PRUNED",
    "TAG_NAMES",
    "MAX_PARSE_DEPTH",
    "TreeDecodeError",
    "InputTypeError",
    "TreeTooLargeError",
    "TreeTooDeepError",
    "TruncatedError",
    "TrailingBytesError",
    "NonCanonicalError",
    "UnknownTagError",
    "ArityError",
    "ExpectedNodeError",
    "ExpectedBytesError",
    "DigestLengthError",
    "encode_tree",
    "encode_nested",
    "node_tag",
    "parse_tree",
    "validate_canonical",
    "decode_tree",
    "tree_from_nested_arrays",
]

TAG_EMPTY = 0
TAG_FORK = 1
TAG_LABELED = 2
TAG_LEAF = 3
TAG_PRUNED = 4
TAG_NAMES = {TAG_EMPTY: "empty", TAG_FORK: "fork", TAG_LABELED: "labeled", TAG_LEAF: "leaf", TAG_PRUNED: "pruned"}

# Array length (tag included) that each tag requires.
_ARITY = {TAG_EMPTY: 1, TAG_FORK: 3, TAG_LABELED: 3, TAG_LEAF: 2, TAG_PRUNED: 2}

#: Deepest nesting ``parse_tree`` reads: msgpack's unpacker refuses deeper input with its
#: fixed stack, before any hook runs.
MAX_PARSE_DEPTH = 1024


# --------------------------------------------------------------------------- errors


class TreeDecodeError(StateManagerError, ValueError):
    """Base of every error raised when decoding a tree."""


class InputTypeError(TreeDecodeError):
    """The input is not bytes."""


class TreeTooLargeError(TreeDecodeError):
    """The input exceeds the byte bound."""


class TreeTooDeepError(TreeDecodeError):
    """The tree nests deeper than the depth bound (or than ``MAX_PARSE_DEPTH``)."""


class TruncatedError(TreeDecodeError):
    """The input ends inside a value."""


class TrailingBytesError(TreeDecodeError):
    """Bytes follow the encoded tree."""


class NonCanonicalError(TreeDecodeError):
    """A value uses a longer msgpack form than the canonical one."""


class UnknownTagError(TreeDecodeError):
    """A node's first element is not one of the tags 0..4."""


class ArityError(TreeDecodeError):
    """A node array has the wrong number of elements for its tag."""


class ExpectedNodeError(TreeDecodeError):
    """A position that must hold a node holds another msgpack type."""


class ExpectedBytesError(TreeDecodeError):
    """A label, leaf value or digest is not msgpack bin."""


class DigestLengthError(TreeDecodeError):
    """A pruned digest is not 32 bytes."""


# --------------------------------------------------------------------------- encoding


def _bin(value: bytes) -> bytes:
    length = len(value)
    if length < 0x100:
        return bytes((0xC4, length)) + value
    if length < 0x10000:
        return b"\xc5" + length.to_bytes(2, "big") + value
    return b"\xc6" + length.to_bytes(4, "big") + value


def encode_tree(tree: HashTree) -> bytes:
    """Canonical msgpack of ``tree`` (layout in the module docstring), without recursion."""
    parts: list[bytes] = []
    stack: list[HashTree] = [tree]
    # Pre-order: a node's header, then its children left to right.
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is Fork:
            parts.append(b"\x93\x01")
            stack.append(node.right)
            stack.append(node.left)
        elif kind is Labeled:
            parts.append(b"\x93\x02")
            parts.append(_bin(node.label))
            stack.append(node.subtree)
        elif kind is Leaf:
            parts.append(b"\x92\x03")
            parts.append(_bin(node.value))
        elif kind is Pruned:
            parts.append(b"\x92\x04")
            parts.append(_bin(node.digest))
        elif kind is Empty:
            parts.append(b"\x91\x00")
        else:
            raise NotATreeError(f"expected a hash tree, got {kind.__name__}")
    return b"".join(parts)


def encode_nested(value: tuple) -> bytes:
    """The canonical bytes of a tree in nested-array form (``encode_tree`` of that tree)."""
    try:
        return packb(value)
    except ValueError:  # nested deeper than msgpack's packer goes: the explicit stack
        return encode_tree(tree_from_nested_arrays(value))


def tree_from_nested_arrays(value: tuple) -> HashTree:
    """The hash tree of a well-formed nested-array value; ``NotATreeError`` if ``value``
    is not one. Post-order with an explicit stack."""
    out: list[HashTree] = []
    stack: list[tuple[object, bool]] = [(value, False)]
    while stack:
        node, children_done = stack.pop()
        if children_done:
            if node[0] == TAG_FORK:  # type: ignore[index]
                right = out.pop()
                out[-1] = Fork(out[-1], right)
            else:
                out[-1] = Labeled(node[1], out[-1])  # type: ignore[index]
            continue
        if type(node) is not tuple or not node or type(node[0]) is not int or _ARITY.get(node[0]) != len(node):
            raise NotATreeError("not a hash tree in nested-array form")
        tag = node[0]
        if tag in (TAG_FORK, TAG_LABELED):
            stack.append((node, True))
            stack.append((node[2], False))
            if tag == TAG_FORK:
                stack.append((node[1], False))
        elif tag == TAG_LEAF:
            out.append(Leaf(node[1]))
        elif tag == TAG_PRUNED:
            out.append(Pruned(node[1]))
        else:
            out.append(Empty())
    return out[0]


# --------------------------------------------------------------------------- reading


def node_tag(node: tuple) -> int:
    """The tag of ``node`` (a complete array of the nested-array form) after checking its
    arity and field types: children are tuples, i.e. nodes the parse hook already checked;
    labels, values and digests are bin; digests are 32 bytes."""
    tag = node[0] if node else None
    if type(tag) is not int or tag not in _ARITY:
        if not node:
            raise ArityError("an empty array has no tag")
        if type(tag) is not int:
            raise UnknownTagError(f"a node must begin with an integer tag, got {type(tag).__name__}")
        raise UnknownTagError(f"unknown tag {tag}")
    if len(node) != _ARITY[tag]:
        raise ArityError(f"a {TAG_NAMES[tag]} node has {len(node)} elements, expected {_ARITY[tag]}")
    if tag == TAG_FORK:
        if type(node[1]) is not tuple or type(node[2]) is not tuple:
            raise ExpectedNodeError("a fork's children must be nodes")
    elif tag == TAG_LABELED:
        if type(node[1]) is not bytes:
            raise ExpectedBytesError(f"a label must be bin, got {type(node[1]).__name__}")
        if type(node[2]) is not tuple:
            raise ExpectedNodeError("a labeled node's subtree must be a node")
    elif tag != TAG_EMPTY:
        if type(node[1]) is not bytes:
            raise ExpectedBytesError(f"a {TAG_NAMES[tag]} node holds a bin, got {type(node[1]).__name__}")
        if tag == TAG_PRUNED and len(node[1]) != DIGEST_LENGTH:
            raise DigestLengthError(f"a pruned digest has {len(node[1])} bytes, expected {DIGEST_LENGTH}")
    return tag


def _check_node(node: tuple) -> tuple:
    node_tag(node)
    return node


def _parse_failure(exc: Exception) -> TreeDecodeError:
    """The error for a failure of msgpack's unpacker itself (hooks raise their own). Its
    limits fail with a ``ValueError`` naming the limit; a length beyond the input's end
    (``max_bin_len``, or no limit hit at all) means the input is truncated."""
    if isinstance(exc, msgpack.StackError):
        return TreeTooDeepError(f"the tree nests deeper than {MAX_PARSE_DEPTH} levels")
    if isinstance(exc, msgpack.ExtraData):
        return TrailingBytesError("bytes follow the tree")
    if isinstance(exc, msgpack.FormatError):
        return ExpectedNodeError("the reserved byte 0xc1 where a value belongs")
    text = str(exc)
    if isinstance(exc, UnicodeDecodeError) or "max_str_len" in text or "max_ext_len" in text:
        return ExpectedBytesError(f"a string or extension type where a bin or node belongs: {text}")
    if "max_array_len" in text:
        return ArityError(f"an array longer than any node: {text}")
    if "max_map_len" in text:
        return ExpectedNodeError(f"a map where a node belongs: {text}")
    return TruncatedError(f"the input ends inside a value: {text}")


def parse_tree(data: bytes, hook: Callable[[tuple], tuple] = _check_node) -> tuple:
    """``data`` as nested tuples, every array passed through ``hook`` as soon as it is
    complete; what ``hook`` returns takes the array's place.

    A hook must check its node with ``node_tag`` first (the default hook does only that);
    it may raise to stop the parse, and its error propagates unchanged. Failures of the
    input itself raise ``TreeDecodeError`` subclasses. The canonical form and any depth
    bound below ``MAX_PARSE_DEPTH`` are the caller's to check after the parse."""
    try:
        value = msgpack.unpackb(data, use_list=False, raw=False, list_hook=hook, max_array_len=3, max_map_len=0,
                                max_str_len=0, max_ext_len=0, max_bin_len=len(data))
    except (msgpack.StackError, msgpack.ExtraData, msgpack.FormatError) as exc:
        raise _parse_failure(exc) from exc
    except ValueError as exc:  # truncated input, a msgpack limit (and hook errors, which pass)
        if isinstance(exc, StateManagerError):
            raise
        raise _parse_failure(exc) from exc
    if type(value) is not tuple:
        raise ExpectedNodeError(f"a tree is an array, got {type(value).__name__}")
    return value


def validate_canonical(value: tuple, data: bytes) -> None:
    """``data`` is the canonical encoding of the tree it was parsed into (``value``)."""
    if encode_nested(value) != data:
        raise NonCanonicalError("the input differs from the canonical encoding of the tree it holds")


def _depth(value: tuple) -> int:
    """How many nodes nest in ``value`` (a lone leaf has depth 1); explicit stack."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if node[0] == TAG_FORK:
            stack.append((node[1], depth + 1))
            stack.append((node[2], depth + 1))
        elif node[0] == TAG_LABELED:
            stack.append((node[2], depth + 1))
    return deepest


def decode_tree(data: bytes, *, max_bytes: int, max_depth: int) -> HashTree:
    """Decode exactly one canonically encoded tree of at most ``max_bytes`` bytes and
    ``max_depth`` nested nodes (a lone leaf has depth 1; never more than ``MAX_PARSE_DEPTH``).
    Each violation raises its own ``TreeDecodeError`` subclass."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InputTypeError(f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) > max_bytes:
        raise TreeTooLargeError(f"{len(data)} bytes exceed the limit of {max_bytes}")
    value = parse_tree(data)
    if _depth(value) > max_depth:
        raise TreeTooDeepError(f"the tree nests deeper than {max_depth} levels")
    validate_canonical(value, data)
    return tree_from_nested_arrays(value)
