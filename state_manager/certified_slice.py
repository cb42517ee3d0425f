"""Certified stream slices: encoding from a certified tree, and the total decoder (DESIGN §7).

Wire format (canonical msgpack)::

    CertifiedStreamSlice = [1, payload_tree, witness_tree, certification]

* ``payload_tree`` (``tree_encoding``) holds only ``Labeled``/``Fork``/``Leaf`` nodes::

      Labeled("streams", Labeled(dst, Fork(Labeled("header", Leaf(header_leaf)),
                                           Labeled("messages", <Labeled(index8, Leaf(message_leaf)) ...>))))

  i.e. the stream header and the messages ``[msg_begin, msg_end)``; a header-only slice has
  no ``"messages"`` child. ``index8`` is the 8-byte big-endian message index.
* ``witness_tree`` is a hash tree over the *whole* certified tree that reconstructs to the
  certified root on its own. Everything is ``Pruned`` except the structure along the paths
  to ``/streams/<dst>/header`` and to every message index in ``[witness_begin, msg_end)``;
  each of those leaf positions is ``Labeled(label, Pruned(hash_leaf(value)))``, so the
  witness never carries leaf data. ``witness_begin <= msg_begin`` lets a receiver that holds
  messages ``[witness_begin, msg_begin)`` from an earlier slice append the new ones.
* ``certification`` is ``certification.encode_certification``.

Decoding checks, in this order, each failure with its own ``SliceDecodeError`` subclass:

1. bounded total size, then the outer array (canonical, version 1, four fields, no trailing
   bytes), then each tree decoded within the byte and depth bounds;
2. the payload is canonical, has no ``Pruned``/``Empty``, is well-formed and holds exactly
   one ``/streams/<dst>`` with ``"header"`` and optional ``"messages"``; ``dst == own_subnet``;
3. the witness is well-formed, every payload leaf position is ``Labeled(l, Pruned(d))`` in
   the witness with ``d == hash_leaf(value)``, and the witness has no ``Leaf`` at all;
4. ``reconstruct(witness) == certification.root``;
5. the certification verifies under the sending subnet's key at the registry version;
6. the header decodes and its bounds are sane;
7. messages have consecutive 8-byte indices inside ``[header.begin, header.end)`` and decode.

Editing verified slices (for the XNet slice pool), each failure a ``SliceEditError``:
``restrict_certified_slice`` cuts the payload to a sub-range of its messages and
``append_certified_slice`` prepends pooled messages to a newer slice whose witness reveals
them; both keep the witness and certification bytes verbatim, so the result decodes.

Pure: the certified tree, the certification and the public key lookup arrive as arguments.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

from state_manager import certification as cm
from state_manager import encoding
from state_manager import hash_tree as ht
from state_manager.codec import CodecError, decode_header_leaf, decode_message_leaf
from state_manager.encoding import packb
from state_manager.hash_tree import Empty, Fork, HashTree, Labeled, Leaf, Pruned
# The witness walker reads trie nodes directly (the package's own persistent trie).
from state_manager.labeled_trie import LabeledTrie, _Branch, _node_digest
from state_manager.sha256 import sha256_of
from state_manager.streams import StreamHeader, StreamSlice
from state_manager.tree_encoding import (
    ByteReader,
    TAG_EMPTY,
    TAG_FORK,
    TAG_LABELED,
    TAG_LEAF,
    TAG_PRUNED,
    TreeDecodeError,
    TreeTooDeepError,
    TreeTooLargeError,
    decode_tree,
    encode_tree,
    tree_from_nested_arrays,
)

__all__ = [
    "SLICE_VERSION",
    "DEFAULT_MAX_SLICE_BYTES",
    "DEFAULT_MAX_TREE_DEPTH",
    "STREAMS_LABEL",
    "HEADER_LABEL",
    "MESSAGES_LABEL",
    # errors
    "CertifiedSliceError",
    "InvalidDecodeLimits",
    "SliceEncodeError",
    "InvalidSliceRequest",
    "MalformedCertifiedTree",
    "CertificationTreeMismatch",
    "NoStream",
    "IndexOutOfRange",
    "SliceDecodeError",
    "SliceTooLarge",
    "MalformedSlice",
    "NonCanonicalSlice",
    "UnsupportedSliceVersion",
    "SliceFieldCount",
    "SliceTrailingBytes",
    "TreeTooDeep",
    "PayloadNotCanonical",
    "PrunedInPayload",
    "EmptyInPayload",
    "PayloadUnsortedLabels",
    "PayloadDuplicateLabel",
    "PayloadLayoutError",
    "SliceForAnotherSubnet",
    "WitnessNotCanonical",
    "MalformedWitness",
    "WitnessMismatch",
    "PositionSuppliedTwice",
    "PrunedDigestMismatch",
    "WitnessContainsLeaf",
    "MalformedSliceCertification",
    "RootMismatch",
    "UnknownSubnetKey",
    "InvalidSubnetKey",
    "EmptyCertificationSignature",
    "IdentityCertificationSignature",
    "MalformedCertificationSignature",
    "InvalidCertificationSignature",
    "MalformedHeader",
    "InvalidHeaderBounds",
    "InvalidRejectSignals",
    "MalformedMessageIndex",
    "NonConsecutiveMessages",
    "MessageOutsideHeaderRange",
    "MalformedMessage",
    # editing verified slices (slice pool)
    "SliceEditError",
    "InvalidSliceRange",
    "SliceMergeError",
    "DifferentStreams",
    "SlicesNotContiguous",
    "WitnessDoesNotCover",
    "PooledMessageMismatch",
    # API
    "CertifiedSlice",
    "message_label",
    "encode_certified_stream_slice",
    "decode_certified_stream_slice",
    "decode_valid_certified_stream_slice",
    "certified_slice_byte_size",
    "restrict_certified_slice",
    "append_certified_slice",
]

SLICE_VERSION = 1
#: Largest accepted encoded slice (matches the XNet client's default response bound).
DEFAULT_MAX_SLICE_BYTES = 16 * 1024 * 1024
#: Deepest accepted tree. An honest witness nests at most 75 levels plus one per fork level of
#: the streams map: <= 5 forks over the top-level labels, the labels streams/<dst>/messages/
#: <index>, the header/messages fork, <= 64 forks over 8-byte indices and the pruned leaf.
DEFAULT_MAX_TREE_DEPTH = 256

STREAMS_LABEL = b"streams"
HEADER_LABEL = b"header"
MESSAGES_LABEL = b"messages"

_U64 = 2**64
_INDEX_BYTES = 8
_CERTIFICATION_PROBE_BYTES = 1024  # an encoded certification is ~140 bytes


# =========================================================================== errors


class CertifiedSliceError(ValueError):
    """Root of every error raised by this module."""


class InvalidDecodeLimits(CertifiedSliceError):
    """``max_bytes`` / ``max_depth`` given to a decoder are not positive integers."""


# --------------------------------------------------------------------------- encoding side


class SliceEncodeError(CertifiedSliceError):
    """A slice cannot be produced from the given tree and request."""


class InvalidSliceRequest(SliceEncodeError):
    """Request fields of the wrong type, or indices/limits outside ``[0, 2**64)``."""


class MalformedCertifiedTree(SliceEncodeError):
    """The certified tree does not have the ``/streams/<dst>/{header, messages}`` layout."""


class CertificationTreeMismatch(SliceEncodeError):
    """``certification.root != certified_tree.digest()``: the certification is for another state."""


class NoStream(SliceEncodeError):
    """``/streams/<remote>`` is absent from the certified tree."""


class IndexOutOfRange(SliceEncodeError):
    """Not ``header.begin <= witness_begin <= msg_begin <= header.end``."""


# --------------------------------------------------------------------------- decoding side


class SliceDecodeError(CertifiedSliceError):
    """Remote bytes that are not a valid certified stream slice."""


# step 1: bounds and the outer array
class SliceTooLarge(SliceDecodeError):
    """The slice (or one of its trees) exceeds the byte bound."""


class MalformedSlice(SliceDecodeError):
    """Not bytes, not an array, truncated, or a field of the wrong msgpack type."""


class NonCanonicalSlice(SliceDecodeError):
    """The outer array or one of its fields uses a longer msgpack form than the canonical one."""


class UnsupportedSliceVersion(SliceDecodeError):
    """The first field is an integer other than ``1``."""


class SliceFieldCount(SliceDecodeError):
    """A version-1 slice without exactly four fields."""


class SliceTrailingBytes(SliceDecodeError):
    """Bytes follow the outer array."""


class TreeTooDeep(SliceDecodeError):
    """The payload or witness nests deeper than the depth bound."""


# step 2: payload
class PayloadNotCanonical(SliceDecodeError):
    """The payload bytes are not the canonical encoding of one hash tree."""


class PrunedInPayload(SliceDecodeError):
    """The payload contains a ``Pruned`` node: it must carry data, not digests."""


class EmptyInPayload(SliceDecodeError):
    """The payload contains an ``Empty`` node."""


class PayloadUnsortedLabels(SliceDecodeError):
    """Labels of a payload fork group are not increasing."""


class PayloadDuplicateLabel(SliceDecodeError):
    """A label occurs twice in one payload fork group."""


class PayloadLayoutError(SliceDecodeError):
    """The payload is not ``/streams/<one dst>/{header: leaf, messages?: {label: leaf}}``."""


class SliceForAnotherSubnet(SliceDecodeError):
    """The payload's ``/streams/<dst>`` is not addressed to this subnet."""


