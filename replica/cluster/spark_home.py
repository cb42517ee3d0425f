"""The Spark inside the installed ``pyspark``, and the environment its daemons run in.

A pip-installed pyspark carries a whole Spark: ``jars/``, ``bin/spark-class``, ``sbin/``.
Its shell scripts find their home with ``find-spark-home``, which runs the *system*
``python3`` to import pyspark — which fails outside the project's environment — unless
``SPARK_HOME`` is set, so ``daemon_environment`` always sets it.

The daemons' environment is deliberately bare of the project: no ``PYTHONPATH``, no
``VIRTUAL_ENV``, no ``PYSPARK_PYTHON``, and ``PATH`` without this environment's ``bin``.
Executors inherit it, so a job that does not ship its own Python environment cannot
quietly use this one.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Mapping

from .errors import ClusterError

__all__ = ["spark_home", "spark_class", "daemon_environment"]

_PROJECT_VARIABLES = ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONHOME")


def spark_home() -> Path:
    """pyspark's directory, which is a Spark home (``bin/``, ``sbin/``, ``jars/``)."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").is_file() or not (home / "jars").is_dir():
        raise ClusterError(f"{home} has no bin/spark-class or jars/: this pyspark does not carry Spark")
    return home


def spark_class() -> Path:
    return spark_home() / "bin" / "spark-class"


def daemon_environment(base: Mapping[str, str], log_dir: Path) -> dict[str, str]:
    """``base`` made fit for the master and workers (module docstring)."""
    env = {k: v for k, v in base.items() if k not in _PROJECT_VARIABLES}
    own_bin = str(Path(sys.prefix) / "bin")
    env["PATH"] = os.pathsep.join(p for p in base.get("PATH", "").split(os.pathsep) if p and p != own_bin)
    env.update(SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(log_dir),
               SPARK_NO_DAEMONIZE="1")
    return env
