"""The Spark job of ``replica audit``: extract, pure transform, load.

* **extract**   the run log (a recorded directory or a generated workload) → one blob,
                broadcast once; replica specs planned in the driver → a DataFrame
                (``analysis.SPEC_SCHEMA``); the live hashes → a DataFrame.
* **transform** specs, keyed by their planned partition, ``mapPartitions(worker.replay_task)``
                → rows ``(replica, subnet, height, full_hash, certified_root, error, build)``
                (``analysis.ROW_SCHEMA``, cached); the ``analysis`` transforms; the builds
                that replayed (``analysis.replay_builds``) and the executors' own account of
                theirs (``worker.describe_worker``); the drill-down replays
                (``mapPartitions(worker.states_task)``) and their diff.
* **load**      the collected facts → ``report.build_report``; writing files is the CLI's job.

The same code runs on ``local[*]`` and on a standalone cluster. For a cluster master the
executors run this very build: its packed environment (``environment``: a venv with the
project's wheel, compiled modules included) goes out with ``spark.archives`` and is their
Python. Shuffles are sized to the rows (``analysis_partitions``), not to the executors.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections import Counter as Tally
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from message_routing.batch import decode_batch

from . import analysis
from .build import BuildInfo, build_from_value, current_build
from .environment import ARCHIVE_ALIAS, EXECUTOR_PYTHON, environment_archive
from .build_check import compare_builds
from .drilldown import describe_messages, diff_states, drill_requests
from .errors import AuditError, EnvironmentArchiveError, PerturbationError
from .faults import apply_fault
from .inputs import RunInputs, prepare_run
from .perturbation import Fault
from replica.progress import Progress

from .progress import SparkProgress
from .replicas import ReplicaSpec, assign_partitions, in_run, plan_live_replicas, plan_replicas
from .report import AuditFacts, build_report, reproduce_command
from .run_log import RunLog, encode_run_log
from .worker import describe_worker, replay_task, states_task

__all__ = ["AuditOptions", "spark_session", "run_audit", "report_rows", "plan_for", "worker_hash_seed",
           "default_worker_hash_seed",
           "default_partitions", "analysis_partitions", "describe_executors"]


@dataclass(frozen=True)
class AuditOptions:
    replicas: int = 2048
    seed: int = 1
    faults: tuple[tuple[int, Fault], ...] = ()
    partitions: int | None = None       # default: ``default_partitions``
    drilldowns: int = 32
    from_genesis: bool = False
    plan: str = "default"               # or "live": ``replicas.plan_live_replicas`` (what ``live`` replays)


#: Fewer replicas than this per partition cost more in task and subprocess overhead than they balance.
MIN_REPLICAS_PER_PARTITION = 64


def default_partitions(replicas: int, parallelism: int) -> int:
    """``4 × parallelism`` (slack for uneven tasks), but no fewer than 64 replicas per
    partition and at least one partition per core."""
    return max(1, min(4 * parallelism, max(parallelism, replicas // MIN_REPLICAS_PER_PARTITION), replicas))


def _is_loopback_master(master: str) -> bool:
    if master.startswith("local"):
        return True
    host = master.removeprefix("spark://").split(":")[0]
    return host in ("127.0.0.1", "localhost")


#: Rows one shuffle partition of the analysis holds: its tasks cost the same fixed overhead
#: however few rows they get, so small audits use one partition however many executors there are.
ROWS_PER_SHUFFLE_PARTITION = 50_000


def analysis_partitions(rows: int) -> int:
    """Shuffle partitions for ``rows`` replay rows: ``ceil(rows / ROWS_PER_SHUFFLE_PARTITION)``, at least 1."""
    return max(1, math.ceil(rows / ROWS_PER_SHUFFLE_PARTITION))


def spark_session(master: str = "local[*]", *, app_name: str = "replica-audit", shuffle_partitions: int = 8,
                  conf: dict[str, str] | None = None, archive: Path | None = None,
                  status: Progress | None = None) -> SparkSession:
    """A session for the audit: no UI, the driver on loopback for local or loopback masters.
    Local executors run this interpreter; a cluster's run the packed environment of this
    build (``archive``, default: ``environment.environment_archive``, built if not cached)."""
    local = master.startswith("local")
    if not local:
        archive = archive or environment_archive(status=status)
        if not Path(archive).is_file():
            raise EnvironmentArchiveError(f"no environment archive at {archive}")
    previous_python = os.environ.get("PYSPARK_PYTHON")
    # PySpark reads PYSPARK_PYTHON once, when the context starts: what its workers run.
    os.environ["PYSPARK_PYTHON"] = (previous_python or sys.executable) if local else EXECUTOR_PYTHON
    if _is_loopback_master(master):
        # Before the JVM starts: otherwise Spark binds its services to the host's first
        # non-loopback interface even for a local run.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
               .config("spark.pyspark.driver.python", sys.executable))
    if not local:
        builder = builder.config("spark.archives", f"{archive}#{ARCHIVE_ALIAS}")
    if _is_loopback_master(master):
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    finally:
        if previous_python is None:
            os.environ.pop("PYSPARK_PYTHON", None)
        else:
            os.environ["PYSPARK_PYTHON"] = previous_python
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def describe_executors(spark: SparkSession, tasks: int | None = None) -> list[dict]:
    """What every Python worker reached by ``tasks`` small tasks says it runs
    (``worker.describe_worker``), one entry per worker process."""
    sc = spark.sparkContext
    tasks = tasks or 4 * sc.defaultParallelism
    seen = {}
    described = sc.parallelize(range(tasks), tasks).mapPartitions(describe_worker).collect()
    for executor, pid, python, encoded, loaded, origins in described:
        seen[(executor, pid)] = {"executor": executor, "pid": pid, "python": python,
                                 "build": _decode_build(encoded), "compiled_loaded": list(loaded),
                                 "imports_from": dict(origins)}
    return [seen[key] for key in sorted(seen)]


def _decode_build(encoded: bytes) -> BuildInfo:
    from state_manager.encoding import decode

    return build_from_value(decode(bytes(encoded), max_bytes=len(encoded)))


def default_worker_hash_seed() -> int:
    """The seed PySpark will give its workers: this process's ``PYTHONHASHSEED``, else 0."""
    value = os.environ.get("PYTHONHASHSEED", "0")
    return int(value) if value.isdigit() else 0


