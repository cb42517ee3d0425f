"""The audit on a standalone cluster started by ``replica cluster up`` (a master and two 1-core
workers on 127.0.0.1), whose daemons' Python has neither the project nor its dependencies:
the executors run the packed environment of this build, compiled modules included, and the
report is the same as on ``local[*]``. One cluster for the module, stopped by ``cluster down``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from replica.audit.environment import environment_archive
from replica.audit.job import AuditOptions, run_audit
from replica.audit.perturbation import Fault
from replica.audit.report import build_lines, comparable
from replica.audit.run_log import write_run_log
from replica.cluster.launcher import is_spark_daemon, load_state
from tests.audit.runs import small_run

pytestmark = [pytest.mark.spark, pytest.mark.slow]

CLI = [sys.executable, "-m", "replica.cli"]


@dataclass(frozen=True)
class Cluster:
    url: str
    directory: Path
    archive: Path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cluster")
    state = None
    up = subprocess.Popen([*CLI, "cluster", "up", "--workers", "2", "--cores", "1", "--dir", str(directory), "--quiet"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        archive = environment_archive()     # built (or found in the cache) while the JVMs start
        out, err = up.communicate(timeout=240)
        if up.returncode != 0:
            pytest.fail(f"replica cluster up failed: {err}")
        state = load_state(directory)
        yield Cluster(out.strip().splitlines()[-1], directory, archive)
    finally:
        if up.poll() is None:
            up.kill()
        subprocess.run([*CLI, "cluster", "down", "--dir", str(directory)], capture_output=True, timeout=120)
    survivors = [p for p in (state.processes if state else ()) if is_spark_daemon(p.pid)]
    if survivors:
        raise RuntimeError(f"cluster down left {survivors} running")


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def test_the_workers_python_cannot_import_the_project(cluster, tmp_path):
    state = load_state(cluster.directory)
    assert state.url == cluster.url and len(state.workers) == 2
    status = subprocess.run([*CLI, "cluster", "status", "--dir", str(cluster.directory)], capture_output=True, text=True)
    assert status.returncode == 0 and status.stdout.count(" running") == 4, status.stdout
    # The interpreter the packed venv links to, and the python3 on the workers' PATH, run with a
    # worker's own environment (which its executors inherit):
    env = _environ(state.workers[0].pid)
    assert not {"PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON"} & set(env)
    interpreters = {getattr(sys, "_base_executable", sys.executable), shutil.which("python3", path=env["PATH"])}
    for python in filter(None, interpreters):
        # (this machine's base Python happens to carry cryptography and sortedcontainers; the
        # packed venv does not see the base's site-packages either way)
        for module in ("replica", "message_routing", "state_manager", "msgpack", "pyblst", "grpc", "pyspark"):
            probe = subprocess.run([python, "-c", f"import {module}"], env=env, cwd=tmp_path, capture_output=True,
                                   text=True)
            assert probe.returncode != 0 and "ModuleNotFoundError" in probe.stderr, (python, module)


def test_the_audit_on_the_cluster_matches_local_and_runs_the_compiled_build(spark, cluster, tmp_path):
    log = small_run(batches=6)
    run_dir = tmp_path / "run"
    write_run_log(log, run_dir)
    options = AuditOptions(replicas=48, seed=9, faults=((3, Fault("flip", 5, 0)),), drilldowns=2)
    local = run_audit(spark, log, options, source=str(run_dir), run_dir=str(run_dir))
    out = tmp_path / "out"
    command = [*CLI, "audit", str(run_dir), "--master", cluster.url, "--environment-archive", str(cluster.archive),
               "--replicas", "48", "--seed", "9", "--fault", "3:flip@5:0", "--drilldowns", "2", "--out", str(out),
               "--quiet"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"))
    assert result.returncode == 1, result.stderr[-3000:]
    assert result.stdout.startswith("verdict: DIVERGENT")
    remote = json.loads((out / "report.json").read_text())
    assert remote["environment"]["master"] == cluster.url
    # Both audits replayed the recorded build (if the local one did not, the checkout's sources
    # changed while this test ran: the check below is then right to fail).
    assert local["build"]["agree"] is True, build_lines(local["build"])
    assert comparable(remote) == json.loads(json.dumps(comparable(local)))
    assert remote["clusters"][0]["replicas"] == [3] and remote["clusters"][0]["drilldown"]["paths"]
    # Every replica was replayed by the live run's build ...
    build = remote["build"]
    assert build["agree"] is True and build["recorded"] == log.build.fingerprint
    assert [(e["build"], e["replicas"]) for e in build["replayed"]] == [(log.build.fingerprint, 48)]
    # ... and every executor (both workers') ran it from the archive, with its compiled modules loaded.
    executors = remote["environment"]["executors"]
    assert len({e["executor"] for e in executors}) == 2
    for e in executors:
        assert e["python"].startswith(str(cluster.directory)) and e["python"].endswith("/environment/bin/python")
        unpacked = e["python"].removesuffix("bin/python")
        assert all(path.startswith(unpacked) for path in e["imports_from"].values()), e["imports_from"]
        assert e["build"] == log.build.fingerprint
        assert e["compiled_loaded"] == build["recorded_compiled"] and "state_manager.labeled_trie" in e["compiled_loaded"]
