"""The local SparkSession of the audit tests, for comparing a cluster's report with ``local[*]``'s."""

from tests.audit.conftest import spark  # noqa: F401  (a fixture)
