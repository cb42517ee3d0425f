"""``replica demo``, the quick start's main job, end to end at a small size: a testnet of node
processes, the example apps installed through the management canister, signed traffic from
every subnet's user (each call awaited as its sender: a node shows a status to its sender
only), the ledgers' supply, ``testnet down`` and the Spark audit of the recorded run."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(600)


def test_the_demo_answers_every_call_keeps_the_supply_and_its_audit_agrees(tmp_path):
    out = tmp_path / "demo"
    done = subprocess.run(
        [sys.executable, "-m", "replica.cli", "demo", "--subnets", "2", "--nodes", "2", "--duration", "3",
         "--replicas", "16", "--master", "local[2]", "--out", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=540)
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    assert "(all certified)" in report and "invariant holds" in done.stdout, report   # progress goes to stderr
    assert "verdict: AGREE" in done.stdout, report
    assert (out / "audit").is_dir()
