"""The pytest plugin from a project outside this repository: a temporary directory with one
test file and no conftest, run with pytest in a child process that finds the plugin through
the declared ``pytest11`` entry point."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib import import_module
from pathlib import Path

from replica.audit.run_log import load_run_log

ROOT = Path(__file__).resolve().parents[2]

#: The outside project's canister, in a module of its own: the whole module is installed, and
#: canister modules may import only the sandbox's allowed modules (not pytest).
OUTSIDE_CANISTER = '''
from replica.sdk import Canister, update


class Counter(Canister):
    VERSION = 1

    @update
    def add(self, n):
        self.stable["n"] = self.stable.get("n", 0) + n
        return self.stable["n"]
'''

OUTSIDE_TEST = '''
import pytest
from outside_counter import Counter


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


def _declared_entry_point() -> tuple[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (name, target), = project["project"]["entry-points"]["pytest11"].items()
    return name, target


def _site_with_the_entry_point(tmp_path: Path) -> Path:
    """A throwaway distribution carrying the declared ``pytest11`` entry point, as the installed
    package's metadata will (this checkout's editable install predates the entry point)."""
    name, target = _declared_entry_point()
    dist = tmp_path / "site" / "entry_point_probe-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: entry-point-probe\nVersion: 0\n")
    (dist / "entry_points.txt").write_text(f"[pytest11]\n{name} = {target}\n")
    return dist.parent


def _pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    (project / "test_outside.py").write_text(OUTSIDE_TEST)
    (project / "outside_counter.py").write_text(OUTSIDE_CANISTER)
    site = tmp_path / "site" if (tmp_path / "site").exists() else _site_with_the_entry_point(tmp_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]))
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "--rootdir", str(project),
         str(project / "test_outside.py"), *args],
        cwd=project, env=env, capture_output=True, text=True, timeout=180)


def test_fixtures_markers_seed_and_failure_report_from_an_outside_project(tmp_path):
    first = _pytest(tmp_path, "--replica-seed", "11")              # the plugin comes from its entry point
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
    shutil.rmtree(run_dir)
    hash_11 = re.search(r"HASH (\w+)", out).group(1)
    # -p with the module path as well as the entry point: registered once (same name).
    other = _pytest(tmp_path, "-p", "replica.testing.pytest_plugin", "--replica-seed", "12", "-k", "default_shape")
    assert other.returncode == 0, other.stdout + other.stderr
    assert re.search(r"HASH (\w+)", other.stdout).group(1) != hash_11   # the seed reached the testnet


def test_the_package_declares_the_plugin_entry_point():
    # The installed metadata has it once the package is (re)installed; the declaration is checked here.
    name, target = _declared_entry_point()
    assert name == target   # named as the module: `-p` with the module path and the entry point coincide
    plugin = import_module(target)
    assert callable(plugin.testnet) and hasattr(plugin, "pytest_addoption")
