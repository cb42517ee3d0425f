"""The two ways a testnet directory runs as processes, one class each (the manifest's
``process_model``): what the supervisor (``replica.processes.supervisor``) starts per unit, what
a started unit publishes, and what the launcher keeps for it.

* ``NodeModel`` (``"node"``, the default): one process per node, ``replica node run --config
  nodes/<node>/config.json`` (``replica.node.process``). The launcher writes each node's
  config before its first start, publishes its ``endpoints.json``, and keeps the subnets'
  ``http/<subnet>.json`` (its running, published nodes' ingress addresses) and
  ``status/<subnet>.json`` (its running node with the highest certified height). A node can
  be held down (``control/hold/<node>``) and killed on purpose (chaos, ``kill-node``). Its
  run log is made of, per subnet, the longest executed log of a node from genesis.
* ``SubnetModel`` (``"subnet"``): one process per subnet (``replica.processes.subnet_process``),
  its nodes agreeing in that process; the process writes ``addresses/``, ``http/`` and
  ``status/`` itself and its recording when it stops.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from replica.node.process_config import NodeProcessConfig

from replica.testnet.launcher import (
    PROCESS_MODELS, TestnetError, TestnetLayout, process_model_of, testnet_nodes, write_atomically,
)

__all__ = ["ProcessModel", "NodeModel", "SubnetModel", "process_model", "node_command", "subnet_command"]


def node_command(layout: TestnetLayout, node: str) -> list[str]:
    """How a node process is started."""
    return [sys.executable, "-m", "replica.cli", "node", "run", "--config", str(layout.node_files(node).config)]


def subnet_command(layout: TestnetLayout, subnet: str) -> list[str]:
    """How a subnet process is started."""
    return [sys.executable, "-m", "replica.processes.subnet_process", str(layout.root), subnet]


def _read_endpoints(path: Path) -> dict[str, str] | None:
    """A node's ``endpoints.json`` once it names at least its XNet and HTTP addresses."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(value, dict) or not all(isinstance(value.get(k), str) for k in ("xnet", "http")):
        return None
    return value


class ProcessModel:
    """What differs between the process models (module docstring); ``units`` are what the
    supervisor runs one process for, ``subnet_of`` maps each to its subnet."""

    name = ""
    #: What one unit's process is called in messages.
    kind = ""
    #: Whether single nodes can be held down and killed on purpose.
    has_node_processes = False

    def __init__(self, layout: TestnetLayout, subnets: list[str]) -> None:
        self.layout = layout
        self.subnets = list(subnets)
        self.units: list[str] = []
        self.subnet_of: dict[str, str] = {}
        #: ``{subnet: [node, ...]}`` of the node processes, in registry order (none in the subnet model).
        self.nodes_by_subnet: dict[str, list[str]] = {s: [] for s in self.subnets}

    def clear(self) -> None:
        """Before the first start: remove what a previous launcher's processes left."""

    def command(self, unit: str) -> list[str]:
        """Prepare ``unit``'s files and return the command that runs it."""
        raise NotImplementedError

    def bound(self, unit: str) -> dict[str, str] | None:
        """What a started ``unit`` published, or ``None`` while it has not."""
        raise NotImplementedError

    def xnet_addresses(self, bound: dict[str, dict[str, str]]) -> dict[str, str]:
        """``{node: XNet address}`` from what units published."""
        raise NotImplementedError

    def is_held(self, unit: str) -> bool:
        return False

    def units_of(self, subnet: str) -> list[str]:
        """The units running ``subnet``'s nodes."""
        return [u for u in self.units if self.subnet_of[u] == subnet]

    def nodes_in(self, unit: str) -> int:
        """How many nodes ``unit``'s process runs."""
        return 1

    def log_unit(self, name: str) -> str:
        """Whose log ``replica testnet logs NAME`` shows (``TestnetError`` if none)."""
        raise NotImplementedError

    def keep_files(self, running: set[str], endpoints: dict[str, dict[str, str]]) -> None:
        """After each supervision check: the files the launcher keeps for the running units
        (``endpoints``: what each published)."""

    def stopped(self) -> None:
        """Every process is stopped."""

    def resumes_from(self, unit: str) -> str:
        """What a restarted ``unit`` continues from, for the launcher's note."""
        raise NotImplementedError

    def recordings(self) -> list:
        """Per subnet, what the run log is made of."""
        raise NotImplementedError


