"""``replica load`` through chaos (issue 27): a live 2 x 4 testnet started with ``replica testnet
up --chaos-kill`` SIGKILLs random nodes (at most f = 1 per subnet down at once) while load and
the agent's own update and query calls go through the nodes' ingress APIs. Restarted nodes
come back on their addresses and the agent fails over meanwhile, so every submitted call is
answered exactly once: none lost, none duplicated, and nothing counted as refused or not
submitted, since no node refused anything."""

from __future__ import annotations

import json
import threading
import time

import pytest

from replica.client.identity import Ed25519Identity
from replica.testnet import launcher as tn
from replica.testnet.http_endpoints import agent_for_testnet
from replica.load.load import LoadOptions, install_load_canisters, run_load
from replica.load.load_report import CLIENT_LIMIT
from tests.integration.test_load import _replica, _stop

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

SUBNETS = ["subnet-0", "subnet-1"]


def test_load_and_agent_calls_through_chaos_kills_are_each_answered_once(tmp_path):
    directory = tmp_path / "net"
    direct = {"updates": [], "queries": 0, "errors": []}
    try:
        _replica(tmp_path, "testnet", "up", "--dir", str(directory), "--subnets", "2", "--nodes", "4",
                 "--chaos-kill", "0.2", "--chaos-seed", "7")
        with agent_for_testnet(directory, Ed25519Identity.from_seed(b"load-chaos-test")) as agent:
            canisters = install_load_canisters(agent, SUBNETS, 3)
            loaded = {subnet: ids[:2] for subnet, ids in canisters.items()}   # the third: the agent's own calls
            mine = [canisters["subnet-0"][2], canisters["subnet-1"][2]]
            until = time.monotonic() + 30

            def agent_calls() -> None:   # update and query calls of the agent itself, beside the load
                try:
                    while time.monotonic() < until:
                        k = len(direct["updates"]) + 1
                        direct["updates"].append(agent.update_call(mine[k % 2], "relay",
                                                                   {"target": mine[(k + 1) % 2]}, timeout_s=60))
                        assert agent.query_call(mine[k % 2], "stats")["replied"] >= 1
                        direct["queries"] += 1
                except BaseException as exc:  # noqa: BLE001 - reported by the test below
                    direct["errors"].append(exc)

            caller = threading.Thread(target=agent_calls)
            caller.start()
            report = run_load(agent, SUBNETS, LoadOptions(rate=20, duration_s=45, drain_s=90, seed=7),
                              canisters=loaded)
            caller.join(timeout=90)
            stats = [agent.query_call(c, "stats") for c in mine]
    finally:
        _stop(tmp_path, directory)
    print(json.dumps(report.as_json()))
    launcher_log = (directory / "logs" / "launcher.log").read_text()
    kills = launcher_log.count("chaos: killing")
    assert kills >= 4, launcher_log[-3000:]
    # every offered call submitted and answered exactly once; nothing refused that no node refused
    assert report.lost == 0 and report.duplicated == 0, report.as_json()
    assert report.refused == {}, report.as_json()
    # The one cause a call may go unsubmitted for is the client's own pace on a loaded machine
    # (a submitter that could not start it within a second of its due time), never a node.
    skipped = report.not_submitted.get(CLIENT_LIMIT, 0)
    assert set(report.not_submitted) <= {CLIENT_LIMIT} and skipped <= report.offered // 50, report.as_json()
    assert report.offered - skipped == report.submitted == report.answered == report.replied >= 800
    totals = report.canister_totals
    assert totals["relayed"] == totals["echoed"] == totals["replied"] == report.replied and totals["violations"] == 0
    # the agent's own calls: each answered once (its sequence number), queries answered
    assert not direct["errors"], direct["errors"]
    assert direct["updates"] and direct["queries"] == len(direct["updates"])
    assert sum(s["relayed"] for s in stats) == sum(s["replied"] for s in stats) == len(direct["updates"])
    assert sum(s["violations"] for s in stats) == 0
    # the testnet is down and its run log written
    assert not (directory / "pids" / "launcher.pid").exists()
    assert tn.TestnetLayout(directory).run.exists()
