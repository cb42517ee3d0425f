"""Streams between subnets, their signals and the slices peers send of them.

Our stream to subnet X holds (a) the gap-free messages ``[begin, end)`` we send to X and
(b) the signals for X's stream to us: ``signals_end`` is the index of the next message we
expect from X; every index below it is accepted except those listed in ``reject_signals``.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass
from typing import Iterable

from .errors import StateManagerError
from .messages import RejectCode, RequestOrResponse

__all__ = [
    "RejectReason", "reject_code_for", "RejectSignal", "StreamHeader", "Stream", "StreamSlice",
    "ExpectedIndices", "StreamError",
]


class StreamError(StateManagerError):
    """A stream operation that would break the gap-free or signal invariants."""


class RejectReason(enum.IntEnum):
    """Why a receiving subnet rejected a message (travels back as a reject signal)."""

    CANISTER_MIGRATING = 1
    CANISTER_NOT_FOUND = 2
    CANISTER_STOPPED = 3
    CANISTER_STOPPING = 4
    QUEUE_FULL = 5
    OUT_OF_MEMORY = 6
    UNKNOWN = 7


_REJECT_CODES = {
    RejectReason.CANISTER_MIGRATING: RejectCode.SYS_TRANSIENT,
    RejectReason.CANISTER_NOT_FOUND: RejectCode.DESTINATION_INVALID,
    RejectReason.CANISTER_STOPPED: RejectCode.CANISTER_ERROR,
    RejectReason.CANISTER_STOPPING: RejectCode.CANISTER_ERROR,
    RejectReason.QUEUE_FULL: RejectCode.SYS_TRANSIENT,
    RejectReason.OUT_OF_MEMORY: RejectCode.CANISTER_ERROR,
    RejectReason.UNKNOWN: RejectCode.SYS_FATAL,
}


def reject_code_for(reason: RejectReason) -> RejectCode:
    """The reject code of the synthetic reject response generated for a rejected request."""
    return _REJECT_CODES[reason]


@dataclass(frozen=True, slots=True, order=True)
class RejectSignal:
    index: int
    reason: RejectReason


@dataclass(frozen=True, slots=True)
class StreamHeader:
    """``{begin, end, signals_end, reject_signals}`` — what a slice always carries."""

    begin: int
    end: int
    signals_end: int
    reject_signals: tuple[RejectSignal, ...] = ()


@dataclass(frozen=True, slots=True)
class ExpectedIndices:
    """Per peer subnet: the next message index and the next signal index we expect from it."""

    message_index: int
    signal_index: int


class Stream:
    """Our outgoing stream to one subnet, plus the signals for that subnet's stream to us."""

    __slots__ = ("begin", "messages", "byte_size", "signals_end", "reject_signals")

    def __init__(
        self,
        begin: int = 0,
        messages: Iterable[RequestOrResponse] = (),
        signals_end: int = 0,
        reject_signals: Iterable[RejectSignal] = (),
    ) -> None:
        self.begin = begin
        self.messages: deque[RequestOrResponse] = deque(messages)
        self.byte_size = sum(m.count_bytes() for m in self.messages)
        self.signals_end = signals_end
        self.reject_signals: deque[RejectSignal] = deque(reject_signals)

    @property
    def end(self) -> int:
        return self.begin + len(self.messages)

    def header(self) -> StreamHeader:
        return StreamHeader(self.begin, self.end, self.signals_end, tuple(self.reject_signals))

    def push(self, message: RequestOrResponse) -> int:
        """Append ``message`` at index ``end``; return that index."""
        self.messages.append(message)
        self.byte_size += message.count_bytes()
        return self.begin + len(self.messages) - 1

    def message_at(self, index: int) -> RequestOrResponse:
        if not self.begin <= index < self.end:
            raise StreamError(f"index {index} outside [{self.begin}, {self.end})")
        return self.messages[index - self.begin]

    def discard_messages_before(self, new_begin: int) -> list[tuple[int, RequestOrResponse]]:
        """Garbage-collect messages below ``new_begin``; return them with their indices."""
        if not self.begin <= new_begin <= self.end:
            raise StreamError(f"cannot move begin from {self.begin} to {new_begin} (end {self.end})")
        dropped = []
        while self.begin < new_begin:
            message = self.messages.popleft()
            self.byte_size -= message.count_bytes()
            dropped.append((self.begin, message))
            self.begin += 1
        return dropped

    def push_accept_signal(self) -> None:
        self.signals_end += 1

    def push_reject_signal(self, reason: RejectReason) -> None:
        self.reject_signals.append(RejectSignal(self.signals_end, reason))
        self.signals_end += 1

    def discard_signals_before(self, index: int) -> None:
        """Drop reject signals below ``index`` (the peer has garbage-collected those messages)."""
        while self.reject_signals and self.reject_signals[0].index < index:
            self.reject_signals.popleft()

    def is_idle(self) -> bool:
        return not self.messages and not self.reject_signals

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Stream)
            and self.begin == other.begin
            and self.signals_end == other.signals_end
            and self.messages == other.messages
            and self.reject_signals == other.reject_signals
        )

    def __repr__(self) -> str:
        return (
            f"Stream(begin={self.begin}, messages={list(self.messages)!r}, "
            f"signals_end={self.signals_end}, reject_signals={list(self.reject_signals)!r})"
        )


@dataclass(frozen=True, slots=True)
class StreamSlice:
    """A peer's stream to us as received: its header and messages ``[messages_begin, +len)``.

    A header-only slice carries signals but no messages (``messages == ()``).
    """

    header: StreamHeader
    messages_begin: int
    messages: tuple[RequestOrResponse, ...] = ()

    @property
    def messages_end(self) -> int:
        return self.messages_begin + len(self.messages)

    def byte_size(self) -> int:
        return 64 + 16 * len(self.header.reject_signals) + sum(m.count_bytes() for m in self.messages)