def worker_hash_seed(spark: SparkSession) -> int:
    """The ``PYTHONHASHSEED`` Spark gives its Python workers (PySpark sets one for them)."""
    value = spark.sparkContext.environment.get("PYTHONHASHSEED", os.environ.get("PYTHONHASHSEED", "0"))
    try:
        return int(value)
    except ValueError as exc:
        raise AuditError(f"Spark workers run with PYTHONHASHSEED={value!r}; the audit needs a fixed seed") from exc


def _key_by_partition(row) -> tuple[int, Any]:
    return row["partition"], row


def _partition_of(key: int) -> int:
    return key


def _validate_faults(run: RunInputs, specs: tuple[ReplicaSpec, ...]) -> None:
    for spec in specs:
        fault = spec.perturbation.fault
        if fault is not None:
            if fault.height > run.subnet(spec.subnet).height:
                raise PerturbationError(f"fault {fault.text()} of replica {spec.replica}: subnet {spec.subnet} has "
                                        f"{run.subnet(spec.subnet).height} batches")
            apply_fault(run.subnet(spec.subnet).batches[fault.height - 1], fault)


def _spec_rows(specs: tuple[ReplicaSpec, ...], assignment: dict[int, int], heights: dict[str, int]) -> list[tuple]:
    return [(s.replica, s.subnet, s.perturbation.text(), list(s.perturbation.kinds()), s.start,
             s.expected_rows(heights[s.subnet]), assignment[s.replica]) for s in specs]


