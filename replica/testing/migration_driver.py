"""``Testnet.migrate`` in deterministic mode: the migration's steps (``replica.testnet.migration``)
driven by ticks.

Management calls go through the testnet's own certified ``update_call``; the registry is the
network's shared holder; subnets' registry versions, heights and stream headers are read from
their nodes' states (the test process is the whole network); waiting is ticking, at most
``max_ticks`` rounds per step.
"""

from __future__ import annotations

from typing import Any, Callable

from consensus_stub.registry import Registry
from replica.client.identity import Identity
from replica.testnet.migration import MigrationError
from replica.testnet.registry_status import NodeRegistryStatus
from state_manager.messages import MANAGEMENT_CANISTER_ID
from state_manager.streams import StreamHeader

__all__ = ["TickingDriver"]


class TickingDriver:
    def __init__(self, testnet: Any, network: Any, sender: Identity, max_ticks: int) -> None:
        self._testnet, self._net, self._sender, self._max_ticks = testnet, network, sender, max_ticks

    @property
    def registry(self) -> Registry:
        return self._net.registry.get()

    def manage(self, subnet: str, method: str, arg: Any) -> Any:
        return self._testnet.update_call(MANAGEMENT_CANISTER_ID, method, arg, sender=self._sender, subnet=subnet)

    def publish(self, change: Callable[[Registry], Registry]) -> Registry:
        registry = change(self._net.registry.get())
        self._net.registry.set(registry)
        return registry

    def _state(self, subnet: str):
        return self._net.subnet(subnet).online_node().state

    def node_registry_statuses(self, subnets: tuple[str, ...]) -> list[NodeRegistryStatus]:
        statuses = []
        for subnet in subnets:
            sub = self._net.subnet(subnet)
            for node_id, node in sub.nodes.items():
                if node_id not in sub.offline:   # a stopped node runs nothing
                    metadata = node.state.metadata
                    statuses.append(NodeRegistryStatus(node_id, subnet, metadata.batch_number,
                                                       metadata.network_topology.registry_version))
        return statuses

    def height(self, subnet: str) -> int:
        return self._net.subnet(subnet).height

    def stream_header(self, here: str, there: str) -> StreamHeader:
        stream = self._state(here).streams.get(there)
        return StreamHeader(0, 0, 0) if stream is None else stream.header()

    def wait(self, what: str, condition: Callable[[], bool], timeout_s: float) -> None:
        for _ in range(self._max_ticks):
            if condition():
                return
            self._net.tick()
        if not condition():
            raise MigrationError(f"{what}: not done after {self._max_ticks} ticks")
