"""Your own canister on a running testnet, through the command line only.

``testnet up --subnets 2 --nodes 4`` in a temporary directory → the README's ``Greeter``
written to a temporary file → ``replica canister install`` on each subnet (the source travels
in the install message) → ``replica call`` of a cross-subnet ``ask`` answers with a certified,
verified ``hello, friend`` → ``testnet down`` → ``replica audit DIR/run --replicas 32`` agrees:
the audit replays the user canister from the recorded states (the file is gone by then, and no
process ever had it on its path).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from replica.ic.textual_ids import canister_text, parse_canister
from replica.testnet import launcher as tn
from replica.processes.lifecycle import running_launcher

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]


def readme_greeter() -> str:
    """The ``Greeter`` of the README's "Writing a canister" section, as a user copies it."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Writing a canister"):]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match and "class Greeter(Canister)" in match.group(1)
    return match.group(1)


def _env(cwd: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("REPLICA_TESTNET", "PYTHONPATH")}
    env["REPLICA_HOME"] = str(cwd / "home")
    return env


def _replica(cwd: Path, *args: str, check: bool = True, timeout: float = 240) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "replica.cli", *args], cwd=cwd, env=_env(cwd), capture_output=True,
                          text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"replica {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


def _replica_all(cwd: Path, *commands: tuple[str, ...]) -> list[str]:
    """Several ``replica`` commands at once; their stdouts (each must succeed)."""
    running = [subprocess.Popen([sys.executable, "-m", "replica.cli", *args], cwd=cwd, env=_env(cwd),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for args in commands]
    outputs = []
    for args, process in zip(commands, running):
        out, err = process.communicate(timeout=240)
        if process.returncode != 0:
            raise AssertionError(f"replica {' '.join(args)} exited {process.returncode}:\n{out}\n{err}")
        outputs.append(out)
    return outputs


def test_install_your_own_canister_call_it_across_subnets_and_audit_the_run(tmp_path):
    layout = tn.TestnetLayout(tmp_path / ".replica" / "testnet")
    module = tmp_path / "user code" / "greeter.py"   # not a package, not on any path
    module.parent.mkdir()
    module.write_text(readme_greeter())
    try:
        _replica(tmp_path, "testnet", "up", "--subnets", "2", "--nodes", "4", "--round-ms", "200")
        installed = _replica_all(tmp_path, ("canister", "install", f"{module}:Greeter", "--subnet", "subnet-0"),
                                 ("canister", "install", f"{module}:Greeter", "--subnet", "subnet-1"))
        printed = [out.strip().splitlines()[-1] for out in installed]   # textual principals
        first, second = (parse_canister(text) for text in printed)
        assert printed == [canister_text(first), canister_text(second)]
        assert first in range(0, 1000) and second in range(1000, 2000)

        # a cross-subnet call: subnet-0's Greeter asks subnet-1's; the reply is certified and verified
        assert json.loads(_replica(tmp_path, "call", printed[0], "ask", str(second)).stdout) == "hello, friend"
        # the same canister by its principal and by its decimal id: the same answer
        by_text, by_number = _replica_all(tmp_path, ("call", printed[1], "greeted", "--query"),
                                          ("call", str(second), "greeted", "--query"))
        assert json.loads(by_text) == json.loads(by_number) == 1

        # a module that does not load is a clean reject with its reason (exit 1), the testnet goes on
        broken = tmp_path / "user code" / "broken.py"
        broken.write_text("from replica.sdk import Canister\nclass Broken(Canister):\n    def oops(self:\n")
        refused = _replica(tmp_path, "canister", "install", f"{broken}:Broken", "--canister", printed[0],
                           "--mode", "upgrade", check=False)
        assert refused.returncode == 1 and "CANISTER_ERROR" in refused.stderr and "SyntaxError" in refused.stderr
        assert json.loads(_replica(tmp_path, "call", str(first), "greet", '"again"').stdout) == "hello, again"

        _replica(tmp_path, "testnet", "down")
        assert running_launcher(layout) is None
    finally:
        _replica(tmp_path, "testnet", "down", check=False)
        pid = running_launcher(layout)
        if pid is not None:
            os.kill(pid, 9)

    module.unlink()
    broken.unlink()
    audit = _replica(tmp_path, "audit", str(layout.run), "--replicas", "32", "--quiet", "--out",
                     str(tmp_path / "audit"), check=False)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "verdict: AGREE" in audit.stdout and "agreement with the live run's hashes: yes" in audit.stdout
