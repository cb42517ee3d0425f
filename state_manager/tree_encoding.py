"""Canonical msgpack encoding of hash trees and witnesses.

    Empty          -> [0]
    Fork(l, r)     -> [1, l, r]
    Labeled(k, t)  -> [2, k, t]      k as msgpack bin
    Leaf(v)        -> [3, v]         v as msgpack bin
    Pruned(d)      -> [4, d]         d as 32-byte bin

The bytes are exactly what ``msgpack.packb(..., use_bin_type=True)`` gives for the nested
arrays, but both directions are written here over the msgpack format with explicit stacks:
msgpack's own packer and unpacker recurse in C and cap nesting, while witnesses from peers
can be deep. The decoder checks the byte bound before reading and the depth bound on every
array it opens, so no input makes it allocate or nest past its limits.
"""

from __future__ import annotations

import struct

import msgpack

from state_manager.encoding import packb
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
    "TreeDecodeError",
    "InputTypeError",
    "TreeTooLargeError",
    "TreeTooDeepError",
    "TruncatedError",
    "ByteReader",
    "TrailingBytesError",
    "NonCanonicalError",
    "UnknownTagError",
    "ArityError",
    "ExpectedNodeError",
    "ExpectedBytesError",
    "DigestLengthError",
    "encode_tree",
    "decode_tree",
    "tree_from_nested_arrays",
]

TAG_EMPTY = 0
TAG_FORK = 1
TAG_LABELED = 2
TAG_LEAF = 3
TAG_PRUNED = 4

# Array length (tag included) that each tag requires.
_ARITY = {TAG_EMPTY: 1, TAG_FORK: 3, TAG_LABELED: 3, TAG_LEAF: 2, TAG_PRUNED: 2}


# --------------------------------------------------------------------------- errors


class TreeDecodeError(ValueError):
    """Base of every error raised when decoding a tree."""


class InputTypeError(TreeDecodeError):
    """The input is not bytes."""


class TreeTooLargeError(TreeDecodeError):
    """The input exceeds the byte bound."""


class TreeTooDeepError(TreeDecodeError):
    """The tree nests deeper than the depth bound."""


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


def _bin_header(length: int) -> bytes:
    if length < 0x100:
        return bytes((0xC4, length))
    if length < 0x10000:
        return b"\xc5" + struct.pack(">H", length)
    return b"\xc6" + struct.pack(">I", length)


def _bin(value: bytes) -> bytes:
    return _bin_header(len(value)) + value


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


# --------------------------------------------------------------------------- decoding


def _type_name(first: int) -> str:
    """The msgpack type introduced by header byte ``first`` (for messages and dispatch)."""
    if first <= 0x7F or first >= 0xE0 or 0xCC <= first <= 0xD3:
        return "int"
    if 0x80 <= first <= 0x8F or first in (0xDE, 0xDF):
        return "map"
    if 0x90 <= first <= 0x9F or first in (0xDC, 0xDD):
        return "array"
    if 0xA0 <= first <= 0xBF or first in (0xD9, 0xDA, 0xDB):
        return "str"
    if first in (0xC4, 0xC5, 0xC6):
        return "bin"
    if first == 0xC0:
        return "nil"
    if first in (0xC2, 0xC3):
        return "bool"
    if first in (0xCA, 0xCB):
        return "float"
    if first == 0xC1:
        return "reserved byte 0xc1"
    return "ext"


