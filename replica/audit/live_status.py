"""What a live audit says about itself while it runs: ``status.json`` in its directory, and
Prometheus metrics on 127.0.0.1 (docs/architecture.md, *The live audit*).

``status.json`` (replaced atomically about twice a second, and after every micro-batch)::

    {"format": "replica-live-audit-status", "version": 1, "pid", "state": "following" |
     "finished" | "stopped", "verdict": "agree" | "divergent" | "waiting", "replicas",
     "audited": {subnet: height}, "testnet": {subnet: height}, "lag_rounds": {subnet: rounds},
     "lag_rounds_max", "micro_batches", "resumed_from": {subnet: height} | null,
     "first_divergence": {"subnet", "height", "replicas", "detected_at": {subnet: height}} | null,
     "report": path | null, "metrics": url | null, "updated": unix seconds}

A live audit's directory is ``live-audit`` in the testnet directory unless it is told another
(``replica audit --follow --out``); ``replica testnet status`` and the status page read it
from there with ``read_live_status``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, start_http_server

__all__ = ["LIVE_AUDIT_DIR", "STATUS_FILE", "read_live_status", "describe_live_status", "LiveMetrics"]

LIVE_AUDIT_DIR = "live-audit"
STATUS_FILE = "status.json"
FORMAT = "replica-live-audit-status"


def read_live_status(testnet_dir: Path | str, audit_dir: Path | str | None = None) -> dict[str, Any] | None:
    """The live audit's status for a testnet directory (``None``: no live audit has run there)."""
    path = Path(audit_dir) if audit_dir is not None else Path(testnet_dir) / LIVE_AUDIT_DIR
    try:
        status = json.loads((path / STATUS_FILE).read_text())
    except (OSError, ValueError):
        return None
    return status if isinstance(status, dict) and status.get("format") == FORMAT else None


def describe_live_status(status: dict[str, Any]) -> str:
    """One line: ``live audit: AGREE, audited subnet-0 h120 (lag 2 rounds), …``."""
    verdict = str(status.get("verdict", "?")).upper()
    lags = status.get("lag_rounds") or {}
    parts = [f"{subnet} h{height} (lag {lags.get(subnet, '?')})"
             for subnet, height in sorted((status.get("audited") or {}).items())]
    line = f"live audit ({status.get('state', '?')}): {verdict}, {status.get('replicas', '?')} replicas; " + \
        ", ".join(parts or ["nothing audited yet"])
    first = status.get("first_divergence")
    if first:
        line += f"; first divergence {first['subnet']} at height {first['height']}"
    if status.get("report"):
        line += f"; report {status['report']}"
    return line


class LiveMetrics:
    """The live audit's own ``/metrics`` (its registry, served on 127.0.0.1)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.audited = Gauge("replica_live_audit_audited_height", "the last height every live replica replayed",
                             ["subnet"], registry=self.registry)
        self.testnet = Gauge("replica_live_audit_testnet_height", "the last height the testnet's nodes executed",
                             ["subnet"], registry=self.registry)
        self.lag = Gauge("replica_live_audit_lag_rounds", "rounds the audit is behind the testnet", ["subnet"],
                         registry=self.registry)
        self.divergent = Gauge("replica_live_audit_divergent", "1 once a replica diverged (the verdict), else 0",
                               registry=self.registry)
        self.divergent_replicas = Gauge("replica_live_audit_divergent_replicas", "replicas that diverged",
                                        registry=self.registry)
        self.micro_batches = Gauge("replica_live_audit_micro_batches", "micro-batches done", registry=self.registry)
        self._server = None

    def serve(self, port: int = 0) -> str:
        server, _ = start_http_server(port, addr="127.0.0.1", registry=self.registry)
        self._server = server
        return f"http://127.0.0.1:{server.server_port}/metrics"

    def update(self, status: dict[str, Any], divergent_replicas: int) -> None:
        for subnet, height in (status.get("audited") or {}).items():
            self.audited.labels(subnet).set(height)
        for subnet, height in (status.get("testnet") or {}).items():
            self.testnet.labels(subnet).set(height)
        for subnet, lag in (status.get("lag_rounds") or {}).items():
            self.lag.labels(subnet).set(lag)
        self.divergent.set(1 if status.get("verdict") == "divergent" else 0)
        self.divergent_replicas.set(divergent_replicas)
        self.micro_batches.set(status.get("micro_batches", 0))

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
