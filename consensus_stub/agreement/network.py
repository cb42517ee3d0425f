"""A subnet's agreement nodes on a simulated network (pure: no threads, no wall clock, no ``random``).

One network carries the protocol's messages wherever a subnet's nodes share a process: the
agreement simulation behind the protocol's tests (``simulation.Simulation``) and the
in-process subnet behind ``replica.testing`` (``replica.inprocess.subnet.Subnet``). It is the
counterpart of the gRPC transport of node processes (``replica.node.agreement_transport``):
the same protocol code, the same wire format, a different carrier.

* **Messages.** Every ``Send`` / ``Broadcast`` is encoded with ``encode_message``; each
  receiver gets ``decode_message`` of those bytes (decoded once per transmission and shared
  by its receivers: decoding is a pure function of the bytes). Deliveries are events on a
  queue ordered by ``(time, sequence number)``, so a run is one fixed order.
* **Time.** ``now`` is simulated agreement time in nanoseconds (``start_ns`` when the network
  is built). ``run_until`` delivers what is due and, when nothing is in flight before a node's
  ``wakeup_at``, moves ``now`` there and calls its ``on_timer``: timeouts cost no wall time.
* **Schedules.** Without a ``Schedule`` every message arrives at once, in send order. With
  one (a seed, a delay range, duplicates, losses, ``Partition``s, ``Crash``es) each
  transmission is delayed by a seeded draw from ``[min_delay_ns, max_delay_ns]`` (so messages
  overtake each other), maybe duplicated or lost; a message crossing a partition when sent or
  when due is lost; a crashed node neither sends nor receives and restarts
  (``Crash.restart_ns``) through the ``boot`` callback, which builds it from what it had
  persisted. The generator is ``SplitMix64``: the same seed and the same calls give the same
  run.
* **Down nodes.** ``stop(node)`` / ``start(node)``: a stopped node is crashed here — its
  in-memory agreement state is dropped, messages to it are lost — and ``start`` boots it
  again through ``boot``.

Outputs other than ``Send`` / ``Broadcast`` go to ``on_output(node_id, output)`` in order.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from .interface import Broadcast, Output, Send
from .messages import Message, decode_message, encode_message
from .protocol import AgreementNode

__all__ = ["MS", "SplitMix64", "Partition", "Crash", "Schedule", "AgreementNetwork"]

MS = 1_000_000
_MASK = (1 << 64) - 1

_DELIVER, _TIMER, _CRASH, _RESTART = 0, 1, 2, 3


class SplitMix64:
    """A tiny deterministic generator (Steele, Lea, Flood 2014): the same seed, the same numbers."""

    def __init__(self, seed: int) -> None:
        self._state = seed & _MASK

    def next_u64(self) -> int:
        self._state = (self._state + 0x9E3779B97F4A7C15) & _MASK
        z = self._state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def below(self, bound: int) -> int:
        """A number in ``[0, bound)`` (the modulo bias of a 64-bit draw is negligible here)."""
        return self.next_u64() % bound

    def chance(self, per_mille: int) -> bool:
        return per_mille > 0 and self.below(1000) < per_mille


@dataclass(frozen=True, slots=True)
class Partition:
    """During ``[start_ns, end_ns)`` only nodes of the same group reach each other."""

    start_ns: int
    end_ns: int
    groups: tuple[tuple[str, ...], ...]

    def separates(self, a: str, b: str, now: int) -> bool:
        if not self.start_ns <= now < self.end_ns:
            return False
        return not any(a in group and b in group for group in self.groups)


@dataclass(frozen=True, slots=True)
class Crash:
    """``node_id`` stops at ``at_ns``; it restarts from its disk at ``restart_ns`` unless ``None``."""

    node_id: str
    at_ns: int
    restart_ns: Optional[int] = None


@dataclass(frozen=True, slots=True)
class Schedule:
    """A seeded adversarial network (module docstring)."""

    seed: int
    min_delay_ns: int = 1 * MS
    max_delay_ns: int = 50 * MS
    duplicate_per_mille: int = 0
    drop_per_mille: int = 0
    partitions: tuple[Partition, ...] = ()
    crashes: tuple[Crash, ...] = ()

    def __post_init__(self) -> None:
        if not 0 <= self.min_delay_ns <= self.max_delay_ns:
            raise ValueError("need 0 <= min_delay_ns <= max_delay_ns")


class _Wire:
    """One transmission's bytes, decoded at most once for all its receivers."""

    __slots__ = ("data", "_message")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._message: Optional[Message] = None

    @property
    def message(self) -> Message:
        if self._message is None:
            self._message = decode_message(self.data)
        return self._message


