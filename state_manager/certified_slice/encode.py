"""Encoding a certified stream slice from a certified state tree (the XNet endpoint's side).

Pure: the certified tree and its certification arrive as arguments.
"""

from __future__ import annotations

from typing import Optional

from state_manager import certification as cm
from state_manager.codec import CodecError, decode_header_leaf
from state_manager.encoding import is_u64
from state_manager.labeled_trie import LabeledTrie
from state_manager.streams import StreamHeader
from state_manager.tree_encoding import encode_nested

from .errors import CertificationTreeMismatch, IndexOutOfRange, InvalidSliceRequest, MalformedCertifiedTree, NoStream
from .layout import (
    HEADER_LABEL,
    HEIGHT_LABEL,
    MESSAGES_LABEL,
    METADATA_LABEL,
    STREAMS_LABEL,
    encode_slice,
    height_leaf,
    message_label,
    payload_value,
)
from .witness_plan import slice_witness

__all__ = ["encode_certified_stream_slice"]


def _stream_of(certified_tree: LabeledTrie, dst_label: bytes) -> tuple[bytes, StreamHeader, LabeledTrie]:
    """``(header_leaf, header, messages)`` of ``/streams/<dst>``; ``NoStream`` if absent."""
    streams = certified_tree.get_subtree(STREAMS_LABEL)
    if streams is None:
        if STREAMS_LABEL in certified_tree:
            raise MalformedCertifiedTree("/streams is not a subtree")
        raise NoStream("the certified tree has no /streams")
    stream = streams.get_subtree(dst_label)
    if stream is None:
        if dst_label in streams:
            raise MalformedCertifiedTree(f"/streams/{dst_label!r} is not a subtree")
        raise NoStream(f"no stream /streams/{dst_label!r}")
    header_leaf = stream.get_leaf(HEADER_LABEL)
    if header_leaf is None:
        raise MalformedCertifiedTree(f"/streams/{dst_label!r}/header is not a leaf")
    try:
        header = decode_header_leaf(header_leaf)
    except CodecError as exc:
        raise MalformedCertifiedTree(f"/streams/{dst_label!r}/header: {exc}") from exc
    messages = stream.get_subtree(MESSAGES_LABEL)
    if messages is None:
        if MESSAGES_LABEL in stream:
            raise MalformedCertifiedTree(f"/streams/{dst_label!r}/messages is not a subtree")
        messages = LabeledTrie.empty()
    return header_leaf, header, messages


def _certified_height_leaf(certified_tree: LabeledTrie) -> Optional[bytes]:
    """The leaf at ``/metadata/height``, if the certified tree has one."""
    metadata = certified_tree.get_subtree(METADATA_LABEL)
    return None if metadata is None else metadata.get_leaf(HEIGHT_LABEL)


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


def encode_certified_stream_slice(
    certified_tree: LabeledTrie,
    certification: cm.Certification,
    remote_subnet: str,
    witness_begin: int,
    msg_begin: int,
    msg_limit: int,
    byte_limit: int,
) -> bytes:
    """The certified slice of ``/streams/<remote_subnet>`` (layout in ``layout``).

    Rules, checked in order:

    * ``certification.root == certified_tree.digest()`` (``CertificationTreeMismatch``);
    * the certified tree's ``/metadata/height`` is ``height_leaf(certification.height)``
      (``CertificationTreeMismatch``, also when the tree has none: the witness's
      ``/metadata/height`` is what authenticates the certification's height);
    * ``/streams/<remote_subnet>`` exists (``NoStream``);
    * ``header.begin <= witness_begin <= msg_begin <= header.end`` (``IndexOutOfRange``);
    * payload messages: from ``msg_begin``, at most ``msg_limit`` and at most ``byte_limit``
      bytes of message leaves, but the first is always included when ``msg_limit >= 1`` and
      ``msg_begin < header.end``; ``msg_limit == 0`` gives a header-only slice;
    * the witness reveals what ``witness_plan`` says: the header, the message positions
      ``[witness_begin, msg_end)`` and ``/metadata/height``.
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
        if not is_u64(value):
            raise InvalidSliceRequest(f"{name} must be an integer in [0, 2**64), got {value!r}")
    if certification.root != certified_tree.digest():
        raise CertificationTreeMismatch("the certification does not certify this tree's root")
    tree_height = _certified_height_leaf(certified_tree)
    if tree_height is None:
        raise CertificationTreeMismatch("the certified tree has no /metadata/height to authenticate the certified height")
    if tree_height != height_leaf(certification.height):
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
    payload = payload_value(dst_label, header_leaf, taken)
    witness = slice_witness(certified_tree, dst_label, witness_begin, msg_end, True)
    return encode_slice(encode_nested(payload), encode_nested(witness), cm.encode_certification(certification))
