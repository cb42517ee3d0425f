"""The local cluster's one exception."""

from __future__ import annotations

__all__ = ["ClusterError"]


class ClusterError(Exception):
    """A local Spark cluster that cannot start, is not running, or is already running."""
