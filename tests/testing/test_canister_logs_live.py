"""Canister logs and ``raw_rand`` on a live testnet (node processes, HTTP, gRPC): through
``Testnet.canister_logs`` and through ``replica canister logs`` on the command line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from replica.testing import CallRejected

from .logging_apps import Diary

ROOT = Path(__file__).resolve().parents[2]
MODULE = Path(__file__).with_name("logging_apps.py")
LINE = re.compile(r"^\[(\d+)\] (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z) (.*)$")


def _replica(home: Path, directory: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("REPLICA_TESTNET", "PYTHONPATH")}
    env["REPLICA_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "replica.cli", *args, "--dir", str(directory)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=240)


@pytest.mark.slow
def test_logs_and_raw_rand_on_a_live_testnet_and_on_the_command_line(live_testnet, tmp_path):
    net = live_testnet
    cid = net.install(Diary, subnet="subnet-0", arg="live")
    assert net.update_call(cid, "write", "hello") == 5
    with pytest.raises(CallRejected):
        net.update_call(cid, "fail", "boom")
    first = net.update_call(cid, "draw", 2)
    net.tick(2)
    draws = net.query_call(cid, "draws")
    assert draws[0] == first and len(draws) == 2 and len(set(draws)) == 2 and all(len(d) == 32 for d in draws)
    records = net.canister_logs(cid)
    assert [r.index for r in records] == list(range(5))
    assert [r.content for r in records][:2] == ["init live", "hello"]
    assert records[2].content.startswith("trapped: Trap: refused boom (")
    assert [r.content for r in records][3:] == [f"drew {d.hex()}" for d in draws]
    assert all(a.timestamp_nanos <= b.timestamp_nanos for a, b in zip(records, records[1:]))

    # the command line, with an identity of its own: it installs, calls, reads the log
    home = tmp_path / "home"
    installed = _replica(home, net.directory, "canister", "install", f"{MODULE}:Diary", "--subnet", "subnet-1",
                         "--arg", '"cli"')
    assert installed.returncode == 0, installed.stderr
    mine = installed.stdout.strip().splitlines()[-1]
    assert _replica(home, net.directory, "call", mine, "write", '"from the command line"').returncode == 0
    logs = _replica(home, net.directory, "canister", "logs", mine)
    assert logs.returncode == 0, logs.stderr
    lines = [LINE.match(line) for line in logs.stdout.splitlines()]
    assert all(lines) and [(m.group(1), m.group(3)) for m in lines] == [("0", "init cli"),
                                                                        ("1", "from the command line")]
    stranger = _replica(home, net.directory, "canister", "logs", str(cid))   # not this identity's canister
    assert stranger.returncode == 1 and "only the controller" in stranger.stderr
