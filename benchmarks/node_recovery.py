"""Crash recovery and agreement speed of real node processes (issue 15).

Two testnets, each started with ``replica testnet up`` (one OS process per node, the
launcher supervising them) and driven with ``kill-node --hold`` / ``restart-node``:

1. **Recovery** — 2 subnets x 4 nodes, idle, a height every ``--block-interval-s`` (0.1 s: the
   eight nodes then leave the two cores some headroom — run flat out, they saturate them and a
   restarted process gets an eighth of the CPU for its start-up), a checkpoint every
   ``--checkpoint-interval`` heights. Once
   subnet-0 is at ``--kill-at`` (>= 1,000), node 2 of subnet-0 is killed (SIGKILL) and held
   down until its peers are ``--down-heights`` (50) further; then it is restarted and timed
   (``--repeats`` times, the median reported beside every run):

   * ``restart_to_caught_up_s`` — from the restart command until the node's own HTTP status
     reports a finalized height at least its peers' at that moment (start-up, loading the
     checkpoint, re-executing its block log above it, fetching and executing what it missed);
   * ``restart_from_genesis_s`` — the same (down for as many heights), after moving its
     checkpoints aside, so it re-executes its whole block log from genesis (the baseline: what every
     restart cost before checkpoints). Its nodes keep every block for this (retained heights
     above the run's length), so the baseline has a log to replay.

2. **Agreement rate** — 1 subnet x 4 nodes, idle, as fast as they go:
   ``finalization_rounds_per_s`` over ``--measure-s`` seconds with all four up, then one node
   killed and held (f = 1) and, after the others count it absent, ``rounds_per_s_with_f_down``
   over the same time; ``f_down_ratio`` is their quotient (target >= 0.5).

Run: ``python benchmarks/node_recovery.py [--kill-at 1000] [--down-heights 50]``. Progress
goes to stderr; the last line is one JSON object with the keys above, the parts of the
restart (``restore_s``: load + re-execute in the process, ``replayed_blocks``), ``heights``,
``floor_us`` and the times in floor units.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from floor import in_floor_units, measure_floor_us
from replica.node.process_config import NodeProcessConfig
from replica.progress import Progress
from replica.processes import lifecycle
from replica.testnet.launcher import TestnetLayout, create_testnet, testnet_nodes

SEED = b"node-recovery-benchmark-seed-32b"
VICTIM = "subnet-0-node-2"


def _configure(layout: TestnetLayout, checkpoint_interval: int, retained_heights: int,
               block_interval_s: float = 0.0) -> None:
    """Node configs written before the launcher would write its defaults (it keeps ours)."""
    for subnet, nodes in testnet_nodes(layout).items():
        for node in nodes:
            config = NodeProcessConfig(str(layout.root), node, subnet, checkpoint_interval=checkpoint_interval,
                                       retained_heights=retained_heights, block_interval_s=block_interval_s,
                                       round_timeout_s=1.0, tick_s=0.2)
            config.files.root.mkdir(parents=True, exist_ok=True)
            config.files.config.write_text(config.to_json())


def _status(layout: TestnetLayout, node: str) -> dict:
    return layout.read_json(layout.node_files(node).status) or {}


def _live_height(layout: TestnetLayout, node: str) -> int | None:
    """The node's finalized height from its own HTTP API (None while it does not answer)."""
    endpoints = layout.read_json(layout.node_files(node).endpoints) or {}
    if "http" not in endpoints:
        return None
    try:
        answer = httpx.get(f"http://{endpoints['http']}/api/v2/status", timeout=1.0)
        return int(answer.json()["finalized_height"])
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return None


def _wait_height(layout: TestnetLayout, nodes: list[str], height: int, label: str, timeout_s: float) -> None:
    progress = Progress(label, total=height)
    deadline = time.monotonic() + timeout_s
    while True:
        low = min(_status(layout, n).get("height", 0) for n in nodes)
        progress.update(done=min(low, height))
        if low >= height:
            progress.finish()
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"{label}: still at {low} after {timeout_s} s")
        time.sleep(0.2)


def _time_catch_up(layout: TestnetLayout, peers: list[str], timeout_s: float) -> float:
    """Restart the held victim; seconds until it has finalized what its peers had finalized."""
    started = time.monotonic()
    lifecycle.restart_node(layout.root, VICTIM)
    while time.monotonic() - started < timeout_s:
        mine = _live_height(layout, VICTIM)
        if mine is not None:
            theirs = [h for h in (_live_height(layout, p) for p in peers) if h is not None]
            if theirs and mine >= min(theirs):
                return time.monotonic() - started
        time.sleep(0.02)
    raise SystemExit(f"{VICTIM} did not catch up in {timeout_s} s")


