"""Which positions of the certified tree a slice's witness reveals.

A slice of ``/streams/<dst>`` whose witness covers the messages ``[witness_begin, msg_end)``
reveals, each as ``Labeled(label, Pruned(hash_leaf(value)))``:

* ``/streams/<dst>/header``;
* ``/streams/<dst>/messages/<i>`` for every ``witness_begin <= i < msg_end`` (none when the
  range is empty): ``witness_begin < msg_begin`` lets a receiver that holds messages
  ``[witness_begin, msg_begin)`` from an earlier slice append the new ones;
* ``/metadata/height``, so receivers can check the height the certification claims
  (``CertificationHeightMismatch``): the certification signs the root only.

Everything else is pruned (``trie_witness.witness``; every planned label exists: the encoder
checked the stream, its header and messages, and that ``/metadata/height`` exists). ``witness_budget`` in
``bounded_parse`` bounds what such a witness can hold; the decoder refuses anything more.
"""

from __future__ import annotations

from state_manager.labeled_trie import LabeledTrie
from state_manager.trie_witness import PRUNED_VALUE, WitnessPlan, witness

from .layout import HEADER_LABEL, HEIGHT_LABEL, MESSAGES_LABEL, METADATA_LABEL, STREAMS_LABEL, message_label

__all__ = ["slice_witness_plan", "slice_witness"]


def slice_witness_plan(dst_label: bytes, witness_begin: int, msg_end: int, reveal_height: bool) -> WitnessPlan:
    """The plan of the module docstring for ``/streams/<dst_label>``."""
    stream: dict = {HEADER_LABEL: PRUNED_VALUE}
    if witness_begin < msg_end:
        stream[MESSAGES_LABEL] = WitnessPlan({}, message_label(witness_begin), message_label(msg_end))
    top: dict = {STREAMS_LABEL: WitnessPlan({dst_label: WitnessPlan(stream)})}
    if reveal_height:
        top[METADATA_LABEL] = WitnessPlan({HEIGHT_LABEL: PRUNED_VALUE})
    return WitnessPlan(top)


def slice_witness(certified_tree: LabeledTrie, dst_label: bytes, witness_begin: int, msg_end: int,
                  reveal_height: bool) -> tuple:
    """The witness (nested-array form) of ``slice_witness_plan`` over ``certified_tree``."""
    return witness(certified_tree, slice_witness_plan(dst_label, witness_begin, msg_end, reveal_height))
