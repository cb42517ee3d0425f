"""Benchmark: sustained cross-subnet calls on a 2 x 4 testnet, through the public API.

``replica testnet up`` (a fresh directory), then ``replica load``'s engine
(``replica.load.load.run_load``) offers ``--rate`` cross-subnet calls per second for
``--minutes`` minutes: each is a user call to a load canister that calls a canister on the
other subnet and answers when the echo is back (request + response through the streams),
and each answer is read from certified, verified state. Meanwhile the resident memory of
every subnet process is sampled once a second; ``rss_growth_pct`` compares the mean of the
last tenth of the run with the mean of the tenth after ``--warmup-s`` (by default 600 s: a
call's status lives until its ingress expiry — the agent's 240 s — plus the history's 300 s
retention, so until then every answered call rightly adds a status, as on the IC; after it,
statuses expire as fast as they come and growth means a leak).

The load stops when its window ends: what the generator could not submit in time is counted
as not submitted (``client_limited``: the client, not the testnet, was the limit), never
queued past the window, and the drain after it is bounded (``drain_s``, ``drain_rounds``).

Last line: one JSON object with ``calls_per_s`` (replied calls per second), ``p50_ms``,
``p99_ms``, ``p50_rounds``, ``rss_growth_pct``, ``offered``, ``submitted``,
``not_submitted``, ``client_limited``, ``drain_s``, ``lost``, ``duplicated`` and ``floor_us``
(and ``error`` if the run ended by one: the numbers are then those so far, and the exit
status is 2).

    python benchmarks/testnet_throughput.py [--minutes 16] [--warmup-s 600] [--rate 1000] [--round-ms 500]
                                            [--process-model node|subnet]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from floor import in_floor_units, measure_floor_us

from replica.client.identity import Ed25519Identity
from replica.progress import Progress
from replica.testnet.http_endpoints import agent_for_testnet
from replica.testnet.launcher import DEFAULT_PROCESS_MODEL, PROCESS_MODELS, TestnetLayout, testnet_nodes
from replica.processes.lifecycle import down, up
from replica.load.load import LoadFailed, LoadOptions, run_load

TARGETS = {"calls_per_s": 1000, "rss_growth_pct": 10.0}


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _replica_pids(layout: TestnetLayout, subnets: list[str]) -> list[int]:
    """The running pids of the testnet's replica processes: one per node (or per subnet in the
    subnet process model), read anew each sample since a restarted node has a new pid."""
    units = list(subnets) + [n for nodes in testnet_nodes(layout, subnets).values() for n in nodes]
    pids = []
    for unit in units:
        try:
            pids.append(int(layout.pid(unit).read_text().strip()))
        except (OSError, ValueError):
            pass
    return pids


def _growth_pct(samples: list[int], warmup: int) -> float:
    """Mean of the last tenth of the samples after ``warmup`` against the mean of the first."""
    measured = samples[warmup:]
    if len(measured) < 10:
        return float("nan")
    tenth = len(measured) // 10
    warm, last = measured[:tenth], measured[-tenth:]
    return 100.0 * (statistics.mean(last) - statistics.mean(warm)) / statistics.mean(warm)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=16.0)
    parser.add_argument("--warmup-s", type=float, default=600.0,
                        help="seconds before memory growth is measured (module docstring)")
    parser.add_argument("--rate", type=float, default=1000.0)
    parser.add_argument("--round-ms", type=int, default=500)
    parser.add_argument("--canisters", type=int, default=4, help="load canisters per subnet")
    parser.add_argument("--submitters", type=int, default=8)
    parser.add_argument("--process-model", choices=PROCESS_MODELS, default=DEFAULT_PROCESS_MODEL,
                        help="one process per node, or one per subnet")
    args = parser.parse_args()
    floor_us = measure_floor_us()
    subnets = ["subnet-0", "subnet-1"]
    with tempfile.TemporaryDirectory(prefix="testnet-throughput-") as tmp:
        directory = Path(tmp) / "net"
        up(directory, subnets=2, nodes=4, round_ms=args.round_ms, out=sys.stderr, process_model=args.process_model)
        layout = TestnetLayout(directory)
        samples: list[int] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(1.0):
                samples.append(sum(_rss_kib(pid) for pid in _replica_pids(layout, subnets)))

        sampler = threading.Thread(target=sample, daemon=True)
        try:
            with agent_for_testnet(directory, Ed25519Identity.from_seed(b"throughput-benchmark")) as agent:
                duration_s = args.minutes * 60
                progress = Progress(f"load: {args.rate:g} calls/s for {duration_s:g} s", total=int(duration_s * 10))
                sampler.start()
                try:
                    report = run_load(agent, subnets, LoadOptions(
                        rate=args.rate, duration_s=duration_s, canisters=args.canisters, cross_subnet=1.0,
                        submitters=args.submitters, drain_s=120), progress=progress)
                except LoadFailed as failed:
                    if failed.report is None:
                        raise
                    report = failed.report
                progress.finish(f"{report.replied} replied")
        finally:
            stop.set()
            stopping = time.monotonic()
            down(directory, out=sys.stderr)
            down_s = time.monotonic() - stopping
    print("\n".join(report.table()), file=sys.stderr)
    summary = report.as_json()
    result = {
        "calls_per_s": summary["achieved_per_s"],
        "offered_per_s": args.rate,
        "submitted_per_s": summary["submitted_per_s"],
        "p50_ms": summary["p50_ms"],
        "p99_ms": summary["p99_ms"],
        "p50_rounds": summary["p50_rounds"],
        "rss_growth_pct": round(_growth_pct(samples, int(args.warmup_s)), 1),
        "warmup_s": args.warmup_s,
        "rss_mib_end": round(samples[-1] / 1024, 1) if samples else 0,
        "offered": summary["offered"],
        "submitted": summary["submitted"],
        "not_submitted": summary["not_submitted"],
        "client_limited": summary["client_limited"],
        "drain_s": summary["drain_s"],
        "drain_rounds": summary["drain_rounds"],
        "down_s": round(down_s, 1),
        "lost": report.lost,
        "duplicated": report.duplicated,
        "minutes": args.minutes,
        "round_ms": args.round_ms,
        "process_model": args.process_model,
        "floor_us": floor_us,
        "p50_floor_units": in_floor_units(summary["p50_ms"] * 1e3, floor_us),
    }
    print(f"{result['calls_per_s']} calls/s (target >= {TARGETS['calls_per_s']}), p50 {result['p50_ms']} ms, "
          f"rss growth {result['rss_growth_pct']}% (target <= {TARGETS['rss_growth_pct']}), "
          f"lost {result['lost']}, duplicated {result['duplicated']}", file=sys.stderr)
    if report.error is not None:
        result["error"] = report.error
    print(json.dumps(result, sort_keys=True))
    if report.error is not None:
        return 2
    return 0 if result["lost"] == 0 and result["duplicated"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
