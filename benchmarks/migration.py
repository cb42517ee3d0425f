"""Benchmark: moving a canister with 1 MB of stable state between the subnets of a live testnet.

``replica testnet up`` (2 x 4 by default, a fresh directory); a canister (the load canister
plus 1 MB of stable state written through its own calls) is moved to the other subnet and
back (``replica.testnet.migration``) while ``replica load`` relays calls to and from it.

* ``migration_rounds``: heights of the destination subnet from the migrate command until the
  canister answers calls there (the median over the moves), and ``migration_s``;
* ``calls_during_migration``: calls the load offered while canisters moved; ``lost`` and
  ``duplicated`` over all of them (must be 0); ``rejected``: answered with a reject (the
  canister stopped or in transit) — answered, not lost;
* ``snapshot_bytes``: the size of the exported canister.

Last line: one JSON object (with ``floor_us``). A failed migration ends the run: the load is
stopped and drained, the testnet stopped, and the error is the one line printed before the
JSON object (which then holds ``error``); exit status 1.

    python benchmarks/migration.py [--moves 2] [--stable-kib 1024] [--nodes 4] [--round-ms 500]
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from floor import in_floor_units, measure_floor_us

from replica.client.management import install_many
from replica.progress import Progress
from replica.load import load_canister
from replica.testnet.http_endpoints import agent_for_testnet
from replica.testnet.launcher import user_key
from replica.processes.lifecycle import down, up
from replica.load.load import LoadFailed, LoadOptions, run_load
from replica.testnet.migration import AgentDriver, MigrationError, migrate_canister

TARGETS = {"migration_rounds": 20, "lost": 0, "duplicated": 0}

#: The load canister plus a method that fills its stable state (so the moved canister is big).
BALLAST = inspect.getsource(load_canister) + '''

class BallastLoadCanister(LoadCanister):
    @update
    def ballast(self, arg):
        chunk, count = arg["chunk"], arg["count"]
        start = self.stable.get("ballast_chunks", 0)
        for k in range(start, start + count):
            self.stable[f"ballast/{k}"] = b"\\xab" * chunk
        self.stable["ballast_chunks"] = start + count
        return start + count
'''


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--moves", type=int, default=2, help="migrations (alternating subnets)")
    parser.add_argument("--stable-kib", type=int, default=1024)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--round-ms", type=int, default=500)
    parser.add_argument("--rate", type=float, default=20.0, help="load calls per second during the moves")
    args = parser.parse_args()
    floor_us = measure_floor_us()
    subnets = ["subnet-0", "subnet-1"]
    with tempfile.TemporaryDirectory(prefix="migration-") as tmp:
        directory = Path(tmp) / "net"
        failure: MigrationError | None = None
        up(directory, subnets=2, nodes=args.nodes, round_ms=args.round_ms, out=sys.stderr)
        try:
            with agent_for_testnet(directory, user_key("subnet-0")) as agent:
                ids = install_many(agent, [(s, BALLAST, "BallastLoadCanister", None) for s in subnets for _ in range(2)])
                canisters = {"subnet-0": ids[:2], "subnet-1": ids[2:]}
                moving = ids[0]
                chunk_kib = 64
                filling = Progress(f"writing {args.stable_kib} KiB of stable state", total=args.stable_kib // chunk_kib)
                for k in range(args.stable_kib // chunk_kib):
                    agent.update_call(moving, "ballast", {"chunk": chunk_kib * 1024, "count": 1}, 60)
                    filling.update(done=k + 1)
                filling.finish()
                outcome = {}
                moved = threading.Event()

                def traffic() -> None:
                    try:
                        outcome["load"] = run_load(agent, subnets, LoadOptions(
                            rate=args.rate, duration_s=3600, drain_s=120, seed=5), canisters=canisters, stop=moved)
                    except LoadFailed as exc:   # reported by the main thread, with its numbers
                        outcome["load"], outcome["error"] = exc.report, str(exc)

                loader = threading.Thread(target=traffic, name="load")
                loader.start()
                reports = []
                progress = Progress("migrations", total=args.moves)
                driver = AgentDriver.for_testnet(agent, directory)
                try:
                    for k in range(args.moves):
                        destination = subnets[(k + 1) % 2]
                        reports.append(migrate_canister(driver, moving, destination, timeout_s=120))
                        progress.update(f"{reports[-1].rounds} rounds, {reports[-1].seconds:.1f} s", done=k + 1)
                    progress.finish()
                except MigrationError as exc:
                    failure = exc
                    progress.finish("failed")
                    print("the migration failed: stopping the load (its calls drain) and the testnet", file=sys.stderr)
                finally:   # the load ends before the agent and the testnet it uses
                    moved.set()
                    loader.join()
                load = outcome["load"]
        finally:
            down(directory, out=sys.stderr)
    if failure is not None or "error" in outcome:
        error = f"migration failed: {failure}" if failure is not None else f"load failed: {outcome['error']}"
        print(error, file=sys.stderr)
        counted = {"lost": load.lost, "duplicated": load.duplicated} if load is not None else {}
        print(json.dumps({"error": error, "migration_rounds_each": [r.rounds for r in reports], **counted},
                         sort_keys=True))
        return 1
    rounds = statistics.median(r.rounds for r in reports)
    seconds = statistics.median(r.seconds for r in reports)
    result = {
        "migration_rounds": rounds,
        "migration_rounds_each": [r.rounds for r in reports],
        "migration_s": round(seconds, 2),
        "snapshot_bytes": reports[0].snapshot_bytes,
        "calls_during_migration": load.submitted,
        "replied": load.replied,
        "rejected": sum(load.rejected.values()),
        "lost": load.lost,
        "duplicated": load.duplicated,
        "moves": args.moves,
        "nodes": args.nodes,
        "round_ms": args.round_ms,
        "floor_us": floor_us,
        "migration_floor_units": in_floor_units(seconds * 1e6, floor_us),
    }
    print(f"migration: {rounds} rounds median ({seconds:.1f} s; target <= {TARGETS['migration_rounds']} rounds), "
          f"{result['snapshot_bytes']} bytes moved; {result['calls_during_migration']} calls during the moves, "
          f"lost {result['lost']}, duplicated {result['duplicated']}", file=sys.stderr)
    print(json.dumps(result, sort_keys=True))
    return 0 if result["lost"] == 0 and result["duplicated"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