def recovery(root: Path, args) -> dict:
    layout = create_testnet(root, 2, 4, seed=SEED, tick_s=0.2, genesis_apps=False)
    _configure(layout, args.checkpoint_interval, retained_heights=10 * (args.kill_at + 1_000),
               block_interval_s=args.block_interval_s)
    lifecycle.up(root, out=sys.stderr)
    try:
        peers = [n for n in testnet_nodes(layout)["subnet-0"] if n != VICTIM]
        started = time.monotonic()
        _wait_height(layout, peers + [VICTIM], args.kill_at, "2 x 4 nodes: up to the kill height", 1_800)
        heights_per_s = args.kill_at / (time.monotonic() - started)
        restarts, restored, killed_at = [], [], None
        for attempt in range(args.repeats):
            lifecycle.kill_node(root, VICTIM, hold=True)
            down_at = _status(layout, VICTIM).get("height", args.kill_at)
            killed_at = killed_at or down_at
            _wait_height(layout, peers, down_at + args.down_heights,
                         f"{VICTIM} down ({attempt + 1}/{args.repeats}): peers go on", 600)
            restarts.append(_time_catch_up(layout, peers, 120))
            time.sleep(1.0)   # its status file shows the restart's parts
            restored.append(_status(layout, VICTIM))
        # the baseline: the same node, no checkpoint to start from
        files = layout.node_files(VICTIM)
        baselines, replayed = [], []
        for attempt in range(args.repeats):
            lifecycle.kill_node(root, VICTIM, hold=True)
            files.checkpoints.rename(files.checkpoints.with_name(f"checkpoints.moved-for-baseline-{attempt}"))
            down_at = _status(layout, VICTIM).get("height", args.kill_at)
            _wait_height(layout, peers, down_at + args.down_heights,
                         f"{VICTIM} down, no checkpoints ({attempt + 1}/{args.repeats}): peers go on", 600)
            baselines.append(_time_catch_up(layout, peers, 600))
            time.sleep(1.0)
            replayed.append(_status(layout, VICTIM))
        restart_s, genesis_s = statistics.median(restarts), statistics.median(baselines)
        return {
            "restart_to_caught_up_s": round(restart_s, 3),
            "restart_from_genesis_s": round(genesis_s, 3),
            "speedup_vs_genesis": round(genesis_s / restart_s, 2),
            "restart_to_caught_up_runs_s": [round(x, 3) for x in restarts],
            "restart_from_genesis_runs_s": [round(x, 3) for x in baselines],
            "killed_at_height": killed_at,
            "restore_s": [r.get("restore_s") for r in restored],
            "replayed_blocks": [r.get("replayed") for r in restored],
            "genesis_restore_s": [r.get("restore_s") for r in replayed],
            "genesis_replayed_blocks": [r.get("replayed") for r in replayed],
            "caught_up_after_process_start_s": [r.get("caught_up_s") for r in restored],
            "heights_per_s_2x4": round(heights_per_s, 2),
        }
    finally:
        lifecycle.down(root, out=sys.stderr)


def _rate(layout: TestnetLayout, nodes: list[str], seconds: float, label: str) -> float:
    def height() -> int:
        return max(_status(layout, n).get("height", 0) for n in nodes)
    progress = Progress(label, total=int(seconds))
    first, started = height(), time.monotonic()
    while time.monotonic() - started < seconds:
        time.sleep(0.5)
        progress.update(done=int(time.monotonic() - started), detail=f"height {height()}")
    progress.finish()
    return (height() - first) / (time.monotonic() - started)


def agreement_rate(root: Path, args) -> dict:
    layout = create_testnet(root, 1, 4, seed=SEED, tick_s=0.2, genesis_apps=False)
    _configure(layout, args.checkpoint_interval, retained_heights=1_000)
    lifecycle.up(root, out=sys.stderr)
    try:
        nodes = testnet_nodes(layout)["subnet-0"]
        _wait_height(layout, nodes, 20, "1 x 4 nodes: warming up", 300)
        full = _rate(layout, nodes, args.measure_s, "4 of 4 up: heights/s")
        lifecycle.kill_node(root, VICTIM, hold=True)
        others = [n for n in nodes if n != VICTIM]
        time.sleep(5.0)   # the others count it absent (absent_after: 3 x the round timeout)
        down = _rate(layout, others, args.measure_s, "3 of 4 up: heights/s")
        return {"finalization_rounds_per_s": round(full, 2), "rounds_per_s_with_f_down": round(down, 2),
                "f_down_ratio": round(down / full, 3) if full else None}
    finally:
        lifecycle.down(root, out=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kill-at", type=int, default=1_000, help="subnet-0's height when the node is killed")
    parser.add_argument("--down-heights", type=int, default=50, help="heights its peers make while it is down")
    parser.add_argument("--checkpoint-interval", type=int, default=100, help="heights between checkpoints")
    parser.add_argument("--measure-s", type=float, default=20.0, help="seconds each agreement rate is measured")
    parser.add_argument("--repeats", type=int, default=3, help="restarts measured (medians reported)")
    parser.add_argument("--block-interval-s", type=float, default=0.1,
                        help="least time between heights of the recovery testnet (0: as fast as the nodes go)")
    args = parser.parse_args()
    floor_us = measure_floor_us()
    with tempfile.TemporaryDirectory(prefix="node-recovery-") as tmp:
        result = recovery(Path(tmp) / "recovery", args)
        shutil.rmtree(Path(tmp) / "recovery", ignore_errors=True)
        result.update(agreement_rate(Path(tmp) / "agreement", args))
    result.update({
        "restart_to_caught_up_floor_units": in_floor_units(result["restart_to_caught_up_s"] * 1e6, floor_us),
        "restart_from_genesis_floor_units": in_floor_units(result["restart_from_genesis_s"] * 1e6, floor_us),
        "checkpoint_interval": args.checkpoint_interval,
        "block_interval_s": args.block_interval_s,
        "floor_us": floor_us,
    })
    print(json.dumps(result))


if __name__ == "__main__":
    main()
