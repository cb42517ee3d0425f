"""``replica audit --follow``: a determinism audit of a running testnet, height by height
(docs/architecture.md, *The live audit*).

* **source**   a feed directory (``live_feed``) a recorder fills with every height the nodes
               execute, read by Spark's file source as a stream (``readStream.format("binaryFile")``);
               the stream's offsets and the files it has taken are kept in Spark's
               ``checkpointLocation`` (``spark/``), so a restarted audit resumes after the last
               micro-batch it committed, without replaying what it audited.
* **micro-batch** (``foreachBatch``) the new heights are added to the run so far; every
               replica of the plan (``replicas.plan_live_replicas``) that can run is advanced to
               the new last heights by ``mapPartitions(live_host.advance_task)``: its host keeps its
               state (``replay.ReplicaRun``, the offline replay) between micro-batches. Rows
               (``analysis.ROW_SCHEMA``) are kept in ``rows/<micro-batch>.bin``.
* **compare**  a height where every replica computed the hash the nodes recorded needs no
               analysis; any other goes through the offline audit's own transforms
               (``analysis.hash_groups`` counts, ``analysis.majority``, ``analysis.divergent_rows``).
* **report**   at the first divergence, and at the end, the whole run so far is written as a
               run log (``run/``, what the reproduce commands name) and reported by
               ``job.report_rows`` — the offline audit's analysis, drill-down (differing state
               paths, decoded values, the messages of that height) and report — to
               ``report.json`` / ``report.html``. ``status.json`` and ``/metrics``
               (``live_status``) show the verdict and the lag in rounds all along.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, TextIO

from pyspark.sql import SparkSession

from replica.progress import Progress
from state_manager.codec import check_tuple
from state_manager.durable_files import write_atomically
from state_manager.encoding import decode, encode_unchecked

from . import analysis
from .errors import AuditError
from .job import AuditOptions, report_rows, worker_hash_seed
from .live_feed import Entry, FeedReader, decode_chunk
from .live_host import advance_task, has_checkpoint, read_checkpoint, stop_hosts
from .live_status import STATUS_FILE, FORMAT, LiveMetrics
from .perturbation import Fault
from .replicas import ReplicaSpec, assign_partitions, checkpoint_writers, in_run, plan_live_replicas
from .report import render_html, render_text
from .run_log import SubnetLog, encode_run_log, write_run_log

__all__ = ["LiveOptions", "LiveAudit", "read_rows_file", "scheduler_conf", "REPLAY_POOL", "REPORT_POOL"]

_ROWS_TAG = "replica-live-rows"
#: ``[tag, version, rows]``: the rows (``analysis.ROW_SCHEMA``) one micro-batch gave.
ROWS_VERSION = 1
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LiveOptions:
    replicas: int = 128
    seed: int = 1
    faults: tuple[tuple[int, Fault], ...] = ()
    partitions: int | None = None       # default: the cluster's parallelism
    drilldowns: int = 8
    trigger_ms: int = 250

    def plan_value(self, subnets: tuple[str, ...], interval: int, worker_seed: int) -> dict[str, Any]:
        return {"replicas": self.replicas, "seed": self.seed, "faults": [f"{r}:{f.text()}" for r, f in self.faults],
                "subnets": list(subnets), "interval": interval, "worker_hash_seed": worker_seed}


def read_rows_file(path: str) -> list[tuple]:
    """The rows one micro-batch kept (``mapPartitions``-friendly: a path in, rows out)."""
    tag, version, rows = check_tuple(decode(Path(path).read_bytes(), max_bytes=1 << 31), "rows file", 3)
    if tag != _ROWS_TAG or version != ROWS_VERSION:
        raise AuditError(f"{path} is not a live audit's rows file")
    return [(r[0], r[1], r[2], None if r[3] is None else bytes(r[3]), None if r[4] is None else bytes(r[4]), r[5], r[6])
            for r in rows]


def _rows_from_files(paths):
    for path in paths:
        yield from read_rows_file(path)


class LiveAudit:
    """One live audit of the feed in ``feed_dir``, kept in ``audit_dir`` (module docstring)."""

    def __init__(self, spark: SparkSession, feed_dir: Path, audit_dir: Path, options: LiveOptions, *,
                 testnet_heights: Callable[[], dict[str, int]], status: Progress | None = None,
                 out: TextIO | None = None, metrics: LiveMetrics | None = None) -> None:
        self.spark, self.options = spark, options
        self.feed = FeedReader(feed_dir)
        self.dir = Path(audit_dir)
        self.testnet_heights = testnet_heights
        self.progress = status or Progress(quiet=True)
        self.out = out
        self.metrics = metrics
        context = self.feed.context()
        self.subnets = tuple(sorted(context.subnets))
        self.interval = context.checkpoint_interval
        self.worker_seed = worker_hash_seed(spark)
        self.specs = plan_live_replicas(self.subnets, options.replicas, options.seed, self.interval,
                                        faults=dict(options.faults), worker_hash_seed=self.worker_seed)
        self.writers = checkpoint_writers(self.specs)
        self.partitions = options.partitions or spark.sparkContext.defaultParallelism
        # costs as if the run were long: what differs between live replicas is the seed, not the start
        self.assignment = assign_partitions(self.specs, {s: 1_000_000 for s in self.subnets}, self.partitions)
        self.entries: dict[str, list[Entry]] = {s: [] for s in self.subnets}
        self.reported: dict[int, int] = {s.replica: -1 for s in self.specs}
        self.failed: set[int] = set()
        self.groups: dict[tuple[str, int], dict[tuple, int]] = {}
        self.divergent: dict[int, int] = {}
        self.mismatched: set[tuple[str, int]] = set()
        self.sent = {s: 0 for s in self.subnets}
        self.micro_batches = 0
        self.first_divergence: dict[str, Any] | None = None
        self.report_path: str | None = None
        self.resumed_from: dict[str, int] | None = None
        self.lag_samples: list[int] = []
        self.metrics_url: str | None = None
        self.state = "following"
        self._lock = threading.Lock()
        self._status_lock = threading.Lock()
        self._query = None
        self._stop = threading.Event()
        self._status_thread: threading.Thread | None = None
        self._reporter: threading.Thread | None = None
        self._report_again = False
        self._resume()

    # -- resuming ------------------------------------------------------------------------------

    def _resume(self) -> None:
        """Take up a previous run of this audit in the same directory: its plan must be this
        one; its rows tell where every replica stands; its heights are read from the feed."""
        self.dir.mkdir(parents=True, exist_ok=True)
        plan = self.options.plan_value(self.subnets, self.interval, self.worker_seed)
        path = self.dir / "plan.json"
        if path.exists():
            previous = json.loads(path.read_text())
            if previous != plan:
                raise AuditError(f"{self.dir} holds a live audit with another plan ({previous}); give the same "
                                 "options or another --out directory")
        else:
            write_atomically(path, json.dumps(plan, sort_keys=True).encode())
        files = self._rows_files()
        if not files:
            return
        for file in files:
            self._take_rows(read_rows_file(str(file)))
        heights = {s: max((self.reported[r.replica] for r in self.specs if r.subnet == s), default=0)
                   for s in self.subnets}
        for subnet, height in heights.items():
            if height > 0:
                self.entries[subnet] = self.feed.entries(subnet, 1, height)
        self.sent = {s: len(self.entries[s]) for s in self.subnets}
        self.micro_batches = len(files)
        self.resumed_from = {s: len(self.entries[s]) for s in self.subnets}
        self._check(list(self.groups))

    def _rows_files(self) -> list[Path]:
        return sorted((self.dir / "rows").glob("*.bin"))

    # -- the stream ----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the streaming query and the status writer."""
        self.feed.chunks.mkdir(parents=True, exist_ok=True)
        stream = self.spark.readStream.format("binaryFile").schema(BINARY_FILE_SCHEMA).load(str(self.feed.chunks))
        self._query = (stream.writeStream.foreachBatch(self._micro_batch)
                       .option("checkpointLocation", str(self.dir / "spark"))
                       .trigger(processingTime=f"{self.options.trigger_ms} milliseconds")
                       .queryName("replica-live-audit").start())
        self._status_thread = threading.Thread(target=self._status_loop, name="live-audit-status", daemon=True)
        self._status_thread.start()

    def failure(self) -> str | None:
        """The streaming query's error, if it stopped with one."""
        if self._query is None:
            return None
        exc = self._query.exception()
        return None if exc is None else str(exc)

    def active(self) -> bool:
        return self._query is not None and self._query.isActive

    def _micro_batch(self, df, batch_id: int) -> None:
        chunks = [decode_chunk(bytes(r.content)) for r in df.select("content").collect()]
        with self._lock:
            for subnet, entries in sorted(chunks, key=lambda c: (c[0], c[1][0][0] if c[1] else 0)):
                self._take(subnet, entries)
        self._advance(f"b{batch_id:010d}")

    def _take(self, subnet: str, entries: tuple[Entry, ...]) -> None:
        if subnet not in self.entries:
            raise AuditError(f"the feed brings heights of {subnet}, which the testnet did not have when the audit "
                             "began")
        kept = self.entries[subnet]
        for entry in entries:
            if entry[0] == len(kept) + 1:
                kept.append(entry)
            elif entry[0] > len(kept) + 1:
                raise AuditError(f"the feed skips heights of {subnet}: {entry[0]} after {len(kept)}")

    def _runnable(self, spec: ReplicaSpec, targets: dict[str, int]) -> bool:
        if spec.replica in self.failed or self.reported[spec.replica] >= targets[spec.subnet]:
            return False
        if spec.start == 0:
            return targets[spec.subnet] > 0 or self.reported[spec.replica] < 0
        return spec.start <= targets[spec.subnet] and has_checkpoint(self.dir, spec.subnet, spec.start)

    def _advance(self, batch_id: str) -> int:
        """Advance every runnable replica to the last heights; the rows it gave."""
        targets = {s: len(self.entries[s]) for s in self.subnets}
        work = [(self.assignment[s.replica], (s.replica, s.subnet, s.perturbation.text(), self.reported[s.replica],
                                               self.writers.get(s.subnet) == s.replica))
                for s in self.specs if self._runnable(s, targets)]
        if not work:
            return 0
        batches = [(subnet, e[0], e[1]) for subnet in self.subnets for e in self.entries[subnet][self.sent[subnet]:]]
        payload = (str(self.dir), str(self.feed.root), os.getpid(), self.worker_seed, targets, batches, self.interval)
        sc = self.spark.sparkContext
        sc.setLocalProperty("spark.scheduler.pool", REPLAY_POOL)
        sc.setJobGroup("live-audit-replay", f"micro-batch {batch_id}: {len(work)} replicas to {targets}")
        rows = (sc.parallelize(work, self.partitions).partitionBy(self.partitions, _identity).values()
                .mapPartitions(partial(advance_task, payload)).collect())
        rows = [tuple(r) for r in rows]
        (self.dir / "rows").mkdir(parents=True, exist_ok=True)
        # a name of its own even when Spark runs a micro-batch again after a restart (its rows then
        # are only those after what the first run kept, which must stay)
        name = f"{batch_id}.{time.time_ns()}.bin"
        write_atomically(self.dir / "rows" / name, encode_unchecked((_ROWS_TAG, ROWS_VERSION, tuple(rows))))
        with self._lock:
            self.sent = dict(targets)
            self._take_rows(rows)
            self.micro_batches += 1
        self._check(sorted({(r[1], r[2]) for r in rows}), rows)
        self._write_status()
        return len(rows)

    def _take_rows(self, rows: list[tuple]) -> None:
        for replica, subnet, height, full, root, error, _ in rows:
            self.reported[replica] = max(self.reported[replica], height)
            if error is not None:
                self.failed.add(replica)
            group = self.groups.setdefault((subnet, height), {})
            key = (full, root, error)
            group[key] = group.get(key, 0) + 1

    # -- comparing ------------------------------------------------------------------------------

    def _recorded(self, subnet: str, height: int) -> tuple[bytes, bytes] | None:
        kept = self.entries[subnet]
        if 1 <= height <= len(kept):
            return kept[height - 1][2], kept[height - 1][3]
        return None

    def _check(self, keys: list[tuple[str, int]], rows: list[tuple] | None = None) -> None:
        """Find new divergences at ``keys``: unanimous heights that equal the live hashes need
        nothing; the others go through ``analysis`` (module docstring)."""
        suspect = []
        if rows is not None:
            # rows of replicas already found divergent below their height are no news; a height whose
            # other new rows all hold the live hash needs no analysis
            fresh: dict[tuple[str, int], set] = {}
            for replica, subnet, height, full, root, error, _ in rows:
                if self.divergent.get(replica, height + 1) > height:
                    fresh.setdefault((subnet, height), set()).add((full, root, error))
            for key, hashes in fresh.items():
                live = self._recorded(*key)
                if len(hashes) != 1 or live is None or next(iter(hashes)) != (*live, None):
                    suspect.append(key)
        else:
            for subnet, height in keys:
                group = self.groups.get((subnet, height), {})
                live = self._recorded(subnet, height)
                if len(group) != 1 or next(iter(group))[2] is not None or \
                        (live is not None and next(iter(group))[:2] != live):
                    suspect.append((subnet, height))
        if not suspect:
            return
        spark = self.spark
        wanted = set(suspect)
        groups = [(s, h, f, r, e, n) for (s, h) in suspect for (f, r, e), n in self.groups[(s, h)].items()]
        recorded = [(s, h, *self._recorded(s, h)) for s, h in suspect if self._recorded(s, h) is not None]
        candidates = rows if rows is not None else [r for f in self._rows_files() for r in read_rows_file(str(f))]
        candidates = [r for r in candidates if (r[1], r[2]) in wanted]
        recorded_df = spark.createDataFrame(recorded, analysis.RECORDED_SCHEMA)
        majority = analysis.majority(spark.createDataFrame(groups, GROUP_SCHEMA), recorded_df).persist()
        try:
            divergent = analysis.divergent_rows(spark.createDataFrame(candidates, analysis.ROW_SCHEMA), majority) \
                .select("replica", "subnet", "height").collect()
            mismatched = analysis.recorded_agreement(majority, recorded_df).where("NOT agrees") \
                .select("subnet", "height").collect()
        finally:
            majority.unpersist()
        new = False
        with self._lock:
            for r in divergent:
                if r.replica not in self.divergent or r.height < self.divergent[r.replica]:
                    new = new or r.replica not in self.divergent
                    self.divergent[r.replica] = r.height
            for r in mismatched:
                if (r.subnet, r.height) not in self.mismatched:
                    self.mismatched.add((r.subnet, r.height))
                    new = True
        if new:
            self._diverged()

    def _diverged(self) -> None:
        """Say so at once (status, metrics, a line), then report with the drill-down."""
        spec = {s.replica: s for s in self.specs}
        firsts = [(h, spec[r].subnet, r) for r, h in self.divergent.items()] + \
            [(h, s, None) for s, h in self.mismatched]
        height, subnet, _ = min(firsts, key=lambda f: (f[0], f[1]))
        replicas = sorted(r for r, h in self.divergent.items() if h == height and spec[r].subnet == subnet)
        if self.first_divergence is None or (height, subnet) < (self.first_divergence["height"],
                                                                 self.first_divergence["subnet"]):
            self.first_divergence = {"subnet": subnet, "height": height, "replicas": replicas,
                                     "detected_at": dict(self.testnet_heights()), "detected_unix": time.time()}
        self._write_status()
        self._say(f"DIVERGENCE: {subnet} at height {height} (replicas {', '.join(map(str, replicas)) or 'none'}; "
                  f"the testnet is at {self.first_divergence['detected_at']}); drilling down")
        # The drill-down replays and the analysis of every row take a while: in a thread of their own
        # (Spark runs jobs of several threads), so that micro-batches go on and the lag stays small.
        if self._reporter is None or not self._reporter.is_alive():
            self._reporter = threading.Thread(target=self._report_divergence, name="live-audit-report", daemon=True)
            self._reporter.start()
        else:
            self._report_again = True

    def _report_divergence(self) -> None:
        self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", REPORT_POOL)
        while True:
            self._report_again = False
            try:
                self._say(render_text(self.report()))
            except Exception as exc:   # the audit goes on; the final report is made anyway
                self._say(f"the divergence report failed: {type(exc).__name__}: {exc}")
            if not self._report_again:
                return

    # -- reports --------------------------------------------------------------------------------

    def run_log(self):
        """The run so far as a run log: the feed's context, genesis, batches and hashes, and the
        baseline's checkpoints (what an offline audit of the same heights reads)."""
        context = self.feed.context()
        subnets = []
        for subnet in self.subnets:
            kept = self.entries[subnet]
            checkpoints = []
            for height in range(self.interval, len(kept) + 1, self.interval):
                data = read_checkpoint(self.dir, subnet, height)
                if data is None:
                    break
                checkpoints.append((height, data))
            subnets.append(SubnetLog(subnet, self.feed.genesis(subnet), tuple(e[1] for e in kept),
                                     tuple((e[0], e[2], e[3]) for e in kept), tuple(checkpoints)))
        return context.run_log(subnets)

    def report(self) -> dict[str, Any]:
        """The report of everything audited so far (``job.report_rows``), written to
        ``report.json`` and ``report.html``; ``run/`` holds the run it names."""
        with self._lock:
            log = self.run_log()
            heights = {s.subnet_id: s.height for s in log.subnets}
            checkpoints = {s.subnet_id: s.checkpoint_heights() for s in log.subnets}
            specs = tuple(s for s in in_run(self.specs, heights, checkpoints)
                          if self.reported[s.replica] >= 0 or s.replica in self.failed)
        run_dir = self.dir / "run"
        write_run_log(log, run_dir)
        sc = self.spark.sparkContext
        files = [str(f) for f in self._rows_files()]
        rows = self.spark.createDataFrame(
            sc.parallelize(files, max(1, min(len(files), self.partitions))).mapPartitions(_rows_from_files),
            analysis.ROW_SCHEMA, verifySchema=False)
        broadcast = sc.broadcast(encode_run_log(log))
        options = AuditOptions(replicas=self.options.replicas, seed=self.options.seed, faults=self.options.faults,
                               drilldowns=self.options.drilldowns, plan="live")
        try:
            report = report_rows(self.spark, rows, specs, log, options, broadcast=broadcast, source=str(run_dir),
                                 run_dir=str(run_dir), worker_seed=self.worker_seed, status=self.progress,
                                 partitions=self.partitions, assignment=self.assignment)
        finally:
            broadcast.unpersist()
        report["environment"]["live"] = {"micro_batches": self.micro_batches, "resumed_from": self.resumed_from,
                                         "first_divergence": self.first_divergence}
        (self.dir / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
        (self.dir / "report.html").write_text(render_html(report))
        self.report_path = str(self.dir / "report.json")
        self._write_status()
        return report

    def finish(self, timeout_s: float = 600.0) -> dict[str, Any]:
        """Audit every height the feed holds now, let late replicas catch up, stop the query
        and report (the final report)."""
        try:
            if self._query is not None and self._query.isActive:
                self._query.processAllAvailable()
                self._query.stop()
            deadline = time.monotonic() + timeout_s
            late = 0
            while self._advance(f"f{late:010d}") and time.monotonic() < deadline:
                late += 1   # replicas whose checkpoint came in the last micro-batch start now
            if self._reporter is not None:
                self._reporter.join()
            self.state = "finished"
            return self.report()
        finally:
            self.close()

    def close(self) -> None:
        """Stop the query (if it runs), the hosts (by their pids) and the status writer. A
        signal that reached Spark's JVM as well (Ctrl-C in a terminal reaches the whole
        process group) may have stopped the query already: that is logged, not raised."""
        try:
            if self._query is not None and self._query.isActive:
                self._query.stop()
        except Exception as exc:   # py4j's errors once the JVM is gone; nothing is left to stop there
            _log.warning("the streaming query did not stop cleanly: %s", exc)
        stop_hosts(self.dir)
        if self.state == "following":
            self.state = "stopped"
        self._stop.set()
        if self._status_thread is not None:
            self._status_thread.join()
        self._write_status()

    # -- status ---------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        testnet = dict(self.testnet_heights())
        with self._lock:
            audited = dict(self.sent)
            lag = {s: max(0, testnet.get(s, audited[s]) - audited[s]) for s in self.subnets}
            verdict = "divergent" if (self.divergent or self.mismatched) else \
                ("agree" if self.micro_batches else "waiting")
            return {"format": FORMAT, "version": 1, "pid": os.getpid(), "state": self.state, "verdict": verdict,
                    "replicas": len(self.specs), "audited": audited, "testnet": testnet, "lag_rounds": lag,
                    "lag_rounds_max": max(lag.values(), default=0), "micro_batches": self.micro_batches,
                    "resumed_from": self.resumed_from, "first_divergence": self.first_divergence,
                    "divergent_replicas": len(self.divergent), "report": self.report_path,
                    "metrics": self.metrics_url, "updated": time.time()}

    def _write_status(self) -> None:
        status = self.status()
        with self._status_lock:   # three threads write it (status loop, micro-batches, reports): one tmp file
            write_atomically(self.dir / STATUS_FILE, json.dumps(status, sort_keys=True).encode(), sync=False)
            if self.metrics is not None:
                self.metrics.update(status, len(self.divergent))
            if self.micro_batches and status["state"] == "following":
                self.lag_samples.append(status["lag_rounds_max"])
        self.progress.update(f"{status['verdict']}: audited {status['audited']}, "
                             f"lag {status['lag_rounds_max']} rounds, "
                             f"{self.micro_batches} micro-batches")

    def _status_loop(self) -> None:
        while not self._stop.wait(0.5):
            self._write_status()

    def _say(self, text: str) -> None:
        if self.out is not None:
            print(text, file=self.out, flush=True)


#: Spark's fair scheduler pools (``scheduler_conf``): a free task slot goes to a micro-batch's
#: replay before the drill-down and analysis of a divergence report, so the lag stays small.
REPLAY_POOL, REPORT_POOL = "live-replay", "live-report"


def scheduler_conf(audit_dir: Path, cores: int) -> dict[str, str]:
    """Session settings for the fair scheduler and its two pools (an allocation file in ``audit_dir``)."""
    audit_dir.mkdir(parents=True, exist_ok=True)
    path = audit_dir / "fairscheduler.xml"
    path.write_text(
        "<?xml version=\"1.0\"?>\n<allocations>\n"
        f"  <pool name=\"{REPLAY_POOL}\"><schedulingMode>FIFO</schedulingMode><weight>4</weight>"
        f"<minShare>{max(1, cores)}</minShare></pool>\n"
        f"  <pool name=\"{REPORT_POOL}\"><schedulingMode>FIFO</schedulingMode><weight>1</weight>"
        "<minShare>0</minShare></pool>\n</allocations>\n")
    return {"spark.scheduler.mode": "FAIR", "spark.scheduler.allocation.file": str(path)}


#: The binary file source's own columns (a streaming source is given its schema).
BINARY_FILE_SCHEMA = "path string, modificationTime timestamp, length long, content binary"
GROUP_SCHEMA = "subnet string, height int, full_hash binary, certified_root binary, error string, replicas long"


def _identity(key: int) -> int:
    return key