class AgreementNetwork:
    """The nodes ``node_ids`` on one deterministic network (module docstring)."""

    def __init__(
        self,
        node_ids: Sequence[str],
        *,
        boot: Callable[[str, int], AgreementNode],
        on_output: Callable[[str, Output], None],
        schedule: Optional[Schedule] = None,
        start_ns: int = 0,
    ) -> None:
        self.node_ids = tuple(node_ids)
        self.schedule = schedule
        self._boot = boot
        self._on_output = on_output
        self._rng = SplitMix64(schedule.seed) if schedule is not None else None
        self.now = start_ns
        self._queue: list[tuple[int, int, int, str, object]] = []
        self._seq = 0
        self._timer_at: dict[str, int] = {}
        # nodes whose wakeup_at may have changed: re-read once time is about to move on
        self._dirty: dict[str, None] = {}
        self._changes = 0   # outputs handed to on_output, crashes and restarts: what done() reads
        #: The running nodes' protocol state (``None``: down).
        self.nodes: dict[str, Optional[AgreementNode]] = {n: None for n in self.node_ids}
        self._stopped: set[str] = set()
        self._crashed: set[str] = set()   # by the schedule
        self.messages_sent = 0
        self.messages_delivered = 0
        self.messages_lost = 0
        if schedule is not None:
            for crash in schedule.crashes:
                if crash.node_id not in self.nodes:
                    raise ValueError(f"the schedule crashes {crash.node_id!r}, not a node here")
                self._push(crash.at_ns, _CRASH, crash.node_id, None)
                if crash.restart_ns is not None:
                    if crash.restart_ns <= crash.at_ns:
                        raise ValueError("a node restarts after it crashed")
                    self._push(crash.restart_ns, _RESTART, crash.node_id, None)

    # -- membership -----------------------------------------------------------------------

    def running(self) -> list[str]:
        return [n for n, node in self.nodes.items() if node is not None]

    def is_running(self, node_id: str) -> bool:
        return self.nodes[node_id] is not None

    def start(self, node_id: str) -> None:
        """Run ``node_id`` (booting it now) unless the schedule has it crashed."""
        self._stopped.discard(node_id)
        if self.nodes[node_id] is None and node_id not in self._crashed:
            self._start_node(node_id)

    def stop(self, node_id: str) -> None:
        """Crash ``node_id`` until ``start``: its agreement state is gone, messages to it are lost."""
        self._stopped.add(node_id)
        self._kill(node_id)

    def _start_node(self, node_id: str) -> None:
        node = self._boot(node_id, self.now)
        self.nodes[node_id] = node
        self._apply(node_id, node.start(self.now))

    def _kill(self, node_id: str) -> None:
        self.nodes[node_id] = None
        self._timer_at.pop(node_id, None)

    # -- running --------------------------------------------------------------------------

    def run_until(self, done: Callable[[], bool], deadline_ns: int) -> bool:
        """Process events in order up to ``deadline_ns``; True as soon as ``done()`` holds
        (then ``now`` stays at that event), else False with ``now`` at the deadline.

        ``done`` is asked again only after an event that produced a non-transport output
        (``Finalized``, ``Persist``, ...) or crashed or restarted a node. Timers are re-read
        (``wakeup_at``) once per node and instant: before time moves past the instant."""
        if done():
            return True
        queue = self._queue
        seen = self._changes
        while True:
            if self._dirty and (not queue or queue[0][0] > self.now):
                self._arm_timers()
            if not queue or queue[0][0] > deadline_ns:
                break
            at, _, kind, node_id, payload = heapq.heappop(queue)
            if at > self.now:
                self.now = at
            self._handle(kind, node_id, payload)
            if self._changes != seen:
                seen = self._changes
                if done():
                    return True
        self.now = max(self.now, deadline_ns)
        return False

    def _arm_timers(self) -> None:
        dirty, self._dirty = self._dirty, {}
        for node_id in dirty:
            node = self.nodes[node_id]
            if node is not None:
                at = max(node.wakeup_at, self.now)
                if self._timer_at.get(node_id) != at:
                    self._timer_at[node_id] = at
                    self._push(at, _TIMER, node_id, at)

    def _push(self, at: int, kind: int, node_id: str, payload: object) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at, self._seq, kind, node_id, payload))

    def _handle(self, kind: int, node_id: str, payload: object) -> None:
        if kind == _CRASH:
            self._crashed.add(node_id)
            self._kill(node_id)
            self._changes += 1
            return
        if kind == _RESTART:
            self._crashed.discard(node_id)
            self._changes += 1
            if self.nodes[node_id] is None and node_id not in self._stopped:
                self._start_node(node_id)
            return
        node = self.nodes[node_id]
        if node is None:
            if kind == _DELIVER:
                self.messages_lost += 1
            return
        if kind == _TIMER:
            if self._timer_at.get(node_id) == payload:
                del self._timer_at[node_id]
                self._apply(node_id, node.on_timer(self.now))
            return
        sender, wire = payload  # type: ignore[misc]
        if self._is_cut(sender, node_id):
            self.messages_lost += 1
            return
        self.messages_delivered += 1
        self._apply(node_id, node.on_message(wire.message, self.now))

    def _is_cut(self, a: str, b: str) -> bool:
        schedule = self.schedule
        return schedule is not None and any(p.separates(a, b, self.now) for p in schedule.partitions)

    def _apply(self, node_id: str, outputs: list[Output]) -> None:
        """Carry out a node's outputs in order; its timer is re-read before time moves on."""
        for output in outputs:
            kind = type(output)
            if kind is Broadcast:
                if len(self.node_ids) > 1:   # a subnet of one node has nobody to tell
                    wire = _Wire(encode_message(output.message))
                    for peer in self.node_ids:
                        if peer != node_id:
                            self._transmit(node_id, peer, wire)
            elif kind is Send:
                self._transmit(node_id, output.to, _Wire(encode_message(output.message)))
            else:
                self._changes += 1
                self._on_output(node_id, output)
        self._dirty[node_id] = None

    def _transmit(self, sender: str, receiver: str, wire: _Wire) -> None:
        self.messages_sent += 1
        schedule = self.schedule
        if schedule is None:
            self._push(self.now, _DELIVER, receiver, (sender, wire))
            return
        rng = self._rng
        if self._is_cut(sender, receiver) or rng.chance(schedule.drop_per_mille):  # type: ignore[union-attr]
            self.messages_lost += 1
            return
        copies = 2 if rng.chance(schedule.duplicate_per_mille) else 1  # type: ignore[union-attr]
        for _ in range(copies):
            delay = schedule.min_delay_ns + rng.below(schedule.max_delay_ns - schedule.min_delay_ns + 1)  # type: ignore[union-attr]
            self._push(self.now + delay, _DELIVER, receiver, (sender, wire))
