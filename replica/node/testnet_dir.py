"""A testnet directory as a node process reads it (shell).

A node process is told one directory (``NodeProcessConfig.testnet_dir``) and reads there what
it runs by: the manifest (limits preset, canister modules), ``registry.bin``, its subnet's
genesis state, its own secrets, and its own directory ``nodes/<node>/``
(``replica.node.process_config.NodeFiles``). ``TestnetDirectory`` names those paths; the
testnet room writes the directory (``replica.testnet.launcher.TestnetLayout``, which adds the
launcher's own files to these).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from message_routing.limits import DEFAULT, MINIMAL, Limits
from replica.errors import ReplicaError
from replica.ic.identities import Ed25519Identity
from state_manager.durable_files import write_atomically

from .process_config import NodeFiles

__all__ = ["TestnetError", "TestnetDirectory", "LIMIT_PRESETS", "EXIT_REFUSED", "LAUNCHER_PID_ENV"]

#: ``TINY_QUEUES``: ``MINIMAL``'s queues, streams, slices and round budgets (back-pressure on
#: every path), with ingress, blocks and expiries large enough to install canisters.
LIMIT_PRESETS = {
    "DEFAULT": DEFAULT, "MINIMAL": MINIMAL,
    "TINY_QUEUES": MINIMAL.with_(max_ingress_bytes=DEFAULT.max_ingress_bytes // 64,
                                 max_block_payload_bytes=DEFAULT.max_block_payload_bytes // 32,
                                 max_ingress_ttl_ns=DEFAULT.max_ingress_ttl_ns,
                                 ingress_history_retention_ns=DEFAULT.ingress_history_retention_ns),
}

#: A node process exiting with this code refused to start (e.g. a corrupt block log):
#: restarting it would only fail again, so the launcher stops the testnet instead.
EXIT_REFUSED = 3
#: Set in a node process's environment: the launcher's pid (the process stops when it dies).
LAUNCHER_PID_ENV = "REPLICA_TESTNET_LAUNCHER_PID"


class TestnetError(ReplicaError, RuntimeError):
    """The testnet directory or one of its processes is not usable."""


@dataclass(frozen=True)
class TestnetDirectory:
    """The paths of a testnet directory every reader needs (module docstring)."""

    root: Path

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def registry(self) -> Path:
        return self.root / "registry.bin"

    def genesis(self, subnet: str) -> Path:
        return self.root / "genesis" / f"{subnet}.bin"

    def secrets(self, node: str) -> Path:
        return self.root / "secrets" / f"{node}.bin"

    def node_files(self, node: str) -> NodeFiles:
        """``nodes/<node>/``: a node process's files."""
        return NodeFiles(self.root / "nodes" / node)

    def read_manifest(self) -> dict[str, Any]:
        try:
            return json.loads(self.manifest.read_text())
        except (OSError, ValueError) as exc:
            raise TestnetError(f"{self.root} is not a testnet directory: {exc}") from exc

    def operator(self, manifest: dict[str, Any] | None = None) -> Ed25519Identity:
        """The testnet's operator: an Ed25519 identity derived from the manifest's seed, so
        whoever holds the directory (its node secrets too) holds it. A node shows the status of
        any request to it, beside each request's sender, for ``replica trace`` and the status
        page (the IC shows a status to its sender only; docs/architecture.md, *The IC's HTTP
        interface*)."""
        seed = (manifest if manifest is not None else self.read_manifest()).get("seed")
        if not isinstance(seed, str):
            raise TestnetError(f"{self.manifest} names no seed")
        return Ed25519Identity.from_seed(b"replica testnet operator" + bytes.fromhex(seed))

    def limits(self, manifest: dict[str, Any]) -> Limits:
        """The limits the manifest's preset names."""
        try:
            return LIMIT_PRESETS[manifest["limits"]]
        except KeyError as exc:
            raise TestnetError(f"{self.manifest} names no limits preset of {sorted(LIMIT_PRESETS)}") from exc

    def write_json(self, path: Path, value: Any) -> None:
        """Atomically and durably replace ``path`` (its directory created if needed)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, json.dumps(value, sort_keys=True).encode())

    def read_json(self, path: Path) -> Any | None:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None
