"""A subnet's agreement nodes on a simulated network, under a seeded adversarial schedule (pure).

Virtual time in nanoseconds and a seeded generator (SplitMix64, so no ``random``) decide
everything: each message is encoded, then delivered after a random delay in
``[min_delay_ns, max_delay_ns]`` (so messages overtake each other), possibly twice
(``duplicate_per_mille``) or never (``drop_per_mille``); ``Partition``s cut the links between
groups of nodes for a while (a message crossing a cut when sent or when due is lost);
``Crash``es stop a node at an instant — its in-memory state is gone, its "disk" (the
``Persist``ed artifacts and the ``Finalized`` blocks) stays — and may restart it from that
disk. Events at the same instant run in the order they were scheduled, so a seed and a
schedule give one run, bit for bit.

Every ``Finalized`` output is checked against every other node's at once: two different
blocks final at one height raise ``SafetyViolation``. The same drivers (``on_message``,
``on_timer`` at ``wakeup_at``, outputs in order) are what a node process runs over gRPC.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

from ..block import GENESIS_PARENT_HASH, Block
from ..notary import BlockNotYetValid, TimeRegresses
from ..registry import SubnetRecord
from .messages import AgreementError, artifact_height, decode_message, encode_message
from .protocol import (
    AgreementConfig, AgreementNode, BlockContext, Broadcast, Finalized, Persist, ProposeFn, Refused, Send,
    ValidateFn, Verifier,
)

__all__ = [
    "SplitMix64", "Partition", "Crash", "Schedule", "SafetyViolation", "Simulation",
    "stub_propose", "stub_validate", "SIM_START_NS", "MS",
]

MS = 1_000_000
#: The simulation's clock starts here (late 2023 in Unix nanoseconds), so block times look real.
SIM_START_NS = 1_700_000_000 * 10**9
_MASK = (1 << 64) - 1


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


class SafetyViolation(AgreementError):
    """Two nodes finalized different blocks at one height, or one node skipped a height or
    finalized a block whose parent is not its previous one."""


def stub_propose(context: BlockContext, now: int) -> Block:
    """An empty block at ``max(now, parent time)``: what a maker with empty pools proposes."""
    time = max(now, context.parent.time if context.parent is not None else 0)
    return Block(context.height, context.parent_hash, time, 1, (), (), context.maker, context.rank)


def stub_validate(block: Block, context: BlockContext, now: int) -> None:
    """The notary's time rules only: monotonic block time, not ahead of our clock."""
    if context.parent is not None and block.time < context.parent.time:
        raise TimeRegresses(f"block time {block.time} before its parent's {context.parent.time}")
    if block.time > now:
        raise BlockNotYetValid(f"block time {block.time} is ahead of the local clock {now}")


@dataclass
class _Disk:
    """What survives a crash: the artifacts the node signed and its finalized blocks."""

    own: list = field(default_factory=list)
    finalized: list[Finalized] = field(default_factory=list)


_DELIVER, _TIMER, _CRASH, _RESTART = 0, 1, 2, 3


