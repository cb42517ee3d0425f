"""A subnet's agreement nodes on a simulated network, under a seeded adversarial schedule (pure).

The network is ``network.AgreementNetwork`` (the one the in-process subnet runs on): virtual
time in nanoseconds and a seeded generator decide everything; each message is encoded, then
delivered after a random delay in ``[min_delay_ns, max_delay_ns]`` (so messages overtake each
other), possibly twice (``duplicate_per_mille``) or never (``drop_per_mille``); ``Partition``s
cut the links between groups of nodes for a while; ``Crash``es stop a node at an instant —
its in-memory state is gone, its "disk" (the ``Persist``ed artifacts and the ``Finalized``
blocks) stays — and may restart it from that disk. A seed and a schedule give one run, bit
for bit.

Every ``Finalized`` output is checked against every other node's at once: two different
blocks final at one height raise ``SafetyViolation``. The same drivers (``on_message``,
``on_timer`` at ``wakeup_at``, outputs in order) are what a node process runs over gRPC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

from ..block import GENESIS_PARENT_HASH, Block
from ..notary import BlockNotYetValid, TimeRegresses
from ..registry import SubnetRecord
from .messages import AgreementError, artifact_height
from .network import MS, AgreementNetwork, Crash, Partition, Schedule, SplitMix64
from .protocol import (
    AgreementConfig, AgreementNode, BlockContext, Finalized, Persist, ProposeFn, Refused, ValidateFn, Verifier,
)

__all__ = [
    "SplitMix64", "Partition", "Crash", "Schedule", "SafetyViolation", "Simulation",
    "stub_propose", "stub_validate", "SIM_START_NS", "MS",
]

#: The simulation's clock starts here (late 2023 in Unix nanoseconds), so block times look real.
SIM_START_NS = 1_700_000_000 * 10**9


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
        self.disks: dict[str, _Disk] = {node_id: _Disk() for node_id in subnet.node_ids}
        #: Per node, the hashes it finalized (index h - 1), and the first hash seen final per height.
        self.finalized: dict[str, list[bytes]] = {node_id: [] for node_id in subnet.node_ids}
        self.chain: dict[int, bytes] = {}
        self.blocks: dict[int, Block] = {}
        self.refused: list[Refused] = []
        self.network = AgreementNetwork(subnet.node_ids, boot=self._boot, on_output=self._on_output,
                                        schedule=schedule, start_ns=start_ns)
        for node_id in subnet.node_ids:
            self.network.start(node_id)

    # -- running --------------------------------------------------------------------------

    @property
    def now(self) -> int:
        return self.network.now

    @property
    def nodes(self) -> dict[str, Optional[AgreementNode]]:
        return self.network.nodes

    @property
    def messages_sent(self) -> int:
        return self.network.messages_sent

    @property
    def messages_delivered(self) -> int:
        return self.network.messages_delivered

    def run_until(self, end_ns: int, stop: Callable[["Simulation"], bool] = lambda sim: False) -> bool:
        """Process events up to ``end_ns``; return early (True) once ``stop(self)`` holds."""
        return self.network.run_until(lambda: stop(self), end_ns) or stop(self)

    def run_until_finalized(self, height: int, deadline_ns: int) -> bool:
        """Run until every running node finalized ``height`` (True), or the deadline (False)."""
        return self.run_until(deadline_ns, lambda sim: sim.min_running_height() >= height)

    def running(self) -> list[str]:
        return self.network.running()

    def min_running_height(self) -> int:
        return min((len(self.finalized[n]) for n in self.running()), default=0)

    def finalized_chain(self, node_id: str) -> list[bytes]:
        return list(self.finalized[node_id])

    # -- the nodes' disks -----------------------------------------------------------------

    def _boot(self, node_id: str, now: int) -> AgreementNode:
        disk = self.disks[node_id]
        return AgreementNode(
            self._configs[node_id], propose=self._propose, validate=self._validate, sign=self._signers[node_id],
            verifier=self._verifier, now=now, finalized=list(disk.finalized), own_artifacts=list(disk.own))

    def _on_output(self, node_id: str, output) -> None:
        if isinstance(output, Persist):
            self.disks[node_id].own.append(output.message)
        elif isinstance(output, Finalized):
            self._record_finalized(node_id, output)
        elif isinstance(output, Refused):
            self.refused.append(output)

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
