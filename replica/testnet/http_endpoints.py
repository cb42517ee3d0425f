"""The ingress HTTP APIs of a subnet's nodes, and agents for a testnet (thin shell).

``node_backend(subnet, node_id)`` wires one node of a ``Subnet`` to the HTTP API's
``NodeBackend``: submissions go through ``Subnet.submit_ingress`` (the stand-in for gossip),
queries run on that node's latest certified state, ``read_state`` reads its latest certified
snapshot (immutable: no lock), and ``status`` reports its heights. ``SubnetHttpApis`` starts
one server per node and stops them. ``agent_for_testnet(directory, identity)`` builds an
``Agent`` from a testnet directory's ``registry.bin`` and ``http/<subnet>.json`` files, and
lets it re-read them (``TestnetDirectoryView``) when nodes stop answering: a restarted node
is back at its old address, or at the new one the launcher wrote there.
"""

from __future__ import annotations

import json
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Mapping

from consensus_stub.registry import Registry, RegistryError, decode_registry
from replica.client.agent import Agent
from replica.client.http_wire import QueryAnswer
from replica.client.identity import UserKey
from replica.client.refusals import CanisterNotOnSubnet, UnknownCanister
from replica.client.refusals import NodeUnavailable, NotCertifiedYet
from replica.node.http_api import HttpApiServer, NodeBackend
from state_manager.messages import Reply
from state_manager.state_manager import StateManager

from .launcher import TestnetError, TestnetLayout
from .subnet import Subnet, SubnetError

__all__ = ["node_backend", "SubnetHttpApis", "read_http_endpoints", "TestnetDirectoryView", "agent_for_testnet"]


def _version() -> str:
    try:
        return metadata.version("subnet-replica")
    except metadata.PackageNotFoundError:
        return "unknown"


def _status(subnet: Subnet, node_id: str, manager: StateManager) -> dict:
    latest = manager.latest_certified()
    key = subnet.registry.get().public_key_for(subnet.subnet_id, subnet.registry.get().latest_version)
    return {
        "subnet_id": subnet.subnet_id,
        "node_id": node_id,
        "finalized_height": manager.latest_height,
        "certified_height": latest[1].height if latest is not None else None,
        "certified_root": latest[1].root.hex() if latest is not None else None,
        "subnet_public_key": key.hex() if key is not None else None,
        # the registry version of the node's latest executed batch (reading an attribute of
        # its current state needs no lock; a migration waits for every subnet to reach one)
        "registry_version": subnet.nodes[node_id].state.metadata.network_topology.registry_version,
        "replica_version": _version(),
    }


def node_backend(subnet: Subnet, node_id: str, clock: Callable[[], int] = time.time_ns) -> NodeBackend:
    """The ``NodeBackend`` of node ``node_id`` of ``subnet`` (module docstring)."""
    manager = subnet.nodes[node_id].state_manager

    def submit(ingress) -> None:
        try:
            subnet.submit_ingress(ingress)
        except SubnetError as exc:
            raise NodeUnavailable(str(exc)) from exc

    def query(canister_id: int, method: str, arg: Any, caller: bytes) -> QueryAnswer:
        host = subnet.registry.get().latest().routing_table.lookup(canister_id)
        if host is None:
            raise UnknownCanister(f"no subnet hosts canister {canister_id}")
        if host != subnet.subnet_id:
            raise CanisterNotOnSubnet(f"canister {canister_id} is on subnet {host}, not {subnet.subnet_id}")
        result = subnet.query_certified(node_id, canister_id, method, arg, caller)
        if result is None:
            raise NotCertifiedYet(f"{node_id}: its latest state is not certified yet")
        answer, height = result
        if isinstance(answer, Reply):
            return QueryAnswer(height, reply=answer.data)
        return QueryAnswer(height, reject_code=answer.code.name, reject_message=answer.message)

    def certified():
        latest = manager.latest_certified()
        return None if latest is None else (latest[0].certified, latest[1])

    return NodeBackend(subnet.subnet_id, node_id, subnet.limits, submit, query, certified,
                       lambda: _status(subnet, node_id, manager), clock, subnet.nodes[node_id].metrics)