class Simulation:
    """The nodes of ``subnet`` under ``schedule`` (module docstring)."""

    def __init__(
        self,
        subnet: SubnetRecord,
        signers: Mapping[str, Callable[[bytes], bytes]],
        verifier: Verifier,
        schedule: Schedule,
        *,
        round_timeout_ns: int = 1_000 * MS,
        rebroadcast_interval_ns: int = 2_000 * MS,
        retained_heights: int = 1_000,
        propose: ProposeFn = stub_propose,
        validate: ValidateFn = stub_validate,
        start_ns: int = SIM_START_NS,
    ) -> None:
        self.subnet = subnet
        self.schedule = schedule
        self._signers = dict(signers)
        self._verifier = verifier
        self._configs = {
            node_id: AgreementConfig(subnet, node_id, round_timeout_ns=round_timeout_ns,
                                     rebroadcast_interval_ns=rebroadcast_interval_ns,
                                     retained_heights=retained_heights)
            for node_id in subnet.node_ids
        }
        self._propose, self._validate = propose, validate
        self._rng = SplitMix64(schedule.seed)
        self.now = start_ns
        self._queue: list[tuple[int, int, int, str, object]] = []
        self._seq = 0
        self._timer_at: dict[str, int] = {}
        self.nodes: dict[str, Optional[AgreementNode]] = {}
        self.disks: dict[str, _Disk] = {node_id: _Disk() for node_id in subnet.node_ids}
        #: Per node, the hashes it finalized (index h - 1), and the first hash seen final per height.
        self.finalized: dict[str, list[bytes]] = {node_id: [] for node_id in subnet.node_ids}
        self.chain: dict[int, bytes] = {}
        self.blocks: dict[int, Block] = {}
        self.refused: list[Refused] = []
        self.messages_sent = 0
        self.messages_delivered = 0
        for crash in schedule.crashes:
            self._push(crash.at_ns, _CRASH, crash.node_id, None)
            if crash.restart_ns is not None:
                if crash.restart_ns <= crash.at_ns:
                    raise ValueError("a node restarts after it crashed")
                self._push(crash.restart_ns, _RESTART, crash.node_id, None)
        for node_id in subnet.node_ids:
            self._boot(node_id)

    # -- running --------------------------------------------------------------------------

    def run_until(self, end_ns: int, stop: Callable[["Simulation"], bool] = lambda sim: False) -> bool:
        """Process events up to ``end_ns``; return early (True) once ``stop(self)`` holds."""
        while self._queue and self._queue[0][0] <= end_ns:
            at, _, kind, node_id, payload = heapq.heappop(self._queue)
            self.now = at
            self._handle(kind, node_id, payload)
            if stop(self):
                return True
        self.now = max(self.now, end_ns)
        return stop(self)

    def run_until_finalized(self, height: int, deadline_ns: int) -> bool:
        """Run until every running node finalized ``height`` (True), or the deadline (False)."""
        return self.run_until(deadline_ns, lambda sim: sim.min_running_height() >= height)

    def running(self) -> list[str]:
        return [node_id for node_id, node in self.nodes.items() if node is not None]

    def min_running_height(self) -> int:
        return min((len(self.finalized[n]) for n in self.running()), default=0)

    def finalized_chain(self, node_id: str) -> list[bytes]:
        return list(self.finalized[node_id])

    # -- events ---------------------------------------------------------------------------

    def _push(self, at: int, kind: int, node_id: str, payload: object) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (at, self._seq, kind, node_id, payload))

    def _boot(self, node_id: str) -> None:
        disk = self.disks[node_id]
        node = AgreementNode(
            self._configs[node_id], propose=self._propose, validate=self._validate, sign=self._signers[node_id],
            verifier=self._verifier, now=self.now, finalized=list(disk.finalized), own_artifacts=list(disk.own))
        self.nodes[node_id] = node
        self._apply(node_id, node.start(self.now))

    def _handle(self, kind: int, node_id: str, payload: object) -> None:
        node = self.nodes.get(node_id)
        if kind == _CRASH:
            self.nodes[node_id] = None
            self._timer_at.pop(node_id, None)
        elif kind == _RESTART:
            if node is None:
                self._boot(node_id)
        elif node is None:
            return   # a crashed node gets nothing
        elif kind == _TIMER:
            if self._timer_at.get(node_id) == payload:
                del self._timer_at[node_id]
                self._apply(node_id, node.on_timer(self.now))
        else:
            sender, data = payload  # type: ignore[misc]
            if self._is_cut(sender, node_id):
                return
            self.messages_delivered += 1
            self._apply(node_id, node.on_message(decode_message(data), self.now))

    def _is_cut(self, a: str, b: str) -> bool:
        return any(p.separates(a, b, self.now) for p in self.schedule.partitions)

    def _apply(self, node_id: str, outputs: list) -> None:
        """Carry out a node's outputs in order, then set its timer."""
        disk = self.disks[node_id]
        for output in outputs:
            if isinstance(output, Persist):
                disk.own.append(output.message)
            elif isinstance(output, Send):
                self._transmit(node_id, output.to, encode_message(output.message))
            elif isinstance(output, Broadcast):
                data = encode_message(output.message)
                for peer in self.subnet.node_ids:
                    if peer != node_id:
                        self._transmit(node_id, peer, data)
            elif isinstance(output, Finalized):
                self._record_finalized(node_id, output)
            elif isinstance(output, Refused):
                self.refused.append(output)
        node = self.nodes[node_id]
        if node is not None:
            at = max(node.wakeup_at, self.now)
            if self._timer_at.get(node_id) != at:
                self._timer_at[node_id] = at
                self._push(at, _TIMER, node_id, at)

    def _transmit(self, sender: str, receiver: str, data: bytes) -> None:
        self.messages_sent += 1
        schedule = self.schedule
        if self._is_cut(sender, receiver) or self._rng.chance(schedule.drop_per_mille):
            return
        copies = 2 if self._rng.chance(schedule.duplicate_per_mille) else 1
        for _ in range(copies):
            delay = schedule.min_delay_ns + self._rng.below(schedule.max_delay_ns - schedule.min_delay_ns + 1)
            self._push(self.now + delay, _DELIVER, receiver, (sender, data))

    def _record_finalized(self, node_id: str, output: Finalized) -> None:
        chain = self.finalized[node_id]
        if output.height != len(chain) + 1:
            raise SafetyViolation(f"{node_id} finalized height {output.height} after {len(chain)}")
        if output.block.parent_hash != (chain[-1] if chain else GENESIS_PARENT_HASH):
            raise SafetyViolation(f"{node_id} finalized a block at height {output.height} off its own chain")
        seen = self.chain.setdefault(output.height, output.block_hash)
        if seen != output.block_hash:
            raise SafetyViolation(
                f"height {output.height}: {node_id} finalized {output.block_hash.hex()}, another node {seen.hex()}")
        self.blocks.setdefault(output.height, output.block)
        chain.append(output.block_hash)
        disk = self.disks[node_id]
        disk.finalized.append(output)
        if output.proof:
            # the disk keeps what a restart needs: a retained tail ending in a proof, and
            # the signed artifacts above it
            keep = self._configs[node_id].retained_heights
            if len(disk.finalized) > keep:
                disk.finalized = disk.finalized[-keep:]
            disk.own = [m for m in disk.own if artifact_height(m) > output.height]