class NodeModel(ProcessModel):
    name, kind, has_node_processes = "node", "node process", True

    def __init__(self, layout: TestnetLayout, subnets: list[str]) -> None:
        super().__init__(layout, subnets)
        self.nodes_by_subnet = testnet_nodes(layout, self.subnets)
        self.units = [n for s in self.subnets for n in self.nodes_by_subnet[s]]
        self.subnet_of = {n: s for s, nodes in self.nodes_by_subnet.items() for n in nodes}
        self._http_written: dict[str, dict[str, str]] = {}
        self._status_written: dict[str, dict] = {}

    def clear(self) -> None:
        for subnet in self.subnets:   # the launcher writes these from the nodes' files
            self.layout.http(subnet).unlink(missing_ok=True)
            self.layout.status(subnet).unlink(missing_ok=True)
        for node in self.units:      # deaths asked of a previous launcher's processes
            self.layout.expected_death(node).unlink(missing_ok=True)

    def command(self, unit: str) -> list[str]:
        """Write the node's config unless it has one; remove what its last run bound and said."""
        files = self.layout.node_files(unit)
        if not files.config.exists():
            tick_s = float(self.layout.read_manifest().get("tick_s", 0.5))
            config = NodeProcessConfig(testnet_dir=str(self.layout.root.resolve()), node_id=unit,
                                       subnet_id=self.subnet_of[unit], tick_s=tick_s, block_interval_s=tick_s,
                                       round_timeout_s=max(1.0, 2 * tick_s))
            write_atomically(files.config, config.to_json().encode())
        files.endpoints.unlink(missing_ok=True)   # stale ports are never published
        files.status.unlink(missing_ok=True)      # nor a stale status taken for this run's
        return node_command(self.layout, unit)

    def bound(self, unit: str) -> dict[str, str] | None:
        return _read_endpoints(self.layout.node_files(unit).endpoints)

    def xnet_addresses(self, bound: dict[str, dict[str, str]]) -> dict[str, str]:
        return {node: endpoints["xnet"] for node, endpoints in bound.items()}

    def is_held(self, unit: str) -> bool:
        return self.layout.hold(unit).exists()

    def resumes_from(self, unit: str) -> str:
        return f"it resumes from {self.layout.node_files(unit).root}"

    def log_unit(self, name: str) -> str:
        """A node's own log; a subnet has none (each of its nodes has one)."""
        if name in self.nodes_by_subnet:
            raise TestnetError(f"{name} is a subnet; each of its nodes runs in its own process with its own log: "
                               f"{', '.join(self.nodes_by_subnet[name])}")
        if name not in self.subnet_of:
            raise TestnetError(f"no node {name!r}; the nodes are {', '.join(self.units)}")
        return name

    def recordings(self) -> list:
        """Per subnet, the recording of the node that executed the most batches from genesis
        (the first in registry order on a tie); a node whose log does not start at genesis
        (e.g. after a state sync) has none. ``TestnetError`` for a subnet without one."""
        from replica.testnet.recording import read_node_recording

        recordings = []
        for subnet, nodes in self.nodes_by_subnet.items():
            best = None
            for node in nodes:
                recording = read_node_recording(self.layout.node_files(node))
                if recording is not None and (best is None or len(recording.batches) > len(best.batches)):
                    best = recording
            if best is None:
                raise TestnetError(f"no node of {subnet} holds its executed log from genesis: no run log is written")
            recordings.append(best)
        return recordings

    def keep_files(self, running: set[str], endpoints: dict[str, dict[str, str]]) -> None:
        self._write_http(endpoints)
        self._write_status(running)

    def stopped(self) -> None:
        """Nothing serves the subnets' ingress addresses any more: ``http/<subnet>.json`` goes."""
        for subnet in self.subnets:
            self.layout.http(subnet).unlink(missing_ok=True)
            self._http_written[subnet] = {}

    def _write_http(self, endpoints: dict[str, dict[str, str]]) -> None:
        """``http/<subnet>.json``: the ingress addresses of the subnet's running, published nodes."""
        written = self._http_written
        for subnet, nodes in self.nodes_by_subnet.items():
            serving = {n: endpoints[n]["http"] for n in nodes if n in endpoints}
            if serving == written.get(subnet):
                continue
            if serving:
                self.layout.write_json(self.layout.http(subnet), serving)
            else:
                self.layout.http(subnet).unlink(missing_ok=True)
            written[subnet] = serving

    def _write_status(self, running: set[str]) -> None:
        """``status/<subnet>.json``: the status of the subnet's running node with the highest
        certified height (the first in registry order on a tie)."""
        written = self._status_written
        for subnet, nodes in self.nodes_by_subnet.items():
            best: dict[str, Any] | None = None
            for node in nodes:
                if node not in running:
                    continue
                current = self.layout.read_json(self.layout.node_files(node).status)
                if not isinstance(current, dict):
                    continue
                if best is None or (current.get("certified_height") or 0) > (best.get("certified_height") or 0):
                    best = current
            if best is not None and best != written.get(subnet):
                self.layout.write_json(self.layout.status(subnet), best)
                written[subnet] = best


class SubnetModel(ProcessModel):
    name, kind = "subnet", "subnet process"

    def __init__(self, layout: TestnetLayout, subnets: list[str]) -> None:
        super().__init__(layout, subnets)
        self.units = list(self.subnets)
        self.subnet_of = {s: s for s in self.subnets}

    def command(self, unit: str) -> list[str]:
        for stale in (self.layout.addresses(unit), self.layout.http(unit), self.layout.status(unit)):
            stale.unlink(missing_ok=True)
        return subnet_command(self.layout, unit)

    def bound(self, unit: str) -> dict[str, str] | None:
        return self.layout.read_json(self.layout.addresses(unit))

    def xnet_addresses(self, bound: dict[str, dict[str, str]]) -> dict[str, str]:
        return {node: address for addresses in bound.values() for node, address in addresses.items()}

    def resumes_from(self, unit: str) -> str:
        return f"it re-executes {self.layout.blocks(unit)}"

    def nodes_in(self, unit: str) -> int:
        return int(self.layout.read_manifest()["nodes"])

    def log_unit(self, name: str) -> str:
        """The log of the subnet, or of the subnet a node is in."""
        which = next((s for s in self.subnets if name == s or name.startswith(f"{s}-node")), "")
        if not which:
            raise TestnetError(f"no subnet or node {name!r}; the subnets are {', '.join(self.subnets)}")
        return which

    def recordings(self) -> list:
        from replica.testnet.recording import decode_recording

        return [decode_recording(self.layout.recording(subnet).read_bytes()) for subnet in self.subnets]


def process_model(layout: TestnetLayout, subnets: list[str], name: str | None = None) -> ProcessModel:
    """The model ``name`` (``None``: the manifest's) of the testnet in ``layout``."""
    name = name or process_model_of(layout.read_manifest())
    if name not in PROCESS_MODELS:
        raise TestnetError(f"no process model {name!r}; the models are {', '.join(PROCESS_MODELS)}")
    return NodeModel(layout, subnets) if name == "node" else SubnetModel(layout, subnets)
