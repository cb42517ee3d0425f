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
  to ``/streams/<dst>/header``, to every message index in ``[witness_begin, msg_end)`` and
  to ``/metadata/height`` (when the tree has it); each of those leaf positions is
  ``Labeled(label, Pruned(hash_leaf(value)))``, so the witness never carries leaf data.
  ``witness_begin <= msg_begin`` lets a receiver that holds messages ``[witness_begin,
  msg_begin)`` from an earlier slice append the new ones.
* ``certification`` is ``certification.encode_certification``: a signature on the height
  and the root.

Decoding checks, in this order, each failure with its own ``SliceDecodeError`` subclass.
Trees are parsed by msgpack's C unpacker with a check on every node as soon as it is
complete, so checks marked *while parsing* stop at the first offending node, before the rest
is parsed; nothing builds ``HashTree`` objects. The work to refuse any input is therefore
bounded by what the payload can need (``witness_budget``), never by the input's size:

1. bounded total size, then the outer array (canonical, version 1, four fields, no trailing
   bytes) — before any tree is parsed;
2. the payload: while parsing, every node is a fork, labeled node or leaf (no ``Pruned``/
   ``Empty``) and the payload fits its witness (``PayloadExceedsWitness``: each leaf
   position needs 40 bytes plus its label there); then it holds exactly one
   ``/streams/<dst>`` with ``"header"`` and optional ``"messages"``, labels increasing in
   every fork group, within the depth bound, canonical; ``dst == own_subnet``;
3. the witness: while parsing, at most the nodes, positions and pruned nodes of
   ``witness_budget`` for this payload (``WitnessOverBudget``); then every fork group is
   well-formed within the depth bound, it is canonical, every payload leaf position is
   ``Labeled(l, Pruned(d))`` in it with ``d == hash_leaf(value)``, and it has no ``Leaf``;
4. ``reconstruct(witness) == certification.root`` (computed while parsing), and where the
   witness reveals ``/metadata/height`` it is ``height_leaf(certification.height)``
   (``CertificationHeightMismatch``: a relabeled height);
5. the certification verifies under the sending subnet's key at the registry version (the
   signed message covers the height, so a relabeled one fails here at the latest);
6. the header decodes and its bounds are sane;
7. messages have consecutive 8-byte indices inside ``[header.begin, header.end)`` and decode.

Depth: msgpack refuses nesting beyond 1024 levels before anything is hooked; ``max_depth``
is then checked by the walks over the parsed (and already counted) nodes.

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

import msgpack

from state_manager import certification as cm
from state_manager import encoding
from state_manager import hash_tree as ht
from state_manager.codec import LEAF_VERSION, CodecError, decode_header_leaf, decode_message_leaf
from state_manager.encoding import packb
from state_manager.hash_tree import Empty, Fork, Labeled, Pruned
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
    encode_tree,
    tree_from_nested_arrays,
)

