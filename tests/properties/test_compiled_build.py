"""The compiled build is the same program as the sources.

``setup.py`` compiles the hottest pure-core modules with mypyc. These tests check that the
modules it lists really load as extensions (so the suite exercises the compiled code), and
that the determinism scenario gives identical hashes and final states when it runs from a
copy of the plain ``.py`` sources with nothing compiled.
"""

from __future__ import annotations

import ast
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("replica", "message_routing", "state_manager", "xnet", "consensus_stub", "examples", "tests")
PURE_BUILD = os.environ.get("SUBNET_REPLICA_PURE_PYTHON") == "1"

_REPORT = """
import importlib, json, sys
from tests.properties.determinism_scenario import record_run, summary
files = {name: importlib.import_module(name).__file__ for name in sys.argv[1:]}
print(json.dumps({"files": files, "summary": summary(record_run())}))
"""


def compiled_modules() -> list[str]:
    """Module names of ``setup.py``'s ``COMPILED_MODULES`` (read, not executed)."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["COMPILED_MODULES"]:
            paths = ast.literal_eval(node.value)
            return [p.removesuffix(".py").replace("/", ".") for p in paths]
    raise AssertionError("setup.py has no COMPILED_MODULES list")


def _run_scenario(cwd: pathlib.Path) -> dict:
    env = {"PYTHONHASHSEED": "0", "PATH": os.environ.get("PATH", "")}
    done = subprocess.run([sys.executable, "-c", _REPORT, *compiled_modules()], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_setup_lists_the_hot_modules():
    assert "state_manager.labeled_trie" in compiled_modules()


@pytest.mark.skipif(PURE_BUILD, reason="SUBNET_REPLICA_PURE_PYTHON=1 asked for an uncompiled build")
def test_the_listed_modules_load_compiled():
    import importlib

    for name in compiled_modules():
        assert importlib.import_module(name).__file__.endswith(".so"), f"{name} is not compiled: run `make setup`"


def test_plain_sources_give_the_same_hashes_as_the_build(tmp_path):
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    built = _run_scenario(ROOT)
    plain = _run_scenario(tmp_path)
    assert all(path.endswith(".py") and path.startswith(str(tmp_path)) for path in plain["files"].values())
    if not PURE_BUILD:
        assert all(path.endswith(".so") for path in built["files"].values())
    assert plain["summary"] == built["summary"]