def _recorded_rows(log: RunLog) -> list[tuple]:
    return [(s.subnet_id, h, f, c) for s in log.subnets for h, f, c in s.hashes]


def _replica_batches(replicas: int, row_count: int, incomplete: list) -> int:
    """Batches executed: one per row after each replica's start row (a failed replica's error
    row stands for the batch it failed on)."""
    silent = sum(1 for r in incomplete if r[3] == 0)  # replicas that reported nothing at all
    return int(row_count - (replicas - silent))


def _b(value) -> bytes | None:
    return None if value is None else bytes(value)


def plan_for(log: RunLog, options: AuditOptions, worker_seed: int) -> tuple[ReplicaSpec, ...]:
    """The replicas ``options`` asks for on ``log``: ``plan_replicas``, or with ``plan="live"``
    the live audit's plan (``plan_live_replicas``) cut to the replicas the run reached."""
    heights = {s.subnet_id: s.height for s in log.subnets}
    checkpoints = {s.subnet_id: s.checkpoint_heights() for s in log.subnets}
    if options.plan == "live":
        planned = plan_live_replicas(log.subnet_ids(), options.replicas, options.seed, log.checkpoint_interval,
                                     faults=dict(options.faults), worker_hash_seed=worker_seed)
        return in_run(planned, heights, checkpoints)
    return plan_replicas(heights, checkpoints, options.replicas, options.seed, faults=dict(options.faults),
                         worker_hash_seed=worker_seed, from_genesis=options.from_genesis)


def run_audit(spark: SparkSession, log: RunLog, options: AuditOptions, *, source: str, run_dir: str | None,
              status: Progress | None = None) -> dict[str, Any]:
    """Audit ``log`` with ``options``; return the report (``report.build_report``)."""
    status = status or Progress(quiet=True)
    sc = spark.sparkContext
    started = time.perf_counter()
    # -- extract -----------------------------------------------------------------------------
    run = prepare_run(log)
    heights = {s.subnet_id: s.height for s in log.subnets}
    worker_seed = worker_hash_seed(spark)
    specs = plan_for(log, options, worker_seed)
    _validate_faults(run, specs)
    partitions = options.partitions or default_partitions(len(specs), sc.defaultParallelism)
    assignment = assign_partitions(specs, heights, partitions)
    spec_df = spark.createDataFrame(_spec_rows(specs, assignment, heights), analysis.SPEC_SCHEMA)
    blob = encode_run_log(log)
    broadcast = sc.broadcast(blob)
    # -- transform: replay -------------------------------------------------------------------
    replayed = (spec_df.rdd.map(_key_by_partition).partitionBy(partitions, _partition_of).values()
                .mapPartitions(partial(replay_task, broadcast)))
    rows = spark.createDataFrame(replayed, analysis.ROW_SCHEMA, verifySchema=False).persist(StorageLevel.MEMORY_AND_DISK)
    with SparkProgress(sc, status, f"replaying {len(specs)} replicas in {partitions} partitions", "audit-replay"):
        rows.count()
    replay_s = time.perf_counter() - started
    try:
        return report_rows(spark, rows, specs, log, options, broadcast=broadcast, source=source, run_dir=run_dir,
                           worker_seed=worker_seed, status=status, partitions=partitions, assignment=assignment,
                           replay_s=replay_s)
    finally:
        rows.unpersist()
        broadcast.unpersist()


