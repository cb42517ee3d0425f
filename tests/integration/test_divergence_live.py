"""Divergence on a live 1 x 4 testnet of node processes (issue 24 item 4), injected with the
fault knob ``fault_diverge_at_height`` (not a canister):

* one node diverged: it logs an ERROR naming the height, its root and who signed which root,
  ``/metrics`` counts it, its status (and ``replica testnet status``) says "diverged at h";
  it stops signing, syncs the certified majority's checkpoint at or above h, re-executes its
  own blocks and certifies with the others again, while the subnet never stops certifying;
* two nodes diverged (no root has 2f + 1 shares): every node's status says "certification
  stalled since h: shares disagree (root a…: n1,n2; root b…: n3; root c…: n4)".
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import urllib.request

import pytest

from replica.node.process_config import NodeProcessConfig
from replica.observe.status_page import StatusPage

from .node_processes import NodeProcesses

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SUBNET = "subnet-0"
NODES = [f"{SUBNET}-node-{i}" for i in range(1, 5)]
#: The knob's height, and checkpoints far enough above it that the diverged state is seen for
#: a while before a certified checkpoint at or above it exists to recover from.
DIVERGE_AT = 6
CHECKPOINT_INTERVAL = 30


def _inject(cluster: NodeProcesses, node: str, height: int) -> None:
    path = cluster.files(node).config
    config = dataclasses.replace(NodeProcessConfig.from_file(path), fault_diverge_at_height=height)
    path.write_text(config.to_json())


def _health(cluster: NodeProcesses, node: str) -> dict:
    return cluster.status(node).get("certification") or {}


def _metrics(cluster: NodeProcesses, node: str) -> str:
    address = json.loads(cluster.files(node).endpoints.read_text())["http"]
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=30) as answer:
        return answer.read().decode()


def _testnet_status(cluster: NodeProcesses) -> str:
    done = subprocess.run([sys.executable, "-m", "replica.cli", "testnet", "status", "--dir", str(cluster.root)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def cluster(tmp_path):
    nodes = NodeProcesses(tmp_path / "testnet", checkpoint_interval=CHECKPOINT_INTERVAL)
    try:
        yield nodes
    finally:
        nodes.stop()


def test_a_diverged_node_is_reported_stops_signing_and_recovers_from_the_certified_majority(cluster):
    victim, others = NODES[2], [n for n in NODES if n != NODES[2]]
    _inject(cluster, victim, DIVERGE_AT)
    cluster.start()
    cluster.wait_until(lambda: _health(cluster, victim).get("state") == "diverged", 120, f"{victim} diverged")
    health = _health(cluster, victim)
    assert health["diverged"]["height"] >= DIVERGE_AT
    assert health["summary"].startswith(f"diverged at {health['diverged']['height']}: own root ")
    signers = {tuple(r["signers"]) for r in health["diverged"]["shares"]}
    assert (victim,) in signers   # alone with its root
    shown = _testnet_status(cluster)
    assert f"{victim}: diverged at {health['diverged']['height']}" in shown
    # the others go on certifying meanwhile, past the next checkpoint height
    target = CHECKPOINT_INTERVAL + 5
    cluster.wait_until(lambda: all((cluster.status(n).get("certified_height") or 0) >= target for n in others),
                       180, f"the others certifying height {target}")
    cluster.wait_until(lambda: (_health(cluster, victim).get("last_recovery") or {}).get("installed", 0)
                       >= DIVERGE_AT, 180, f"{victim} recovered")
    recovery = _health(cluster, victim)["last_recovery"]
    assert recovery["diverged_at"] == health["diverged"]["height"] and recovery["installed"] >= recovery["diverged_at"]
    # signing again: certifications of its own roots reach it, near the others' tip
    tip = max(cluster.status(n).get("certified_height") or 0 for n in others)
    cluster.wait_until(lambda: (cluster.status(victim).get("certified_height") or 0) >= tip
                       and _health(cluster, victim).get("state") == "ok", 120, f"{victim} certifying again")
    log = cluster.log(victim)
    error = next(line for line in log.splitlines() if " ERROR " in line and "state diverged at height" in line)
    assert f"{victim}: state diverged at height {health['diverged']['height']}: own root " \
           f"{health['diverged']['own_root'][:8]}…" in error
    assert "root " + health["diverged"]["certified_root"][:8] + "…: " + ",".join(others) in error
    assert "recovered from the divergence" in log
    metrics = _metrics(cluster, victim)
    assert "replica_state_divergences_total 1.0" in metrics
    assert "replica_state_recoveries_total 1.0" in metrics
    assert "replica_diverged_height 0.0" in metrics
    assert f"{victim}: diverged" not in _testnet_status(cluster)
    # (with f = 1 spent on the diverged node, a lagging healthy node may leave a few heights
    # short of shares for a while: what matters is that every status settles at ok)
    cluster.wait_until(lambda: all(_health(cluster, n).get("state") == "ok" for n in others), 120,
                       "the others' certification status ok")
    # the recovered node's own hashes from the installed height on are the subnet's
    assert cluster.assert_converged(SUBNET) >= target
    # and it restarts from the certified state it installed (its diverged checkpoints are aside)
    cluster.kill(victim)
    cluster.start(victim)
    tip = max(cluster.status(n).get("certified_height") or 0 for n in others) + 3
    cluster.wait_until(lambda: (cluster.status(victim).get("certified_height") or 0) >= tip, 120,
                       f"{victim} certifying after its restart")
    assert _health(cluster, victim).get("state") == "ok"
    assert cluster.assert_converged(SUBNET) >= tip


def test_diverged_on_two_of_four_nodes_certification_stalls_and_every_status_says_why(cluster):
    for victim in NODES[2:]:
        _inject(cluster, victim, DIVERGE_AT)
    cluster.start()

    def stalled() -> bool:
        return all(_health(cluster, n).get("state") == "stalled" for n in NODES)
    cluster.wait_until(stalled, 120, "every node to report the stall")
    summary = _health(cluster, NODES[0])["summary"]
    assert summary.startswith(f"certification stalled since {DIVERGE_AT}: shares disagree (root ")
    assert f"…: {NODES[0]},{NODES[1]}; root " in summary
    assert summary.count("; root ") == 2 and f"…: {NODES[2]}" in summary and f"…: {NODES[3]}" in summary
    assert all((cluster.status(n).get("certified_height") or 0) < DIVERGE_AT for n in NODES)
    shown = _testnet_status(cluster)
    assert f"{NODES[0]}: certification stalled since {DIVERGE_AT}: shares disagree" in shown
    on_page = {p["node"]: p for p in StatusPage(cluster.root).view()["certification"]}   # the status page's view
    assert sorted(on_page) == NODES
    assert all(p["summary"].startswith(f"certification stalled since {DIVERGE_AT}: shares disagree")
               for p in on_page.values())
    metrics = _metrics(cluster, NODES[0])
    assert 'replica_certification_stalls_total{reason="shares_disagree"} 1.0' in metrics
    assert f"replica_certification_stalled_height {float(DIVERGE_AT)}" in metrics
    assert any(" ERROR " in line and "certification stalled since" in line
               for line in cluster.log(NODES[0]).splitlines())
