"""Which nodes of a running testnet diverged, or see certification stall (shell;
docs/architecture.md, *Guarantees, and where each is tested*: divergence).

Every node process writes ``certification`` into its ``status.json`` each tick
(``replica.node.certification_health``): ``state`` (``ok``, ``diverged``, ``stalled``), a
one-line ``summary`` ("diverged at 12: ..." / "certification stalled since 12: shares
disagree (root a…: n1,n2; root b…: n3)"), the messages executed at that height and the last
recovery. ``certification_problems`` reads them for ``replica testnet status``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .launcher import TestnetLayout, process_model_of, testnet_nodes

__all__ = ["CertificationProblem", "certification_problems"]


@dataclass(frozen=True)
class CertificationProblem:
    """A node whose certification is not ``ok``, as its status file says."""

    node: str
    subnet: str
    state: str
    summary: str
    messages: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        head = f"{self.node}: {self.summary}"
        if not self.messages:
            return [head]
        return [head, "  executed at that height:"] + [f"    {m}" for m in self.messages]

    def as_json(self) -> dict:
        return {"node": self.node, "subnet": self.subnet, "state": self.state, "summary": self.summary,
                "messages": list(self.messages)}


def certification_problems(layout: TestnetLayout) -> list[CertificationProblem]:
    """Every node (node process model) whose status says it diverged or sees certification
    stall; nodes without a readable status are left to the other status lines."""
    if process_model_of(layout.read_manifest()) != "node":
        return []
    problems = []
    for subnet, nodes in testnet_nodes(layout).items():
        for node in nodes:
            try:
                raw: Any = json.loads(layout.node_files(node).status.read_text())
                health = raw.get("certification") or {}
                state, summary = str(health.get("state", "ok")), str(health.get("summary", ""))
                messages = tuple(str(m) for m in health.get("messages") or ())
            except (OSError, ValueError, AttributeError, TypeError):
                continue
            if state != "ok":
                problems.append(CertificationProblem(node, subnet, state, summary, messages))
    return problems