def report_rows(spark: SparkSession, rows: DataFrame, specs: tuple[ReplicaSpec, ...], log: RunLog,
                options: AuditOptions, *, broadcast, source: str, run_dir: str | None, worker_seed: int,
                status: Progress, partitions: int, assignment: dict[int, int] | None = None,
                replay_s: float = 0.0) -> dict[str, Any]:
    """The report of replay ``rows`` (``analysis.ROW_SCHEMA``) of ``specs`` on ``log``: the
    analysis, the builds, the drill-down (replaying from ``broadcast``, the blob of ``log``).
    The offline audit calls it once on its rows; the live audit on the rows it kept."""
    sc = spark.sparkContext
    started = time.perf_counter()
    heights = {s.subnet_id: s.height for s in log.subnets}
    assignment = assignment or {s.replica: 0 for s in specs}
    shuffle = analysis_partitions(sum(s.expected_rows(heights[s.subnet]) for s in specs))
    spark.conf.set("spark.sql.shuffle.partitions", str(shuffle))
    # Local relations (held by the driver's JVM): a query reading them runs no Python on the executors.
    spec_df = spark.createDataFrame(_spec_rows(specs, assignment, heights), analysis.SPEC_SCHEMA)
    recorded_df = spark.createDataFrame(_recorded_rows(log), analysis.RECORDED_SCHEMA)
    row_count = rows.count()
    # -- transform: analysis -----------------------------------------------------------------
    with SparkProgress(sc, status, "comparing hashes", "audit-analysis"):
        groups = analysis.hash_groups(rows).persist()
        majority = analysis.majority(groups, recorded_df).persist()
        per_height = [tuple(r) for r in analysis.divergent_per_height(groups, majority).collect()]
        error_rows = sum(r.replicas for r in groups.where(F.col("error").isNotNull()).select("replicas").collect())
        split = [(r.subnet, r.height, _b(r.full_hash), _b(r.certified_root), r.error, r.replicas, r.is_majority)
                 for r in analysis.split_groups(groups, majority).orderBy("subnet", "height").limit(2000).collect()]
        mismatches = [(r.subnet, r.height, _b(r.majority_full), _b(r.majority_root), _b(r.recorded_full),
                       _b(r.recorded_root))
                      for r in analysis.recorded_agreement(majority, recorded_df).where(~F.col("agrees")).collect()]
        first = analysis.first_divergence(rows, majority).persist()
        cluster_rows = [r.asDict() for r in analysis.clusters(first, spec_df).collect()]
        divergent_replicas = sum(c["size"] for c in cluster_rows)
        incomplete = [tuple(r) for r in analysis.incomplete_replicas(rows, spec_df).collect()]
        replayed_by = [(r.build, r.replicas, r.rows, list(r.sample)) for r in analysis.replay_builds(rows).collect()]
    analysis_s = time.perf_counter() - started
    with SparkProgress(sc, status, "asking the executors which build they run", "audit-builds"):
        executors = describe_executors(spark)
    own = current_build()
    known = {own.fingerprint: own, **{e["build"].fingerprint: e["build"] for e in executors}}
    build = compare_builds(log.build, replayed_by, known)
    # -- transform: drill-down ---------------------------------------------------------------
    clusters_sorted = sorted(cluster_rows, key=lambda c: (c["first_height"], c["subnet"], c["replicas"][0]))
    chosen = clusters_sorted[: options.drilldowns]
    by_replica = {s.replica: s for s in specs}
    if chosen:
        with SparkProgress(sc, status, f"drilling down into {len(chosen)} clusters", "audit-drilldown"):
            _drill(spark, broadcast, chosen, rows, majority, spec_df, by_replica, run_dir, worker_seed)
            _messages_of(log, chosen)
    drill_s = time.perf_counter() - started - analysis_s
    groups.unpersist()
    majority.unpersist()
    first.unpersist()
    # -- load --------------------------------------------------------------------------------
    kinds = Tally(kind for s in specs for kind in s.perturbation.kinds())
    faults = [f"{r}:{f.text()}" for r, f in options.faults if r in by_replica]
    facts = AuditFacts(
        source=source,
        subnets=[{"subnet": s.subnet_id, "batches": s.height, "checkpoints": list(s.checkpoint_heights())}
                 for s in log.subnets],
        canister_modules=list(log.canister_modules), limits=log.limits_name, replicas=len(specs),
        seed=options.seed, worker_hash_seed=worker_seed, from_genesis=options.from_genesis,
        faults=faults, perturbation_counts=dict(kinds),
        replica_batches=_replica_batches(len(specs), row_count, incomplete), rows=int(row_count),
        error_rows=int(error_rows), per_height=per_height, split_groups=split, clusters=clusters_sorted,
        recorded_mismatches=mismatches, incomplete=incomplete, divergent_replicas=int(divergent_replicas),
        build=build,
        environment={"master": sc.master, "default_parallelism": sc.defaultParallelism, "partitions": partitions,
                     "shuffle_partitions": shuffle, "driver_build": own.fingerprint,
                     "executors": [{**e, "build": e["build"].fingerprint} for e in executors],
                     "timing_s": {"replay": round(replay_s, 3), "analysis": round(analysis_s, 3),
                                  "drilldown": round(drill_s, 3),
                                  "total": round(replay_s + time.perf_counter() - started, 3)}},
    )
    recorded = {(s.subnet_id, h): (f, c) for s in log.subnets for h, f, c in s.hashes}
    report = build_report(facts, recorded)
    if options.plan != "default":
        report["audit"]["plan"] = options.plan
    return report


