"""The audit's exceptions: one hierarchy under ``AuditError`` (a ``ReplicaError``), one class
per kind of failure."""

from __future__ import annotations

from replica.errors import ReplicaError

__all__ = [
    "AuditError", "RunLogError", "RecordError", "PerturbationError", "FaultError", "ReplayError",
    "IsolationError", "WorkloadError", "EnvironmentArchiveError",
]


class AuditError(ReplicaError):
    """Base of every error the determinism audit raises."""


class RunLogError(AuditError):
    """A recorded run directory or run-log blob that is missing, corrupt or inconsistent."""


class RecordError(AuditError):
    """A simulation that cannot be written as a run log (nothing recorded, no registry, or
    its own batches do not replay to its own hashes)."""


class PerturbationError(AuditError):
    """A perturbation or fault spec that does not parse or cannot apply to the run."""


class FaultError(PerturbationError):
    """A fault that names a message the batch does not have, or cannot corrupt it."""


class ReplayError(AuditError):
    """A replay that cannot start or continue (missing checkpoint, batch out of order)."""


class IsolationError(AuditError):
    """A replay subprocess (another ``PYTHONHASHSEED``) that failed or answered garbage."""


class WorkloadError(AuditError):
    """Workload generator parameters out of range."""


class EnvironmentArchiveError(AuditError):
    """The executors' environment archive cannot be built (no source tree, a failed wheel
    build or install, or a packed build that differs from the one being audited)."""
