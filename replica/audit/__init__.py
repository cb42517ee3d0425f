"""Determinism audits: replay a recorded multi-subnet run on many simulated replicas.

Modules, one job each:

* ``run_log``      the recorded-run format (directory and blob), strict loading
* ``perturbation`` what makes a replica differ (checkpoint start, restart, shuffle, hash seed, fault)
* ``faults``       injected faults (flip, drop, swap one message of one batch)
* ``shuffle``      shuffled container fill and shuffled unordered inputs
* ``replay``       the replay engine: the replica's own state machine, pure
* ``inputs``       a run log decoded once for many replicas
* ``replicas``     the replica plan and its partitioning
* ``executor``     replaying one partition's replicas into rows (pure)
* ``isolation``    + ``child``: replays under another PYTHONHASHSEED, in a subprocess
* ``worker``       the executor-side shell (cache, GC, ``mapPartitions`` bodies)
* ``analysis``     Spark SQL transforms: hash groups, majority, divergence, clusters
* ``tree_diff``    + ``drilldown``: the smallest set of differing state paths
* ``report``       report dict, terminal text, HTML page
* ``progress``     the status line
* ``job``          the Spark job (extract / transform / load)
* ``build``        the build fingerprint (module sources, compiled modules, Python, dependencies)
* ``build_check``  which builds replayed the run, against the one the live run recorded
* ``environment``  the executors' packed environment (``spark.archives``) of this build

What one simulated replica executes is documented in ``replay`` and ``replicas``: it
decodes its start state (genesis or a recorded checkpoint), executes every batch after it
with ``message_routing.state_machine.execute_round`` and commits each height through the
state manager, emitting that height's full-state hash and certified root. Nothing is shared
between replicas but immutable inputs (the decoded batches and the code).
"""

from .errors import (
    AuditError, FaultError, IsolationError, PerturbationError, RecordError, ReplayError, RunLogError, WorkloadError,
)
from .perturbation import Fault, Perturbation, parse_fault, parse_perturbation
from .replay import ReplayContext, ReplayStep, replay, replay_states
from .run_log import RunLog, SubnetLog, decode_run_log, encode_run_log, load_run_log, write_run_log

__all__ = [
    "AuditError", "FaultError", "IsolationError", "PerturbationError", "RecordError", "ReplayError", "RunLogError",
    "WorkloadError", "Fault", "Perturbation", "parse_fault", "parse_perturbation",
    "ReplayContext", "ReplayStep", "replay", "replay_states", "RunLog", "SubnetLog",
    "decode_run_log", "encode_run_log", "load_run_log", "write_run_log",
]