# step 3: witness
class WitnessNotCanonical(SliceDecodeError):
    """The witness bytes are not the canonical encoding of one hash tree."""


class MalformedWitness(SliceDecodeError):
    """A witness fork group has unsorted or duplicate labels, or a leaf that is not alone."""


class WitnessMismatch(SliceDecodeError):
    """A payload position is not revealed in the witness (it proves some other part of the tree)."""


class PositionSuppliedTwice(SliceDecodeError):
    """The witness carries a ``Leaf`` at a position the payload supplies."""


class PrunedDigestMismatch(SliceDecodeError):
    """The witness digest at a payload position is not ``hash_leaf`` of the payload value."""


class WitnessContainsLeaf(SliceDecodeError):
    """The witness carries leaf data; it may only carry digests."""


# step 4: root
class MalformedSliceCertification(SliceDecodeError):
    """The certification bytes are not a canonical certification."""


class RootMismatch(SliceDecodeError):
    """``reconstruct(witness) != certification.root``."""


# step 5: signature
class UnknownSubnetKey(SliceDecodeError):
    """The registry has no public key for the sending subnet at the registry version."""


class InvalidSubnetKey(SliceDecodeError):
    """The registry's public key for the sending subnet is not a valid G1 point."""


class EmptyCertificationSignature(SliceDecodeError):
    """The signature is empty or all zero: the state was never certified."""


class IdentityCertificationSignature(SliceDecodeError):
    """The signature is the identity point of G2."""


class MalformedCertificationSignature(SliceDecodeError):
    """The signature is not a valid point of the prime-order subgroup of G2."""


class InvalidCertificationSignature(SliceDecodeError):
    """A well-formed signature that does not verify under the sending subnet's key."""


# step 6: header
class MalformedHeader(SliceDecodeError):
    """The header leaf is not a canonical stream header."""


class InvalidHeaderBounds(SliceDecodeError):
    """``header.begin > header.end``."""


class InvalidRejectSignals(SliceDecodeError):
    """Reject signals are not strictly increasing or not below ``signals_end``."""


# step 7: messages
class MalformedMessageIndex(SliceDecodeError):
    """A message label is not an 8-byte big-endian index."""


class NonConsecutiveMessages(SliceDecodeError):
    """Message indices skip or repeat."""


class MessageOutsideHeaderRange(SliceDecodeError):
    """A message index is outside ``[header.begin, header.end)``."""


class MalformedMessage(SliceDecodeError):
    """A message leaf is not a canonical message."""


# --------------------------------------------------------------------------- editing side
# Not ``SliceDecodeError``s: these reject a requested edit of slices that already decoded.


class SliceEditError(CertifiedSliceError):
    """A restriction or merge of certified slices that cannot be made."""


class InvalidSliceRange(SliceEditError):
    """``restrict_certified_slice`` asked for messages the slice does not carry."""


class SliceMergeError(SliceEditError):
    """``append_certified_slice`` got two slices that do not continue each other."""


class DifferentStreams(SliceMergeError):
    """The two slices are of different ``/streams/<dst>``."""


class SlicesNotContiguous(SliceMergeError):
    """The newer slice's messages do not begin exactly at the pooled messages' end."""


class WitnessDoesNotCover(SliceMergeError):
    """The newer witness does not reveal a position of the pooled messages."""


class PooledMessageMismatch(SliceMergeError):
    """The newer witness's digest at a pooled position is not ``hash_leaf`` of the pooled message."""


# =========================================================================== result


