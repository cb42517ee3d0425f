"""Which nodes of a running testnet run a registry version yet, and what holds the others (shell).

Every node process writes into its status file (``nodes/<node>/status.json``; a subnet
process, for all its nodes at once, ``status/<subnet>.json``) each tick:

* ``registry_version``: the registry version of its latest executed batch (what it runs);
* ``registry_read``: the newest version it has read from ``registry.bin``;
* ``registry_error``: why its last read of ``registry.bin`` failed (``null`` after a good one);
* ``awaiting_registry``: ``[height, version]`` when a finalized block waits for a version
  the node has not read (node processes);
* ``height`` and ``finalized_height``.

``node_registry_statuses(layout, subnets)`` reads them; ``NodeRegistryStatus.lag(version)``
says in words why a node does not run ``version`` yet.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .launcher import TestnetLayout, process_model_of, testnet_nodes

__all__ = ["NodeRegistryStatus", "node_registry_statuses"]

#: A status file older than this (seconds; nodes rewrite theirs every tick) is reported as stale.
STALE_STATUS_S = 5.0


@dataclass(frozen=True)
class NodeRegistryStatus:
    """One node's (or, in the subnet process model, one subnet process's) registry version."""

    node: str
    subnet: str
    height: int              # executed
    registry_version: int    # of the latest executed batch
    finalized_height: int | None = None
    registry_read: int | None = None
    registry_error: str | None = None
    awaiting: tuple[int, int] | None = None   # (finalized height, registry version it waits for)
    age_s: float | None = None                # since the status was written
    unreadable: str | None = None             # why there is no status to go by

    def lag(self, version: int) -> str:
        """Why this node does not run ``version`` yet, from what it reported."""
        if self.unreadable is not None:
            return self.unreadable
        why = [f"runs registry version {self.registry_version} at height {self.height}"]
        if self.awaiting is not None:
            why.append(f"its finalized height {self.awaiting[0]} waits for registry version {self.awaiting[1]}, "
                       f"which it has not read")
        if self.registry_read is not None and self.registry_read < version:
            why.append(f"it has read registry version {self.registry_read} only")
        if self.registry_error:
            why.append(f"its last read of registry.bin failed: {self.registry_error}")
        if self.finalized_height is not None and self.finalized_height > self.height:
            why.append(f"finalized height {self.finalized_height} but executed {self.height}")
        if self.age_s is not None and self.age_s > STALE_STATUS_S:
            why.append(f"its status was written {self.age_s:.0f} s ago (the process is stuck or gone)")
        if len(why) == 1:
            why.append("no batch of that version executed yet")
        return "; ".join(why)


def _status(node: str, subnet: str, path: Path, now: float) -> NodeRegistryStatus:
    try:
        age = now - path.stat().st_mtime
        raw: Any = json.loads(path.read_text())
        awaiting = raw.get("awaiting_registry")
        return NodeRegistryStatus(
            node, subnet, int(raw["height"]), int(raw.get("registry_version", 0)),
            finalized_height=raw.get("finalized_height"), registry_read=raw.get("registry_read"),
            registry_error=raw.get("registry_error"),
            awaiting=(int(awaiting[0]), int(awaiting[1])) if awaiting else None, age_s=age)
    except FileNotFoundError:
        return NodeRegistryStatus(node, subnet, 0, 0, unreadable=f"no status file {path} (not running?)")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        return NodeRegistryStatus(node, subnet, 0, 0, unreadable=f"its status file {path} is unreadable: {exc}")


def node_registry_statuses(layout: TestnetLayout, subnets: tuple[str, ...] | list[str]) -> list[NodeRegistryStatus]:
    """The registry status of every node of ``subnets`` (one per subnet process in the subnet
    process model, whose nodes take a new version together), from their status files."""
    now = time.time()
    if process_model_of(layout.read_manifest()) != "node":
        return [_status(subnet, subnet, layout.status(subnet), now) for subnet in subnets]
    nodes = testnet_nodes(layout, list(subnets))
    return [_status(node, subnet, layout.node_files(node).status, now) for subnet in subnets for node in nodes[subnet]]
