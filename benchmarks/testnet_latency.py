"""Benchmark: a 2 x 4 testnet through its public API, as a user meets it.

1. ``up_to_ready_s``: ``replica testnet up`` (a fresh directory) until every subnet has
   certified a block and published its ingress endpoints.
2. The example apps are installed through the management canister (``example_apps``), as
   a user installs theirs. Update calls (``--calls``, the counter on subnet-0), one at a time, each submitted over
   HTTP and answered only once its reply is certified and verified by the agent.
   ``rounds`` of a call = the height of the first certificate that shows it replied minus
   the node's finalized height when it was submitted (1 is the least possible: it enters the
   next block, runs and is certified at that height).
3. Cross-subnet calls: the ping-pong player on subnet-1 pings the one on subnet-0 once and
   replies when the pong is back. ``xnet_rtt_*`` = such a call minus the median local update
   call: what the round trip (request routed into the stream, certified, fetched by subnet-0,
   inducted and executed, the response routed, certified, fetched back and inducted) adds.
4. ``rounds_per_s``: finalized heights per second over the measured part.

The certificates are polled every 10 ms, so a call's time is its certified answer's, plus
up to a poll. Last line: one JSON object (with ``floor_us``).

    python benchmarks/testnet_latency.py [--calls 30] [--round-ms 500]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from floor import in_floor_units, measure_floor_us

from replica.client.identity import Ed25519Identity
from replica.progress import Progress
from replica.testnet.http_endpoints import agent_for_testnet
from replica.demo.example_apps import install_example_apps
from replica.processes.lifecycle import down, up

TARGETS = {"up_to_ready_s": 5.0, "update_call_median_rounds": 3, "xnet_rtt_median_rounds": 4}


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _timed_call(agent, endpoint: str, canister: int, method: str, arg) -> tuple[float, int]:
    """(seconds, rounds) of one call until its certified, verified answer (module docstring)."""
    submitted_at = agent.status(endpoint)["finalized_height"]
    started = time.perf_counter()
    message_id = agent.submit_call(canister, method, arg)
    while True:
        status = agent.request_status(message_id, canister)
        if status.status == "replied":
            return time.perf_counter() - started, status.certificate.height - submitted_at
        if status.status in ("rejected", "done"):
            raise SystemExit(f"{method} on {canister} was {status.status}: {status.reject_message}")
        time.sleep(0.01)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--round-ms", type=int, default=500)
    args = parser.parse_args()
    floor_us = measure_floor_us()
    with tempfile.TemporaryDirectory(prefix="testnet-latency-") as tmp:
        directory = Path(tmp) / "net"
        started = time.perf_counter()
        up(directory, subnets=2, nodes=4, round_ms=args.round_ms, out=sys.stderr)
        up_s = time.perf_counter() - started
        try:
            agent = agent_for_testnet(directory, Ed25519Identity.from_seed(b"latency-benchmark"))
            apps = install_example_apps(agent, ("subnet-0", "subnet-1"))
            endpoints = {s: agent.endpoint_for(app.counter) for s, app in apps.items()}
            heights_from = agent.status(endpoints["subnet-0"])["finalized_height"]
            measured_from = time.perf_counter()
            progress = Progress("update calls", total=args.calls)
            local = []
            for k in range(args.calls):
                local.append(_timed_call(agent, endpoints["subnet-0"], apps["subnet-0"].counter, "increment", 1))
                progress.update(f"last {local[-1][1]} rounds, {local[-1][0] * 1e3:.0f} ms", done=k + 1)
            progress.finish()
            progress = Progress("cross-subnet pings", total=args.calls)
            xnet = []
            target = apps["subnet-0"].pinger
            for k in range(args.calls):
                xnet.append(_timed_call(agent, endpoints["subnet-1"], apps["subnet-1"].pinger, "ping",
                                        {"target": target, "rounds": 1}))
                progress.update(f"last {xnet[-1][1]} rounds, {xnet[-1][0] * 1e3:.0f} ms", done=k + 1)
            progress.finish()
            heights = agent.status(endpoints["subnet-0"])["finalized_height"] - heights_from
            rounds_per_s = heights / (time.perf_counter() - measured_from)
            agent.close()
        finally:
            down(directory, out=sys.stderr)
    local_ms = [s * 1e3 for s, _ in local]
    local_rounds = [r for _, r in local]
    xnet_ms = [s * 1e3 for s, _ in xnet]
    xnet_rounds = [r for _, r in xnet]
    result = {
        "up_to_ready_s": round(up_s, 2),
        "update_call_median_rounds": statistics.median(local_rounds),
        "update_call_median_ms": round(statistics.median(local_ms), 1),
        "update_call_p99_ms": round(_percentile(local_ms, 0.99), 1),
        "xnet_call_median_rounds": statistics.median(xnet_rounds),
        "xnet_call_median_ms": round(statistics.median(xnet_ms), 1),
        "xnet_rtt_median_rounds": statistics.median(xnet_rounds) - statistics.median(local_rounds),
        "xnet_rtt_median_ms": round(statistics.median(xnet_ms) - statistics.median(local_ms), 1),
        "rounds_per_s": round(rounds_per_s, 2),
        "round_ms": args.round_ms,
        "calls": args.calls,
        "floor_us": floor_us,
        "update_call_median_floor_units": in_floor_units(statistics.median(local_ms) * 1e3, floor_us),
    }
    print(f"up {result['up_to_ready_s']} s (target <= {TARGETS['up_to_ready_s']}); update call median "
          f"{result['update_call_median_rounds']} rounds / {result['update_call_median_ms']} ms, p99 "
          f"{result['update_call_p99_ms']} ms (target <= {TARGETS['update_call_median_rounds']} rounds); "
          f"cross-subnet round trip median {result['xnet_rtt_median_rounds']} rounds / {result['xnet_rtt_median_ms']} ms "
          f"(target <= {TARGETS['xnet_rtt_median_rounds']}); {result['rounds_per_s']} rounds/s")
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