class ByteReader:
    """A cursor over the input; every read is bounds-checked and a short input raises
    ``truncated`` (callers with their own error hierarchy pass their class)."""

    __slots__ = ("data", "pos", "truncated")

    def __init__(self, data: bytes, truncated: type[Exception] = TruncatedError) -> None:
        self.data = data
        self.pos = 0
        self.truncated = truncated

    def take(self, count: int) -> bytes:
        end = self.pos + count
        if end > len(self.data):
            raise self.truncated(f"need {count} bytes at offset {self.pos}, input ends at {len(self.data)}")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise self.truncated(f"input ends at offset {self.pos}")
        value = self.data[self.pos]
        self.pos += 1
        return value

    def array_len(self, where: str) -> int:
        start = self.pos
        first = self.byte()
        if 0x90 <= first <= 0x9F:
            return first & 0x0F
        if first == 0xDC:
            length = struct.unpack(">H", self.take(2))[0]
        elif first == 0xDD:
            length = struct.unpack(">I", self.take(4))[0]
        else:
            raise ExpectedNodeError(f"{where} at offset {start} must be an array, got {_type_name(first)}")
        if length <= 0x0F:
            raise NonCanonicalError(f"array of length {length} at offset {start} is not a fixarray")
        if first == 0xDD and length <= 0xFFFF:
            raise NonCanonicalError(f"array of length {length} at offset {start} is not an array16")
        return length

    def tag(self) -> int:
        start = self.pos
        first = self.byte()
        if first <= 0x7F:
            return first
        kind = _type_name(first)
        if kind != "int":
            raise UnknownTagError(f"tag at offset {start} must be an integer, got {kind}")
        if first >= 0xE0:
            raise UnknownTagError(f"unknown tag {first - 0x100} at offset {start}")
        width = 1 << ((first - 0xCC) & 0x03)
        raw = self.take(width)
        value = int.from_bytes(raw, "big", signed=first >= 0xD0)
        if packb(value) != bytes((first,)) + raw:
            raise NonCanonicalError(f"integer {value} at offset {start} is not in its shortest form")
        raise UnknownTagError(f"unknown tag {value} at offset {start}")

    def bin(self, what: str) -> bytes:
        start = self.pos
        first = self.byte()
        if first == 0xC4:
            length = self.byte()
        elif first == 0xC5:
            length = struct.unpack(">H", self.take(2))[0]
        elif first == 0xC6:
            length = struct.unpack(">I", self.take(4))[0]
        else:
            raise ExpectedBytesError(f"{what} at offset {start} must be bin, got {_type_name(first)}")
        if (first == 0xC5 and length < 0x100) or (first == 0xC6 and length < 0x10000):
            raise NonCanonicalError(f"bin of length {length} at offset {start} uses a longer header")
        return self.take(length)


def _build(tag: int, items: list) -> HashTree:
    if tag == TAG_FORK:
        return Fork(items[0], items[1])
    if tag == TAG_LABELED:
        return Labeled(items[0], items[1])
    if tag == TAG_LEAF:
        return Leaf(items[0])
    if tag == TAG_PRUNED:
        return Pruned(items[0])
    return Empty()


# Nesting the C unpacker handles without hitting its own stack limit (msgpack's is 1024).
_FAST_PATH_MAX_DEPTH = 512


def _tree_from_unpacked(value: object, max_depth: int) -> HashTree | None:
    """The tree that msgpack's nested ``value`` spells, or ``None`` if it spells none within
    ``max_depth`` (wrong tag, arity or field type, too deep): the caller then decodes with
    the checking reader to raise the precise error. Post-order with an explicit stack."""
    out: list[HashTree] = []
    stack: list[tuple] = [(value, 1, False)]
    push, pop = stack.append, stack.pop
    emit = out.append
    while stack:
        node, depth, children_done = pop()
        if children_done:
            if node[0] == TAG_FORK:
                right = out.pop()
                out[-1] = Fork(out[-1], right)
            else:
                out[-1] = Labeled(node[1], out[-1])
            continue
        if type(node) is not tuple or not node or depth > max_depth:
            return None
        tag = node[0]
        if type(tag) is not int:
            return None
        size = len(node)
        if tag == TAG_FORK and size == 3:
            push((node, depth, True))
            push((node[2], depth + 1, False))
            push((node[1], depth + 1, False))
        elif tag == TAG_LABELED and size == 3 and type(node[1]) is bytes:
            sub = node[2]
            # Most labeled nodes hold a leaf or a pruned digest (messages, witness positions):
            # build those at once instead of a round trip over the stack.
            if type(sub) is tuple and len(sub) == 2 and depth < max_depth and type(sub[0]) is int \
                    and type(sub[1]) is bytes:
                if sub[0] == TAG_LEAF:
                    emit(Labeled(node[1], Leaf(sub[1])))
                    continue
                if sub[0] == TAG_PRUNED and len(sub[1]) == DIGEST_LENGTH:
                    emit(Labeled(node[1], Pruned(sub[1])))
                    continue
            push((node, depth, True))
            push((sub, depth + 1, False))
        elif tag == TAG_LEAF and size == 2 and type(node[1]) is bytes:
            emit(Leaf(node[1]))
        elif tag == TAG_PRUNED and size == 2 and type(node[1]) is bytes and len(node[1]) == DIGEST_LENGTH:
            emit(Pruned(node[1]))
        elif tag == TAG_EMPTY and size == 1:
            emit(Empty())
        else:
            return None
    return out[0]


