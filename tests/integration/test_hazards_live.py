"""The hazards of issue 24 on a live testnet of node processes (1 x 4, one process per node):
each call is answered (a reject with its deterministic text, or a refusal at install), a
well-behaved canister keeps answering, the subnet keeps certifying, no node process dies or
restarts, and the audit of the recorded run — hash-seed perturbations among its defaults —
agrees."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from replica.ic.textual_ids import canister_text
from replica.processes import lifecycle
from replica.testing import CallRejected, Testnet
from replica.testnet import launcher

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]

HAZARDS = textwrap.dedent('''
    from replica.sdk import Canister, update


    def down(n):
        return down(n + 1)


    class Hazards(Canister):
        @update
        def spin(self):
            x = 0
            while True:
                x += 1

        @update
        def set_of_strings(self):
            self.stable["order"] = tuple(s for s in {"pear", "apple", "fig", "banana", "kiwi", "cherry"})
            return self.stable["order"]

        @update
        def allocate(self):
            return len(bytearray(2 * 1024 ** 3))

        @update
        def recurse(self):
            return down(0)
''')

EXITS = textwrap.dedent('''
    from replica.sdk import Canister, update

    class Exits(Canister):
        @update
        def leave(self):
            raise SystemExit(3)
''')

KILLS = textwrap.dedent('''
    import os
    from replica.sdk import Canister, update

    class Kills(Canister):
        @update
        def kill(self):
            os._exit(9)
''')

def _one_method(imports: str, body: str) -> str:
    """A canister whose one update method runs ``body`` (a hazard the subset refuses at install)."""
    return f"{imports}from replica.sdk import Canister, update\n\nclass Hazard(Canister):\n" \
           f"    @update\n    def run(self):\n        {body}\n"


#: (source, class, what the refusal names): host randomness, the host clock, the host's files.
READS_HOST = (
    (_one_method("import random\n", "return random.random()"), "Hazard", "import of 'random' is not allowed"),
    (_one_method("import time\n", "return time.time_ns()"), "Hazard", "import of 'time' is not allowed"),
    (_one_method("", "return open('/etc/hostname').read()"), "Hazard", "the name 'open' is not allowed"),
)

COUNTER = textwrap.dedent('''
    from replica.sdk import Canister, update, query

    class Counter(Canister):
        @update
        def inc(self):
            self.stable["n"] = self.stable.get("n", 0) + 1
            return self.stable["n"]

        @query
        def get(self):
            return self.stable.get("n", 0)
''')


def _node_pids(layout: launcher.TestnetLayout, nodes: list[str]) -> dict[str, int]:
    return {node: int(layout.pid(node).read_text().strip()) for node in nodes}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _certified(directory: Path) -> int:
    (row,) = lifecycle.status(directory)
    return row.certified_height or 0


def test_hazards_on_node_processes_are_answered_and_the_run_audits_agree(tmp_path):
    directory = tmp_path / "testnet"
    layout = launcher.TestnetLayout(directory)
    lifecycle.up(directory, subnets=1, nodes=4, round_ms=200, seed="hazards", process_model="node", out=io.StringIO())
    try:
        (row,) = lifecycle.status(directory)
        assert row.process_model == "node" and row.nodes_running == 4
        nodes = sorted(row.endpoints)
        pids = _node_pids(layout, nodes)
        with Testnet.connect(directory) as net:
            counter = net.install(COUNTER, class_name="Counter")
            hazards = net.install(HAZARDS, class_name="Hazards")
            assert net.update_call(counter, "inc") == 1

            for source, name, construct in ((EXITS, "Exits", "the name 'SystemExit' is not allowed"),
                                            (KILLS, "Kills", "import of 'os' is not allowed"), *READS_HOST):
                with pytest.raises(CallRejected) as refused:
                    net.install(source, class_name=name)
                assert construct in str(refused.value)

            expected = {
                "spin": f"Canister {canister_text(hazards)} exceeded the instruction limit for single message execution",
                "allocate": f"Canister {canister_text(hazards)} trapped: exceeded the memory limit of",
                "recurse": f"Canister {canister_text(hazards)} trapped: call depth exceeded",
            }
            for method, text in expected.items():
                with pytest.raises(CallRejected) as rejected:
                    net.update_call(hazards, method)
                assert text in str(rejected.value), method
                assert net.update_call(counter, "inc") >= 2       # the other canister keeps answering
            # a set of strings iterates in insertion order in the sandbox: the same on every node
            assert net.update_call(hazards, "set_of_strings") == ("pear", "apple", "fig", "banana", "kiwi", "cherry")
            assert net.query_call(counter, "get") == 4

        height = _certified(directory)
        deadline = time.monotonic() + 20
        while _certified(directory) < height + 3:                 # the subnet keeps certifying
            assert time.monotonic() < deadline, f"certification stalled at {_certified(directory)}"
            time.sleep(0.1)
        assert _node_pids(layout, nodes) == pids                  # no node process died or was restarted
        assert all(_alive(pid) for pid in pids.values())
        lifecycle.down(directory, out=io.StringIO())
    finally:
        lifecycle.down(directory, out=io.StringIO())

    env = {k: v for k, v in os.environ.items() if k not in ("REPLICA_TESTNET", "PYTHONPATH")}
    audit = subprocess.run([sys.executable, "-m", "replica.cli", "audit", str(layout.run), "--replicas", "4",
                            "--quiet", "--out", str(tmp_path / "audit")], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=180)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "verdict: AGREE" in audit.stdout and "agreement with the live run's hashes: yes" in audit.stdout
    report = json.loads((tmp_path / "audit" / "report.json").read_text())
    assert report["verdict"] == "agree" and report["audit"]["perturbations"].get("hashseed", 0) >= 1
