"""Editing verified certified slices for the XNet slice pool, each failure a ``SliceEditError``.

``restrict_certified_slice`` cuts the payload to a sub-range of its messages and
``append_certified_slice`` prepends pooled messages to a newer slice whose witness reveals
them; both keep the witness and certification bytes verbatim, so the result decodes
whenever the input did. The inputs are slices that decoded before: only the steps the edit
needs run again (the payload's shape and index labels; for a merge, the newer witness).
"""

from __future__ import annotations

from dataclasses import dataclass

from state_manager.codec import CodecError, decode_header_leaf
from state_manager.encoding import is_u64
from state_manager.hash_tree import hash_leaf
from state_manager.tree_encoding import TAG_PRUNED, encode_nested

from .bounded_parse import PayloadParts, parse_payload, parse_witness, witness_budget
from .decode import split_envelope
from .errors import (
    DifferentStreams,
    InvalidSliceRange,
    MalformedHeader,
    MalformedMessageIndex,
    NonConsecutiveMessages,
    PooledMessageMismatch,
    SlicesNotContiguous,
    WitnessDoesNotCover,
)
from .layout import (
    DEFAULT_MAX_EXTRA_POSITIONS,
    DEFAULT_MAX_SLICE_BYTES,
    DEFAULT_MAX_TREE_DEPTH,
    INDEX_BYTES,
    encode_slice,
    payload_value,
)

__all__ = ["restrict_certified_slice", "append_certified_slice"]


@dataclass(frozen=True, slots=True)
class _OpenedSlice:
    """A slice split into its parsed payload and its verbatim witness and certification."""

    parts: PayloadParts
    messages_begin: int  # first message index; meaningless when ``parts.messages`` is empty
    witness_bytes: bytes
    certification_bytes: bytes

    @property
    def messages_end(self) -> int:
        return self.messages_begin + len(self.parts.messages)


def _open_slice(data: bytes) -> _OpenedSlice:
    """Steps 1, 2 (shape) and 7 (index labels) of the decoder, over bytes that are expected
    to have decoded before; the witness and certification stay undecoded."""
    payload_bytes, witness_bytes, certification_bytes = split_envelope(data, DEFAULT_MAX_SLICE_BYTES)
    parts = parse_payload(payload_bytes, len(witness_bytes), DEFAULT_MAX_TREE_DEPTH)
    begin = 0
    for position, (label, _) in enumerate(parts.messages):
        if len(label) != INDEX_BYTES:
            raise MalformedMessageIndex(f"message label {label.hex()} is not {INDEX_BYTES} bytes")
        index = int.from_bytes(label, "big")
        if position == 0:
            begin = index
        elif index != begin + position:
            raise NonConsecutiveMessages(f"message {index} follows message {begin + position - 1}")
    return _OpenedSlice(parts, begin, witness_bytes, certification_bytes)


def _assemble(dst: str, header_leaf: bytes, messages: list[tuple[bytes, bytes]], witness_bytes: bytes,
              certification_bytes: bytes) -> bytes:
    """``[1, payload, witness, certification]`` with a payload built like the encoder's."""
    payload = payload_value(dst.encode("utf-8"), header_leaf, messages)
    return encode_slice(encode_nested(payload), witness_bytes, certification_bytes)


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
    if not is_u64(msg_begin) or not is_u64(msg_end):
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
    revealed = parse_witness(new.witness_bytes, new.parts.dst.encode("utf-8"), budget, DEFAULT_MAX_TREE_DEPTH).revealed
    for label, value in old.parts.messages:
        node = revealed.get(label)
        if node is None or node[0] != TAG_PRUNED:
            raise WitnessDoesNotCover(f"the newer witness does not reveal message {int.from_bytes(label, 'big')}")
        if node[1] != hash_leaf(value):
            raise PooledMessageMismatch(
                f"pooled message {int.from_bytes(label, 'big')} differs from the newer certified state")
    return _assemble(new.parts.dst, new.parts.header_leaf, list(old.parts.messages) + list(new.parts.messages),
                     new.witness_bytes, new.certification_bytes)
