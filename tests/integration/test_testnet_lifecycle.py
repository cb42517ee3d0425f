"""``replica testnet up | status | logs | down`` through the command line only: a testnet in the
background, found through its directory, resumed with its state, stopped by pid."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from consensus_stub.registry import decode_registry
from replica.ic.principal import principal_from_text
from replica.ic.textual_ids import canister_text, parse_canister, subnet_text
from replica.testnet import launcher as tn
from replica.processes.lifecycle import running_launcher

pytestmark = pytest.mark.timeout(300)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _replica(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("REPLICA_TESTNET", None)
    env["REPLICA_HOME"] = str(cwd / "home")   # the identities of this test only
    done = subprocess.run([sys.executable, "-m", "replica.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=240)
    if check and done.returncode != 0:
        raise AssertionError(f"replica {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists() and b"replica" in Path(f"/proc/{pid}/cmdline").read_bytes()


def test_up_status_down_and_up_again_resumes(tmp_path):
    layout = tn.TestnetLayout(tmp_path / ".replica" / "testnet")   # the default directory
    try:
        started = _replica(tmp_path, "testnet", "up", "--subnets", "2", "--nodes", "2", "--round-ms", "100")
        assert "subnet-0" in started.stdout and "http://127.0.0.1:" in started.stdout
        launcher = running_launcher(layout)
        assert launcher is not None
        nodes = [n for members in tn.testnet_nodes(layout).values() for n in members]
        assert len(nodes) == 4   # one process per node
        children = [int(layout.pid(n).read_text()) for n in nodes]

        rows = json.loads(_replica(tmp_path, "testnet", "status", "--json").stdout)["subnets"]
        assert [r["subnet"] for r in rows] == ["subnet-0", "subnet-1"]
        # ids as people read them: canister ranges as textual principals, each subnet's IC principal
        assert [r["canister_range"] for r in rows] == [[canister_text(0), canister_text(999)],
                                                       [canister_text(1000), canister_text(1999)]]
        keys = decode_registry(layout.registry.read_bytes()).latest()
        assert [r["principal"] for r in rows] == [subnet_text(keys.subnet(r["subnet"]).public_key) for r in rows]
        table = _replica(tmp_path, "testnet", "status", "--interval", "0").stdout   # the principal beside the name
        assert all(re.search(rf"^{r['subnet']} +{r['principal']} +running", table, re.M) for r in rows), table
        assert all(r["running"] and r["certified_height"] >= 1 and len(r["endpoints"]) == 2 for r in rows)

        again = _replica(tmp_path, "testnet", "up", check=False)
        assert again.returncode == 2 and "already running" in again.stderr
        assert running_launcher(layout) == launcher

        assert "subnet-1" in _replica(tmp_path, "testnet", "logs", "subnet-1-node-2").stdout

        # the example apps, installed from their source through the management canister (the
        # subnets start empty and allocate ids from the start of their ranges), then calls with
        # certified replies, through the command line
        whoami = _replica(tmp_path, "identity", "whoami").stdout.split()
        assert whoami[0] == "default" and principal_from_text(whoami[1])[-1:] == b"\x02"   # self-authenticating
        assert oct((tmp_path / "home" / "identities" / "default.pem").stat().st_mode & 0o777) == "0o600"
        printed = [
            _replica(tmp_path, "canister", "install", f"{EXAMPLES / module}:{cls}", "--subnet", subnet).stdout.strip()
            for module, cls, subnet in (("counter.py", "Counter", "subnet-0"), ("ping_pong.py", "PingPong", "subnet-0"),
                                        ("ping_pong.py", "PingPong", "subnet-1"))]
        assert printed == [canister_text(0), canister_text(1), canister_text(1000)]   # textual principals
        assert [parse_canister(text) for text in printed] == [0, 1, 1000]
        assert _replica(tmp_path, "call", "0", "increment", "5").stdout.strip() == "5"
        # the counter by its principal and by its decimal id: the same answer
        for name in (canister_text(0), "0"):
            assert _replica(tmp_path, "call", name, "get", "--query").stdout.strip() == "5"
        pings = json.loads(_replica(tmp_path, "call", "1000", "ping", '{"target": 1, "rounds": 2}').stdout)
        assert pings["pongs_received"] == 2   # a cross-subnet round trip, twice, answered and certified
        message_id = _replica(tmp_path, "call", "0", "increment", "1", "--async").stdout.strip()
        answered = _replica(tmp_path, "call", "0", "get", "--query")
        assert answered.returncode == 0
        status = {}
        for _ in range(100):
            status = json.loads(_replica(tmp_path, "request-status", message_id).stdout)   # every subnet asked
            if status["status"] == "replied":
                break
        assert status["status"] == "replied" and status["reply"] == 6
        assert json.loads(_replica(tmp_path, "request-status", message_id, canister_text(0)).stdout)["reply"] == 6
        # the counter moves to subnet-1 with its state, through the command line, and answers there
        moved = _replica(tmp_path, "testnet", "migrate", canister_text(0), "--to", "subnet-1")
        assert f"canister {canister_text(0)}: subnet-0 -> subnet-1" in moved.stdout
        assert _replica(tmp_path, "call", "0", "get", "--query").stdout.strip() == "6"
        assert _replica(tmp_path, "call", "0", "increment", "1").stdout.strip() == "7"
        versions = json.loads(_replica(tmp_path, "testnet", "registry", "show", "--json").stdout)
        assert [canister_text(0), canister_text(0), "subnet-1"] in versions[-1]["routing_table"]
        assert versions[-1]["canister_migrations"] == []
        rejected = _replica(tmp_path, "call", "0", "nosuch", check=False)
        assert rejected.returncode == 1 and "CANISTER_ERROR" in rejected.stderr
        refused = _replica(tmp_path, "call", "5", "get", check=False)
        assert refused.returncode == 2 and "UnknownCanister" in refused.stderr and canister_text(5) in refused.stderr
        _replica(tmp_path, "testnet", "down")
        assert running_launcher(layout) is None
        assert not any(_alive(pid) for pid in children + [launcher])
        assert "no testnet is running" in _replica(tmp_path, "testnet", "down").stdout
        stopped = json.loads(_replica(tmp_path, "testnet", "status", "--json").stdout)["subnets"]
        assert not any(r["running"] for r in stopped)
        heights = {r["subnet"]: r["height"] for r in stopped}

        _replica(tmp_path, "testnet", "up")   # resumes: same genesis, the block logs replayed
        resumed = json.loads(_replica(tmp_path, "testnet", "status", "--json").stdout)["subnets"]
        assert all(r["height"] > heights[r["subnet"]] for r in resumed)
        assert layout.read_manifest()["nodes"] == 2
        # the installed canisters and their state survived: same ids, same values, still callable
        assert _replica(tmp_path, "call", "0", "get", "--query").stdout.strip() == "7"
        assert json.loads(_replica(tmp_path, "call", "1", "stats", "--query").stdout)["pongs_sent"] == 2
    finally:
        _replica(tmp_path, "testnet", "down", check=False)
        pid = running_launcher(layout)
        if pid is not None:
            os.kill(pid, 9)
