"""How long a fork of a recorded run takes (issue 26, part 2): ``replica testnet fork``.

1. **The recorded run** — a live testnet of 2 subnets x 1 node process (``--round-ms`` 20: a
   height every 20 ms when idle), a counter on subnet-0 and a ping-pong player on each subnet;
   while the subnets are below ``--height`` - 200 it increments the counter and plays a
   cross-subnet ping every ``--traffic-every-s`` seconds (each call answered, certified); then
   it waits until every subnet is past ``--height`` and stops the testnet (``down`` writes its
   run log, replayed and checked against every live hash: ``down_s``). ``--source DIR`` reuses
   a run recorded before (a stopped testnet directory).
2. **The fork** — ``fork_s``: ``fork_testnet(DIR, --height, NEW)``, everything up to a fork
   directory a node can start from: the run log read, each subnet's state of that height
   rebuilt from the nearest checkpoint plus the recorded batches above it and checked against
   the recorded hashes, new keys, the nodes' checkpoints, block logs and executed logs
   written. ``replayed_blocks`` says how many batches that was per subnet (the run log
   checkpoints every 10 heights, so a height that is a multiple of 10 replays none);
   ``fork_worst_s`` forks at ``--height`` + 9 (nine batches replayed) for the other end.
3. **Starting it** — ``fork_up_s``: ``replica testnet up`` of the fork until every subnet has
   certified a block; every node must report the recorded full state hash of the fork height
   as the state it started from (``started_at_recorded_hash``). ``dry_run_ms``: one
   ``replica call --dry-run`` of the counter on the fork, through the ingress API.

Run: ``python benchmarks/fork.py [--height 5000] [--source DIR] [--keep]``. Progress goes to
stderr; the last line is one JSON object with the keys above, ``heights`` recorded,
``run_log_bytes`` and ``floor_us`` (with the times in floor units).
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from floor import in_floor_units, measure_floor_us
from replica.audit.run_log import load_run_log
from replica.processes import lifecycle
from replica.progress import Progress
from replica.testing import Testnet
from replica.testnet.fork import fork_testnet, started_states
from replica.testnet.launcher import TestnetLayout

ROOT = Path(__file__).resolve().parents[1]


def _heights(directory: Path) -> dict[str, int]:
    return {row.subnet: row.height or 0 for row in lifecycle.status(directory)}


def record_run(directory: Path, height: int, round_ms: int, traffic_every_s: float) -> float:
    """The recorded run of step 1; returns ``down_s``."""
    progress = Progress(f"recording a run to height {height}")
    net = Testnet(subnets=2, nodes=1, mode="live", directory=directory, round_ms=round_ms)
    try:
        counter = net.install((ROOT / "examples" / "counter.py").read_text(), class_name="Counter",
                              subnet="subnet-0")
        pinger = net.install((ROOT / "examples" / "ping_pong.py").read_text(), class_name="PingPong",
                             subnet="subnet-1")
        ponger = net.install((ROOT / "examples" / "ping_pong.py").read_text(), class_name="PingPong",
                             subnet="subnet-0")
        calls = 0
        while True:
            low = min(_heights(directory).values())
            if low > height + 20:
                break
            if low < height - 200:
                net.update_call(counter, "increment", 1)
                net.update_call(pinger, "ping", {"target": ponger, "rounds": 1})
                calls += 2
                time.sleep(traffic_every_s)
            else:
                time.sleep(0.5)
            progress.update(f"heights {_heights(directory)}, {calls} calls", done=low)
        started = time.monotonic()
    finally:
        net.close()   # down: settles, stops, writes and checks the run log
    down_s = time.monotonic() - started
    progress.finish(f"{calls} calls; down {down_s:.1f} s")
    return down_s


def measure_fork(source: Path, height: int, target: Path) -> dict:
    """Step 2 for one height (what ``benchmarks/live_audit.py`` may call on its own recorded
    run): ``fork_s``, ``fork_height`` and ``replayed_blocks`` per subnet; the fork is left in
    ``target``."""
    started = time.perf_counter()
    report = fork_testnet(source, height, target)
    return {"fork_s": round(time.perf_counter() - started, 3), "fork_height": height,
            "replayed_blocks": {s.subnet_id: s.replayed for s in report.subnets},
            "checkpoint_heights": {s.subnet_id: s.checkpoint_height for s in report.subnets},
            "report": report}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--height", type=int, default=5000, help="the fork height")
    parser.add_argument("--round-ms", type=int, default=20)
    parser.add_argument("--traffic-every-s", type=float, default=5.0)
    parser.add_argument("--source", type=Path, default=None, help="a stopped testnet directory recorded before")
    parser.add_argument("--keep", action="store_true", help="keep the directories (printed on stderr)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="replica-fork-bench-"))
    result: dict = {"fork_height": args.height}
    try:
        source = args.source
        if source is None:
            source = work / "source"
            result["down_s"] = round(record_run(source, args.height, args.round_ms, args.traffic_every_s), 2)
        log = load_run_log(TestnetLayout(source).run)
        result["heights"] = {s.subnet_id: s.height for s in log.subnets}
        result["run_log_bytes"] = sum(p.stat().st_size for p in TestnetLayout(source).run.iterdir())

        measured = measure_fork(source, args.height, work / "fork")
        report = measured.pop("report")
        result.update(measured)
        worst = measure_fork(source, args.height + 9, work / "fork-worst")
        result["fork_worst_s"] = worst["fork_s"]
        result["fork_worst_replayed_blocks"] = worst["replayed_blocks"]

        started = time.perf_counter()
        lifecycle.up(work / "fork", out=io.StringIO())
        result["fork_up_s"] = round(time.perf_counter() - started, 2)
        try:
            recorded = {s.subnet_id: (s.height, s.full_hash.hex()) for s in report.subnets}
            nodes = started_states(work / "fork")
            result["started_at_recorded_hash"] = bool(nodes) and all(
                (height, full) == recorded[subnet] for subnet, height, full in nodes.values())
            with Testnet.connect(work / "fork") as fork:
                fork.dry_run(0, "increment", 1)   # the first one loads the canister's module
                started = time.perf_counter()
                dry = fork.dry_run(0, "increment", 1)
                result["dry_run_ms"] = round((time.perf_counter() - started) * 1000, 1)
                result["dry_run_changed_paths"] = len(dry.changed_paths)
        finally:
            lifecycle.down(work / "fork", out=io.StringIO())
    finally:
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    floor_us = measure_floor_us()
    result["floor_us"] = floor_us
    result["fork_floor_units"] = in_floor_units(result["fork_s"] * 1e6, floor_us)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
