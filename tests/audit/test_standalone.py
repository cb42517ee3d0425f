"""The audit on a standalone Spark cluster (a master and a worker on 127.0.0.1, started
here from the installed pyspark) gives the same report as on ``local[*]``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyspark
import pytest

from replica.audit.job import AuditOptions, run_audit
from replica.audit.perturbation import Fault
from replica.audit.report import comparable
from replica.audit.run_log import write_run_log

from .runs import small_run

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SPARK_CLASS = Path(pyspark.__file__).resolve().parent / "bin" / "spark-class"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(predicate, what: str, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise TimeoutError(f"timed out waiting for {what}")


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    """``spark://127.0.0.1:PORT`` with one 2-core worker; both stopped afterwards."""
    home = tmp_path_factory.mktemp("standalone")
    properties = home / "spark.properties"
    properties.write_text("spark.master.rest.enabled false\nspark.ui.enabled false\n")
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(home), SPARK_WORKER_DIR=str(home / "work"))
    port = _free_port()
    master_log = open(home / "master.log", "wb")
    worker_log = open(home / "worker.log", "wb")
    master = subprocess.Popen([str(SPARK_CLASS), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(port), "--webui-port", "0", "--properties-file", str(properties)],
                              stdout=master_log, stderr=subprocess.STDOUT, env=env)
    worker = None
    try:
        _wait_for(lambda: _listening(port), "the Spark master")
        worker = subprocess.Popen([str(SPARK_CLASS), "org.apache.spark.deploy.worker.Worker",
                                   f"spark://127.0.0.1:{port}", "--host", "127.0.0.1", "--cores", "2", "--memory", "1g",
                                   "--webui-port", "0", "--work-dir", str(home / "work"),
                                   "--properties-file", str(properties)],
                                  stdout=worker_log, stderr=subprocess.STDOUT, env=env)
        _wait_for(lambda: b"Registering worker" in (home / "master.log").read_bytes(), "the worker to register")
        yield f"spark://127.0.0.1:{port}", env
    finally:
        for process in (worker, master):
            if process is not None:
                process.terminate()
        for process in (worker, master):
            if process is not None:
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
        master_log.close()
        worker_log.close()


def test_standalone_cluster_gives_the_same_report_as_local(spark, standalone, tmp_path):
    master, env = standalone
    log = small_run(batches=8)
    run_dir = tmp_path / "run"
    write_run_log(log, run_dir)
    options = AuditOptions(replicas=96, seed=9, faults=((3, Fault("flip", 5, 0)),), drilldowns=2)
    local = run_audit(spark, log, options, source=str(run_dir), run_dir=str(run_dir))
    out = tmp_path / "out"
    command = [sys.executable, "-m", "replica.cli", "audit", str(run_dir), "--master", master, "--replicas", "96",
               "--seed", "9", "--fault", "3:flip@5:0", "--drilldowns", "2", "--out", str(out), "--quiet"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 1, result.stderr[-3000:]
    assert result.stdout.startswith("verdict: DIVERGENT")
    remote = json.loads((out / "report.json").read_text())
    assert remote["environment"]["master"] == master
    assert comparable(remote) == json.loads(json.dumps(comparable(local)))
    assert remote["clusters"][0]["replicas"] == [3] and remote["clusters"][0]["drilldown"]["paths"]
    assert (out / "report.html").read_text().startswith("<!DOCTYPE html>")
