"""Incremental state hashing: commit cost vs state size, and a sliding stream.

1. Commit cost with 1,000 changed leaves in a state of 10^4 vs 10^6 leaves (the leaves are
   the stable-state entries of one canister, e.g. a big ledger). Incremental hashing should
   make the ratio small (≤ 2); a full rehash would be ~100.
2. Commits/s for a stream of 10,000 messages that is garbage-collected by 100 and extended
   by 100 per round (each commit touches 200 of the stream's leaves and rehashes O(log n)).

Last line: one JSON object.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from state_manager.canister_state import CanisterState  # noqa: E402
from state_manager.labeled_trie import pending_hashes  # noqa: E402
from state_manager.messages import Request  # noqa: E402
from state_manager.replicated_state import ReplicatedState  # noqa: E402
from state_manager.routing_table import CanisterIdRange, NetworkTopology, RoutingTable  # noqa: E402
from state_manager.state_tree import StateTreeBuilder  # noqa: E402
from state_manager.streams import Stream  # noqa: E402
from floor import in_floor_units, measure_floor_us  # noqa: E402


def status(text: str) -> None:
    sys.stderr.write(f"\r{text:<78}")
    sys.stderr.flush()


def new_state() -> ReplicatedState:
    table = RoutingTable(((CanisterIdRange(0, 99), "alpha"), (CanisterIdRange(100, 199), "beta")))
    state = ReplicatedState("alpha", NetworkTopology(1, table))
    state.add_canister(CanisterState(1, "bench:Ledger", b"\x00" * 32))
    return state


def commit(builder: StateTreeBuilder, state: ReplicatedState) -> None:
    """One commit: update both trees and compute both roots (the trees hash lazily)."""
    trees = builder.update(state)
    trees.certified_root
    trees.full_hash


def commit_cost(leaves: int, changed: int, rounds: int, rng: random.Random) -> tuple[float, int]:
    """Median ms of one commit after ``changed`` random leaves of ``leaves`` were rewritten,
    and the median number of hashes it computed."""
    state = new_state()
    stable = state.canisters[1].stable
    keys = [f"account/{i:08d}" for i in range(leaves)]
    status(f"building a state of {leaves:,} leaves")
    for i, key in enumerate(keys):
        stable[key] = i
    builder = StateTreeBuilder()
    commit(builder, state)
    gc.collect()
    gc.freeze()  # the big initial tree is long-lived; keep the collector off it
    samples, hashes = [], []
    for r in range(rounds):
        status(f"{leaves:,} leaves: commit {r + 1}/{rounds}")
        for key in rng.sample(keys, changed):
            stable[key] = stable[key] + 1
        state.metadata.batch_number += 1
        started = time.process_time()  # CPU time: the commit's own cost, not other processes' load
        commit(builder, state)
        samples.append((time.process_time() - started) * 1000)
        # the same commit again, untimed, to count the hashes it computes
        for key in rng.sample(keys, changed):
            stable[key] = stable[key] + 1
        state.metadata.batch_number += 1
        hashes.append(pending_hashes(builder.update(state).full))  # the full tree holds the certified one
        commit(builder, state)
    gc.unfreeze()
    return statistics.median(samples), int(statistics.median(hashes))


def stream_commits_per_s(length: int, step: int, rounds: int) -> float:
    state = new_state()
    stream = state.streams["beta"] = Stream(messages=[Request(1, 100, "m", b"x" * 100, i) for i in range(length)])
    builder = StateTreeBuilder()
    commit(builder, state)
    next_callback = length
    started = time.perf_counter()
    for r in range(rounds):
        stream.discard_messages_before(stream.begin + step)
        for _ in range(step):
            stream.push(Request(1, 100, "m", b"x" * 100, next_callback))
            next_callback += 1
        state.metadata.batch_number += 1
        commit(builder, state)
        if r % 20 == 0:
            status(f"sliding stream: commit {r + 1}/{rounds}")
    return rounds / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--changed", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=31)
    args = parser.parse_args()
    rng = random.Random(1)
    small, small_hashes = commit_cost(args.small, args.changed, args.rounds, rng)
    large, large_hashes = commit_cost(args.large, args.changed, args.rounds, rng)
    per_s = stream_commits_per_s(10_000, 100, 200)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    floor_us = measure_floor_us()
    sys.stderr.write("\r" + " " * 78 + "\r")
    print(f"commit with {args.changed:,} changed leaves: {small:.1f} ms at {args.small:,} leaves, "
          f"{large:.1f} ms at {args.large:,} leaves (ratio {large / small:.2f}; a full rehash would be ~{args.large // args.small})")
    print(f"hashes per commit: {small_hashes:,} vs {large_hashes:,} (ratio {large_hashes / small_hashes:.2f})")
    print(f"sliding 10,000-message stream (GC 100 + append 100 per round): {per_s:.0f} commits/s")
    print(f"floor {floor_us} us: a commit costs {in_floor_units(small * 1e3 / args.changed, floor_us)} / "
          f"{in_floor_units(large * 1e3 / args.changed, floor_us)} floor units per changed leaf")
    print(json.dumps({
        "commit_ms_small": round(small, 2), "commit_ms_large": round(large, 2), "ratio": round(large / small, 3),
        "stream_commits_per_s": round(per_s, 1), "hashes_per_commit_small": small_hashes,
        "hashes_per_commit_large": large_hashes, "hash_ratio": round(large_hashes / small_hashes, 3), "small_leaves": args.small, "large_leaves": args.large,
        "changed_leaves": args.changed, "peak_rss_mb": round(peak_mb, 1), "floor_us": floor_us,
        "commit_floor_units_per_changed_leaf_small": in_floor_units(small * 1e3 / args.changed, floor_us),
        "commit_floor_units_per_changed_leaf_large": in_floor_units(large * 1e3 / args.changed, floor_us),
    }))


if __name__ == "__main__":
    main()