__all__ = [
    "SLICE_VERSION",
    "DEFAULT_MAX_SLICE_BYTES",
    "DEFAULT_MAX_TREE_DEPTH",
    "DEFAULT_MAX_EXTRA_POSITIONS",
    "STREAMS_LABEL",
    "HEADER_LABEL",
    "MESSAGES_LABEL",
    "METADATA_LABEL",
    "HEIGHT_LABEL",
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
    "PayloadExceedsWitness",
    "SliceForAnotherSubnet",
    "WitnessNotCanonical",
    "MalformedWitness",
    "WitnessMismatch",
    "PositionSuppliedTwice",
    "PrunedDigestMismatch",
    "WitnessContainsLeaf",
    "WitnessOverBudget",
    "WitnessTooManyNodes",
    "WitnessTooManyPositions",
    "WitnessTooManyPruned",
    "MalformedSliceCertification",
    "RootMismatch",
    "CertificationHeightMismatch",
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
    "height_leaf",
    "witness_budget",
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
#: Message positions a witness may reveal beyond the payload's messages: those of pooled
#: messages a continuation is appended to, or cut off by ``restrict_certified_slice``. The
#: slice pool holds at most twice the per-slice message limit (10,000 by default) of them.
DEFAULT_MAX_EXTRA_POSITIONS = 20_000

STREAMS_LABEL = b"streams"
HEADER_LABEL = b"header"
MESSAGES_LABEL = b"messages"
METADATA_LABEL = b"metadata"
HEIGHT_LABEL = b"height"

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


class PayloadExceedsWitness(SliceDecodeError):
    """The payload has more leaf positions or nodes than the witness has bytes to reveal
    (each position takes at least 40 bytes plus its label); refused while parsing."""


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


class WitnessOverBudget(SliceDecodeError):
    """The witness holds more than a slice with this payload can need (``witness_budget``);
    raised at the first node too many, while parsing."""


class WitnessTooManyNodes(WitnessOverBudget):
    """More nodes than ``3·(positions) + 4·R·max_depth``."""


class WitnessTooManyPositions(WitnessOverBudget):
    """More revealed positions than the payload's messages, the header, ``/metadata/height``
    and ``max_extra_positions``."""


class WitnessTooManyPruned(WitnessOverBudget):
    """More pruned nodes outside positions than the siblings of ``2·R`` paths of ``max_depth``."""


# step 4: root
class MalformedSliceCertification(SliceDecodeError):
    """The certification bytes are not a canonical certification."""


class RootMismatch(SliceDecodeError):
    """``reconstruct(witness) != certification.root``."""


class CertificationHeightMismatch(SliceDecodeError):
    """The witness reveals ``/metadata/height`` of the certified tree and it is not the
    certification's height: the height was relabeled (the signature would not verify either)."""


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
    """A well-formed signature that does not verify under the sending subnet's key for the
    claimed height and root: forged, or its height relabeled."""


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
    header range (``messages_begin`` when none is revealed).
    """

    stream_slice: StreamSlice
    certification: cm.Certification
    witness_begin: int
    witness_end: int


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


def _certified_height_leaf(certified_tree: LabeledTrie) -> Optional[bytes]:
    """The leaf at ``/metadata/height``, if the certified tree has one."""
    metadata = certified_tree.get(METADATA_LABEL)
    value = metadata.get(HEIGHT_LABEL) if isinstance(metadata, LabeledTrie) else None
    return value if isinstance(value, bytes) else None


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
    * the certified tree's ``/metadata/height``, if it has one, is ``height_leaf(certification.height)``
      (``CertificationTreeMismatch``);
    * the witness reveals the header, the message positions ``[witness_begin, msg_end)`` and
      ``/metadata/height`` (when the tree has it), so receivers can check the height.
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
    tree_height = _certified_height_leaf(certified_tree)
    if tree_height is not None and tree_height != height_leaf(certification.height):
        raise CertificationTreeMismatch(f"the tree's /metadata/height is not the certified height {certification.height}")
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
    top_plan: dict = {STREAMS_LABEL: _Plan({dst_label: _Plan(stream_plan)})}
    if _certified_height_leaf(certified_tree) is not None:
        top_plan[METADATA_LABEL] = _Plan({HEIGHT_LABEL: _LEAF_DIGEST})
    plan = _Plan(top_plan)
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


def _check_limits(max_bytes: object, max_depth: object, max_extra_positions: object) -> None:
    if type(max_bytes) is not int or max_bytes < 1:
        raise InvalidDecodeLimits(f"max_bytes must be a positive integer, got {max_bytes!r}")
    if type(max_depth) is not int or max_depth < 1:
        raise InvalidDecodeLimits(f"max_depth must be a positive integer, got {max_depth!r}")
    if type(max_extra_positions) is not int or max_extra_positions < 0:
        raise InvalidDecodeLimits(f"max_extra_positions must be a non-negative integer, got {max_extra_positions!r}")


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


# --------------------------------------------------------------------------- bounded tree parsing
#
# Remote trees are parsed by msgpack's C unpacker into nested tuples, ``(tag, ...)`` exactly as
# ``tree_encoding`` writes them, and never turned into ``HashTree`` objects. A hook runs on
# every array as soon as it is complete (post-order), so each node is checked — and counted
# against the budget — before anything above it is parsed: the first bad or surplus node
# stops the parse. Nesting is capped by the unpacker itself (``_PARSER_MAX_DEPTH``), arrays
# by ``max_array_len=3``; ``max_depth`` is checked by the walks that follow, and the
# canonical form by re-packing the tuples (``encoding.packb``) and comparing bytes.

#: msgpack's unpacker refuses deeper nesting (its fixed stack), before any hook runs.
_PARSER_MAX_DEPTH = 1024
_ARITY = {TAG_EMPTY: 1, TAG_FORK: 3, TAG_LABELED: 3, TAG_LEAF: 2, TAG_PRUNED: 2}
_TAG_NAMES = {TAG_EMPTY: "empty", TAG_FORK: "fork", TAG_LABELED: "labeled", TAG_LEAF: "leaf", TAG_PRUNED: "pruned"}
_FORK_SEP = ht.domain_sep("ic-hashtree-fork")
_LABELED_SEP = ht.domain_sep("ic-hashtree-labeled")
_EMPTY_DIGEST = ht.hash_empty()


def _check_node(node: tuple, not_canonical: type) -> int:
    """The tag of ``node`` after checking its arity and field types (children are tuples,
    i.e. nodes the hook has already checked; labels and values bytes; digests 32 bytes)."""
    tag = node[0] if node else None
    if type(tag) is not int or tag not in _ARITY:
        raise not_canonical(f"a tree node must begin with a tag 0..4, got {tag!r}")
    if len(node) != _ARITY[tag]:
        raise not_canonical(f"a {_TAG_NAMES[tag]} node has {len(node)} elements, expected {_ARITY[tag]}")
    if tag == TAG_FORK:
        if type(node[1]) is not tuple or type(node[2]) is not tuple:
            raise not_canonical("a fork's children must be nodes")
    elif tag == TAG_LABELED:
        if type(node[1]) is not bytes or type(node[2]) is not tuple:
            raise not_canonical("a labeled node holds a bin label and a node")
    elif tag != TAG_EMPTY and (type(node[1]) is not bytes or (tag == TAG_PRUNED and len(node[1]) != 32)):
        raise not_canonical(f"a {_TAG_NAMES[tag]} node holds a bin{' of 32 bytes' if tag == TAG_PRUNED else ''}")
    return tag


def _unpack(data: bytes, hook: Callable[[tuple], tuple], not_canonical: type) -> tuple:
    """``data`` as nested tuples, every array passed through ``hook`` as it completes."""
    try:
        value = msgpack.unpackb(data, use_list=False, raw=False, list_hook=hook, max_array_len=3, max_map_len=0,
                                max_str_len=0, max_ext_len=0, max_bin_len=len(data))
    except SliceDecodeError:
        raise
    except msgpack.StackError as exc:
        raise TreeTooDeep(f"the tree nests deeper than {_PARSER_MAX_DEPTH} levels") from exc
    except Exception as exc:  # noqa: BLE001 - truncated, trailing bytes, wrong types, limits
        raise not_canonical(f"not one encoded tree: {exc}") from exc
    if type(value) is not tuple:
        raise not_canonical(f"a tree is an array, got {type(value).__name__}")
    return value


def _check_canonical(value: tuple, data: bytes, not_canonical: type) -> None:
    """The bytes are the canonical encoding of the tree they hold (the tree was walked, so
    its depth is within bounds; trees deeper than the C packer goes use the iterative one)."""
    try:
        canonical = packb(value)
    except ValueError:
        canonical = encode_tree(tree_from_nested_arrays(value))
    if canonical != data:
        raise not_canonical("the bytes are not the canonical encoding of the tree they hold")


def _check_depth(depth: int, max_depth: int) -> None:
    if depth > max_depth:
        raise TreeTooDeep(f"the tree nests deeper than {max_depth} levels")


def _group(node: tuple, depth: int, max_depth: int) -> list[tuple[tuple, int]]:
    """The fork group of ``node`` (``hash_tree.flatten_forks``), left to right, with depths."""
    out: list[tuple[tuple, int]] = []
    stack = [(node, depth)]
    while stack:
        member, level = stack.pop()
        _check_depth(level, max_depth)
        tag = member[0]
        if tag == TAG_FORK:
            stack.append((member[2], level + 1))
            stack.append((member[1], level + 1))
        elif tag != TAG_EMPTY:
            out.append((member, level))
    return out


# --------------------------------------------------------------------------- payload


@dataclass(frozen=True, slots=True)
class _PayloadParts:
    dst: str
    header_leaf: bytes
    messages: tuple[tuple[bytes, bytes], ...]


#: Fewest bytes with which a witness reveals one position, ``Labeled(label, Pruned(digest))``:
#: ``93 02 c4 <len> label 92 04 c4 20 <32 bytes>``, i.e. this plus the label.
_POSITION_BYTES = 40


def _payload_hook(witness_bytes: int) -> Callable[[tuple], tuple]:
    """The parse hook of step 2: every payload node is a fork, labeled node or leaf, and
    the payload fits the witness that must reveal it. Each leaf position (``Labeled(l,
    Leaf(v))``) needs ``_POSITION_BYTES + len(l)`` witness bytes, so an honest payload of
    ``k`` messages has ``3k + 5`` nodes for a witness of at least ``48k + 46`` bytes: more
    than ``witness_bytes // 16 + 8`` nodes, or positions the witness has no room for, stop
    the parse (``PayloadExceedsWitness``)."""
    max_nodes = witness_bytes // 16 + 8
    nodes = need = 0

    def hook(node: tuple) -> tuple:
        nonlocal nodes, need
        nodes += 1
        tag = _check_node(node, PayloadNotCanonical)
        if tag == TAG_PRUNED:
            raise PrunedInPayload("the payload contains a pruned subtree")
        if tag == TAG_EMPTY:
            raise EmptyInPayload("the payload contains an empty subtree")
        if tag == TAG_LABELED and node[2][0] == TAG_LEAF:
            need += _POSITION_BYTES + len(node[1])
            if need > witness_bytes:
                raise PayloadExceedsWitness(f"the payload has more leaves than a {witness_bytes}-byte witness can reveal")
        if nodes > max_nodes:
            raise PayloadExceedsWitness(f"the payload has more nodes than a {witness_bytes}-byte witness allows")
        return node

    return hook


def _labeled_group(node: tuple, depth: int, max_depth: int, where: str) -> list[tuple[tuple, int]]:
    """A payload fork group of labeled nodes with strictly increasing labels."""
    group = _group(node, depth, max_depth)
    previous = None
    for member, _ in group:
        if member[0] != TAG_LABELED:
            raise PayloadLayoutError(f"{where} holds a {_TAG_NAMES[member[0]]} node, expected labeled children")
        label = member[1]
        if previous is not None and label <= previous:
            if label == previous:
                raise PayloadDuplicateLabel(f"label {label!r} occurs twice in {where}")
            raise PayloadUnsortedLabels(f"label {label!r} follows the larger label {previous!r} in {where}")
        previous = label
    return group


def _parse_payload(data: bytes, witness_bytes: int, max_depth: int) -> _PayloadParts:
    """Steps 1 and 2 for the payload: it parses, holds no ``Pruned``/``Empty`` and fits a
    witness of ``witness_bytes`` (each refused at the first node in excess), is exactly ``/streams/<dst>/{header: Leaf, messages?: {label: Leaf, ...}}``
    with increasing labels in every fork group, within ``max_depth``, and is canonical."""
    payload = _unpack(data, _payload_hook(witness_bytes), PayloadNotCanonical)
    top = _labeled_group(payload, 1, max_depth, "the payload root")
    if len(top) != 1 or top[0][0][1] != STREAMS_LABEL:
        raise PayloadLayoutError("the payload root must hold exactly the label 'streams'")
    streams = _labeled_group(top[0][0][2], top[0][1] + 1, max_depth, "/streams")
    if len(streams) != 1:
        raise PayloadLayoutError(f"/streams must hold exactly one stream, got {len(streams)}")
    (_, dst_label, stream), level = streams[0]
    try:
        dst = dst_label.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PayloadLayoutError("the stream label is not UTF-8") from exc
    children = _labeled_group(stream, level + 1, max_depth, "/streams/<dst>")
    labels = [child[1] for child, _ in children]
    if labels not in ([HEADER_LABEL], [HEADER_LABEL, MESSAGES_LABEL]):
        raise PayloadLayoutError(f"/streams/<dst> must hold 'header' and optionally 'messages', got {labels!r}")
    (_, _, header), level = children[0]
    _check_depth(level + 1, max_depth)
    if header[0] != TAG_LEAF:
        raise PayloadLayoutError("/streams/<dst>/header is not a leaf")
    messages: list[tuple[bytes, bytes]] = []
    if len(children) == 2:
        (_, _, group), level = children[1]
        for (_, label, leaf), position_depth in _labeled_group(group, level + 1, max_depth, "/streams/<dst>/messages"):
            _check_depth(position_depth + 1, max_depth)
            if leaf[0] != TAG_LEAF:
                raise PayloadLayoutError(f"message {label!r} is not a leaf")
            messages.append((label, leaf[1]))
    _check_canonical(payload, data, PayloadNotCanonical)
    return _PayloadParts(dst, header[1], tuple(messages))


# --------------------------------------------------------------------------- witness


@dataclass(frozen=True, slots=True)
class _WitnessBudget:
    """What a witness may hold (``witness_budget``); exceeding any bound stops the parse."""

    positions: int
    pruned: int
    nodes: int


#: Runs of consecutive positions an honest witness reveals: the header with the messages
#: ``[witness_begin, msg_end)`` (adjacent under ``/streams/<dst>``), and ``/metadata/height``;
#: counted as three to leave room.
_WITNESS_RUNS = 3


def witness_budget(payload_messages: int, max_extra_positions: int, max_depth: int) -> _WitnessBudget:
    """Bounds on the witness of a slice whose payload carries ``payload_messages`` messages.

    The encoder's witness is the union ``U`` of the paths from the root to its *positions*
    (labeled nodes over a pruned leaf digest): the header, ``/metadata/height`` and the
    messages ``[witness_begin, msg_end)``, i.e. ``p <= k + X + 2`` positions for ``k`` payload
    messages and ``X`` messages revealed beyond them (``witness_begin < msg_begin``, or a
    payload cut by ``restrict_certified_slice``), plus one pruned sibling for every fork of
    ``U`` with one child in ``U``. The positions form ``R <= 3`` runs of consecutive leaves of
    the certified tree. Every node is then one of: a position's digest or label (``2p``); a
    fork with both children in ``U`` (``<= p - 1``, as ``U`` has ``p`` leaves); a unary node of
    ``U`` — a path label or a fork with a pruned sibling — which lies on the path to the first
    or the last position of a run (a pruned side strictly inside a run would skip leaves of
    it), so ``<= 2·R·D`` of them for paths of at most ``D = max_depth`` nodes; or such a pruned
    sibling (``<= 2·R·D``). Hence:

        positions   <= k + X + 2
        bare pruned <= 2·R·D                     (pruned nodes not under a label)
        nodes       <= 3·(k + X + 2) + 4·R·D

    A witness for a header-only slice with nothing revealed beyond the payload has at most
    ``3·2 + 12·256 = 3,078`` nodes at the default depth; ``X`` is the caller's to choose
    (``DEFAULT_MAX_EXTRA_POSITIONS``).
    """
    positions = payload_messages + max_extra_positions + 2
    unary = 2 * _WITNESS_RUNS * max_depth
    return _WitnessBudget(positions, unary, 3 * positions + 2 * unary)


@dataclass(frozen=True, slots=True)
class _Witness:
    """What the decoder needs of a parsed witness."""

    root: bytes  # reconstruct(witness)
    header: Optional[tuple]  # the node at /streams/<dst>/header
    messages: Optional[tuple]  # the node at /streams/<dst>/messages
    revealed: dict[bytes, tuple]  # label -> node of the messages fork group
    height: Optional[tuple]  # the node at /metadata/height
    has_leaf: bool


def _witness_hook(budget: _WitnessBudget) -> tuple[Callable[[tuple], tuple], list[bytes], list[bool]]:
    """The parse hook of step 3: counts nodes, positions and bare pruned nodes against
    ``budget`` (raising at the first one too many) and computes every node's digest on a
    stack (post-order, so the root's digest is the last one left)."""
    digests: list[bytes] = []
    push, pop = digests.append, digests.pop
    has_leaf = [False]
    nodes = positions = pruned = 0
    max_nodes, max_positions, max_pruned = budget.nodes, budget.positions, budget.pruned

    def hook(node: tuple) -> tuple:
        nonlocal nodes, positions, pruned
        nodes += 1
        if nodes > max_nodes:
            raise WitnessTooManyNodes(f"the witness has more than {max_nodes} nodes")
        tag = _check_node(node, WitnessNotCanonical)
        if tag == TAG_PRUNED:
            push(node[1])
        elif tag == TAG_LABELED:
            if node[2][0] == TAG_PRUNED:
                positions += 1
                if positions > max_positions:
                    raise WitnessTooManyPositions(f"the witness reveals more than {max_positions} positions")
            push(sha256_of(_LABELED_SEP, node[1], pop()))
        elif tag == TAG_FORK:
            if node[1][0] == TAG_PRUNED:
                pruned += 1
            if node[2][0] == TAG_PRUNED:
                pruned += 1
            if pruned > max_pruned:
                raise WitnessTooManyPruned(f"the witness has more than {max_pruned} pruned nodes outside positions")
            right = pop()
            push(sha256_of(_FORK_SEP, pop(), right))
        elif tag == TAG_LEAF:
            has_leaf[0] = True
            push(sha256_of(_LEAF_DOMAIN, node[1]))
        else:
            push(_EMPTY_DIGEST)
        return node

    return hook, digests, has_leaf


# Where a fork group of the witness sits, for collecting the nodes the decoder checks.
_AT_ROOT, _AT_METADATA, _AT_STREAMS, _AT_STREAM, _AT_MESSAGES, _ELSEWHERE = range(6)


def _parse_witness(data: bytes, dst_label: bytes, budget: _WitnessBudget, max_depth: int) -> _Witness:
    """Steps 1 and 3 for the witness: parsed within ``budget`` (the first surplus node stops
    it), every fork group well-formed (labels strictly increasing, a leaf alone) within
    ``max_depth``, canonical; returns its root digest and the nodes at the header, messages
    and ``/metadata/height`` positions."""
    hook, digests, has_leaf = _witness_hook(budget)
    witness = _unpack(data, hook, WitnessNotCanonical)
    header = messages = height = None
    revealed: dict[bytes, tuple] = {}
    groups = [(witness, 1, _AT_ROOT)]
    while groups:
        top, depth, where = groups.pop()
        group = _group(top, depth, max_depth)
        previous = None
        for member, level in group:
            tag = member[0]
            if tag == TAG_LEAF:
                if len(group) > 1:
                    raise MalformedWitness("a leaf shares its fork group with other nodes")
                continue
            if tag != TAG_LABELED:
                continue
            label, sub = member[1], member[2]
            if previous is not None and label <= previous:
                kind = "occurs twice" if label == previous else f"follows the larger label {previous!r}"
                raise MalformedWitness(f"label {label!r} {kind} in a witness fork group")
            previous = label
            inner = _ELSEWHERE
            if where == _AT_MESSAGES:
                revealed[label] = sub
            elif where == _AT_ROOT:
                inner = _AT_STREAMS if label == STREAMS_LABEL else _AT_METADATA if label == METADATA_LABEL else inner
            elif where == _AT_STREAMS:
                inner = _AT_STREAM if label == dst_label else inner
            elif where == _AT_STREAM:
                if label == HEADER_LABEL:
                    header = sub
                elif label == MESSAGES_LABEL:
                    messages, inner = sub, _AT_MESSAGES
            elif where == _AT_METADATA and label == HEIGHT_LABEL:
                height = sub
            if sub[0] == TAG_PRUNED:
                _check_depth(level + 1, max_depth)
            else:
                groups.append((sub, level + 1, inner))
    _check_canonical(witness, data, WitnessNotCanonical)
    return _Witness(digests[-1], header, messages, revealed, height, has_leaf[0])


def _check_position(witness_node: Optional[tuple], value: bytes, where: str) -> None:
    """A payload leaf position: the witness must hold ``Pruned(hash_leaf(value))`` there."""
    if witness_node is None:
        raise WitnessMismatch(f"the witness does not reveal {where}")
    tag = witness_node[0]
    if tag == TAG_LEAF:
        raise PositionSuppliedTwice(f"both the payload and the witness supply {where}")
    if tag != TAG_PRUNED:
        raise WitnessMismatch(f"the witness holds a {_TAG_NAMES[tag]} node at {where}, expected a pruned leaf")
    if witness_node[1] != sha256_of(_LEAF_DOMAIN, value):
        raise PrunedDigestMismatch(f"the witness digest at {where} is not the digest of the payload value")


def _check_witness_against_payload(witness: _Witness, parts: _PayloadParts) -> None:
    """Step 3 (merge): every payload leaf position is ``Labeled(l, Pruned(hash_leaf(v)))`` in
    the witness; then the witness carries no leaf data at all."""
    where = f"/streams/{parts.dst}"
    _check_position(witness.header, parts.header_leaf, f"{where}/header")
    if parts.messages and witness.messages is None:
        raise WitnessMismatch(f"the witness does not reveal {where}/messages")
    revealed = witness.revealed
    for label, value in parts.messages:
        _check_position(revealed.get(label), value, f"message {label.hex()}")
    if witness.has_leaf:
        raise WitnessContainsLeaf("the witness carries leaf data")


def height_leaf(height: int) -> bytes:
    """The leaf at ``/metadata/height`` of a certified tree at ``height`` (``state_tree.leaf``)."""
    return encoding.encode_unchecked((LEAF_VERSION, height))


def _check_certified_height(witness: _Witness, certification: cm.Certification) -> None:
    """Step 4 (height): where the witness reveals ``/metadata/height``, the certified tree
    was built at ``certification.height``."""
    node = witness.height
    if node is not None and node[0] == TAG_PRUNED and node[1] != ht.hash_leaf(height_leaf(certification.height)):
        raise CertificationHeightMismatch(
            f"the certification claims height {certification.height}, the certified tree's /metadata/height differs "
            f"(a relabeled height)")


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


def _witness_range(stream_slice: StreamSlice, revealed: dict[bytes, tuple]) -> tuple[int, int]:
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
    max_extra_positions: int = DEFAULT_MAX_EXTRA_POSITIONS,
) -> CertifiedSlice:
    """Decode and verify a slice that ``remote_subnet`` sent to ``own_subnet``.

    Checks in the order of the module docstring (steps 1–7); the first failure raises its
    own ``SliceDecodeError`` subclass and no slice is returned. The signature is checked
    with ``public_key_for(remote_subnet, registry_version)`` (``None``: ``UnknownSubnetKey``).
    The witness may reveal at most ``max_extra_positions`` message positions beyond the
    payload's messages (``witness_budget``).
    """
    _check_limits(max_bytes, max_depth, max_extra_positions)
    # 1. bounds, outer array
    payload_bytes, witness_bytes, certification_bytes = _split_envelope(data, max_bytes)
    # 2. payload
    parts = _parse_payload(payload_bytes, len(witness_bytes), max_depth)
    if parts.dst != own_subnet:
        raise SliceForAnotherSubnet(f"slice addressed to {parts.dst!r}, this is {own_subnet!r}")
    # 3. witness, within what a slice with this payload can need
    budget = witness_budget(len(parts.messages), max_extra_positions, max_depth)
    witness = _parse_witness(witness_bytes, parts.dst.encode("utf-8"), budget, max_depth)
    _check_witness_against_payload(witness, parts)
    # 4. root and height
    certification = _decode_certification(certification_bytes)
    if witness.root != certification.root:
        raise RootMismatch("the witness does not reconstruct to the certified root")
    _check_certified_height(witness, certification)
    # 5. signature
    public_key = public_key_for(remote_subnet, registry_version)
    if public_key is None:
        raise UnknownSubnetKey(f"no public key for subnet {remote_subnet!r} at registry version {registry_version}")
    _verify_signature(certification, public_key)
    # 6. header
    header = _decode_header(parts.header_leaf)
    # 7. messages
    stream_slice = _decode_messages(header, parts.messages)
    witness_begin, witness_end = _witness_range(stream_slice, witness.revealed)
    return CertifiedSlice(stream_slice, certification, witness_begin, witness_end)


def decode_valid_certified_stream_slice(
    data: bytes,
    *,
    max_bytes: int = DEFAULT_MAX_SLICE_BYTES,
    max_depth: int = DEFAULT_MAX_TREE_DEPTH,
) -> StreamSlice:
    """The ``StreamSlice`` of a slice already validated (e.g. agreed in a block): steps 1, 2
    (without the destination check), 6 and 7 only. The witness and the certification are
    not decoded, so this is cheap; garbage still raises a ``SliceDecodeError`` subclass."""
    _check_limits(max_bytes, max_depth, 0)
    payload_bytes, witness_bytes, _ = _split_envelope(data, max_bytes)
    parts = _parse_payload(payload_bytes, len(witness_bytes), max_depth)
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
    parts = _parse_payload(payload_bytes, len(witness_bytes), DEFAULT_MAX_TREE_DEPTH)
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
    budget = witness_budget(len(new.parts.messages), len(old.parts.messages) + DEFAULT_MAX_EXTRA_POSITIONS,
                            DEFAULT_MAX_TREE_DEPTH)
    revealed = _parse_witness(new.witness_bytes, new.parts.dst.encode("utf-8"), budget, DEFAULT_MAX_TREE_DEPTH).revealed
    for label, value in old.parts.messages:
        node = revealed.get(label)
        if node is None or node[0] != TAG_PRUNED:
            raise WitnessDoesNotCover(f"the newer witness does not reveal message {int.from_bytes(label, 'big')}")
        if node[1] != ht.hash_leaf(value):
            raise PooledMessageMismatch(
                f"pooled message {int.from_bytes(label, 'big')} differs from the newer certified state")
    return _assemble(new.parts.dst, new.parts.header_leaf, list(old.parts.messages) + list(new.parts.messages),
                     new.witness_bytes, new.certification_bytes)
