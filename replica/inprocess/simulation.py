"""In-process multi-subnet simulation: N subnets, one replicated state each, one driver.

Each tick, every subnet (in a fixed or seeded-shuffled order) makes a batch — its pending
ingress plus, per peer, a slice of that peer's stream to it — and runs it through the very
state machine a replica runs. After a subnet's round, its streams are *published*; peers
see a publication only after a network delay. Knobs make the network hostile in the ways
the routing layer must survive: random delays, stale (reordered) and duplicated deliveries,
shuffled tick orders and tiny limits. Slices are not certified here (the replica certifies
them); every delivery still goes through trimming and validation against the receiver's
expected indices, exactly as a payload builder would.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from message_routing.batch import Batch
from message_routing.executor import Executor
from message_routing.limits import DEFAULT, Limits
from message_routing.state_machine import execute_round
from state_manager.messages import Ingress, SubnetId
from state_manager.replicated_state import ReplicatedState
from state_manager.state_codec import encode_state
from state_manager.state_manager import StateManager
from state_manager.routing_table import CanisterIdRange, NetworkTopology, RoutingTable
from state_manager.streams import StreamSlice
from xnet.expected_indices import expected_indices_for, reject_signals_begin_for
from xnet.slice_validation import InvalidSlice, trim_stream_slice, validate_stream_slice

__all__ = ["NetworkKnobs", "Simulation", "SubnetSim", "GENESIS_TIME_NS", "TICK_NS"]

GENESIS_TIME_NS = 1_700_000_000 * 10**9
TICK_NS = 10**9


@dataclass(frozen=True)
class NetworkKnobs:
    """How hostile the simulated network is."""

    max_delay_ticks: int = 0            # a publication becomes visible 0..max_delay ticks later
    stale_probability: float = 0.0      # deliver an older publication instead of the newest visible
    duplicate_probability: float = 0.0  # deliver the same publication as last time again
    drop_probability: float = 0.0       # deliver nothing from this peer in this round
    shuffle_tick_order: bool = False    # subnets take their turns in a random order each tick
    publications_kept: int = 8


@dataclass
class SubnetSim:
    subnet_id: SubnetId
    state: ReplicatedState
    pending_ingress: list[Ingress] = field(default_factory=list)
    #: What a recorded run holds: the state before the first batch, every batch, and the
    #: hashes committed after each one as ``(height, full_hash, certified_root)``.
    genesis: bytes | None = None
    batches: list[Batch] = field(default_factory=list)
    hashes: list[tuple[int, bytes, bytes]] = field(default_factory=list)
    state_manager: StateManager | None = None
    last_delivered: dict[SubnetId, StreamSlice] = field(default_factory=dict)


@dataclass
class _Publication:
    tick: int
    stream_slice: StreamSlice


class Simulation:
    """Drive ``execute_round`` on several subnets and move stream slices between them."""

    def __init__(
        self,
        subnet_ranges: Mapping[SubnetId, tuple[int, int]],
        execution_environment: Executor,
        *,
        limits: Limits = DEFAULT,
        knobs: NetworkKnobs = NetworkKnobs(),
        seed: int = 0,
        record_batches: bool = True,
    ) -> None:
        table = RoutingTable(tuple((CanisterIdRange(lo, hi), s) for s, (lo, hi) in sorted(subnet_ranges.items())))
        self.topology = NetworkTopology(1, table)
        self.execution_environment = execution_environment
        self.limits = limits
        self.knobs = knobs
        self.rng = random.Random(seed)
        self.record_batches = record_batches
        self.tick_count = 0
        self.rejected_deliveries = 0
        self.subnets: dict[SubnetId, SubnetSim] = {
            s: SubnetSim(s, ReplicatedState(s, self.topology)) for s in sorted(subnet_ranges)
        }
        for sim in self.subnets.values():
            sim.state.metadata.batch_time = GENESIS_TIME_NS
        # (src, dst) -> publications of src's stream to dst, oldest first
        self.publications: dict[tuple[SubnetId, SubnetId], list[_Publication]] = {}

    # -- inputs ------------------------------------------------------------------------------

    def subnet_of(self, canister_id: int) -> SubnetId:
        subnet = self.topology.routing_table.lookup(canister_id)
        if subnet is None:
            raise KeyError(f"canister {canister_id} is in no subnet's range")
        return subnet

    def state_of(self, subnet: SubnetId) -> ReplicatedState:
        return self.subnets[subnet].state

    def submit(self, ingress: Ingress, subnet: SubnetId | None = None) -> None:
        """Queue ``ingress`` for the next batch of its receiver's subnet (or of ``subnet``)."""
        self.subnets[subnet or self.subnet_of(ingress.receiver)].pending_ingress.append(ingress)

    @property
    def now(self) -> int:
        return GENESIS_TIME_NS + self.tick_count * TICK_NS

    # -- the driver --------------------------------------------------------------------------

    def tick(self, order: Iterable[SubnetId] | None = None) -> None:
        """One round on every subnet (in ``order``, sorted, or shuffled per the knobs)."""
        self.tick_count += 1
        if order is None:
            order = sorted(self.subnets)
            if self.knobs.shuffle_tick_order:
                self.rng.shuffle(order)
        for subnet in order:
            self.step(subnet)

    def step(self, subnet: SubnetId) -> None:
        """Make and execute the next batch of ``subnet``, then publish its streams."""
        sim = self.subnets[subnet]
        if sim.state_manager is None:  # the first batch: what is installed now is genesis
            if self.record_batches:
                sim.genesis = encode_state(sim.state)
            sim.state_manager = StateManager(sim.state)
        state = sim.state
        ingress, sim.pending_ingress = tuple(sim.pending_ingress), []
        batch = Batch(
            batch_number=state.metadata.batch_number + 1,
            time=max(self.now, state.metadata.batch_time),
            registry_version=self.topology.registry_version,
            randomness=self.rng.getrandbits(256).to_bytes(32, "big"),
            ingress=ingress,
            xnet_payload=self._xnet_payload(sim),
        )
        if self.record_batches:
            sim.batches.append(batch)
        sim.state = execute_round(state, batch, self.topology, self.execution_environment, self.limits)
        trees = sim.state_manager.commit(sim.state)
        sim.hashes.append((trees.height, trees.full_hash, trees.certified_root))
        self._publish(sim)

    def run(self, ticks: int) -> None:
        for _ in range(ticks):
            self.tick()

    def run_until_quiescent(self, max_ticks: int = 1_000) -> int:
        """Tick until no subnet has queued, routed or unacknowledged work; return the ticks."""
        for n in range(1, max_ticks + 1):
            self.tick()
            if self.is_quiescent():
                return n
        raise RuntimeError(f"not quiescent after {max_ticks} ticks")

    def is_quiescent(self) -> bool:
        for sim in self.subnets.values():
            if sim.pending_ingress:
                return False
            for stream in sim.state.streams.values():
                if stream.messages or stream.reject_signals:
                    return False
            for canister in sim.state.canisters.values():
                q = canister.queues
                if q.message_count() or canister.call_contexts or canister.callbacks:
                    return False
        return self._signals_settled()

    def _signals_settled(self) -> bool:
        """Every subnet has seen every peer's latest signals (streams fully acknowledged)."""
        for (src, dst) in self.publications:
            ours = self.subnets[dst].state.streams.get(src)
            theirs = self.subnets[src].state.streams.get(dst)
            if ours is None or theirs is None:
                continue
            if ours.begin != theirs.signals_end or theirs.begin != ours.signals_end:
                return False
        return True

    # -- the network -------------------------------------------------------------------------

    def _publish(self, sim: SubnetSim) -> None:
        for dst, stream in sim.state.streams.items():
            if dst == sim.subnet_id:
                continue
            published = self.publications.setdefault((sim.subnet_id, dst), [])
            published.append(_Publication(self.tick_count, StreamSlice(stream.header(), stream.begin, tuple(stream.messages))))
            del published[: -self.knobs.publications_kept]

    def _pick_publication(self, src: SubnetId, dst: SubnetId) -> StreamSlice | None:
        knobs, rng = self.knobs, self.rng
        if knobs.drop_probability and rng.random() < knobs.drop_probability:
            return None
        sim = self.subnets[dst]
        if knobs.duplicate_probability and src in sim.last_delivered and rng.random() < knobs.duplicate_probability:
            return sim.last_delivered[src]
        delay = rng.randint(0, knobs.max_delay_ticks) if knobs.max_delay_ticks else 0
        visible = [p for p in self.publications.get((src, dst), ()) if p.tick <= self.tick_count - delay]
        if not visible:
            return None
        if knobs.stale_probability and len(visible) > 1 and rng.random() < knobs.stale_probability:
            return rng.choice(visible[:-1]).stream_slice
        return visible[-1].stream_slice

    def _xnet_payload(self, sim: SubnetSim) -> tuple[tuple[SubnetId, StreamSlice], ...]:
        payload = []
        state = sim.state
        for src in sorted(self.subnets):
            if src == sim.subnet_id:
                continue
            delivered = self._pick_publication(src, sim.subnet_id)
            if delivered is None:
                continue
            sim.last_delivered[src] = delivered
            expected = expected_indices_for(state, src, ())
            candidate = trim_stream_slice(delivered, expected, self.limits.max_slice_messages, self.limits.max_slice_bytes)
            own_stream = state.streams.get(src)
            try:
                validate_stream_slice(candidate, expected, own_stream.end if own_stream else 0,
                                      self.limits.max_slice_messages, self.limits.max_slice_bytes,
                                      own_reject_signals_begin=reject_signals_begin_for(state, src, ()))
            except InvalidSlice:
                self.rejected_deliveries += 1
                continue
            payload.append((src, candidate))
        return tuple(payload)
