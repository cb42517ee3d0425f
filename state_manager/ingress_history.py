"""Ingress history: the status of every user message the subnet has seen, by message id.

Lifecycle: ``received`` (inducted) → ``processing`` (execution started) → ``replied`` or
``rejected`` (terminal, carrying the answer) → ``done`` (answer dropped once the message can
no longer be resubmitted, i.e. past its expiry) → forgotten.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from sortedcontainers import SortedDict

from .messages import CanisterId, RejectCode

__all__ = ["IngressState", "IngressStatus", "IngressHistory"]


class IngressState(enum.IntEnum):
    RECEIVED = 0
    PROCESSING = 1
    REPLIED = 2
    REJECTED = 3
    DONE = 4


_TERMINAL = (IngressState.REPLIED, IngressState.REJECTED, IngressState.DONE)


@dataclass(frozen=True, slots=True)
class IngressStatus:
    state: IngressState
    receiver: CanisterId
    source: bytes
    time: int
    expiry_time: int
    reply: bytes | None = None
    reject_code: RejectCode | None = None
    reject_message: str | None = None

    @property
    def is_terminal(self) -> bool:
        return self.state in _TERMINAL


class IngressHistory:
    """``message_id -> IngressStatus``, ordered by id; records changed ids for hashing."""

    __slots__ = ("statuses", "_changed")

    def __init__(self) -> None:
        self.statuses: SortedDict = SortedDict()
        self._changed: set[bytes] = set()

    def get(self, message_id: bytes) -> IngressStatus | None:
        return self.statuses.get(message_id)

    def __contains__(self, message_id: object) -> bool:
        return message_id in self.statuses

    def __len__(self) -> int:
        return len(self.statuses)

    def set(self, message_id: bytes, status: IngressStatus) -> None:
        self.statuses[message_id] = status
        self._changed.add(message_id)

    def prune(self, now: int, forget_after: int) -> None:
        """Terminal statuses past expiry become ``done``; ``done`` ones are forgotten after
        ``expiry + forget_after``. Keeps the history bounded once traffic stops."""
        for message_id in list(self.statuses.keys()):
            status = self.statuses[message_id]
            if status.expiry_time >= now:
                continue
            if status.state is IngressState.DONE:
                if status.expiry_time + forget_after < now:
                    del self.statuses[message_id]
                    self._changed.add(message_id)
            elif status.is_terminal:
                self.set(message_id, IngressStatus(
                    IngressState.DONE, status.receiver, status.source, now, status.expiry_time))

    def take_changed_ids(self) -> list[bytes]:
        changed, self._changed = sorted(self._changed), set()
        return changed

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IngressHistory) and self.statuses == other.statuses

    def __repr__(self) -> str:
        return f"IngressHistory({len(self.statuses)} entries)"
