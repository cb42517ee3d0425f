"""Benchmark: the Spark determinism audit against a plain process pool on the same cores.

Generates a seeded workload (``--subnets`` × ``--batches`` batches of about ``--messages``
messages), plans ``--replicas`` simulated replicas exactly as ``replica audit`` does, then

1. runs the full Spark audit (``local[CORES]``: replay, Spark SQL analysis, drill-down) and
2. replays the very same replicas, partitioned the same way, on a ``multiprocessing`` pool
   of ``CORES`` processes, with a plain-Python majority check at the end.

Both run every replica for real (``replica.audit.replay``); a replica-batch is one batch
executed and committed by one replica (replicas starting from a checkpoint at ``k``
execute ``n - k`` batches; the plan is in ``replica.audit.replicas``). The last line of
output is one JSON object with the throughputs, their ratio, the wall times and the peak
memory of the driver (Python process + Spark's driver JVM).

    python benchmarks/audit.py                       # 4096 replicas × 100 batches
    python benchmarks/audit.py --replicas 512 --batches 30
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYTHONHASHSEED", "0")  # workers of both kinds run with the seed Spark gives its own

from replica.inprocess.workload import generate_isolated  # noqa: E402
from replica.audit.job import AuditOptions, run_audit, spark_session  # noqa: E402
from replica.progress import Progress  # noqa: E402
from replica.audit.replicas import assign_partitions, plan_replicas  # noqa: E402
from replica.audit.run_log import decode_run_log  # noqa: E402
from replica.audit.worker import init_local_worker, local_replay_chunk  # noqa: E402
from replica.inprocess.workload import WorkloadConfig  # noqa: E402
from floor import in_floor_units, measure_floor_us  # noqa: E402


def _peak_mb_self() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _peak_mb_of(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _pool_audit(blob: bytes, log, chunks: list[list[tuple]], cores: int, status: Progress) -> tuple[float, int, bool]:
    """Replay every chunk on a pool; return (wall seconds, rows, all agree with the live run)."""
    started = time.perf_counter()
    context = multiprocessing.get_context("spawn")
    votes: Counter = Counter()
    rows = 0
    with context.Pool(cores, initializer=init_local_worker, initargs=(blob,)) as pool:
        for done, result in enumerate(pool.imap_unordered(local_replay_chunk, chunks), 1):
            for _, subnet, height, full, certified, error, *_ in result:  # the build last
                votes[(subnet, height, full, certified, error)] += 1
            rows += len(result)
            status.update(f"pool: {done}/{len(chunks)} chunks, {time.perf_counter() - started:.0f} s")
    majority: dict[tuple, tuple] = {}
    for (subnet, height, full, certified, error), count in votes.items():
        best = majority.get((subnet, height))
        if error is None and (best is None or count > best[0]):
            majority[(subnet, height)] = (count, full, certified)
    live = {(s.subnet_id, h): (f, c) for s in log.subnets for h, f, c in s.hashes}
    agree = all(len([k for k in votes if k[:2] == key]) == 1 for key in majority) and all(
        majority.get(key, (0, None, None))[1:] == hashes for key, hashes in live.items())
    wall = time.perf_counter() - started
    status.finish(f"pool: done in {wall:.1f} s")
    return wall, rows, agree


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicas", type=int, default=4096)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--subnets", type=int, default=4)
    parser.add_argument("--canisters", type=int, default=16)
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--partitions", type=int, default=None, help="default: 4 × cores")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--from-genesis", action="store_true", help="every replica replays from genesis")
    parser.add_argument("--pool-first", action="store_true", help="run the pool before Spark (to see order effects)")
    args = parser.parse_args(argv)
    status = Progress()
    began = time.perf_counter()

    config = WorkloadConfig(subnets=args.subnets, canisters=args.canisters, batches=args.batches,
                            messages=args.messages, seed=args.seed)
    status.update(f"generating {args.subnets} subnets × {args.batches} batches of ~{args.messages} messages")
    t = time.perf_counter()
    blob = generate_isolated(config, int(os.environ["PYTHONHASHSEED"]))
    log = decode_run_log(blob)
    generate_s = time.perf_counter() - t
    messages = sum(len(b) for s in log.subnets for b in s.batches)  # bytes, for the record only
    status.finish(f"generated in {generate_s:.1f} s ({len(blob) / 1e6:.1f} MB of run log)")

    partitions = args.partitions or 4 * args.cores
    heights = {s.subnet_id: s.height for s in log.subnets}
    specs = plan_replicas(heights, {s.subnet_id: s.checkpoint_heights() for s in log.subnets}, args.replicas,
                          args.seed, worker_hash_seed=int(os.environ["PYTHONHASHSEED"]), from_genesis=args.from_genesis)
    replica_batches = sum(heights[s.subnet] - s.start for s in specs)
    assignment = assign_partitions(specs, heights, partitions)
    chunks: list[list[tuple]] = [[] for _ in range(partitions)]
    for s in specs:
        chunks[assignment[s.replica]].append((s.replica, s.subnet, s.perturbation.text()))

    def run_spark():
        t = time.perf_counter()
        spark = spark_session(f"local[{args.cores}]", shuffle_partitions=max(2, args.cores))
        session_s = time.perf_counter() - t
        t = time.perf_counter()
        report = run_audit(spark, log, AuditOptions(replicas=args.replicas, seed=args.seed, partitions=partitions,
                                                    from_genesis=args.from_genesis),
                           source="benchmark", run_dir=None, status=status)
        spark_wall = time.perf_counter() - t
        jvm_peak = _peak_mb_of(spark.sparkContext._gateway.proc.pid)
        python_peak = _peak_mb_self()
        spark.stop()
        if report["audit"]["replica_batches"] != replica_batches:
            raise SystemExit(f"the audit executed {report['audit']['replica_batches']} replica-batches, "
                             f"planned {replica_batches}")
        return report, spark_wall, session_s, jvm_peak, python_peak

    if args.pool_first:
        pool_wall, pool_rows, pool_agree = _pool_audit(blob, log, chunks, args.cores, status)
        report, spark_wall, session_s, jvm_peak, python_peak = run_spark()
    else:
        report, spark_wall, session_s, jvm_peak, python_peak = run_spark()
        pool_wall, pool_rows, pool_agree = _pool_audit(blob, log, chunks, args.cores, status)
    if pool_rows != report["audit"]["rows"]:
        raise SystemExit(f"the pool produced {pool_rows} rows, the audit {report['audit']['rows']}")

    floor_us = measure_floor_us()
    spark_rate = replica_batches / spark_wall
    pool_rate = replica_batches / pool_wall
    result = {
        "spark_replica_batches_per_s": round(spark_rate, 2),
        "pool_replica_batches_per_s": round(pool_rate, 2),
        "ratio": round(spark_rate / pool_rate, 3),
        "replicas": args.replicas,
        "batches": args.batches,
        "subnets": args.subnets,
        "messages_per_batch": round(sum(len(b.ingress) + sum(len(x.messages) for _, x in b.xnet_payload)
                                        for b in _decoded(log)) / (args.subnets * args.batches), 1),
        "replica_batches": replica_batches,
        "full_replay_replica_batches": args.replicas * args.batches,
        "rows": pool_rows,
        "cores": args.cores,
        "order": "pool, spark" if args.pool_first else "spark, pool",
        "load_average_1m_end": round(os.getloadavg()[0], 2),
        "partitions": partitions,
        "wall_s": round(spark_wall, 2),
        "spark_replay_s": report["environment"]["timing_s"]["replay"],
        "spark_analysis_s": report["environment"]["timing_s"]["analysis"],
        "spark_session_start_s": round(session_s, 2),
        "pool_wall_s": round(pool_wall, 2),
        "generate_s": round(generate_s, 2),
        "total_s": round(time.perf_counter() - began, 2),
        "verdict": report["verdict"],
        "pool_agrees": pool_agree,
        "driver_peak_mb": round(python_peak + (jvm_peak or 0.0), 1),
        "driver_python_peak_mb": round(python_peak, 1),
        "driver_jvm_peak_mb": None if jvm_peak is None else round(jvm_peak, 1),
        "run_log_mb": round(len(blob) / 1e6, 2),
        "run_log_batch_bytes": messages,
        "floor_us": floor_us,
        "spark_floor_units_per_replica_batch": in_floor_units(1e6 / spark_rate, floor_us),
        "pool_floor_units_per_replica_batch": in_floor_units(1e6 / pool_rate, floor_us),
    }
    print(json.dumps(result))
    return 0


def _decoded(log):
    from replica.audit.inputs import decode_batches
    for subnet in log.subnets:
        yield from decode_batches(subnet)


if __name__ == "__main__":
    sys.exit(main())
