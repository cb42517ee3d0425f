"""The pytest plugin from a project outside this repository: a temporary directory with one
test file and no conftest, run with pytest in a child process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from importlib import import_module
from pathlib import Path

from replica.audit.run_log import load_run_log

ROOT = Path(__file__).resolve().parents[2]

OUTSIDE_TEST = '''
import pytest
from replica.sdk import Canister, update


class Counter(Canister):
    VERSION = 1

    @update
    def add(self, n):
        self.stable["n"] = self.stable.get("n", 0) + n
        return self.stable["n"]


def test_default_shape(testnet, replica_seed):
    assert testnet.subnets == ["subnet-0", "subnet-1"]
    assert testnet.seed == replica_seed
    c = testnet.install(Counter, subnet="subnet-1")
    assert testnet.update_call(c, "add", 2) == 2
    print("HASH", testnet.state_hash("subnet-1").hex())


@pytest.mark.testnet(subnets=3, nodes=1)
def test_marker_shape(testnet):
    assert len(testnet.topology()) == 3


def test_fails_on_purpose(testnet):
    c = testnet.install(Counter)
    assert testnet.update_call(c, "add", 1) == 99
'''


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_outside.py").write_text(OUTSIDE_TEST)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "replica.testing.pytest_plugin", "-p", "no:cacheprovider", "-s",
         "--rootdir", str(tmp_path), str(tmp_path / "test_outside.py"), *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)


def test_fixtures_markers_seed_and_failure_report_from_an_outside_project(tmp_path):
    first = _pytest(tmp_path, "--replica-seed", "11")
    out = first.stdout
    assert first.returncode == 1, out + first.stderr            # exactly the deliberate failure
    assert re.search(r"2 passed", out) and re.search(r"1 failed", out), out
    assert "replica testnet" in out and "seed: 11 (rerun with --replica-seed 11)" in out
    run_dir = re.search(r"run log: (\S+)", out).group(1)
    assert load_run_log(run_dir).subnet_ids() == ("subnet-0", "subnet-1")
    assert f"replica replay-one {run_dir} --subnet subnet-0" in out
    replay = subprocess.run([sys.executable, "-m", "replica.cli", "replay-one", run_dir, "--subnet", "subnet-0"],
                            cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
                            text=True, timeout=180)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "live: same" in replay.stdout and "DIFFERS" not in replay.stdout   # the failed run replays as recorded
    hash_11 = re.search(r"HASH (\w+)", out).group(1)
    other = _pytest(tmp_path, "--replica-seed", "12", "-k", "default_shape")
    assert other.returncode == 0, other.stdout + other.stderr
    assert re.search(r"HASH (\w+)", other.stdout).group(1) != hash_11   # the seed reached the testnet


def test_the_package_declares_the_plugin_entry_point():
    # The installed metadata has it once the package is (re)installed; the declaration is checked here.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    target = project["project"]["entry-points"]["pytest11"]["replica.testing.pytest_plugin"]
    plugin = import_module(target)
    assert callable(plugin.testnet) and hasattr(plugin, "pytest_addoption")
