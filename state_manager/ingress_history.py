"""Ingress history: the status of every user message the subnet has seen, by message id.

Lifecycle: ``received`` (inducted) → ``processing`` (execution started) → ``replied`` or
``rejected`` (terminal, carrying the answer) → ``done`` (answer dropped once the message can
no longer be resubmitted, i.e. past its expiry) → forgotten.
"""

from __future__ import annotations

import enum
import heapq
from dataclasses import dataclass

from mypy_extensions import mypyc_attr

from .key_ordered import KeyOrderedDict
from .messages import CanisterId, RejectCode

__all__ = ["IngressState", "IngressStatus", "IngressHistory"]


class IngressState(enum.IntEnum):
    RECEIVED = 0
    PROCESSING = 1
    REPLIED = 2
    REJECTED = 3
    DONE = 4


_TERMINAL = (IngressState.REPLIED, IngressState.REJECTED, IngressState.DONE)


# An ordinary class even when this module is compiled (see setup.py): a compiled frozen
# dataclass cannot be deep-copied, and statuses are shared, copied and compared freely.
@mypyc_attr(native_class=False)
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
    """``message_id -> IngressStatus``, iterated by id; records changed ids for hashing.

    ``prune`` must not scan the whole history every round, so two min-heaps of
    ``(expiry_time, message_id)`` index the statuses it can change: answered ones
    (replied/rejected) and ``done`` ones. Entries are pushed on ``set`` and never removed
    there; an entry whose status has since changed class or expiry is stale and skipped.
    """

    __slots__ = ("statuses", "_changed", "_answered", "_done")

    def __init__(self) -> None:
        self.statuses = KeyOrderedDict()
        self._changed: set[bytes] = set()
        self._answered: list[tuple[int, bytes]] = []
        self._done: list[tuple[int, bytes]] = []

    def get(self, message_id: bytes) -> IngressStatus | None:
        return self.statuses.get(message_id)

    def __contains__(self, message_id: object) -> bool:
        return message_id in self.statuses

    def __len__(self) -> int:
        return len(self.statuses)

    def set(self, message_id: bytes, status: IngressStatus) -> None:
        self.statuses[message_id] = status
        self._changed.add(message_id)
        state = status.state
        if state is IngressState.DONE:
            heapq.heappush(self._done, (status.expiry_time, message_id))
        elif state is IngressState.REPLIED or state is IngressState.REJECTED:
            heapq.heappush(self._answered, (status.expiry_time, message_id))

    def prune(self, now: int, forget_after: int) -> None:
        """Terminal statuses past expiry become ``done``; ``done`` ones are forgotten after
        ``expiry + forget_after``. Keeps the history bounded once traffic stops.

        Forgetting runs first, so a status that becomes ``done`` in this call is forgotten
        in a later one at the earliest. Each status's outcome depends only on itself, so
        the heaps' visiting order does not matter."""
        statuses, changed = self.statuses, self._changed
        # ``done`` and past both ``now`` and ``now - forget_after``: forgotten.
        done, cutoff = self._done, min(now, now - forget_after)
        while done and done[0][0] < cutoff:
            expiry, message_id = heapq.heappop(done)
            status = statuses.get(message_id)
            if status is not None and status.state is IngressState.DONE and status.expiry_time == expiry:
                del statuses[message_id]
                changed.add(message_id)
        # Replied or rejected and past expiry: the answer is dropped.
        answered = self._answered
        while answered and answered[0][0] < now:
            expiry, message_id = heapq.heappop(answered)
            status = statuses.get(message_id)
            if status is not None and status.expiry_time == expiry and (
                    status.state is IngressState.REPLIED or status.state is IngressState.REJECTED):
                self.set(message_id, IngressStatus(
                    IngressState.DONE, status.receiver, status.source, now, status.expiry_time))

    def take_changed_ids(self) -> list[bytes]:
        changed, self._changed = sorted(self._changed), set()
        return changed

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IngressHistory) and self.statuses == other.statuses

    def __repr__(self) -> str:
        return f"IngressHistory({len(self.statuses)} entries)"
