"""``replica audit --follow``: the live audit's shell. It puts together the recorder that copies
what the testnet's nodes execute into a feed (``replica.testnet.live_recorder``), the Spark
streaming audit of that feed (``replica.audit.live``) and its ``/metrics``, and polls the
recorder until the testnet's launcher is gone and nothing new comes; then the final report.
SIGINT or SIGTERM stop it where it stands (status ``stopped``); started again with the same
options it resumes from its checkpointed offset.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from pathlib import Path

from replica.audit.errors import AuditError
from replica.errors import ReplicaError
from replica.progress import Progress

__all__ = ["follow_command", "POLL_S", "QUIET_POLLS"]

#: How often the recorder reads the nodes' executed logs.
POLL_S = 0.1
#: Polls that found nothing new, after the testnet's launcher is gone, before the final report.
QUIET_POLLS = 10


class _Stopped(Exception):
    pass


#: Set by SIGTERM; the loop checks it between polls (an exception raised in the handler could
#: land in a py4j finalizer, which swallows it).
_STOP = threading.Event()


def _note_stop(signum, frame) -> None:
    _STOP.set()


def _cores(master: str) -> int:
    """Task slots a ``local[N]`` master has (the replay pool's minimum share); 2 otherwise."""
    inside = master.removeprefix("local[").removesuffix("]")
    if master.startswith("local[") and inside.isdigit():
        return int(inside)
    return 2


def follow_command(args: argparse.Namespace, status: Progress) -> int:
    from replica.audit.job import spark_session
    from replica.audit.live import LiveAudit, LiveOptions, scheduler_conf
    from replica.audit.live_status import LIVE_AUDIT_DIR, LiveMetrics
    from replica.audit.report import render_text
    from replica.processes.lifecycle import running_launcher, testnet_directory
    from replica.testnet.launcher import TestnetLayout
    from replica.testnet.live_recorder import LiveRecorder

    directory = testnet_directory(args.dir)
    layout = TestnetLayout(directory)
    out = Path(args.out) if args.out else directory / LIVE_AUDIT_DIR
    try:
        recorder = LiveRecorder(directory, out / "feed")
        recorder.start()
        recorder.poll()
    except (ReplicaError, OSError) as exc:
        print(f"replica audit --follow: {exc}", file=sys.stderr)
        return 2
    replicas = args.replicas or args.replicas_per_subnet * len(recorder.subnets)
    options = LiveOptions(replicas=replicas, seed=args.seed, faults=tuple(args.faults), partitions=args.partitions,
                          drilldowns=args.drilldowns, trigger_ms=args.trigger_ms)
    _STOP.clear()
    previous = signal.signal(signal.SIGTERM, _note_stop)
    spark = audit = metrics = None
    try:
        spark = spark_session(args.master, app_name="replica-live-audit", status=status,
                              conf=scheduler_conf(out, _cores(args.master)),
                              archive=Path(args.environment_archive) if args.environment_archive else None)
        metrics = LiveMetrics()
        audit = LiveAudit(spark, out / "feed", out, options, testnet_heights=recorder.heights, status=status,
                          out=sys.stdout, metrics=metrics)
        audit.metrics_url = metrics.serve()
        audit.start()
        print(f"following {directory}: {replicas} replicas, status {out / 'status.json'}, "
              f"metrics {audit.metrics_url}" + (f", resumed at {audit.resumed_from}" if audit.resumed_from else ""),
              flush=True)
        quiet = 0
        while True:
            if _STOP.is_set():
                raise _Stopped()
            appended = recorder.poll()
            failure = audit.failure()
            if failure is not None:
                raise AuditError(f"the streaming query failed: {failure}")
            if running_launcher(layout) is None:
                quiet = 0 if any(appended.values()) else quiet + 1
                if quiet >= QUIET_POLLS:
                    break
            time.sleep(POLL_S)
        report = audit.finish()
        print(render_text(report), flush=True)
        print(f"report: {out / 'report.json'}  page: {out / 'report.html'}  run: {out / 'run'}", flush=True)
        return report["exit_status"]
    except (_Stopped, KeyboardInterrupt):
        print(f"stopped; started again with the same options it resumes from {out}", file=sys.stderr)
        return 130
    except ReplicaError as exc:
        print(f"replica audit --follow: {exc}", file=sys.stderr)
        return 2
    finally:
        signal.signal(signal.SIGTERM, previous)
        if audit is not None:
            audit.close()
        if metrics is not None:
            metrics.stop()
        if spark is not None:
            try:
                spark.stop()
            except Exception as exc:   # the JVM got the signal too and is gone: nothing left to stop
                print(f"replica audit --follow: Spark did not stop cleanly: {exc}", file=sys.stderr)
