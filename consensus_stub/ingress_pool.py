"""One node's pool of validated ingress messages waiting to be put into a block.

The shell decodes and authenticates signed envelopes (``replica.client.envelope``) and hands the
resulting ``Ingress`` values in with ``add``. The pool

* deduplicates by message id — also against messages it already handed to a finalized
  block (``remove``), until those expire;
* refuses messages that are expired or expire too far ahead, and stops at its size bounds;
* ``select``s, in arrival order, the messages for a block within a byte and count budget,
  skipping expired ones and those the caller excludes (already in the ingress history, or
  for a canister this subnet does not host at the block's registry version);
* ``purge_expired`` drops what can never be inducted any more.

Pure: the current time (nanoseconds) is an argument of every call that needs it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable

from state_manager.messages import Ingress

__all__ = ["Admission", "IngressPool"]


class Admission(enum.Enum):
    """The verdict on one message: ``ADDED``, or why it was refused. A member's value is
    ``(reason, description)``: ``reason`` is the stable, machine-readable code the ingress
    API reports a refusal with (``replica.ingress.refusal_for`` turns a verdict into its
    typed error), ``description`` says it in words."""

    ADDED = ("added", "added to the ingress pool")
    DUPLICATE = ("duplicate", "duplicate message id")
    EXPIRED = ("expired", "message expired")
    EXPIRY_TOO_FAR = ("expiry_too_far", "expiry too far in the future")
    TOO_LARGE = ("too_large", "message exceeds the ingress size limit")
    POOL_FULL = ("pool_full", "ingress pool is full")
    # The node's checks of the receiver against its state and registry (the pool knows neither).
    UNKNOWN_CANISTER = ("unknown_canister", "canister not found")
    CANISTER_NOT_ON_SUBNET = ("canister_not_on_subnet", "canister is not on this subnet")

    @property
    def reason(self) -> str:
        return self.value[0]

    @property
    def description(self) -> str:
        return self.value[1]


class IngressPool:
    """Validated ingress in arrival order, keyed by message id."""

    def __init__(self, *, max_messages: int = 10_000, max_bytes: int = 64 * 1024 * 1024) -> None:
        if type(max_messages) is not int or max_messages < 1:
            raise ValueError("max_messages must be a positive int")
        if type(max_bytes) is not int or max_bytes < 1:
            raise ValueError("max_bytes must be a positive int")
        self._max_messages = max_messages
        self._max_bytes = max_bytes
        self._messages: dict[bytes, Ingress] = {}   # insertion order = arrival order
        self._bytes = 0
        self._included: dict[bytes, int] = {}       # message id -> expiry, handed to a block

    def __len__(self) -> int:
        return len(self._messages)

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._messages

    @property
    def byte_size(self) -> int:
        return self._bytes

    def add(self, ingress: Ingress, now: int, max_ttl_ns: int, max_ingress_bytes: int) -> Admission:
        """Admit ``ingress`` unless it is a duplicate, expired (``expiry < now``), expires after
        ``now + max_ttl_ns``, is larger than ``max_ingress_bytes``, or the pool is full."""
        mid = ingress.message_id
        if mid in self._messages or mid in self._included:
            return Admission.DUPLICATE
        if ingress.expiry_time < now:
            return Admission.EXPIRED
        if ingress.expiry_time > now + max_ttl_ns:
            return Admission.EXPIRY_TOO_FAR
        size = ingress.count_bytes()
        if size > max_ingress_bytes:
            return Admission.TOO_LARGE
        if len(self._messages) >= self._max_messages or self._bytes + size > self._max_bytes:
            return Admission.POOL_FULL
        self._messages[mid] = ingress
        self._bytes += size
        return Admission.ADDED

    def select(
        self,
        now: int,
        byte_budget: int,
        max_messages: int,
        excluded: Callable[[Ingress], bool] = lambda _ingress: False,
    ) -> tuple[Ingress, ...]:
        """Messages for a block made at time ``now``: in arrival order, not expired, not
        ``excluded``, at most ``max_messages`` and ``byte_budget`` bytes (``count_bytes``)."""
        chosen: list[Ingress] = []
        used = 0
        for mid, ingress in self._messages.items():
            if len(chosen) >= max_messages:
                break
            if ingress.expiry_time < now or excluded(ingress):
                continue
            size = ingress.count_bytes()
            if used + size > byte_budget:
                continue
            chosen.append(ingress)
            used += size
        return tuple(chosen)

    def remove(self, messages: Iterable[Ingress]) -> None:
        """Forget messages a finalized block carried; re-adding them is a duplicate until they expire."""
        for ingress in messages:
            held = self._messages.pop(ingress.message_id, None)
            if held is not None:
                self._bytes -= held.count_bytes()
            self._included[ingress.message_id] = ingress.expiry_time

    def purge_expired(self, now: int) -> int:
        """Drop messages with ``expiry < now`` (and the ids of included ones); return how many."""
        expired = [mid for mid, ingress in self._messages.items() if ingress.expiry_time < now]
        for mid in expired:
            self._bytes -= self._messages.pop(mid).count_bytes()
        for mid in [mid for mid, expiry in self._included.items() if expiry < now]:
            del self._included[mid]
        return len(expired)