def tree_from_nested_arrays(value: tuple) -> HashTree:
    """The hash tree of a well-formed nested-array value (``msgpack`` form of the encoding);
    ``NotATreeError`` if ``value`` is not one."""
    tree = _tree_from_unpacked(value, 2**63)
    if tree is None:
        raise NotATreeError("not a hash tree in nested-array form")
    return tree


def _decode_fast(data: bytes, max_depth: int) -> HashTree | None:
    """Unpack with msgpack's C unpacker, build the tree, and accept it only if re-packing the
    unpacked value gives back exactly ``data`` (the encoding is msgpack of nested arrays, so
    that is the canonical-form check). ``None``: take the checking reader instead."""
    if max_depth > _FAST_PATH_MAX_DEPTH:
        return None
    try:
        value = msgpack.unpackb(data, use_list=False, raw=False)
    except Exception:  # noqa: BLE001 - any failure: the checking reader names it precisely
        return None
    tree = _tree_from_unpacked(value, max_depth)
    if tree is None:
        return None
    try:
        if packb(value) != data:
            return None
    except Exception:  # noqa: BLE001
        return None
    return tree


def decode_tree(data: bytes, *, max_bytes: int, max_depth: int) -> HashTree:
    """Decode exactly one canonically encoded tree of at most ``max_bytes`` bytes and
    ``max_depth`` nested nodes (a lone leaf has depth 1). Each violation raises its own
    ``TreeDecodeError`` subclass.

    Well-formed input takes a fast path (msgpack's C unpacker, then the same checks on the
    unpacked value); anything it does not accept is decoded again by the checking reader,
    which raises the precise error."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InputTypeError(f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) > max_bytes:
        raise TreeTooLargeError(f"{len(data)} bytes exceed the limit of {max_bytes}")
    fast = _decode_fast(data, max_depth)
    if fast is not None:
        return fast
    return _decode_with_reader(data, max_depth)


def _decode_with_reader(data: bytes, max_depth: int) -> HashTree:
    """The checking reader: every msgpack header, tag, arity, length and depth is checked as
    it is read, each violation with its own error; then the canonical re-encoding check."""
    reader = ByteReader(data)
    # Each frame is one open node: [tag, arity, decoded children so far].
    frames: list[list] = []
    result: HashTree | None = None
    want_node = True  # the next value to read is a node (array), else a bin field
    while True:
        if want_node:
            if len(frames) >= max_depth:
                raise TreeTooDeepError(f"tree nests deeper than {max_depth} levels")
            start = reader.pos
            length = reader.array_len("node" if frames else "root")
            if length == 0:
                raise ArityError(f"empty array at offset {start} has no tag")
            tag = reader.tag()
            if tag not in _ARITY:
                raise UnknownTagError(f"unknown tag {tag} at offset {start}")
            if length != _ARITY[tag]:
                raise ArityError(f"node with tag {tag} at offset {start} has {length} elements, expected {_ARITY[tag]}")
            frames.append([tag, length - 1, []])
        else:
            tag = frames[-1][0]
            if tag == TAG_LABELED:
                frames[-1][2].append(reader.bin("label"))
            elif tag == TAG_LEAF:
                frames[-1][2].append(reader.bin("leaf value"))
            else:
                start = reader.pos
                digest = reader.bin("pruned digest")
                if len(digest) != DIGEST_LENGTH:
                    raise DigestLengthError(
                        f"pruned digest at offset {start} has {len(digest)} bytes, expected {DIGEST_LENGTH}"
                    )
                frames[-1][2].append(digest)
        # Close every frame that is complete, then decide what the open frame needs next.
        while frames and len(frames[-1][2]) == frames[-1][1]:
            tag, _, items = frames.pop()
            node = _build(tag, items)
            if frames:
                frames[-1][2].append(node)
            else:
                result = node
        if result is not None:
            break
        tag, _, items = frames[-1]
        # Fork: both children are nodes; labeled: label then node; leaf/pruned: one bin.
        want_node = tag == TAG_FORK or (tag == TAG_LABELED and len(items) == 1)
    if reader.pos != len(data):
        raise TrailingBytesError(f"{len(data) - reader.pos} bytes follow the tree")
    if encode_tree(result) != data:
        raise NonCanonicalError("input differs from the canonical encoding of the tree it holds")
    return result