def _messages_of(log: RunLog, chosen: list[dict]) -> None:
    """Each drilled cluster's drill-down gets the messages of the batch executed at its first
    divergent height (the recorded batch, as every replica but a faulted one executed it)."""
    for cluster in chosen:
        drill = cluster.get("drilldown")
        subnet = log.subnet(cluster["subnet"])
        height = cluster["first_height"]
        if drill is not None and 1 <= height <= subnet.height:
            drill["messages"] = describe_messages(decode_batch(subnet.batches[height - 1]))


def _drill(spark: SparkSession, broadcast, chosen: list[dict], rows: DataFrame, majority: DataFrame,
           spec_df: DataFrame, by_replica: dict[int, ReplicaSpec], run_dir: str | None, worker_seed: int) -> None:
    """Fill ``drilldown``, ``majority_replica`` and ``reproduce`` of the chosen clusters."""
    wanted = spark.createDataFrame([(c["subnet"], c["first_height"]) for c in chosen], "subnet string, height int")
    witnesses = {(r.subnet, r.height): (r.replica, r.perturbation)
                 for r in analysis.majority_witnesses(rows, majority, spec_df, wanted).collect()}
    pairs, drilled = [], []
    for cluster in chosen:
        witness = witnesses.get((cluster["subnet"], cluster["first_height"]))
        minority = by_replica[cluster["replicas"][0]]
        command_against = None if witness is None else witness[1]
        cluster["reproduce"] = reproduce_command(run_dir or "RUN_DIR", cluster["subnet"], minority.perturbation.text(),
                                                 cluster["first_height"], command_against, worker_seed)
        if witness is None:
            cluster["drilldown"] = {"paths": [], "more_paths": 0,
                                    "notes": ["no replica computed a majority hash at this height"]}
            continue
        cluster["majority_replica"] = witness[0]
        height = cluster["first_height"]
        pairs.append(((cluster["subnet"], minority.perturbation.text(), height),
                      (cluster["subnet"], witness[1], height)))
        drilled.append(cluster)
    if not pairs:
        return
    requests, ids = drill_requests(pairs)
    slices = min(len(requests), spark.sparkContext.defaultParallelism)
    states = {row[0]: row for row in spark.sparkContext.parallelize([r.as_tuple() for r in requests], slices)
              .mapPartitions(partial(states_task, broadcast)).collect()}
    for cluster, (minority_id, majority_id) in zip(drilled, ids):
        cluster["drilldown"] = diff_states(states[minority_id], states[majority_id],
                                           (cluster["full_hash"], cluster["certified_root"]))
