"""The local cluster's one exception."""

from __future__ import annotations

from replica.errors import ReplicaError

__all__ = ["ClusterError"]


class ClusterError(ReplicaError):
    """A local Spark cluster that cannot start, is not running, or is already running."""
