"""``replica audit --follow`` on a live 2 x 4 testnet of node processes.

1. A fault injected into one simulated replica at a chosen height (one whose batch holds a
   call) is flagged with that height, that replica and the differing state paths, the
   messages of that height and the command that reproduces it.
2. A clean audit of the same testnet under calls, a node kill, a migration and a restart of
   the audit itself (it resumes from its checkpointed offset) stays AGREE, and its final
   report equals the offline audit of the run ``down`` wrote, replaying the same replicas
   (``--plan live``).
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from message_routing.batch import decode_batch
from replica.audit.live_status import read_live_status
from replica.audit.report import comparable
from replica.node.node_store import ExecutedLog
from replica.processes import lifecycle
from replica.testing import Testnet
from replica.testnet import launcher

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(2400)]

ROOT = Path(__file__).resolve().parents[2]
PER_SUBNET = 4
FAULTY = 2          # subnet-0 (2 mod 2)

COUNTER = textwrap.dedent('''
    from replica.sdk import Canister, update, query

    class Counter(Canister):
        @update
        def add(self, n):
            self.stable["n"] = self.stable.get("n", 0) + n
            return self.stable["n"]

        @query
        def get(self):
            return self.stable.get("n", 0)
''')


def _follow(directory: Path, out: Path | None, *extra: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "REPLICA_TESTNET"}
    args = [sys.executable, "-m", "replica.cli", "audit", "--follow", "--dir", str(directory), "--master", "local[2]",
            "--replicas-per-subnet", str(PER_SUBNET), "--quiet", "--trigger-ms", "500", *extra]
    if out is not None:
        args += ["--out", str(out)]
    log_dir = out or directory
    log_dir.mkdir(parents=True, exist_ok=True)
    with open(log_dir / "follow.log", "ab") as log:
        return subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _wait(what: str, condition, timeout_s: float, process: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the audit exited ({process.returncode}) waiting for {what}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def _height_with_a_call(directory: Path) -> int:
    """The last height of subnet-0 whose batch holds an ingress message."""
    log = ExecutedLog(launcher.TestnetLayout(directory).node_files("subnet-0-node-1").executed_log)
    try:
        return max(h for h, batch, _, _ in log.entries if decode_batch(batch).ingress)
    finally:
        log.close()


def _stop(process: subprocess.Popen) -> int:
    """SIGTERM to the audit's own pid (it stops its JVM and hosts); its group only if it hangs."""
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(300)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        raise


def test_follow_flags_an_injected_divergence_and_a_clean_run_reports_as_offline(tmp_path):
    directory = tmp_path / "testnet"
    lifecycle.up(directory, subnets=2, nodes=4, round_ms=300, seed="live-audit", process_model="node",
                 out=io.StringIO())
    audits: list[subprocess.Popen] = []
    try:
        with Testnet.connect(directory) as net:
            counter = net.install(COUNTER, class_name="Counter", subnet="subnet-0")
            for n in (1, 2, 3):
                assert net.update_call(counter, "add", n) == (1, 3, 6)[n - 1]
            chosen = _height_with_a_call(directory)

            # -- 1: a divergence injected at a chosen height -----------------------------------
            faulty_dir = tmp_path / "faulty"
            faulty = _follow(directory, faulty_dir, "--fault", f"{FAULTY}:flip@{chosen}")
            audits.append(faulty)
            status = _wait("the divergence", lambda: (s := read_live_status(directory, faulty_dir)) and
                           s["first_divergence"] and s, 900, faulty)
            first = status["first_divergence"]
            assert (first["subnet"], first["height"], first["replicas"]) == ("subnet-0", chosen, [FAULTY])
            assert status["verdict"] == "divergent"
            report = _wait("the report", lambda: read_live_status(directory, faulty_dir)["report"] and
                           json.loads((faulty_dir / "report.json").read_text()), 900, faulty)
            cluster = report["clusters"][0]
            assert (cluster["subnet"], cluster["first_height"], cluster["replicas"]) == ("subnet-0", chosen, [FAULTY])
            paths = cluster["drilldown"]["paths"]
            assert paths and any(f"/canister/{counter}" in p["path"] or "ingress" in p["path"] for p in paths), paths
            assert cluster["drilldown"]["messages"]["count"] >= 1
            assert "replay-one" in cluster["reproduce"] and str(faulty_dir / "run") in cluster["reproduce"]
            assert _stop(faulty) == 130
            audits.remove(faulty)

            # -- 2: a clean audit under calls, a node kill, a migration and its own restart ---
            clean = _follow(directory, None)
            audits.append(clean)
            caught = _wait("the clean audit catching up", lambda: (s := read_live_status(directory)) and
                           s["micro_batches"] and s["audited"]["subnet-0"] >= chosen and s, 900, clean)
            stop = threading.Event()

            def calls():
                while not stop.is_set():
                    try:
                        net.update_call(counter, "add", 1)
                    except Exception:   # rejected while the canister moves: the next call goes on
                        time.sleep(0.2)

            caller = threading.Thread(target=calls, daemon=True)
            caller.start()
            lifecycle.kill_node(directory, "subnet-1-node-2")
            net.migrate(counter, "subnet-1")
            assert _stop(clean) == 130
            audits.remove(clean)
            stopped = read_live_status(directory)
            assert stopped["state"] == "stopped" and stopped["audited"]["subnet-0"] >= caught["audited"]["subnet-0"]
            clean = _follow(directory, None)
            audits.append(clean)
            resumed = _wait("the resumed audit", lambda: (s := read_live_status(directory)) and
                            s["pid"] == clean.pid and s["micro_batches"] > stopped["micro_batches"] and s, 900, clean)
            # it went on from where it stopped: the heights it had audited were not replayed again
            assert resumed["resumed_from"]["subnet-0"] >= stopped["audited"]["subnet-0"] > 0
            stop.set()
            caller.join(120)
            assert net.query_call(counter, "get") >= 7
        lifecycle.down(directory, out=io.StringIO())
        # 1 only for another build (this tree is edited while tests run): the verdict is checked below
        assert clean.wait(1200) in (0, 1), (directory / "follow.log").read_text()[-3000:]
        audits.remove(clean)
    finally:
        for process in audits:
            if process.poll() is None:
                _stop(process)
        lifecycle.down(directory, out=io.StringIO())

    live = json.loads((directory / "live-audit" / "report.json").read_text())
    assert live["verdict"] in ("agree", "other-build") and live["summary"]["divergent_replicas"] == 0
    env = {k: v for k, v in os.environ.items() if k != "REPLICA_TESTNET"}
    offline_dir = tmp_path / "offline"
    done = subprocess.run([sys.executable, "-m", "replica.cli", "audit", str(directory / "run"), "--plan", "live",
                           "--replicas", str(2 * PER_SUBNET), "--master", "local[2]", "--quiet", "--out",
                           str(offline_dir)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    offline = json.loads((offline_dir / "report.json").read_text())

    def same(report: dict) -> dict:
        # what names the directory or the build of whoever replayed (others edit this tree as
        # tests run: a build differs when a file changed in between) is left out
        kept = comparable(report)
        kept["run"] = {k: v for k, v in kept["run"].items() if k != "source"}
        for key in ("build", "verdict", "exit_status"):
            kept.pop(key)
        kept["summary"] = {k: v for k, v in kept["summary"].items() if k != "other_build_replicas"}
        return kept

    assert same(live) == same(offline)
    assert offline["summary"]["divergent_replicas"] == 0 and offline["recorded"]["agree"]
    assert live["run"]["subnets"] == offline["run"]["subnets"]
