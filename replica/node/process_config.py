"""What a node process is told at start (``replica node run --config FILE``), and where it keeps its files.

The config is a small JSON file the launcher writes into the node's directory
(``<testnet>/nodes/<node id>/config.json``); everything else — registry, secrets, genesis,
limits, canister modules — the node reads from the testnet directory it names. A typo in
the file is a ``NodeConfigError`` naming the field, never a default silently taken.

A node's directory (``NodeFiles``) holds only what that node wrote:

    config.json        this config
    endpoints.json     {"xnet", "agreement", "http": "127.0.0.1:port"} once bound
    ports.json         {"xnet", "agreement", "http": port}: what it bound last, asked for
                       again when it restarts (``replica.node.ports``)
    status.json        heights, streams and app numbers, rewritten every tick
    blocks.log         its finalized blocks (``consensus_stub.block_store``)
    agreement.log      the agreement artifacts it signed (``replica.node.node_store``)
    proof.bin          the finalization proof of its latest finalized height
    executed.log       per executed height: batch bytes and hashes (the run log's source)
    checkpoints/       verified checkpoints every ``checkpoint_interval`` heights
    certifications/    the certifications of checkpoint heights (what state sync checks)
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from replica.errors import ReplicaError

__all__ = ["NodeConfigError", "NodeProcessConfig", "NodeFiles"]


class NodeConfigError(ReplicaError, ValueError):
    """A node config that cannot be used, with the field and the reason."""


@dataclass(frozen=True)
class NodeProcessConfig:
    testnet_dir: str
    node_id: str
    subnet_id: str
    #: A checkpoint every this many heights (written atomically, verified when loaded).
    checkpoint_interval: int = 100
    #: Checkpoints kept (older ones are deleted after a newer one is written).
    checkpoints_kept: int = 3
    #: Finalized blocks a node keeps to answer peers' catch-up; further behind needs state sync.
    retained_heights: int = 1_000
    #: Rank r proposes r x this after a round starts (when the makers before it are silent).
    round_timeout_s: float = 1.0
    #: The least time between heights of an idle subnet.
    block_interval_s: float = 0.5
    #: Seconds between status-file writes (and demo traffic ticks).
    tick_s: float = 0.5
    #: Seconds between the routine checks of ``registry.bin`` (0: every tick; every tick anyway
    #: until the node's XNet address is published). Whatever it is, a block naming a registry
    #: version the node has not read makes it read the file at once.
    registry_poll_s: float = 0.0
    #: Fault injection for tests only (``replica.node.faults``): perturb the state this node
    #: computes at this height, so that it diverges from its subnet's (0: never).
    fault_diverge_at_height: int = 0

    def __post_init__(self) -> None:
        for name in ("testnet_dir", "node_id", "subnet_id"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise NodeConfigError(f"{name} must be a non-empty string")
        for name in ("checkpoint_interval", "checkpoints_kept", "retained_heights"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise NodeConfigError(f"{name} must be a positive integer, got {value!r}")
        value = self.fault_diverge_at_height
        if type(value) is not int or value < 0:
            raise NodeConfigError(f"fault_diverge_at_height must be a non-negative integer (0: off), got {value!r}")
        for name in ("round_timeout_s", "tick_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
                raise NodeConfigError(f"{name} must be a positive number, got {value!r}")
        for name in ("block_interval_s", "registry_poll_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise NodeConfigError(f"{name} must be a non-negative number, got {value!r}")

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, indent=1)

    @classmethod
    def from_file(cls, path: Path | str) -> "NodeProcessConfig":
        try:
            raw = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise NodeConfigError(f"cannot read node config {path}: {exc}") from exc
        if not isinstance(raw, dict):
            raise NodeConfigError(f"node config {path} is not a JSON object")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise NodeConfigError(f"node config {path}: unknown fields {unknown}")
        try:
            return cls(**raw)
        except TypeError as exc:
            raise NodeConfigError(f"node config {path}: {exc}") from exc

    @property
    def files(self) -> "NodeFiles":
        return NodeFiles(Path(self.testnet_dir) / "nodes" / self.node_id)


@dataclass(frozen=True)
class NodeFiles:
    """Paths inside one node's directory (module docstring)."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.json"

    @property
    def endpoints(self) -> Path:
        return self.root / "endpoints.json"

    @property
    def ports(self) -> Path:
        return self.root / "ports.json"

    @property
    def status(self) -> Path:
        return self.root / "status.json"

    @property
    def blocks(self) -> Path:
        return self.root / "blocks.log"

    @property
    def agreement_log(self) -> Path:
        return self.root / "agreement.log"

    @property
    def proof(self) -> Path:
        return self.root / "proof.bin"

    @property
    def executed_log(self) -> Path:
        return self.root / "executed.log"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def certifications(self) -> Path:
        return self.root / "certifications"