@dataclass(frozen=True, slots=True)
class CertifiedSlice:
    """A decoded and verified slice.

    ``stream_slice`` holds the header and the payload's messages. A header-only slice has
    ``messages_begin = header.end`` (the decoders cannot learn the sender's ``msg_begin``
    from the payload, and both decoders must agree). The witness reveals every message
    position in ``[witness_begin, witness_end)``: ``witness_end`` is ``messages_end`` when
    the slice carries messages, else one past the highest revealed position inside the
    header range (``messages_begin`` when none is revealed). ``payload`` and ``witness`` are
    the decoded trees, kept for the slice pool.
    """

    stream_slice: StreamSlice
    certification: cm.Certification
    witness_begin: int
    witness_end: int
    payload: HashTree
    witness: HashTree


# =========================================================================== helpers


def message_label(index: int) -> bytes:
    """The label of message ``index`` under ``/streams/<dst>/messages``: 8 bytes, big-endian."""
    return index.to_bytes(_INDEX_BYTES, "big")


def _is_u64(value: object) -> bool:
    return type(value) is int and 0 <= value < _U64


def _balanced_group(nodes: list, fork=Fork):
    """Join ``nodes`` (left to right) with forks into a tree of depth ``ceil(log2 n)``."""
    level = nodes
    while len(level) > 1:
        joined = [fork(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            joined.append(level[-1])
        level = joined
    return level[0]


# The encoder builds trees in their nested-array form — exactly what ``tree_encoding``
# writes, ``Fork -> (1, l, r)``, ``Labeled -> (2, k, t)``, ``Leaf -> (3, v)``,
# ``Pruned -> (4, d)``, ``Empty -> (0,)`` — so msgpack's C packer can produce the bytes.


def _fork_value(left: tuple, right: tuple) -> tuple:
    return (TAG_FORK, left, right)


def _labeled_value(label: bytes, subtree: tuple) -> tuple:
    return (TAG_LABELED, label, subtree)


def _pruned_value(digest: bytes) -> tuple:
    return (TAG_PRUNED, digest)


def _empty_value() -> tuple:
    return (TAG_EMPTY,)


def _encode_value(value: tuple) -> bytes:
    """The canonical bytes of a tree in nested-array form (``encode_tree`` of that tree)."""
    try:
        return packb(value)
    except ValueError:  # nested deeper than the C packer goes: the iterative encoder
        return encode_tree(tree_from_nested_arrays(value))


_LEAF_DIGEST = object()  # plan target: reveal the label, prune the leaf to hash_leaf(value)


@dataclass(frozen=True, slots=True)
class _Plan:
    """What the witness reveals of one trie: ``children`` maps labels to a nested ``_Plan``
    or ``_LEAF_DIGEST``; every label in ``[lo, hi)`` (when ``lo`` is set) is ``_LEAF_DIGEST``."""

    children: dict
    lo: Optional[bytes] = None
    hi: Optional[bytes] = None

    def overlaps(self, first: bytes, last: bytes) -> bool:
        if self.lo is not None and self.lo <= last and first < self.hi:
            return True
        for label in self.children:
            if first <= label <= last:
                return True
        return False

    def target(self, label: bytes) -> object:
        found = self.children.get(label)
        return _LEAF_DIGEST if found is None else found


_LEAF_DOMAIN = ht.domain_sep("ic-hashtree-leaf")


def _reveal_all_leaves(node, Fork, Labeled, Pruned):  # noqa: N803 - node constructors
    """``_reveal`` of a trie node whose every label the plan reveals as a pruned leaf (a run
    of messages inside the witness range): the same result, without a plan check per node."""
    domain = _LEAF_DOMAIN
    out: list = []
    stack: list = [node]
    push, pop, emit = stack.append, stack.pop, out.append
    while stack:
        current = pop()
        if current is None:  # both children of a branch are done
            right = out.pop()
            out[-1] = Fork(out[-1], right)
        elif type(current) is _Branch:
            push(None)
            push(current.right)
            push(current.left)
        else:
            value = current.value
            if not isinstance(value, bytes):
                raise MalformedCertifiedTree(f"{current.label!r} is not a leaf")
            emit(Labeled(current.label, Pruned(sha256_of(domain, value))))
    return out[0]


# Task codes of the witness walker's explicit stack.
_TRIE, _NODE, _LABEL, _FORK = range(4)


def _reveal(trie: LabeledTrie, plan: _Plan, nodes: tuple = (Fork, Labeled, Pruned, ht.empty)):
    """The witness of ``trie`` under ``plan``: subtrees the plan does not touch are
    ``Pruned(digest)``, planned leaves are ``Labeled(label, Pruned(hash_leaf(value)))``, and
    the forks and labels above them are revealed. ``reconstruct`` of the result is
    ``trie.digest()``. Walks the trie nodes directly (no intermediate tree with leaf data);
    every planned label must exist (the caller checked). ``nodes`` are the constructors of
    fork, labeled, pruned and empty nodes (hash trees, or their nested-array form)."""
    Fork, Labeled, Pruned, empty = nodes  # noqa: N806 - the node constructors to build with
    out: list = []
    tasks: list[tuple] = [(_TRIE, trie, plan)]
    while tasks:
        task = tasks.pop()
        op = task[0]
        if op == _NODE:
            node, level = task[1], task[2]
            if not level.overlaps(node.first, node.last):
                out.append(Pruned(_node_digest(node)))
            elif not level.children and level.lo is not None and level.lo <= node.first and node.last < level.hi:
                out.append(_reveal_all_leaves(node, Fork, Labeled, Pruned))
            elif type(node) is _Branch:
                tasks.append((_FORK,))
                tasks.append((_NODE, node.right, level))
                tasks.append((_NODE, node.left, level))
            else:
                target = level.target(node.label)
                value = node.value
                if target is _LEAF_DIGEST:
                    if not isinstance(value, bytes):
                        raise MalformedCertifiedTree(f"{node.label!r} is not a leaf")
                    out.append(Labeled(node.label, Pruned(ht.hash_leaf(value))))
                else:
                    if not isinstance(value, LabeledTrie):
                        raise MalformedCertifiedTree(f"{node.label!r} is not a subtree")
                    tasks.append((_LABEL, node.label))
                    tasks.append((_TRIE, value, target))
        elif op == _FORK:
            right = out.pop()
            out.append(Fork(out.pop(), right))
        elif op == _LABEL:
            out.append(Labeled(task[1], out.pop()))
        else:
            root = task[1].root
            if root is None:
                out.append(empty())
            else:
                tasks.append((_NODE, root, task[2]))
    return out[0]


# =========================================================================== encoding


def _stream_of(certified_tree: LabeledTrie, dst_label: bytes) -> tuple[bytes, StreamHeader, LabeledTrie]:
    """``(header_leaf, header, messages)`` of ``/streams/<dst>``; ``NoStream`` if absent."""
    streams = certified_tree.get(STREAMS_LABEL)
    if streams is None:
        raise NoStream("the certified tree has no /streams")
    if not isinstance(streams, LabeledTrie):
        raise MalformedCertifiedTree("/streams is not a subtree")
    stream = streams.get(dst_label)
    if stream is None:
        raise NoStream(f"no stream /streams/{dst_label!r}")
    if not isinstance(stream, LabeledTrie):
        raise MalformedCertifiedTree(f"/streams/{dst_label!r} is not a subtree")
    header_leaf = stream.get(HEADER_LABEL)
    if not isinstance(header_leaf, bytes):
        raise MalformedCertifiedTree(f"/streams/{dst_label!r}/header is not a leaf")
    try:
        header = decode_header_leaf(header_leaf)
    except CodecError as exc:
        raise MalformedCertifiedTree(f"/streams/{dst_label!r}/header: {exc}") from exc
    messages = stream.get(MESSAGES_LABEL, LabeledTrie.empty())
    if isinstance(messages, Empty):
        messages = LabeledTrie.empty()
    if not isinstance(messages, LabeledTrie):
        raise MalformedCertifiedTree(f"/streams/{dst_label!r}/messages is not a subtree")
    return header_leaf, header, messages


def _take_messages(
    messages: LabeledTrie,
    header: StreamHeader,
    witness_begin: int,
    msg_begin: int,
    msg_limit: int,
    byte_limit: int,
) -> list[tuple[bytes, bytes]]:
    """Messages from ``msg_begin`` while ``count < msg_limit`` and the sum of leaf lengths
    stays ``<= byte_limit`` — except that the first one is always taken when ``msg_limit >= 1``
    (so one large message cannot stall the stream). Also checks that every position in
    ``[witness_begin, end)`` that is walked holds a leaf at the expected index."""
    taken: list[tuple[bytes, bytes]] = []
    if msg_limit == 0 or msg_begin == header.end:
        # Still require the positions the witness will reveal to exist.
        stop = msg_begin
    else:
        stop = header.end
    if witness_begin == stop:
        return taken
    expected = witness_begin
    used = 0
    for label, value in messages.range_items(message_label(witness_begin), message_label(stop)):
        if label != message_label(expected):
            raise MalformedCertifiedTree(f"stream has no message at index {expected}")
        if not isinstance(value, bytes):
            raise MalformedCertifiedTree(f"message {expected} is not a leaf")
        if expected >= msg_begin:
            if taken and (len(taken) >= msg_limit or used + len(value) > byte_limit):
                break
            taken.append((label, value))
            used += len(value)
        expected += 1
    else:
        if expected != stop:
            raise MalformedCertifiedTree(f"stream has no message at index {expected}")
    return taken


def _payload_value(dst_label: bytes, header_leaf: bytes, messages: list[tuple[bytes, bytes]]) -> tuple:
    """``/streams/<dst>/{header, messages?}`` with the leaf data, forks balanced (nested-array form)."""
    stream_children = [(TAG_LABELED, HEADER_LABEL, (TAG_LEAF, header_leaf))]
    if messages:
        group = _balanced_group([(TAG_LABELED, label, (TAG_LEAF, value)) for label, value in messages], _fork_value)
        stream_children.append((TAG_LABELED, MESSAGES_LABEL, group))
    return (TAG_LABELED, STREAMS_LABEL, (TAG_LABELED, dst_label, _balanced_group(stream_children, _fork_value)))


def encode_certified_stream_slice(
    certified_tree: LabeledTrie,
    certification: cm.Certification,
    remote_subnet: str,
    witness_begin: int,
    msg_begin: int,
    msg_limit: int,
    byte_limit: int,
) -> bytes:
    """The certified slice of ``/streams/<remote_subnet>`` (layout in the module docstring).

    Rules, checked in order:

    * ``certification.root == certified_tree.digest()`` (``CertificationTreeMismatch``);
    * ``/streams/<remote_subnet>`` exists (``NoStream``);
    * ``header.begin <= witness_begin <= msg_begin <= header.end`` (``IndexOutOfRange``);
    * payload messages: from ``msg_begin``, at most ``msg_limit`` and at most ``byte_limit``
      bytes of message leaves, but the first is always included when ``msg_limit >= 1`` and
      ``msg_begin < header.end``; ``msg_limit == 0`` gives a header-only slice;
    * the witness reveals the header and the message positions ``[witness_begin, msg_end)``.
    """
    if not isinstance(certified_tree, LabeledTrie):
        raise MalformedCertifiedTree(f"expected a LabeledTrie, got {type(certified_tree).__name__}")
    if not isinstance(certification, cm.Certification):
        raise InvalidSliceRequest(f"expected a Certification, got {type(certification).__name__}")
    if not isinstance(remote_subnet, str):
        raise InvalidSliceRequest(f"remote subnet must be text, got {type(remote_subnet).__name__}")
    for name, value in (
        ("witness_begin", witness_begin),
        ("msg_begin", msg_begin),
        ("msg_limit", msg_limit),
        ("byte_limit", byte_limit),
    ):
        if not _is_u64(value):
            raise InvalidSliceRequest(f"{name} must be an integer in [0, 2**64), got {value!r}")
    if certification.root != certified_tree.digest():
        raise CertificationTreeMismatch("the certification does not certify this tree's root")
    dst_label = remote_subnet.encode("utf-8")
    header_leaf, header, messages = _stream_of(certified_tree, dst_label)
    if not header.begin <= witness_begin <= msg_begin <= header.end:
        raise IndexOutOfRange(
            f"need header.begin={header.begin} <= witness_begin={witness_begin} "
            f"<= msg_begin={msg_begin} <= header.end={header.end}"
        )
    taken = _take_messages(messages, header, witness_begin, msg_begin, msg_limit, byte_limit)
    msg_end = msg_begin + len(taken)

    payload = _payload_value(dst_label, header_leaf, taken)

    stream_plan: dict = {HEADER_LABEL: _LEAF_DIGEST}
    if witness_begin < msg_end:
        stream_plan[MESSAGES_LABEL] = _Plan({}, message_label(witness_begin), message_label(msg_end))
    plan = _Plan({STREAMS_LABEL: _Plan({dst_label: _Plan(stream_plan)})})
    witness = _reveal(certified_tree, plan, (_fork_value, _labeled_value, _pruned_value, _empty_value))

    return encoding.encode_unchecked(
        (SLICE_VERSION, _encode_value(payload), _encode_value(witness), cm.encode_certification(certification))
    )


# =========================================================================== decoding


def _read_array_len(cursor: ByteReader) -> int:
    first = cursor.byte()
    if 0x90 <= first <= 0x9F:
        return first & 0x0F
    if first == 0xDC:
        length = struct.unpack(">H", cursor.take(2))[0]
        if length <= 0x0F:
            raise NonCanonicalSlice(f"array of {length} items is not a fixarray")
        return length
    if first == 0xDD:
        length = struct.unpack(">I", cursor.take(4))[0]
        if length <= 0xFFFF:
            raise NonCanonicalSlice(f"array of {length} items is not an array16")
        return length
    raise MalformedSlice(f"a certified slice is an array, got header byte 0x{first:02x}")


def _read_int(cursor: ByteReader) -> int:
    start = cursor.pos
    first = cursor.byte()
    if first <= 0x7F:
        return first
    if first >= 0xE0:
        return first - 0x100
    if not 0xCC <= first <= 0xD3:
        raise MalformedSlice(f"the version at offset {start} is not an integer")
    width = 1 << ((first - 0xCC) & 0x03)
    raw = cursor.take(width)
    value = int.from_bytes(raw, "big", signed=first >= 0xD0)
    if packb(value) != bytes((first,)) + raw:
        raise NonCanonicalSlice(f"integer {value} at offset {start} is not in its shortest form")
    return value


def _read_bin(cursor: ByteReader, what: str) -> bytes:
    start = cursor.pos
    first = cursor.byte()
    if first == 0xC4:
        length = cursor.byte()
    elif first == 0xC5:
        length = struct.unpack(">H", cursor.take(2))[0]
        if length < 0x100:
            raise NonCanonicalSlice(f"{what} of {length} bytes uses a bin16 header")
    elif first == 0xC6:
        length = struct.unpack(">I", cursor.take(4))[0]
        if length < 0x10000:
            raise NonCanonicalSlice(f"{what} of {length} bytes uses a bin32 header")
    else:
        raise MalformedSlice(f"{what} at offset {start} must be bin")
    return cursor.take(length)


def _check_limits(max_bytes: object, max_depth: object) -> None:
    if type(max_bytes) is not int or max_bytes < 1:
        raise InvalidDecodeLimits(f"max_bytes must be a positive integer, got {max_bytes!r}")
    if type(max_depth) is not int or max_depth < 1:
        raise InvalidDecodeLimits(f"max_depth must be a positive integer, got {max_depth!r}")


def _split_envelope(data: object, max_bytes: int) -> tuple[bytes, bytes, bytes]:
    """Step 1 (outer): ``len(data) <= max_bytes``; the input is exactly one canonical array
    ``[1, payload: bin, witness: bin, certification: bin]``.

    The version is read before the field count, so a future version may change the arity."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise MalformedSlice(f"expected bytes, got {type(data).__name__}")
    if len(data) > max_bytes:
        raise SliceTooLarge(f"{len(data)} bytes exceed the limit of {max_bytes}")
    cursor = ByteReader(bytes(data), MalformedSlice)
    count = _read_array_len(cursor)
    if count == 0:
        raise MalformedSlice("empty array has no version")
    version = _read_int(cursor)
    if version != SLICE_VERSION:
        raise UnsupportedSliceVersion(f"unknown certified slice version {version}")
    if count != 4:
        raise SliceFieldCount(f"certified slice has {count} fields, expected 4")
    payload_bytes = _read_bin(cursor, "payload")
    witness_bytes = _read_bin(cursor, "witness")
    certification_bytes = _read_bin(cursor, "certification")
    if cursor.pos != len(cursor.data):
        raise SliceTrailingBytes(f"{len(cursor.data) - cursor.pos} bytes follow the certified slice")
    return payload_bytes, witness_bytes, certification_bytes


def _decode_bounded(data: bytes, max_bytes: int, max_depth: int, not_canonical: type) -> HashTree:
    """Step 1 (trees): decode within ``max_bytes`` and ``max_depth``; other decoding errors
    become ``not_canonical`` (the payload's or the witness's own class)."""
    try:
        return decode_tree(data, max_bytes=max_bytes, max_depth=max_depth)
    except TreeTooDeepError as exc:
        raise TreeTooDeep(str(exc)) from exc
    except TreeTooLargeError as exc:
        raise SliceTooLarge(str(exc)) from exc
    except TreeDecodeError as exc:
        raise not_canonical(str(exc)) from exc


@dataclass(frozen=True, slots=True)
class _PayloadParts:
    dst: str
    header_leaf: bytes
    messages: tuple[tuple[bytes, bytes], ...]


def _only_labeled(group: list[HashTree], where: str) -> list[Labeled]:
    for node in group:
        if type(node) is not Labeled:
            raise PayloadLayoutError(f"{where} holds a {type(node).__name__} node, expected labeled children")
    return group  # type: ignore[return-value]


def _parse_payload(payload: HashTree) -> _PayloadParts:
    """Step 2 (shape): no ``Pruned``/``Empty`` anywhere; well-formed; exactly
    ``/streams/<dst>/{header: Leaf, messages?: {label: Leaf, ...}}``."""
    stack: list[HashTree] = [payload]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind is Fork:
            stack.append(node.right)
            stack.append(node.left)
        elif kind is Labeled:
            stack.append(node.subtree)
        elif kind is Pruned:
            raise PrunedInPayload("the payload contains a pruned subtree")
        elif kind is Empty:
            raise EmptyInPayload("the payload contains an empty subtree")
    try:
        ht.validate_well_formed(payload)
    except ht.DuplicateLabelError as exc:
        raise PayloadDuplicateLabel(str(exc)) from exc
    except ht.UnsortedLabelsError as exc:
        raise PayloadUnsortedLabels(str(exc)) from exc
    except ht.MalformedTreeError as exc:
        raise PayloadLayoutError(str(exc)) from exc

    top = _only_labeled(ht.flatten_forks(payload), "the payload root")
    if len(top) != 1 or top[0].label != STREAMS_LABEL:
        raise PayloadLayoutError("the payload root must hold exactly the label 'streams'")
    streams = _only_labeled(ht.flatten_forks(top[0].subtree), "/streams")
    if len(streams) != 1:
        raise PayloadLayoutError(f"/streams must hold exactly one stream, got {len(streams)}")
    try:
        dst = streams[0].label.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PayloadLayoutError("the stream label is not UTF-8") from exc
    children = _only_labeled(ht.flatten_forks(streams[0].subtree), "/streams/<dst>")
    labels = [child.label for child in children]
    if labels not in ([HEADER_LABEL], [HEADER_LABEL, MESSAGES_LABEL]):
        raise PayloadLayoutError(f"/streams/<dst> must hold 'header' and optionally 'messages', got {labels!r}")
    header = children[0].subtree
    if type(header) is not Leaf:
        raise PayloadLayoutError("/streams/<dst>/header is not a leaf")
    messages: list[tuple[bytes, bytes]] = []
    if len(children) == 2:
        for node in _only_labeled(ht.flatten_forks(children[1].subtree), "/streams/<dst>/messages"):
            if type(node.subtree) is not Leaf:
                raise PayloadLayoutError(f"message {node.label!r} is not a leaf")
            messages.append((node.label, node.subtree.value))
    return _PayloadParts(dst, header.value, tuple(messages))


def _labeled_children(tree: HashTree) -> dict[bytes, HashTree]:
    """``label -> subtree`` over the labeled nodes of ``tree``'s fork group."""
    return {node.label: node.subtree for node in ht.flatten_forks(tree) if type(node) is Labeled}


def _witness_child(tree: HashTree, label: bytes, where: str) -> HashTree:
    child = _labeled_children(tree).get(label)
    if child is None:
        raise WitnessMismatch(f"the witness does not reveal {where}")
    return child


def _check_position(witness_node: HashTree, value: bytes, where: str) -> None:
    """A payload leaf position: the witness must hold ``Pruned(hash_leaf(value))`` there."""
    kind = type(witness_node)
    if kind is Leaf:
        raise PositionSuppliedTwice(f"both the payload and the witness supply {where}")
    if kind is not Pruned:
        raise WitnessMismatch(f"the witness holds a {kind.__name__} node at {where}, expected a pruned leaf")
    if witness_node.digest != ht.hash_leaf(value):
        raise PrunedDigestMismatch(f"the witness digest at {where} is not the digest of the payload value")


def _check_witness_against_payload(witness_tree: HashTree, parts: _PayloadParts) -> dict[bytes, HashTree]:
    """Step 3 (merge): every payload leaf position is ``Labeled(l, Pruned(hash_leaf(v)))`` in
    the witness. Returns the witness's revealed ``messages`` children (for ``witness_begin``)."""
    dst_label = parts.dst.encode("utf-8")
    streams = _witness_child(witness_tree, STREAMS_LABEL, "/streams")
    stream = _witness_child(streams, dst_label, f"/streams/{parts.dst}")
    stream_children = _labeled_children(stream)
    header = stream_children.get(HEADER_LABEL)
    if header is None:
        raise WitnessMismatch(f"the witness does not reveal /streams/{parts.dst}/header")
    _check_position(header, parts.header_leaf, f"/streams/{parts.dst}/header")
    messages_node = stream_children.get(MESSAGES_LABEL)
    revealed = {} if messages_node is None else _labeled_children(messages_node)
    if parts.messages and messages_node is None:
        raise WitnessMismatch(f"the witness does not reveal /streams/{parts.dst}/messages")
    for label, value in parts.messages:
        node = revealed.get(label)
        if node is None:
            raise WitnessMismatch(f"the witness does not reveal message {label.hex()}")
        _check_position(node, value, f"message {label.hex()}")
    return revealed


_FORK_SEP = ht.domain_sep("ic-hashtree-fork")
_LABELED_SEP = ht.domain_sep("ic-hashtree-labeled")


def _witness_root(witness_tree: HashTree) -> bytes:
    """Step 3 (no leaves) and the digest for step 4: ``reconstruct(witness)``, raising
    ``WitnessContainsLeaf`` at the first ``Leaf``. Post-order, no recursion; a label over a
    pruned subtree (every revealed position) is hashed without a stack round trip."""
    digests: list[bytes] = []
    push = digests.append
    stack: list[tuple[HashTree, bool]] = [(witness_tree, False)]
    while stack:
        node, children_done = stack.pop()
        kind = type(node)
        if kind is Fork:
            if children_done:
                right = digests.pop()
                push(sha256_of(_FORK_SEP, digests.pop(), right))
            else:
                stack.append((node, True))
                stack.append((node.right, False))
                stack.append((node.left, False))
        elif kind is Labeled:
            if children_done:
                push(sha256_of(_LABELED_SEP, node.label, digests.pop()))
            elif type(node.subtree) is Pruned:
                push(sha256_of(_LABELED_SEP, node.label, node.subtree.digest))
            else:
                stack.append((node, True))
                stack.append((node.subtree, False))
        elif kind is Pruned:
            push(node.digest)
        elif kind is Leaf:
            raise WitnessContainsLeaf("the witness carries leaf data")
        else:
            push(ht.hash_empty())
    return digests[0]


def _decode_certification(data: bytes) -> cm.Certification:
    """Step 4 (certification bytes). A canonical certification whose signature is the empty
    byte string is an uncertified state: ``EmptyCertificationSignature``, like an all-zero one."""
    try:
        return cm.decode_certification(data)
    except cm.MalformedCertification as exc:
        if _has_empty_signature(data):
            raise EmptyCertificationSignature("the certification signature is empty") from exc
        raise MalformedSliceCertification(str(exc)) from exc


def _has_empty_signature(data: bytes) -> bool:
    try:
        value = encoding.decode(data, max_bytes=_CERTIFICATION_PROBE_BYTES)
    except encoding.EncodingError:
        return False
    return (
        isinstance(value, tuple)
        and len(value) == 4
        and type(value[0]) is int
        and value[0] == cm.CERTIFICATION_VERSION
        and value[3] == b""
    )


def _verify_signature(certification: cm.Certification, public_key: bytes) -> None:
    """Step 5: ``verify_certification`` under the sending subnet's key, errors mapped 1:1."""
    try:
        cm.verify_certification(certification, public_key)
    except cm.InvalidPublicKey as exc:
        raise InvalidSubnetKey(str(exc)) from exc
    except cm.EmptySignature as exc:
        raise EmptyCertificationSignature(str(exc)) from exc
    except cm.IdentitySignature as exc:
        raise IdentityCertificationSignature(str(exc)) from exc
    except cm.MalformedSignature as exc:
        raise MalformedCertificationSignature(str(exc)) from exc
    except cm.InvalidSignature as exc:
        raise InvalidCertificationSignature(str(exc)) from exc


def _decode_header(header_leaf: bytes) -> StreamHeader:
    """Step 6: the header leaf decodes; ``begin <= end``; reject signal indices strictly
    increase and stay below ``signals_end``."""
    try:
        header = decode_header_leaf(header_leaf)
    except CodecError as exc:
        raise MalformedHeader(str(exc)) from exc
    if header.begin > header.end:
        raise InvalidHeaderBounds(f"header begin {header.begin} is above end {header.end}")
    previous = -1
    for signal in header.reject_signals:
        if signal.index <= previous:
            raise InvalidRejectSignals(f"reject signal {signal.index} does not follow {previous}")
        if signal.index >= header.signals_end:
            raise InvalidRejectSignals(f"reject signal {signal.index} is not below signals_end {header.signals_end}")
        previous = signal.index
    return header


def _decode_messages(header: StreamHeader, messages: tuple[tuple[bytes, bytes], ...]) -> StreamSlice:
    """Step 7: labels are 8-byte indices ``i0, i0 + 1, ...`` inside ``[header.begin,
    header.end)`` and every leaf decodes. A header-only slice begins at ``header.end``."""
    if not messages:
        return StreamSlice(header, header.end, ())
    decoded = []
    first = None
    expected = 0
    for label, value in messages:
        if len(label) != _INDEX_BYTES:
            raise MalformedMessageIndex(f"message label {label.hex()} is not {_INDEX_BYTES} bytes")
        index = int.from_bytes(label, "big")
        if first is None:
            first = index
        elif index != expected:
            raise NonConsecutiveMessages(f"message {index} follows message {expected - 1}")
        if not header.begin <= index < header.end:
            raise MessageOutsideHeaderRange(f"message {index} outside [{header.begin}, {header.end})")
        try:
            decoded.append(decode_message_leaf(value))
        except CodecError as exc:
            raise MalformedMessage(f"message {index}: {exc}") from exc
        expected = index + 1
    return StreamSlice(header, first, tuple(decoded))


def _witness_range(stream_slice: StreamSlice, revealed: dict[bytes, HashTree]) -> tuple[int, int]:
    """``[witness_begin, witness_end)``: the longest run of revealed message positions inside
    the header range that ends at ``messages_end`` (header-only: one past the highest revealed
    position, or the empty range at ``messages_begin`` when none is revealed)."""
    header = stream_slice.header
    if stream_slice.messages:
        begin, end = stream_slice.messages_begin, stream_slice.messages_end
    else:
        inside = [
            index
            for index in (int.from_bytes(label, "big") for label in revealed if len(label) == _INDEX_BYTES)
            if header.begin <= index < header.end
        ]
        if not inside:
            return stream_slice.messages_begin, stream_slice.messages_begin
        end = max(inside) + 1
        begin = end - 1
    while begin > header.begin and message_label(begin - 1) in revealed:
        begin -= 1
    return begin, end


def decode_certified_stream_slice(
    own_subnet: str,
    remote_subnet: str,
    public_key_for: Callable[[str, int], Optional[bytes]],
    registry_version: int,
    data: bytes,
    *,
    max_bytes: int = DEFAULT_MAX_SLICE_BYTES,
    max_depth: int = DEFAULT_MAX_TREE_DEPTH,
) -> CertifiedSlice:
    """Decode and verify a slice that ``remote_subnet`` sent to ``own_subnet``.

    Checks in the order of the module docstring (steps 1–7); the first failure raises its
    own ``SliceDecodeError`` subclass and no slice is returned. The signature is checked
    with ``public_key_for(remote_subnet, registry_version)`` (``None``: ``UnknownSubnetKey``).
    """
    _check_limits(max_bytes, max_depth)
    # 1. bounds, outer array, trees within bounds
    payload_bytes, witness_bytes, certification_bytes = _split_envelope(data, max_bytes)
    payload = _decode_bounded(payload_bytes, max_bytes, max_depth, PayloadNotCanonical)
    witness_tree = _decode_bounded(witness_bytes, max_bytes, max_depth, WitnessNotCanonical)
    # 2. payload
    parts = _parse_payload(payload)
    if parts.dst != own_subnet:
        raise SliceForAnotherSubnet(f"slice addressed to {parts.dst!r}, this is {own_subnet!r}")
    # 3. witness
    try:
        ht.validate_well_formed(witness_tree)
    except ht.MalformedTreeError as exc:
        raise MalformedWitness(str(exc)) from exc
    revealed = _check_witness_against_payload(witness_tree, parts)
    root = _witness_root(witness_tree)
    # 4. root
    certification = _decode_certification(certification_bytes)
    if root != certification.root:
        raise RootMismatch("the witness does not reconstruct to the certified root")
    # 5. signature
    public_key = public_key_for(remote_subnet, registry_version)
    if public_key is None:
        raise UnknownSubnetKey(f"no public key for subnet {remote_subnet!r} at registry version {registry_version}")
    _verify_signature(certification, public_key)
    # 6. header
    header = _decode_header(parts.header_leaf)
    # 7. messages
    stream_slice = _decode_messages(header, parts.messages)
    witness_begin, witness_end = _witness_range(stream_slice, revealed)
    return CertifiedSlice(stream_slice, certification, witness_begin, witness_end, payload, witness_tree)


def decode_valid_certified_stream_slice(
    data: bytes,
    *,
    max_bytes: int = DEFAULT_MAX_SLICE_BYTES,
    max_depth: int = DEFAULT_MAX_TREE_DEPTH,
) -> StreamSlice:
    """The ``StreamSlice`` of a slice already validated (e.g. agreed in a block): steps 1, 2
    (without the destination check), 6 and 7 only. The witness and the certification are
    not decoded, so this is cheap; garbage still raises a ``SliceDecodeError`` subclass."""
    _check_limits(max_bytes, max_depth)
    payload_bytes, _, _ = _split_envelope(data, max_bytes)
    payload = _decode_bounded(payload_bytes, max_bytes, max_depth, PayloadNotCanonical)
    parts = _parse_payload(payload)
    header = _decode_header(parts.header_leaf)
    return _decode_messages(header, parts.messages)


def certified_slice_byte_size(data: bytes) -> int:
    """The encoded size of a certified slice: ``len(data)`` (what block byte budgets count)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise MalformedSlice(f"expected bytes, got {type(data).__name__}")
    return len(data)


# =========================================================================== editing (slice pool)


@dataclass(frozen=True, slots=True)
class _OpenedSlice:
    """A slice split into its parsed payload and its verbatim witness and certification."""

    parts: _PayloadParts
    messages_begin: int  # first message index; meaningless when ``parts.messages`` is empty
    witness_bytes: bytes
    certification_bytes: bytes

    @property
    def messages_end(self) -> int:
        return self.messages_begin + len(self.parts.messages)


def _open_slice(data: bytes) -> _OpenedSlice:
    """Steps 1, 2 (shape) and 7 (index labels) of the decoder, over bytes that are expected
    to have decoded before; the witness and certification stay undecoded."""
    payload_bytes, witness_bytes, certification_bytes = _split_envelope(data, DEFAULT_MAX_SLICE_BYTES)
    payload = _decode_bounded(payload_bytes, DEFAULT_MAX_SLICE_BYTES, DEFAULT_MAX_TREE_DEPTH, PayloadNotCanonical)
    parts = _parse_payload(payload)
    begin = 0
    for position, (label, _) in enumerate(parts.messages):
        if len(label) != _INDEX_BYTES:
            raise MalformedMessageIndex(f"message label {label.hex()} is not {_INDEX_BYTES} bytes")
        index = int.from_bytes(label, "big")
        if position == 0:
            begin = index
        elif index != begin + position:
            raise NonConsecutiveMessages(f"message {index} follows message {begin + position - 1}")
    return _OpenedSlice(parts, begin, witness_bytes, certification_bytes)


def _assemble(dst: str, header_leaf: bytes, messages: list[tuple[bytes, bytes]], witness_bytes: bytes,
              certification_bytes: bytes) -> bytes:
    """``[1, payload, witness, certification]`` with a payload built like the encoder's."""
    payload = _payload_value(dst.encode("utf-8"), header_leaf, messages)
    return encoding.encode_unchecked((SLICE_VERSION, _encode_value(payload), witness_bytes, certification_bytes))


def restrict_certified_slice(data: bytes, msg_begin: int, msg_end: int) -> bytes:
    """The same certified slice with its payload cut to the messages ``[msg_begin, msg_end)``.

    ``payload' = {header, messages[i] for msg_begin <= i < msg_end}``, ``witness' = witness``,
    ``certification' = certification``; requires ``messages_begin <= msg_begin <= msg_end <=
    messages_end`` of the slice's own messages, except that ``msg_begin == msg_end`` is always
    allowed and gives the header-only slice. The witness still reveals the header and every
    position of the original range, so the result decodes whenever ``data`` did (with the
    same ``witness_begin``). Raises ``InvalidSliceRange``, or a ``SliceDecodeError`` for
    bytes that are not a certified slice.
    """
    if not _is_u64(msg_begin) or not _is_u64(msg_end):
        raise InvalidSliceRange(f"indices must be integers in [0, 2**64), got {msg_begin!r}, {msg_end!r}")
    if msg_begin > msg_end:
        raise InvalidSliceRange(f"msg_begin {msg_begin} is above msg_end {msg_end}")
    opened = _open_slice(data)
    messages = opened.parts.messages
    if msg_begin == msg_end:
        kept: list[tuple[bytes, bytes]] = []
    elif messages and opened.messages_begin <= msg_begin and msg_end <= opened.messages_end:
        kept = list(messages[msg_begin - opened.messages_begin : msg_end - opened.messages_begin])
    else:
        held = f"[{opened.messages_begin}, {opened.messages_end})" if messages else "no messages"
        raise InvalidSliceRange(f"cannot cut [{msg_begin}, {msg_end}) from a slice holding {held}")
    return _assemble(opened.parts.dst, opened.parts.header_leaf, kept, opened.witness_bytes,
                     opened.certification_bytes)


def _revealed_messages(witness_tree: HashTree, dst: str) -> dict[bytes, HashTree]:
    """``label -> node`` of the positions the witness reveals under ``/streams/<dst>/messages``."""
    node = witness_tree
    for label in (STREAMS_LABEL, dst.encode("utf-8"), MESSAGES_LABEL):
        child = _labeled_children(node).get(label)
        if child is None:
            return {}
        node = child
    return _labeled_children(node)


def append_certified_slice(pooled: bytes, newer: bytes) -> bytes:
    """Merge a pooled slice (messages ``[a, b)``) with a newer slice of the same stream that
    was fetched with ``witness_begin <= a`` and ``msg_begin = b`` (messages ``[b, c)``,
    possibly none, witness over ``[witness_begin, c)``).

    ``result = {newer.header, pooled.messages ++ newer.messages}`` under ``newer.witness``
    and ``newer.certification``, i.e. messages ``[a, c)``. Checks, each with its own
    ``SliceMergeError``: same ``/streams/<dst>`` (``DifferentStreams``); the newer messages
    begin exactly at ``b`` (``SlicesNotContiguous``); every pooled position ``i`` lies in the
    newer header range and is revealed by the newer witness (``WitnessDoesNotCover``) with
    digest ``hash_leaf(pooled message i)`` (``PooledMessageMismatch``). The result decodes
    with ``decode_certified_stream_slice`` whenever ``newer`` did. A pooled slice without
    messages contributes nothing: ``newer`` comes back unchanged.
    """
    old = _open_slice(pooled)
    new = _open_slice(newer)
    if old.parts.dst != new.parts.dst:
        raise DifferentStreams(f"/streams/{old.parts.dst} cannot be merged with /streams/{new.parts.dst}")
    if not old.parts.messages:
        return bytes(newer)
    if new.parts.messages and new.messages_begin != old.messages_end:
        raise SlicesNotContiguous(
            f"newer messages begin at {new.messages_begin}, pooled messages end at {old.messages_end}")
    try:
        header = decode_header_leaf(new.parts.header_leaf)
    except CodecError as exc:
        raise MalformedHeader(str(exc)) from exc
    if not header.begin <= old.messages_begin or not old.messages_end <= header.end:
        raise WitnessDoesNotCover(
            f"pooled messages [{old.messages_begin}, {old.messages_end}) are outside the newer header range "
            f"[{header.begin}, {header.end})")
    witness_tree = _decode_bounded(new.witness_bytes, DEFAULT_MAX_SLICE_BYTES, DEFAULT_MAX_TREE_DEPTH,
                                   WitnessNotCanonical)
    revealed = _revealed_messages(witness_tree, new.parts.dst)
    for label, value in old.parts.messages:
        node = revealed.get(label)
        if type(node) is not Pruned:
            raise WitnessDoesNotCover(f"the newer witness does not reveal message {int.from_bytes(label, 'big')}")
        if node.digest != ht.hash_leaf(value):
            raise PooledMessageMismatch(
                f"pooled message {int.from_bytes(label, 'big')} differs from the newer certified state")
    return _assemble(new.parts.dst, new.parts.header_leaf, list(old.parts.messages) + list(new.parts.messages),
                     new.witness_bytes, new.certification_bytes)
