"""Benchmark: one audit on a standalone cluster of 1 and of 2 one-core workers, and on ``local[2]``.

Generates a seeded workload (``--subnets`` × ``--batches``), builds (or finds cached) the
executors' environment archive, then audits the same run with the same replica plan three
ways, each in a fresh Spark session of this process:

1. a standalone cluster of 1 worker × 1 core (``replica.cluster``, started and stopped here),
2. a standalone cluster of 2 workers × 1 core,
3. ``local[2]``.

Per run it records the wall time (session start, audit and stop), the replay and analysis
stages (the report's ``environment.timing_s``) and the verdict. The last line of output is
one JSON object with ``wall_1w_s``, ``wall_2w_s``, ``wall_local_s``, ``replay_1w_s``,
``replay_2w_s``, ``replay_local_s``, ``analysis_*_s``, ``replay_scaleout`` (= replay_1w_s /
replay_2w_s), ``replay_cluster_vs_local`` (= replay_local_s / replay_2w_s),
``wall_2w_vs_local`` (= wall_2w_s / wall_local_s), the machine's ``floor_us`` and load.

    python benchmarks/audit_scaleout.py                     # 256 replicas of 2 subnets × 30 batches
    python benchmarks/audit_scaleout.py --replicas 128 --batches 20
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYTHONHASHSEED", "0")

from replica.audit.environment import environment_archive  # noqa: E402
from replica.audit.job import AuditOptions, run_audit, spark_session  # noqa: E402
from replica.audit.run_log import decode_run_log  # noqa: E402
from replica.cluster import ClusterConfig, cluster_down, cluster_up  # noqa: E402
from replica.progress import Progress  # noqa: E402
from replica.inprocess.workload import WorkloadConfig, generate_isolated  # noqa: E402
from floor import measure_floor_us  # noqa: E402


def _audit(master: str, log, options: AuditOptions, archive: Path, status: Progress) -> dict:
    started = time.perf_counter()
    spark = spark_session(master, archive=archive, conf={"spark.default.parallelism": "2"})
    try:
        report = run_audit(spark, log, options, source="benchmark", run_dir=None, status=status)
    finally:
        spark.stop()
    wall = time.perf_counter() - started
    timing = report["environment"]["timing_s"]
    return {"wall_s": round(wall, 2), "replay_s": timing["replay"], "analysis_s": timing["analysis"],
            "verdict": report["verdict"], "replica_batches": report["audit"]["replica_batches"],
            "executors": len({e["executor"] for e in report["environment"]["executors"]}),
            "partitions": report["environment"]["partitions"],
            "shuffle_partitions": report["environment"]["shuffle_partitions"]}


def _on_cluster(workers: int, directory: Path, log, options: AuditOptions, archive: Path, status: Progress) -> dict:
    state = cluster_up(ClusterConfig(directory=directory, workers=workers, cores=1), status)
    try:
        return _audit(state.url, log, options, archive, status)
    finally:
        cluster_down(directory)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicas", type=int, default=256)
    parser.add_argument("--subnets", type=int, default=2)
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--canisters", type=int, default=16)
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    status = Progress()
    floor_us = measure_floor_us()
    config = WorkloadConfig(subnets=args.subnets, canisters=args.canisters, batches=args.batches,
                            messages=args.messages, seed=args.seed)
    status.update(f"generating {args.subnets} subnets × {args.batches} batches")
    log = decode_run_log(generate_isolated(config, int(os.environ["PYTHONHASHSEED"])))
    archive = environment_archive(status=status)
    options = AuditOptions(replicas=args.replicas, seed=args.seed, drilldowns=0)
    runs = {}
    with tempfile.TemporaryDirectory(prefix="audit-scaleout-") as scratch:
        runs["1w"] = _on_cluster(1, Path(scratch) / "one", log, options, archive, status)
        status.finish(f"1 worker: {runs['1w']}")
        runs["2w"] = _on_cluster(2, Path(scratch) / "two", log, options, archive, status)
        status.finish(f"2 workers: {runs['2w']}")
    runs["local"] = _audit("local[2]", log, options, archive, status)
    status.finish(f"local[2]: {runs['local']}")
    result = {f"{key}_{name}_s": runs[name][f"{key}_s"] for name in ("1w", "2w", "local")
              for key in ("wall", "replay", "analysis")}
    result.update(
        replay_scaleout=round(runs["1w"]["replay_s"] / runs["2w"]["replay_s"], 3),
        replay_cluster_vs_local=round(runs["local"]["replay_s"] / runs["2w"]["replay_s"], 3),
        wall_2w_vs_local=round(runs["2w"]["wall_s"] / runs["local"]["wall_s"], 3),
        verdicts={name: run["verdict"] for name, run in runs.items()},
        replica_batches=runs["local"]["replica_batches"], replicas=args.replicas, subnets=args.subnets,
        batches=args.batches, runs=runs, floor_us=floor_us, load_average=[round(x, 2) for x in os.getloadavg()],
    )
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
