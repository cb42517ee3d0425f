"""The local cluster launcher without starting Spark: its daemons' environment, its refusals."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from replica.cli import main
from replica.cluster import ClusterConfig, ClusterError, cluster_down, cluster_up
from replica.cluster.launcher import is_spark_daemon, load_state
from replica.cluster.spark_home import daemon_environment, spark_home


def test_the_daemons_environment_has_no_project_python(tmp_path):
    own_bin = str(Path(sys.prefix) / "bin")
    base = {"PATH": os.pathsep.join([own_bin, "/usr/bin"]), "PYTHONPATH": "/src", "VIRTUAL_ENV": sys.prefix,
            "PYSPARK_PYTHON": sys.executable, "HOME": "/home/x"}
    env = daemon_environment(base, tmp_path)
    assert env["PATH"] == "/usr/bin" and env["HOME"] == "/home/x"
    assert not {"PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON"} & set(env)
    assert env["SPARK_HOME"] == str(spark_home()) and env["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert (spark_home() / "bin" / "spark-class").is_file() and (spark_home() / "jars").is_dir()


@pytest.mark.parametrize("config, message", [
    (ClusterConfig(workers=0), "at least one worker"),
    (ClusterConfig(cores=0), "at least one core"),
    (ClusterConfig(port=70000), "not a TCP port"),
])
def test_bad_configurations_are_refused_before_starting_anything(tmp_path, config, message):
    from dataclasses import replace

    with pytest.raises(ClusterError, match=message):
        cluster_up(replace(config, directory=tmp_path / "c"))
    assert not (tmp_path / "c").exists()


def test_down_and_status_without_a_cluster(tmp_path, capsys):
    with pytest.raises(ClusterError, match="no cluster"):
        cluster_down(tmp_path)
    assert main(["cluster", "down", "--dir", str(tmp_path)]) == 2
    assert main(["cluster", "status", "--dir", str(tmp_path)]) == 1
    assert "no cluster in" in capsys.readouterr().out


def test_down_never_signals_a_pid_that_is_not_a_spark_daemon(tmp_path):
    (tmp_path / "pids").mkdir()
    (tmp_path / "pids" / "worker-1.pid").write_text(f"{os.getpid()}\n")   # this test process
    assert not is_spark_daemon(os.getpid())
    assert cluster_down(tmp_path) == []
    assert not (tmp_path / "pids" / "worker-1.pid").exists() and load_state(tmp_path) is None
