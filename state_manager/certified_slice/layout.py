"""What a certified stream slice is: its version, bounds, labels, payload layout and result.

Wire format (canonical msgpack)::

    CertifiedStreamSlice = [2, payload_tree, witness_tree, certification]

* ``payload_tree`` (``tree_encoding``) holds only ``Labeled``/``Fork``/``Leaf`` nodes::

      Labeled("streams", Labeled(dst, Fork(Labeled("header", Leaf(header_leaf)),
                                           Labeled("messages", <Labeled(index8, Leaf(message_leaf)) ...>))))

  i.e. the stream header and the messages ``[msg_begin, msg_end)`` with balanced forks
  (``payload_value``); a header-only slice has no ``"messages"`` child. ``index8`` is the
  8-byte big-endian message index (``message_label``).
* ``witness_tree`` is a hash tree over the *whole* certified tree that reconstructs to the
  certified root on its own (``witness_plan``): everything is ``Pruned`` except the paths
  to ``/streams/<dst>/header``, to every message index in ``[witness_begin, msg_end)`` and
  to ``/metadata/height``, each of those leaf positions being
  ``Labeled(label, Pruned(hash_leaf(value)))``, so the witness never carries leaf data.
* ``certification`` is ``certification.encode_certification``: a signature on the root. The
  height it claims is authenticated by the witness's ``/metadata/height``, which every slice
  reveals (docs/architecture.md, *Certifications*).

Version 1 carried certifications of the project's own BLS variant (which signed the height)
and revealed ``/metadata/height`` only when the tree had one; it is refused
(``UnsupportedSliceVersion``), as its certifications are.
"""

from __future__ import annotations

from dataclasses import dataclass

from state_manager import certification as cm
from state_manager.encoding import encode_unchecked
from state_manager.streams import StreamSlice
from state_manager.tree_encoding import TAG_FORK, TAG_LABELED, TAG_LEAF

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
    "INDEX_BYTES",
    "CertifiedSlice",
    "message_label",
    "height_leaf",
    "payload_value",
    "balanced_forks",
    "encode_slice",
]

#: 2: certifications of the IC's BLS variant, ``/metadata/height`` always revealed.
SLICE_VERSION = 2
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
#: Length of a message label: the index as 8 bytes big-endian.
INDEX_BYTES = 8


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


def message_label(index: int) -> bytes:
    """The label of message ``index`` under ``/streams/<dst>/messages``: 8 bytes, big-endian."""
    return index.to_bytes(INDEX_BYTES, "big")


def height_leaf(height: int) -> bytes:
    """The leaf at ``/metadata/height`` of a certified tree at ``height``
    (``certification.certified_height_leaf``)."""
    return cm.certified_height_leaf(height)


def balanced_forks(nodes: list[tuple]) -> tuple:
    """Join ``nodes`` (left to right) with forks into a tree of depth ``ceil(log2 n)``."""
    level = nodes
    while len(level) > 1:
        joined = [(TAG_FORK, level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            joined.append(level[-1])
        level = joined
    return level[0]


def payload_value(dst_label: bytes, header_leaf: bytes, messages: list[tuple[bytes, bytes]]) -> tuple:
    """``/streams/<dst>/{header, messages?}`` with the leaf data and balanced forks, in the
    nested-array form of ``tree_encoding``."""
    stream_children = [(TAG_LABELED, HEADER_LABEL, (TAG_LEAF, header_leaf))]
    if messages:
        group = balanced_forks([(TAG_LABELED, label, (TAG_LEAF, value)) for label, value in messages])
        stream_children.append((TAG_LABELED, MESSAGES_LABEL, group))
    return (TAG_LABELED, STREAMS_LABEL, (TAG_LABELED, dst_label, balanced_forks(stream_children)))


def encode_slice(payload: bytes, witness: bytes, certification: bytes) -> bytes:
    """``[SLICE_VERSION, payload, witness, certification]`` (encoded trees and certification)."""
    return encode_unchecked((SLICE_VERSION, payload, witness, certification))
