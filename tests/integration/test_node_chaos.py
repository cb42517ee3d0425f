"""Ledger traffic on 2 subnets x 4 node processes while the launcher SIGKILLs random nodes
(at most f = 1 per subnet down at a time) and restarts them: no call lost or answered twice,
the supply unchanged, every node at the same hashes at every height it executed (issue 15)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from examples.ledger import account_of
from replica.client.agent_errors import CallRejected
from replica.node.node_store import ExecutedLog
from replica.testnet import launcher as tn
from replica.testnet.http_endpoints import agent_for_testnet

pytestmark = pytest.mark.timeout(420)

SEED = b"node-chaos-test-seed-of-32-bytes"
TRANSFERS = 40


def _wait(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _converged(root: Path, subnet: str, nodes: list[str]) -> int:
    by_height: dict[int, set] = {}
    for node in nodes:
        log = ExecutedLog(root / "nodes" / node / "executed.log")
        try:
            for height, _, full, certified in log.entries:
                by_height.setdefault(height, set()).add((full, certified))
        finally:
            log.close()
    diverged = [h for h, hashes in by_height.items() if len(hashes) > 1]
    assert not diverged, f"{subnet} diverged at heights {diverged[:5]}"
    return max(by_height)


def test_ledger_traffic_survives_repeated_sigkills_of_up_to_f_nodes_per_subnet(tmp_path):
    root = tmp_path / "net"
    layout = tn.create_testnet(root, 2, 4, seed=SEED, tick_s=0.2, genesis_apps=True)
    out = open(tmp_path / "launcher.out", "wb")
    launcher = subprocess.Popen(
        [sys.executable, "-m", "replica.cli", "testnet", "run", "--dir", str(root), "--duration", "75",
         "--no-traffic", "--chaos-kill", "0.3", "--chaos-seed", "11"],
        stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    agents = []
    try:
        _wait(lambda: all((layout.read_json(layout.status(s)) or {}).get("certified_height", 0) >= 2
                          for s in ("subnet-0", "subnet-1")), 120, "both subnets to certify")
        users = {s: tn.user_key(s) for s in ("subnet-0", "subnet-1")}
        ledgers = {s: tn.canister_range(i)[0] + tn.LEDGER for i, s in enumerate(("subnet-0", "subnet-1"))}
        sent = {s: [] for s in users}   # (message id, amount) per paying subnet
        for i in range(TRANSFERS):
            payer = "subnet-0" if i % 2 == 0 else "subnet-1"
            payee = "subnet-1" if payer == "subnet-0" else "subnet-0"
            agent = agent_for_testnet(root, users[payer])
            agents.append(agent)
            amount = 1 + i
            message_id = agent.submit_call(ledgers[payer], "transfer", {
                "to_ledger": ledgers[payee], "to": account_of(users[payee].principal.raw), "amount": amount})
            sent[payer].append((agent, message_id, amount))
            time.sleep(0.5)
        moved = {s: 0 for s in users}
        outcomes = {"replied": 0, "rejected": 0}
        for payer, calls in sent.items():
            for agent, message_id, amount in calls:
                try:
                    agent.wait(message_id, ledgers[payer], timeout_s=120)
                except CallRejected:
                    outcomes["rejected"] += 1   # refunded by the paying ledger
                    continue
                outcomes["replied"] += 1
                moved[payer] += amount
        assert outcomes["replied"] + outcomes["rejected"] == TRANSFERS
        assert outcomes["replied"] >= TRANSFERS // 2, outcomes
        # exactly once: every answered transfer moved its amount once, every rejected one none
        reader = agent_for_testnet(root, users["subnet-0"])
        agents.append(reader)
        for me, other in (("subnet-0", "subnet-1"), ("subnet-1", "subnet-0")):
            account = account_of(users[me].principal.raw)
            _wait(lambda: reader.query_call(ledgers[me], "escrow") == 0, 60, f"{me}'s escrow to empty")
            balance = reader.query_call(ledgers[me], "balance", account)
            assert balance == tn.INITIAL_BALANCE - moved[me] + moved[other], (me, balance, moved)
        code = launcher.wait(timeout=240)
        output = (tmp_path / "launcher.out").read_text()
        assert code == 0, output[-4000:]
        assert "invariant holds" in output
        kills = [line for line in output.splitlines() if "chaos" in line.lower() and "kill" in line.lower()]
        assert kills, output[-3000:]
    finally:
        for agent in agents:
            agent.close()
        if launcher.poll() is None:
            launcher.send_signal(signal.SIGTERM)
            try:
                launcher.wait(60)
            except subprocess.TimeoutExpired:
                launcher.kill()
                launcher.wait()
        out.close()
    restarts = sum(1 for line in (root / "logs").glob("*.log") for _ in [0]
                   if "state of height" in line.read_text() and line.read_text().count("state of height") > 1)
    assert restarts >= 2, "chaos restarted fewer than two nodes"
    for subnet, nodes in tn.testnet_nodes(layout).items():
        assert _converged(root, subnet, nodes) > 20
    assert os.path.exists(root / "run")
