"""The replicated state of one subnet: everything a batch reads and writes."""

from __future__ import annotations

from sortedcontainers import SortedDict

from .canister_state import CanisterState
from .ingress_history import IngressHistory
from .messages import CanisterId, Ingress, SubnetId
from .queues import Queue
from .routing_table import NetworkTopology, RoutingTable
from .streams import Stream

__all__ = ["SystemMetadata", "ReplicatedState"]

#: Counter names the state machine increments (kept in the state so they are hashed too).
COUNTERS = (
    "critical_errors",
    "dropped_invalid_sender",
    "dropped_responses_without_callback",
    "dropped_responses_unroutable",
    "ingress_inducted",
    "ingress_rejected",
    "xnet_messages_inducted",
    "reject_signals_sent",
    "synthetic_rejects",
)
#: Counters of bounded-wait calls (issue 17). They enter ``counters`` at their first use, so
#: the counters leaf — and every state hash — of a subnet that never saw one is unchanged.
BOUNDED_WAIT_COUNTERS = (
    "bounded_wait_requests_timed_out",
    "bounded_wait_messages_expired",
    "bounded_wait_callbacks_expired",
    "bounded_wait_late_responses_dropped",
    "bounded_wait_messages_shed",
    "bounded_wait_bytes_shed",
)


class SystemMetadata:
    __slots__ = ("own_subnet_id", "batch_number", "batch_time", "prev_state_hash", "network_topology", "counters")

    def __init__(self, own_subnet_id: SubnetId, network_topology: NetworkTopology) -> None:
        self.own_subnet_id = own_subnet_id
        self.batch_number = 0           # the height of the last batch applied (0 = genesis)
        self.batch_time = 0             # nanoseconds since the epoch, from consensus
        self.prev_state_hash = b""      # full-state hash of the previous height
        self.network_topology = network_topology
        self.counters: SortedDict = SortedDict((name, 0) for name in COUNTERS)

    def count(self, name: str, by: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + by

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SystemMetadata):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __repr__(self) -> str:
        return f"SystemMetadata(subnet={self.own_subnet_id!r}, batch={self.batch_number}, time={self.batch_time})"


class ReplicatedState:
    __slots__ = ("canisters", "streams", "ingress_history", "metadata", "management_queue")

    def __init__(self, own_subnet_id: SubnetId, network_topology: NetworkTopology) -> None:
        self.canisters: SortedDict = SortedDict()   # CanisterId -> CanisterState
        self.streams: SortedDict = SortedDict()     # SubnetId -> Stream (ours to that subnet)
        self.ingress_history = IngressHistory()
        self.metadata = SystemMetadata(own_subnet_id, network_topology)
        # Inducted ingress for the management canister (``MANAGEMENT_CANISTER_ID``), executed
        # at the start of the next rounds' execution, before any canister's messages.
        self.management_queue: Queue[Ingress] = Queue()

    @property
    def own_subnet_id(self) -> SubnetId:
        return self.metadata.own_subnet_id

    @property
    def routing_table(self) -> RoutingTable:
        return self.metadata.network_topology.routing_table

    def canister(self, canister_id: CanisterId) -> CanisterState | None:
        return self.canisters.get(canister_id)

    def add_canister(self, canister: CanisterState) -> None:
        self.canisters[canister.canister_id] = canister

    def stream_to(self, subnet: SubnetId) -> Stream:
        """Our stream to ``subnet``, created empty on first use."""
        stream = self.streams.get(subnet)
        if stream is None:
            stream = self.streams[subnet] = Stream()
        return stream

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ReplicatedState):
            return NotImplemented
        return (
            dict(self.canisters) == dict(other.canisters)
            and dict(self.streams) == dict(other.streams)
            and self.ingress_history == other.ingress_history
            and self.metadata == other.metadata
            and self.management_queue == other.management_queue
        )

    def __repr__(self) -> str:
        return (
            f"ReplicatedState(subnet={self.own_subnet_id!r}, batch={self.metadata.batch_number}, "
            f"canisters={len(self.canisters)}, streams={list(self.streams)})"
        )
