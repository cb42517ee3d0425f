"""Test harness: a testnet whose nodes are real ``replica node run`` processes, driven one by one.

The launcher supervises nodes for users; tests of crash recovery need to kill one node at a
chosen moment, hold it down, corrupt its files and start it again, so this harness starts
each node itself (on 127.0.0.1, every process stopped by its own pid at the end) and
publishes their XNet addresses into ``registry.bin`` as the launcher does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from consensus_stub.registry import decode_registry
from replica.node.node_store import ExecutedLog
from replica.node.process_config import NodeFiles, NodeProcessConfig
from replica.testnet.launcher import create_testnet, update_registry_file

SEED = b"node-process-tests".ljust(32, b".")


class NodeProcesses:
    def __init__(self, root: Path, *, subnets: int = 1, nodes: int = 4, apps: bool = True,
                 checkpoint_interval: int = 10, retained_heights: int = 1_000, block_interval_s: float = 0.1,
                 round_timeout_s: float = 1.0, limits: str = "DEFAULT") -> None:
        self.root = root
        self.layout = create_testnet(root, subnets, nodes, seed=SEED, tick_s=0.25, genesis_apps=apps, limits=limits)
        registry = decode_registry(self.layout.registry.read_bytes())
        self.subnets = {r.subnet_id: list(r.node_ids) for r in registry.latest().subnets}
        self.processes: dict[str, subprocess.Popen] = {}
        for subnet, members in self.subnets.items():
            for node in members:
                config = NodeProcessConfig(str(root), node, subnet, checkpoint_interval=checkpoint_interval,
                                           retained_heights=retained_heights, round_timeout_s=round_timeout_s,
                                           block_interval_s=block_interval_s, tick_s=0.25)
                config.files.root.mkdir(parents=True, exist_ok=True)
                config.files.config.write_text(config.to_json())

    # -- processes ------------------------------------------------------------------------

    def files(self, node: str) -> NodeFiles:
        return NodeFiles(self.root / "nodes" / node)

    @property
    def nodes(self) -> list[str]:
        return [n for members in self.subnets.values() for n in members]

    def start(self, *nodes: str, env: dict[str, str] | None = None, timeout_s: float = 60.0) -> None:
        """Start ``nodes`` (none: all) and publish their addresses once every one has bound."""
        nodes = nodes or tuple(self.nodes)
        for node in nodes:
            self.files(node).endpoints.unlink(missing_ok=True)
            log = open(self.root / f"{node}.log", "ab")
            self.processes[node] = subprocess.Popen(
                [sys.executable, "-m", "replica.cli", "node", "run", "--config", str(self.files(node).config)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})
            log.close()
        addresses: dict[str, str] = {}
        deadline = time.monotonic() + timeout_s
        while len(addresses) < len(nodes):
            for node in nodes:
                if self.processes[node].poll() is not None:
                    raise AssertionError(f"{node} exited with {self.processes[node].returncode}: {self.log(node)[-3000:]}")
                try:
                    addresses[node] = json.loads(self.files(node).endpoints.read_text())["xnet"]
                except (OSError, ValueError, KeyError):
                    pass
            if time.monotonic() > deadline:
                raise AssertionError(f"nodes {sorted(set(nodes) - set(addresses))} did not bind")
            time.sleep(0.05)
        update_registry_file(self.layout, lambda registry: registry.with_node_addresses(addresses))

    def kill(self, node: str) -> None:
        process = self.processes.pop(node)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()

    def wait_exit(self, node: str, timeout_s: float = 60.0) -> int:
        code = self.processes[node].wait(timeout_s)
        del self.processes[node]
        return code

    def stop(self) -> None:
        """SIGTERM every node, SIGKILL those still running after 20 s; each by its own pid."""
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes.clear()

    def log(self, node: str) -> str:
        return (self.root / f"{node}.log").read_text(errors="replace")

    # -- reading --------------------------------------------------------------------------

    def status(self, node: str) -> dict:
        try:
            return json.loads(self.files(node).status.read_text())
        except (OSError, ValueError):
            return {}

    def height(self, node: str) -> int:
        return self.status(node).get("height", 0)

    def wait_until(self, condition: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            for node, process in self.processes.items():
                if process.poll() is not None:
                    raise AssertionError(f"{node} died ({process.returncode}) waiting for {what}: "
                                         f"{self.log(node)[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}: "
                                     f"{ {n: self.height(n) for n in self.nodes} }")
            time.sleep(0.1)

    def wait_heights(self, height: int, nodes: list[str] | None = None, timeout_s: float = 60.0) -> None:
        nodes = nodes or list(self.processes)
        self.wait_until(lambda: all(self.height(n) >= height for n in nodes), timeout_s, f"height {height}")

    def executed(self, node: str) -> dict[int, tuple[bytes, bytes]]:
        log = ExecutedLog(self.files(node).executed_log)
        try:
            return {h: (full, root) for h, _, full, root in log.entries}
        finally:
            log.close()

    def assert_converged(self, subnet: str) -> int:
        """Every node of ``subnet`` reached the same hashes at every height it executed; the
        number of heights compared."""
        by_height: dict[int, dict[str, tuple[bytes, bytes]]] = {}
        for node in self.subnets[subnet]:
            for height, hashes in self.executed(node).items():
                by_height.setdefault(height, {})[node] = hashes
        for height, hashes in sorted(by_height.items()):
            assert len(set(hashes.values())) == 1, f"{subnet} diverged at height {height}: {hashes}"
        return len(by_height)
