"""Validation of one decoded stream slice against what this subnet expects (pure).

``validate_stream_slice`` accepts exactly what an honest payload builder produces: a slice
that continues the stream where we are (no gap, no overlap), whose signals only move forward
and only acknowledge messages we sent, with well-formed reject signals, within limits, and
not empty. Every rule is a guarded raise with its own error type.
"""

from __future__ import annotations

from state_manager.streams import ExpectedIndices, RejectReason, StreamSlice

from .errors import XNetError

__all__ = [
    "InvalidSlice", "EmptySlice", "MessageIndexMismatch", "HeaderOutOfBounds", "SignalsRegress",
    "SignalsBeyondStream", "BadRejectSignals", "SliceExceedsLimits", "validate_stream_slice", "trim_stream_slice",
]


class InvalidSlice(XNetError):
    """A slice that must never be inducted (permanent: it will not become valid later)."""


class EmptySlice(InvalidSlice):
    pass


class MessageIndexMismatch(InvalidSlice):
    pass


class HeaderOutOfBounds(InvalidSlice):
    pass


class SignalsRegress(InvalidSlice):
    pass


class SignalsBeyondStream(InvalidSlice):
    pass


class BadRejectSignals(InvalidSlice):
    pass


class SliceExceedsLimits(InvalidSlice):
    """More messages or bytes than a block may take from one subnet (the decoder's
    ``SliceTooLarge`` is about the encoded bytes it is willing to parse)."""


def validate_stream_slice(
    stream_slice: StreamSlice,
    expected: ExpectedIndices,
    own_stream_end: int,
    max_messages: int,
    max_bytes: int,
    *,
    own_reject_signals_begin: int | None = None,
) -> None:
    """Raise ``InvalidSlice`` unless all hold:

    * ``header.begin ≤ messages_begin ≤ messages_end ≤ header.end`` and ``header.begin ≤ header.end``
    * messages present ⇒ ``messages_begin == expected.message_index``
    * ``expected.signal_index ≤ header.signals_end ≤ own_stream_end``
    * reject signal indices strictly increasing, ``< header.signals_end``, known reasons
    * ``|messages| ≤ max_messages`` and ``byte_size ≤ max_bytes``
    * not empty: it carries messages, moves ``signals_end`` forward, or moves the peer's
      ``header.begin`` past ``own_reject_signals_begin`` (the index of the oldest reject
      signal we still keep for the peer's stream, if any), so we can garbage-collect it.
      Without that last case, the reject signal for a peer's last message would stay in
      our stream forever once traffic stops.
    """
    header = stream_slice.header
    begin, end = stream_slice.messages_begin, stream_slice.messages_end
    if not (0 <= header.begin <= header.end and header.begin <= begin <= end <= header.end):
        raise HeaderOutOfBounds(
            f"messages [{begin}, {end}) not inside header range [{header.begin}, {header.end})")
    if stream_slice.messages and begin != expected.message_index:
        raise MessageIndexMismatch(f"slice begins at {begin}, expected {expected.message_index}")
    if header.signals_end < expected.signal_index:
        raise SignalsRegress(f"signals_end {header.signals_end} regresses below {expected.signal_index}")
    if header.signals_end > own_stream_end:
        raise SignalsBeyondStream(
            f"signals_end {header.signals_end} acknowledges messages never sent (our stream ends at {own_stream_end})")
    previous = -1
    for signal in header.reject_signals:
        if not isinstance(signal.reason, RejectReason):
            raise BadRejectSignals(f"unknown reject reason {signal.reason!r}")
        if signal.index <= previous or signal.index >= header.signals_end:
            raise BadRejectSignals(f"reject signal {signal.index} out of order or not below {header.signals_end}")
        previous = signal.index
    if len(stream_slice.messages) > max_messages:
        raise SliceExceedsLimits(f"{len(stream_slice.messages)} messages exceed the limit of {max_messages}")
    size = stream_slice.byte_size()
    if size > max_bytes:
        raise SliceExceedsLimits(f"{size} bytes exceed the limit of {max_bytes}")
    if not stream_slice.messages and header.signals_end == expected.signal_index and not (
            own_reject_signals_begin is not None and header.begin > own_reject_signals_begin):
        raise EmptySlice("slice carries no messages, no new signals and frees none of our reject signals")


def trim_stream_slice(stream_slice: StreamSlice, expected: ExpectedIndices, max_messages: int, max_bytes: int) -> StreamSlice:
    """The part of an honest slice a payload builder can use: messages from the expected
    index on, at most ``max_messages`` of them and within ``max_bytes`` (always at least
    one message if any is available, so one big message cannot stall the stream).
    Returns a header-only slice when nothing new is left; a slice that starts after the
    expected index (a gap) cannot be repaired and comes back unchanged for the validator."""
    if stream_slice.messages_begin > expected.message_index:
        return stream_slice
    skip = expected.message_index - stream_slice.messages_begin
    messages = stream_slice.messages[skip:]
    budget = max_bytes - 64 - 16 * len(stream_slice.header.reject_signals)
    taken = []
    for message in messages[:max_messages]:
        budget -= message.count_bytes()
        if taken and budget < 0:
            break
        taken.append(message)
    begin = min(expected.message_index, stream_slice.messages_end) if taken else stream_slice.messages_end
    return StreamSlice(stream_slice.header, begin, tuple(taken))
