"""One local SparkSession per test process (loopback only, no UI), stopped at the end."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="session")
def spark():
    from replica.audit.job import spark_session

    session = spark_session("local[2]", app_name="replica-audit-tests", shuffle_partitions=2,
                            conf={"spark.default.parallelism": "2"})
    yield session
    session.stop()
