"""``replica load`` against real testnets started by ``replica testnet up``.

* Within capacity: every call submitted is answered with a certified reply, none lost or
  duplicated, and the canisters' own counters agree with what users were told.
* Overload of the client (2,000 calls/s offered to two submitters): the load window is kept
  (what could not be submitted is counted as not submitted, the client being the limit, never
  queued past the window), every submitted call is answered within a bounded drain, and
  ``replica testnet down`` returns within a minute.
* Overload with tiny limits (``TINY_QUEUES``: queues of 4, streams and slices of 3 messages,
  16 messages a round):
  back-pressure shows as refusals and rejects with their codes, never as loss; streams stay
  within their limits; and once the load stops the testnet answers calls normally again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replica.client.identity import Ed25519Identity
from replica.testnet import launcher as tn
from replica.testnet.http_endpoints import agent_for_testnet
from replica.processes.lifecycle import running_launcher
from replica.load.load import LoadOptions, run_load
from replica.load.load_report import CLIENT_LIMIT

pytestmark = pytest.mark.timeout(300)


def _replica(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "REPLICA_TESTNET"}
    env["REPLICA_HOME"] = str(cwd / "home")
    done = subprocess.run([sys.executable, "-m", "replica.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=240)
    if check and done.returncode != 0:
        raise AssertionError(f"replica {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


def _stop(cwd: Path, directory: Path) -> None:
    _replica(cwd, "testnet", "down", "--dir", str(directory), check=False)
    pid = running_launcher(tn.TestnetLayout(directory))
    if pid is not None:
        os.kill(pid, 9)


def test_load_within_capacity_answers_every_call_once(tmp_path):
    directory = tmp_path / "net"
    try:
        _replica(tmp_path, "testnet", "up", "--dir", str(directory), "--subnets", "2", "--nodes", "1",
                 "--round-ms", "100")
        done = _replica(tmp_path, "load", "--dir", str(directory), "--rate", "40", "--duration", "3",
                        "--canisters", "2", "--json")
    finally:
        _stop(tmp_path, directory)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["lost"] == 0 and report["duplicated"] == 0
    assert report["refused"] == {} and report["rejected"] == {} and report["inner_rejects"] == {}
    assert report["submitted"] == report["replied"] >= 100
    totals = report["canisters"]
    assert totals["relayed"] == totals["echoed"] == totals["replied"] == report["replied"]
    assert totals["violations"] == 0
    assert 1 <= report["p50_rounds"] <= report["p99_rounds"]


def test_an_overloaded_client_keeps_its_window_and_every_submitted_call_drains_in_bounded_rounds(tmp_path):
    directory = tmp_path / "net"
    options = LoadOptions(rate=2000, duration_s=3, canisters=2, submitters=2, drain_s=60)
    try:
        _replica(tmp_path, "testnet", "up", "--dir", str(directory), "--subnets", "2", "--nodes", "1",
                 "--round-ms", "100")
        with agent_for_testnet(directory, Ed25519Identity.from_seed(b"overload-test")) as agent:
            report = run_load(agent, ["subnet-0", "subnet-1"], options)
    finally:
        stopping = time.monotonic()
        _stop(tmp_path, directory)
        down_s = time.monotonic() - stopping
    print(json.dumps(report.as_json()))
    # the window: every offered call accounted for, what the client could not submit said so
    assert report.offered >= 0.95 * options.rate * options.duration_s
    assert report.offered == report.submitted + sum(report.refused.values()) + sum(report.not_submitted.values())
    assert report.client_limited and set(report.not_submitted) == {CLIENT_LIMIT}
    assert report.submitting_s <= options.duration_s + 1.0, "calls were submitted after the window"
    # the drain: every submitted call answered once, in a bounded number of rounds
    assert report.lost == 0 and report.duplicated == 0 and report.refused == {}
    assert report.answered == report.submitted > 0
    assert report.drain_s < 20 and report.drain_rounds <= 60 and max(report.latency_rounds) <= 60, report.as_json()
    assert down_s < 60


def test_overload_with_tiny_limits_rejects_with_codes_loses_nothing_and_recovers(tmp_path):
    directory = tmp_path / "net"
    tn.create_testnet(directory, 2, 1, seed=b"load-overload-test-seed-32-bytes", tick_s=0.1, genesis_apps=False,
                      limits="TINY_QUEUES")
    try:
        _replica(tmp_path, "testnet", "up", "--dir", str(directory))   # resumes the directory made above
        with agent_for_testnet(directory, Ed25519Identity.from_seed(b"load-test")) as agent:
            subnets = ["subnet-0", "subnet-1"]
            overload = run_load(agent, subnets, LoadOptions(rate=150, duration_s=3, canisters=2, drain_s=60))
            canisters = {s: [c for c in range(base, base + 2)] for s, base in (("subnet-0", 0), ("subnet-1", 1000))}
            statuses = [tn.TestnetLayout(directory).read_json(tn.TestnetLayout(directory).status(s)) for s in subnets]
            calm = run_load(agent, subnets, LoadOptions(rate=5, duration_s=2, drain_s=60), canisters=canisters)
    finally:
        _stop(tmp_path, directory)
    print(json.dumps(overload.as_json()))
    assert overload.lost == 0 and overload.duplicated == 0
    pushed_back = sum(overload.refused.values()) + sum(overload.rejected.values()) + sum(overload.inner_rejects.values())
    assert pushed_back > 0, overload.as_json()
    assert set(overload.refused) <= {"pool_full", "too_large"}, overload.refused
    assert set(overload.inner_rejects) <= {"SYS_TRANSIENT", "CANISTER_ERROR"}, overload.inner_rejects
    assert overload.replied > 0
    for status in statuses:   # bounded: no stream holds more than the limit
        for begin, end, _ in status["streams"].values():
            assert end - begin <= tn.LIMIT_PRESETS["TINY_QUEUES"].max_stream_messages
    assert calm.lost == 0 and calm.duplicated == 0 and calm.replied == calm.submitted > 0
    assert calm.rejected == {} and calm.refused == {}