class SubnetHttpApis:
    """One ``HttpApiServer`` per node of ``subnet``; ``wrap`` may replace a node's backend
    (tests: a node that tampers with its answers)."""

    def __init__(self, subnet: Subnet, *, workers: int = 2,
                 wrap: Mapping[str, Callable[[NodeBackend], NodeBackend]] | None = None) -> None:
        self.subnet = subnet
        wrap = dict(wrap or {})
        self.servers = {
            node_id: HttpApiServer(wrap.get(node_id, lambda b: b)(node_backend(subnet, node_id)), workers=workers)
            for node_id in subnet.nodes
        }

    def start(self) -> dict[str, str]:
        """Bind every node's API on 127.0.0.1; ``{node id: "127.0.0.1:port"}``."""
        try:
            return {node_id: server.start() for node_id, server in self.servers.items()}
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop()


def read_http_endpoints(directory: Path | str) -> dict[str, dict[str, str]]:
    """``{subnet: {node id: "127.0.0.1:port"}}`` from a testnet directory's ``http/*.json``."""
    layout = TestnetLayout(Path(directory))
    endpoints: dict[str, dict[str, str]] = {}
    for path in sorted(layout.http_dir.glob("*.json")):
        try:
            value = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise TestnetError(f"cannot read {path}: {exc}") from exc
        if not (isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())):
            raise TestnetError(f"{path} is not a {{node id: address}} object")
        endpoints[path.stem] = value
    return endpoints


class TestnetDirectoryView:
    """A testnet directory as an agent reads it: the registry (decoded again only when
    ``registry.bin`` changed) and the ingress addresses of each subnet's serving nodes, in
    the registry's node order."""

    def __init__(self, directory: Path | str) -> None:
        self.layout = TestnetLayout(Path(directory))
        self._stamp: tuple[int, int, int] | None = None
        self._registry: Registry | None = None

    def registry(self) -> Registry:
        """The registry in ``registry.bin`` (``TestnetError`` if there is none readable)."""
        try:
            st = self.layout.registry.stat()
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
            if stamp != self._stamp or self._registry is None:
                self._registry, self._stamp = decode_registry(self.layout.registry.read_bytes()), stamp
        except (OSError, RegistryError) as exc:
            raise TestnetError(f"{self.layout.root} holds no readable registry: {exc}") from exc
        return self._registry

    def serving(self) -> dict[str, list[str]]:
        """``{subnet: [ingress address, ...]}`` of the subnets with a serving node."""
        registry = self.registry()
        endpoints = read_http_endpoints(self.layout.root)
        serving: dict[str, list[str]] = {}
        for record in registry.latest().subnets:
            nodes = endpoints.get(record.subnet_id, {})
            addresses = [nodes[node] for node in record.node_ids if node in nodes]
            if addresses:
                serving[record.subnet_id] = addresses
        return serving

    def registry_if_readable(self) -> Registry | None:
        """The agent's ``registry_source``: None while the file cannot be read."""
        try:
            return self.registry()
        except TestnetError:
            return None

    def serving_if_readable(self, subnet: str | None = None) -> dict[str, list[str]] | list[str] | None:
        """The agent's ``endpoints_source``: every subnet's addresses, or ``subnet``'s; None
        while the files cannot be read (the agent keeps what it had)."""
        try:
            serving = self.serving()
        except TestnetError:
            return None
        return serving if subnet is None else serving.get(subnet, [])


def agent_for_testnet(directory: Path | str, identity: UserKey, subnet: str | None = None, **options: Any) -> Agent:
    """An ``Agent`` for the testnet in ``directory``: trusting its ``registry.bin``, talking to
    the nodes of ``subnet``, or (``None``) to those of each canister's subnet — the first in
    the registry's order, the next when one does not answer (``Agent``), re-reading the
    directory when none does."""
    view = TestnetDirectoryView(directory)
    registry = view.registry()
    serving = view.serving()
    sources = dict(registry_source=view.registry_if_readable,
                   endpoints_source=lambda: view.serving_if_readable(subnet))
    if subnet is not None:
        if subnet not in serving:
            raise TestnetError(f"no ingress endpoint of subnet {subnet!r} in {view.layout.http_dir} "
                               f"(subnets serving: {sorted(serving) or 'none'})")
        return Agent(serving[subnet], identity, registry, **sources, **options)
    if not serving:
        raise TestnetError(f"no ingress endpoints in {view.layout.http_dir}: is the testnet running?")
    return Agent(serving, identity, registry, **sources, **options)
