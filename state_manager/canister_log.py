"""A canister's log: what ``self.log(text)`` and the system's trap records leave behind.

Modelled on the IC's canister logging. A record is ``(index, timestamp_nanos, content)``:
``index`` numbers every record the canister ever logged (0, 1, 2, ... — it keeps counting
when old records are dropped or the log is purged), ``timestamp_nanos`` is the batch time of
the message that logged it, ``content`` its text.

The log is bounded like the IC's (``Limits.max_canister_log_bytes``, 4 KiB by default): a
record's size is its content's UTF-8 bytes plus ``RECORD_OVERHEAD_BYTES`` for its index and
timestamp (as the IC counts it), and the sizes of the records kept sum to at most the bound
(so their texts do too, and an empty text still takes room). Appending drops the oldest
records until the log fits (``keep_newest``); a text too long for an otherwise empty log
keeps only its first ``bound - RECORD_OVERHEAD_BYTES`` bytes, cut on a character boundary
(``cut_log_text``).

``CanisterLog`` is immutable: every change makes a new value, so a state tree can tell a
changed log by identity. ``LogBuffer`` collects one message's records, bounded by the same
rule as they come, and is merged into the log only if the message commits.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Iterable

__all__ = [
    "RECORD_OVERHEAD_BYTES", "LogRecord", "CanisterLog", "EMPTY_LOG", "LogBuffer", "record_size", "cut_log_text",
    "keep_newest", "append_log",
]

#: What a record costs besides its text: its index and timestamp (two u64, as on the IC).
RECORD_OVERHEAD_BYTES = 16


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One record: its ``index``, the batch time it was logged at, and its text."""

    index: int
    timestamp_nanos: int
    content: str


def record_size(content: str) -> int:
    """A record's size in the log's bound: UTF-8 bytes of ``content`` plus the overhead."""
    return RECORD_OVERHEAD_BYTES + len(content.encode("utf-8"))


def cut_log_text(text: str, max_bytes: int) -> str:
    """``text``, or its first ``max_bytes - RECORD_OVERHEAD_BYTES`` UTF-8 bytes (cut on a
    character boundary) when a record of the whole text would not fit in ``max_bytes``."""
    room = max(max_bytes - RECORD_OVERHEAD_BYTES, 0)
    raw = text.encode("utf-8")
    if len(raw) <= room:
        return text
    return raw[:room].decode("utf-8", errors="ignore")


@dataclass(frozen=True, slots=True)
class CanisterLog:
    """The records kept, oldest first, and the index the next record gets. ``size`` is the
    records' total ``record_size`` (derived; ``CanisterLog.of`` computes it)."""

    next_index: int = 0
    records: tuple[LogRecord, ...] = ()
    size: int = 0

    @classmethod
    def of(cls, next_index: int, records: Iterable[LogRecord]) -> "CanisterLog":
        kept = tuple(records)
        return cls(next_index, kept, sum(record_size(r.content) for r in kept))

    def purged(self) -> "CanisterLog":
        """No records; indices go on from ``next_index`` (reinstall)."""
        return CanisterLog(self.next_index) if self.records else self


EMPTY_LOG = CanisterLog()


def keep_newest(records: list[LogRecord], size: int, max_bytes: int) -> tuple[list[LogRecord], int]:
    """The bound's one rule: drop the oldest of ``records`` (total size ``size``) until the
    rest fit in ``max_bytes``; the records kept and their size."""
    dropped = 0
    while size > max_bytes and dropped < len(records):
        size -= record_size(records[dropped].content)
        dropped += 1
    return records[dropped:], size


class LogBuffer:
    """The records one message logs, not yet in the canister's log. Bounded as they come
    (the same rule as the log's, so merging gives what logging them one by one would),
    so a message that logs in a loop holds at most ``max_bytes`` of them."""

    __slots__ = ("max_bytes", "texts", "size", "count")

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.texts: deque[str] = deque()
        self.size = 0
        self.count = 0  # records logged, the dropped ones included (each takes an index)

    def add(self, text: str) -> None:
        text = cut_log_text(text, self.max_bytes)
        texts = self.texts
        texts.append(text)
        self.size += record_size(text)
        self.count += 1
        while self.size > self.max_bytes and texts:
            self.size -= record_size(texts.popleft())

    def merged_into(self, log: CanisterLog, timestamp_nanos: int) -> CanisterLog:
        """``log`` followed by these records (logged at ``timestamp_nanos``), within the bound."""
        if not self.count:
            return log
        dropped = self.count - len(self.texts)
        first = log.next_index + dropped
        new = [LogRecord(first + i, timestamp_nanos, text) for i, text in enumerate(self.texts)]
        if dropped:   # a record newer than all of the log's was dropped: so are they
            return CanisterLog(log.next_index + self.count, tuple(new), self.size)
        kept, size = keep_newest(list(log.records) + new, log.size + self.size, self.max_bytes)
        return CanisterLog(log.next_index + self.count, tuple(kept), size)


def append_log(log: CanisterLog, timestamp_nanos: int, text: str, max_bytes: int) -> CanisterLog:
    """``log`` with one more record (the system's own, such as a trap's), within the bound."""
    buffer = LogBuffer(max_bytes)
    buffer.add(text)
    return buffer.merged_into(log, timestamp_nanos)
