"""Bounded-wait calls under overload: how many messages a subnet sheds, and what the per-round
bookkeeping costs.

(a) Overload run (``shed_under_overload``): three simulated subnets with ``DEFAULT`` limits
    except a bounded-wait byte budget of ``--budget`` bytes (default 64 KiB). Every round,
    each of ``--canisters`` flooding canisters per subnet makes ``--calls`` bounded-wait
    calls (timeout 2-5 s) with ``--pad``-byte payloads to canisters on the other subnets,
    which reply with payloads as large: far more bounded-wait bytes than the budget holds,
    so subnets shed. After ``--rounds`` rounds of traffic the run drains. Reported: messages
    and bytes shed, the outcomes of the calls (replied, ``SYS_TRANSIENT`` — timed out or shed
    before leaving —, ``SYS_UNKNOWN`` — deadline passed or response shed), and the guarantee
    counted: ``lost`` (calls whose callback never ran) and ``duplicated`` (callbacks that ran
    twice), both must be 0.
(b) Bookkeeping cost (info): one round's time-outs and two budget checks
    (``time_out_messages``, ``time_out_callbacks``, ``enforce_bounded_wait_message_limit``
    twice) on a state holding ``--queued`` guaranteed-response messages in queues and as many
    callbacks — what every round now pays even without bounded-wait traffic — in µs and in
    floor units per queued message.

Run: ``python benchmarks/bounded_wait.py``; the last line is one JSON object with
``shed_under_overload``, ``lost``, ``duplicated`` and ``floor_us``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.floor import in_floor_units, measure_floor_us  # noqa: E402
from message_routing.limits import DEFAULT  # noqa: E402
from message_routing.shedding import enforce_bounded_wait_message_limit  # noqa: E402
from message_routing.timeouts import time_out_callbacks, time_out_messages  # noqa: E402
from replica.execution import ExecutionEnvironment, install_canister  # noqa: E402
from replica.sdk import CallError, Canister, RejectCode, callback, encode_value, update  # noqa: E402
from replica.inprocess.simulation import Simulation  # noqa: E402
from state_manager.canister_state import CanisterState  # noqa: E402
from state_manager.messages import Ingress, Request  # noqa: E402
from state_manager.replicated_state import ReplicatedState  # noqa: E402
from state_manager.routing_table import CanisterIdRange, NetworkTopology, RoutingTable  # noqa: E402

SUBNETS = {"subnet-a": (0, 999), "subnet-b": (1000, 1999), "subnet-c": (2000, 2999)}


class Flooder(Canister):
    """Sends bounded-wait calls; counts how each callback ran (``sent``, ``ran/<outcome>``,
    ``twice``) and who never answered (``open/<seq>`` until its callback runs)."""

    VERSION = 1

    @update
    def flood(self, arg):
        targets, pad, timeouts = arg
        self.reply(None)
        for k, target in enumerate(targets):
            seq = self.stable.get("sent", 0)
            try:
                self.call(target, "echo", b"p" * pad, on_reply=self.replied, on_reject=self.rejected, context=seq,
                          timeout_s=timeouts[k % len(timeouts)])
            except CallError:
                self.stable["refused"] = self.stable.get("refused", 0) + 1
                continue
            self.stable["sent"] = seq + 1
            self.stable[f"open/{seq:010d}"] = True

    @update
    def echo(self, payload):
        return payload

    def _ran(self, outcome: str, seq: int) -> None:
        key = f"open/{seq:010d}"
        if key in self.stable:
            del self.stable[key]
        else:
            self.stable["twice"] = self.stable.get("twice", 0) + 1
        self.stable[f"ran/{outcome}"] = self.stable.get(f"ran/{outcome}", 0) + 1

    @callback
    def replied(self, _value, seq):
        self._ran("replied", seq)

    @callback
    def rejected(self, reject, seq):
        self._ran(RejectCode(reject[0]).name, seq)


def overload_run(args) -> dict:
    limits = DEFAULT.with_(bounded_wait_message_memory_capacity=args.budget)
    sim = Simulation(SUBNETS, ExecutionEnvironment([Flooder]), limits=limits, seed=1, record_batches=False)
    flooders = {s: [lo + k for k in range(args.canisters)] for s, (lo, _) in SUBNETS.items()}
    for subnet, ids in flooders.items():
        for cid in ids:
            install_canister(sim.state_of(subnet), cid, Flooder)
    nonce = 0
    started = time.perf_counter()
    for round_ in range(args.rounds):
        for subnet, ids in flooders.items():
            others = [c for s, cs in flooders.items() if s != subnet for c in cs]
            for k, cid in enumerate(ids):
                nonce += 1
                targets = tuple(others[(k + j + round_) % len(others)] for j in range(args.calls))
                sim.submit(Ingress(b"\x01" * 29 + b"\x02", cid, "flood", encode_value((targets, args.pad, (2, 3, 5))),
                                   nonce.to_bytes(32, "big"), sim.now + 60 * 10**9))
        sim.tick()
    drained = sim.run_until_quiescent(max_ticks=1_000)
    elapsed = time.perf_counter() - started
    counters: dict[str, int] = {}
    outcomes: dict[str, int] = {}
    sent = lost = twice = refused = 0
    for subnet, ids in flooders.items():
        state = sim.state_of(subnet)
        for name, value in state.metadata.counters.items():
            counters[name] = counters.get(name, 0) + value
        for cid in ids:
            stable = state.canisters[cid].stable
            sent += stable.get("sent", 0)
            refused += stable.get("refused", 0)
            twice += stable.get("twice", 0)
            lost += sum(1 for _ in stable.irange("open/", "open0"))
            for key in stable.irange("ran/", "ran0"):
                outcomes[key[4:]] = outcomes.get(key[4:], 0) + stable[key]
    return {
        "budget_bytes": args.budget, "calls_sent": sent, "calls_refused_at_send": refused,
        "rounds": args.rounds, "drain_rounds": drained, "run_s": round(elapsed, 2),
        "shed_under_overload": counters.get("bounded_wait_messages_shed", 0),
        "bytes_shed": counters.get("bounded_wait_bytes_shed", 0),
        "requests_timed_out": counters.get("bounded_wait_requests_timed_out", 0),
        "callbacks_expired": counters.get("bounded_wait_callbacks_expired", 0),
        "late_responses_dropped": counters.get("bounded_wait_late_responses_dropped", 0),
        "outcomes": dict(sorted(outcomes.items())), "lost": lost, "duplicated": twice,
    }


def bookkeeping_cost(queued: int, repeats: int) -> float:
    """Median µs of one round's bounded-wait bookkeeping on a guaranteed-only state."""
    table = RoutingTable(((CanisterIdRange(0, 999), "subnet-a"), (CanisterIdRange(1000, 1999), "subnet-b")))
    state = ReplicatedState("subnet-a", NetworkTopology(1, table))
    canisters = 32
    for cid in range(canisters):
        c = CanisterState(cid, "bench", b"\x00" * 32)
        c.new_call_context(None, "m")
        state.add_canister(c)
    for n in range(queued):
        c = state.canisters[n % canisters]
        callback_ = c.register_callback(0, 1000 + n % 16, "r", "j", None)
        c.queues.push_output_request(Request(c.canister_id, 1000 + n % 16, "m", b"x" * 100, callback_.callback_id),
                                     DEFAULT.queue_capacity)
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        time_out_messages(state)
        time_out_callbacks(state)
        enforce_bounded_wait_message_limit(state, DEFAULT)
        enforce_bounded_wait_message_limit(state, DEFAULT)
        samples.append((time.perf_counter() - started) * 1e6)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=64 * 1024)
    parser.add_argument("--canisters", type=int, default=4)
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--pad", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--queued", type=int, default=2_000)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    result = overload_run(args)
    floor_us = measure_floor_us()
    cost_us = bookkeeping_cost(args.queued, args.repeats)
    result.update({
        "floor_us": floor_us, "bookkeeping_queued_messages": args.queued,
        "bookkeeping_us_per_round": round(cost_us, 1),
        "bookkeeping_floor_units_per_queued_message": in_floor_units(cost_us / args.queued, floor_us),
    })
    print(f"bounded-wait overload: {result['calls_sent']:,} calls of {args.pad:,} bytes over {args.rounds} rounds, "
          f"budget {args.budget:,} bytes per subnet")
    print(f"  shed {result['shed_under_overload']:,} messages ({result['bytes_shed']:,} bytes); outcomes "
          f"{result['outcomes']}; lost {result['lost']}, duplicated {result['duplicated']}")
    print(f"  per-round bookkeeping with {args.queued:,} queued guaranteed messages: {result['bookkeeping_us_per_round']} us "
          f"({result['bookkeeping_floor_units_per_queued_message']} floor units per message); floor {floor_us} us")
    print(json.dumps(result, sort_keys=True))
    return 0 if result["lost"] == 0 and result["duplicated"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
