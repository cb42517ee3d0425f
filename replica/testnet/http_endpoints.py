"""A testnet's ingress addresses, and agents for it (thin shell).

``read_http_endpoints(directory)`` reads the ingress HTTP addresses of a testnet directory's
nodes (``http/<subnet>.json``). ``agent_for_testnet(directory, identity)`` builds an
``Agent`` from the directory's ``registry.bin`` and those files, and lets it re-read them
(``TestnetDirectoryView``) when nodes stop answering: a restarted node is back at its old
address, or at the new one the launcher wrote there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from consensus_stub.registry import Registry, RegistryError, decode_registry
from replica.client.agent import Agent
from replica.client.identity import Identity

from .launcher import TestnetError, TestnetLayout

__all__ = ["read_http_endpoints", "TestnetDirectoryView", "agent_for_testnet"]


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


def agent_for_testnet(directory: Path | str, identity: Identity | None, subnet: str | None = None, **options: Any) -> Agent:
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
