"""Agreement throughput in one process: finalization rounds per second of a 4-node subnet.

The subnet's four ``AgreementNode``s run on the simulated network
(``consensus_stub.agreement.simulation``) with empty stub blocks, real node keys (ECDSA P-256
signatures made and checked for every proposal and share) and every message encoded and
decoded. Measured, each ``--repeats`` times (median reported), until every running node has
finalized ``--heights`` heights:

(a) all 4 nodes up;
(b) f = 1 node down from the start (every 4th height its maker is missing: the maker of rank
    1 proposes after the round timeout until the others count the down node as absent —
    ``absent_after_ns``, 6 s by default — and at once from then on).

Two rates per case:

* ``*_rounds_per_s`` (wall clock): the CPU cost of agreement — the four nodes share one core
  here, so a node process would spend about a quarter of it;
* ``simulated_*_rounds_per_s``: heights per second of simulated time with a one-way message
  delay of ``--delay-ms`` and a round timeout of ``--round-timeout-ms``: what latency and
  timeouts alone allow, over the whole run and (``steady_*``) over its second half;
  ``steady_f_down_ratio`` is the issue's "rate with f down / full rate" (target >= 0.5).

The issue's ``node_recovery`` benchmark (restart and catch-up times of node processes, and
these rates over gRPC between 4 node processes) needs the node process, which is future work.

Run: ``python benchmarks/agreement.py [--heights H] [--repeats K]``. The last line is a JSON
object with ``finalization_rounds_per_s``, ``rounds_per_s_with_f_down``, the simulated rates,
CPU per round (also in floor units) and ``floor_us``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import time

from consensus_stub.agreement.signing import NodeKeyVerifier, node_key_signer
from consensus_stub.agreement.simulation import MS, SIM_START_NS, Crash, Schedule, Simulation
from consensus_stub.genesis import SubnetSpec, genesis_registry
from floor import in_floor_units, measure_floor_us


def _subnet():
    registry, secrets = genesis_registry([SubnetSpec("alpha", 4, ((0, 999),))], b"agreement-benchmark-seed-32bytes",
                                         not_before=datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc))
    subnet = registry.subnet("alpha", 1)
    signers = {n: node_key_signer(secrets[n].identity) for n in subnet.node_ids}
    return subnet, signers, NodeKeyVerifier.for_subnet(registry.record(1), "alpha")


def run_once(heights: int, down: int, delay_ms: float, round_timeout_ms: float, seed: int) -> dict:
    subnet, signers, verifier = _subnet()
    delay = int(delay_ms * MS)
    crashes = tuple(Crash(node_id, SIM_START_NS) for node_id in subnet.node_ids[1:1 + down])
    sim = Simulation(subnet, signers, verifier, Schedule(seed, min_delay_ns=delay, max_delay_ns=delay, crashes=crashes),
                     round_timeout_ns=int(round_timeout_ms * MS), rebroadcast_interval_ns=int(3 * round_timeout_ms * MS))
    deadline = SIM_START_NS + heights * 10 * int(round_timeout_ms * MS) + 60 * 10**9
    started = time.perf_counter()
    if not sim.run_until_finalized(heights // 2, deadline):
        raise SystemExit(f"only {sim.min_running_height()} of {heights // 2} heights finalized")
    halfway = sim.now
    if not sim.run_until_finalized(heights, deadline):
        raise SystemExit(f"only {sim.min_running_height()} of {heights} heights finalized")
    wall = time.perf_counter() - started
    return {"wall_s": wall, "simulated_s": (sim.now - SIM_START_NS) / 1e9,
            "second_half_s": (sim.now - halfway) / 1e9, "messages": sim.messages_delivered}


def measure(heights: int, down: int, repeats: int, delay_ms: float, round_timeout_ms: float) -> dict:
    runs = [run_once(heights, down, delay_ms, round_timeout_ms, seed) for seed in range(repeats)]
    wall = statistics.median(r["wall_s"] for r in runs)
    simulated = statistics.median(r["simulated_s"] for r in runs)
    second_half = statistics.median(r["second_half_s"] for r in runs)
    return {
        "steady_simulated_rounds_per_s": round((heights - heights // 2) / second_half, 2),
        "rounds_per_s": round(heights / wall, 1),
        "simulated_rounds_per_s": round(heights / simulated, 2),
        "cpu_us_per_round": round(wall / heights * 1e6, 1),
        "messages_per_round": round(statistics.median(r["messages"] for r in runs) / heights, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--heights", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--delay-ms", type=float, default=1.0, help="one-way message delay")
    parser.add_argument("--round-timeout-ms", type=float, default=1000.0)
    args = parser.parse_args()
    full = measure(args.heights, 0, args.repeats, args.delay_ms, args.round_timeout_ms)
    degraded = measure(args.heights, 1, args.repeats, args.delay_ms, args.round_timeout_ms)
    floor_us = measure_floor_us()
    result = {
        "nodes": 4,
        "heights": args.heights,
        "delay_ms": args.delay_ms,
        "round_timeout_ms": args.round_timeout_ms,
        "finalization_rounds_per_s": full["rounds_per_s"],
        "rounds_per_s_with_f_down": degraded["rounds_per_s"],
        "simulated_rounds_per_s": full["simulated_rounds_per_s"],
        "simulated_rounds_per_s_with_f_down": degraded["simulated_rounds_per_s"],
        "steady_simulated_rounds_per_s": full["steady_simulated_rounds_per_s"],
        "steady_simulated_rounds_per_s_with_f_down": degraded["steady_simulated_rounds_per_s"],
        "steady_f_down_ratio": round(degraded["steady_simulated_rounds_per_s"] / full["steady_simulated_rounds_per_s"], 3),
        "cpu_us_per_round": full["cpu_us_per_round"],
        "cpu_us_per_round_with_f_down": degraded["cpu_us_per_round"],
        "cpu_floor_units_per_round": in_floor_units(full["cpu_us_per_round"], floor_us),
        "messages_per_round": full["messages_per_round"],
        "messages_per_round_with_f_down": degraded["messages_per_round"],
        "floor_us": floor_us,
    }
    print(f"4 nodes, {args.heights} heights, {args.delay_ms} ms delay, {args.round_timeout_ms} ms round timeout:")
    print(f"  all up:   {full['rounds_per_s']} rounds/s of CPU ({full['cpu_us_per_round']} us per round, "
          f"{full['messages_per_round']} messages), {full['simulated_rounds_per_s']} rounds/s simulated")
    print(f"  f down:   {degraded['rounds_per_s']} rounds/s of CPU, "
          f"{degraded['simulated_rounds_per_s']} rounds/s simulated; in the second half, once the "
          f"down maker counts as absent, {degraded['steady_simulated_rounds_per_s']} "
          f"(all up: {full['steady_simulated_rounds_per_s']})")
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
