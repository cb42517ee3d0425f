"""Checks on a fetched, verified slice before it may enter the slice pool (pure).

A slice that decodes and verifies is authentic, but not necessarily an answer to what was
asked: a replica may replay an older certified state, start before or after the requested
message (an overlap or a gap), or — if its subnet's nodes collude — certify signals that
regress or acknowledge messages we never sent. ``check_fetched_slice`` refuses those, so the
refresher can penalise that replica and ask another one; the payload validator checks the
agreed payload again regardless.
"""

from __future__ import annotations

from typing import Optional

from state_manager.certified_slice import CertifiedSlice
from state_manager.streams import ExpectedIndices

from .errors import XNetError
from .slice_pool import PooledSlice

__all__ = ["FetchedSliceRejected", "check_fetched_slice"]


class FetchedSliceRejected(XNetError):
    """A verified slice that is not an answer to the request (stale, gap, overlap, signals)."""


def check_fetched_slice(
    decoded: CertifiedSlice,
    witness_begin: int,
    msg_begin: int,
    expected: ExpectedIndices,
    own_stream_end: int,
    pooled: Optional[PooledSlice],
) -> None:
    """Raise ``FetchedSliceRejected`` unless the answer to a request for messages from
    ``msg_begin`` with a witness from ``witness_begin``:

    * is certified at a height not below the pooled slice's (no replay of older states);
    * carries messages beginning exactly at ``msg_begin``, if it carries any (no gap, no overlap);
    * has a witness reaching down to ``witness_begin`` when that is below ``msg_begin`` (so it
      can be appended to the pooled messages);
    * has ``expected.signal_index <= header.signals_end <= own_stream_end`` (signals never
      regress, never acknowledge messages we did not send).
    """
    s = decoded.stream_slice
    if pooled is not None and decoded.certification.height < pooled.certification_height:
        raise FetchedSliceRejected(
            f"certified at height {decoded.certification.height}, older than the pooled {pooled.certification_height}")
    if s.messages and s.messages_begin != msg_begin:
        raise FetchedSliceRejected(f"messages begin at {s.messages_begin}, {msg_begin} was asked for")
    if s.messages and witness_begin < msg_begin and decoded.witness_begin > witness_begin:
        raise FetchedSliceRejected(f"witness begins at {decoded.witness_begin}, {witness_begin} was asked for")
    signals_end = s.header.signals_end
    if signals_end < expected.signal_index:
        raise FetchedSliceRejected(f"signals_end {signals_end} regresses below {expected.signal_index}")
    if signals_end > own_stream_end:
        raise FetchedSliceRejected(f"signals_end {signals_end} acknowledges messages never sent (end {own_stream_end})")
