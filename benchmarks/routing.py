"""Message routing throughput: one subnet inducting, executing and routing N cross-subnet messages.

Setup (not timed): subnet A hosts ``R`` receiver canisters running ``Echo`` (an update method
that replies ``None``); peer subnet B hosts ``S`` sender canisters. B's stream to A is given
as one slice holding N requests ``B:s → A:r`` spread round-robin over all (s, r) pairs.

Measured, each repeated ``--repeats`` times on a fresh copy of the state (median reported):

(a) full round: ``execute_round`` with the real ``ExecutionEnvironment`` — induction of the
    N requests from the slice, execution (N ``Echo`` calls, each opening and closing a call
    context and answering into its reserved slot), routing of the N responses into the
    stream back to B;
(b) induction + routing alone: ``pre_process`` (induct the same N requests) and
    ``post_process`` (route N responses), timed separately and summed. In between, untimed,
    every inducted request is answered by moving a reply into the output slot reserved for
    it — what execution produces, without running canister code.

Also reported, for information: the commit of the state after (a) through ``StateManager``
(incremental hashing of N new stream messages and all touched canisters).

Limits: ``DEFAULT``. With the default N = 10,000 nothing throttles: R = max(32, ceil(N/800))
receivers keep every canister under ``max_messages_per_canister_per_round`` (1,000) and
every (sender, receiver) queue far below ``queue_capacity`` (500); N equals
``max_stream_messages`` / ``max_slice_messages`` / half of ``max_messages_per_round``. For a
larger ``--messages`` those four limits (and the byte limits) are raised to fit N, and the
summary says so.

Run: ``python benchmarks/routing.py [--messages N] [--repeats K]`` (one core). The last line
of the output is a JSON object with ``full_round_msgs_per_s``, ``induct_route_msgs_per_s``
and ``peak_rss_mb``.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import resource
import statistics
import sys
import time

from message_routing.batch import Batch
from message_routing.limits import DEFAULT, Limits
from message_routing.state_machine import execute_round, post_process, pre_process
from replica.execution import ExecutionEnvironment, install_canister
from replica.sdk import Canister, encode_value, update
from state_manager.messages import Reply, Request, Response
from state_manager.replicated_state import ReplicatedState
from state_manager.routing_table import CanisterIdRange, NetworkTopology, RoutingTable
from state_manager.state_manager import StateManager
from state_manager.streams import StreamHeader, StreamSlice
from floor import in_floor_units, measure_floor_us

A, B = "subnet-a", "subnet-b"
A_RANGE, B_RANGE = (0, 999_999), (1_000_000, 1_999_999)
SENDERS = 32
TIME = 1_700_000_000 * 10**9
TARGETS = {"full_round_msgs_per_s": 50_000, "induct_route_msgs_per_s": 150_000}


class Echo(Canister):
    VERSION = 1

    @update
    def echo(self):
        return None


def limits_for(messages: int) -> tuple[Limits, bool]:
    """DEFAULT, with the per-round and per-stream limits raised only if N exceeds them."""
    fits = (messages <= DEFAULT.max_stream_messages and messages <= DEFAULT.max_slice_messages
            and messages <= DEFAULT.max_messages_per_round)
    if fits:
        return DEFAULT, False
    bytes_needed = 256 * messages
    return DEFAULT.with_(
        max_stream_messages=messages, max_slice_messages=messages, max_messages_per_round=messages,
        max_stream_bytes=max(DEFAULT.max_stream_bytes, bytes_needed),
        max_slice_bytes=max(DEFAULT.max_slice_bytes, bytes_needed),
        max_block_payload_bytes=max(DEFAULT.max_block_payload_bytes, bytes_needed),
    ), True


class Workload:
    def __init__(self, messages: int, limits: Limits) -> None:
        self.messages = messages
        self.limits = limits
        self.receivers = max(32, math.ceil(messages / 800))
        table = RoutingTable(((CanisterIdRange(*A_RANGE), A), (CanisterIdRange(*B_RANGE), B)))
        self.topology = NetworkTopology(1, table)
        self.env = ExecutionEnvironment([Echo])
        payload = encode_value(None)
        receivers = [A_RANGE[0] + 1 + r for r in range(self.receivers)]
        senders = [B_RANGE[0] + 1 + s for s in range(SENDERS)]
        requests = tuple(
            Request(senders[i % SENDERS], receivers[(i // SENDERS) % self.receivers], "echo", payload, i)
            for i in range(messages)
        )
        self.slice = StreamSlice(StreamHeader(0, messages, 0), 0, requests)
        self.batch = Batch(1, TIME + 10**9, 1, xnet_payload=((B, self.slice),))
        self.receiver_ids = receivers
        worst = max(self.per_pair_counts().values())
        per_canister = math.ceil(messages / self.receivers)
        if worst > limits.queue_capacity or per_canister > limits.max_messages_per_canister_per_round:
            raise SystemExit(f"layout would throttle: {worst} per queue, {per_canister} per canister")

    def per_pair_counts(self) -> dict[tuple[int, int], int]:
        counts: dict[tuple[int, int], int] = {}
        for m in self.slice.messages:
            counts[(m.sender, m.receiver)] = counts.get((m.sender, m.receiver), 0) + 1
        return counts

    def fresh_state(self) -> ReplicatedState:
        state = ReplicatedState(A, self.topology)
        state.metadata.batch_time = TIME
        for cid in self.receiver_ids:
            install_canister(state, cid, Echo)
        return state

    # -- the measured operations -----------------------------------------------------------

    def full_round(self) -> tuple[float, ReplicatedState]:
        state = self.fresh_state()
        gc.collect()
        started = time.perf_counter()
        state = execute_round(state, self.batch, self.topology, self.env, self.limits)
        elapsed = time.perf_counter() - started
        self.check_routed(state)
        return elapsed, state

    def induct_and_route(self) -> float:
        state = self.fresh_state()
        gc.collect()
        started = time.perf_counter()
        state = pre_process(state, self.batch, self.topology, self.limits)
        inducted = time.perf_counter() - started
        answer_every_request(state)
        started = time.perf_counter()
        state = post_process(state, self.limits)
        routed = time.perf_counter() - started
        self.check_routed(state)
        return inducted + routed

    def commit(self, state: ReplicatedState) -> float:
        manager = StateManager(self.fresh_state())
        gc.collect()
        started = time.perf_counter()
        manager.commit(state)
        return time.perf_counter() - started

    def check_routed(self, state: ReplicatedState) -> None:
        stream = state.streams.get(B)
        if stream is None or len(stream.messages) != self.messages or stream.signals_end != self.messages:
            raise SystemExit("the round did not induct and route every message")
        if any(type(m) is not Response or type(m.response_payload) is not Reply for m in stream.messages):
            raise SystemExit("a message was not answered with a reply")
        if any(c.queues.message_count() or c.call_contexts for c in state.canisters.values()):
            raise SystemExit("work left in canister queues")


def answer_every_request(state: ReplicatedState) -> None:
    """What execution would produce, without running code: a reply per inducted request."""
    reply = Reply(encode_value(None))
    for canister in state.canisters.values():
        queues = canister.queues
        for remote in list(queues.input_queues.keys()):
            while remote in queues.input_queues and queues.input_queues[remote].elements:
                request = queues.pop_input(remote)
                queues.push_output_response(Response(request.sender, request.receiver, request.sender_reply_callback, reply))


def status(text: str) -> None:
    """One status line on stderr, rewritten in place on a terminal."""
    if sys.stderr.isatty():
        sys.stderr.write(f"\r\033[K[routing bench] {text}")
    else:
        sys.stderr.write(f"[routing bench] {text}\n")
    sys.stderr.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=10_000, help="messages per round (default 10,000)")
    parser.add_argument("--repeats", type=int, default=5, help="repetitions per measurement (median; default 5)")
    args = parser.parse_args(argv)
    if args.messages < 1 or args.repeats < 1:
        parser.error("--messages and --repeats must be positive")
    n = args.messages
    limits, raised = limits_for(n)
    status("building the workload…")
    workload = Workload(n, limits)

    full, induct_route, commit = [], [], []
    for k in range(args.repeats):
        status(f"(a) full round {k + 1}/{args.repeats}")
        elapsed, state = workload.full_round()
        full.append(elapsed)
        status(f"    commit after (a) {k + 1}/{args.repeats}")
        commit.append(workload.commit(state))
        del state
    for k in range(args.repeats):
        status(f"(b) induction + routing {k + 1}/{args.repeats}")
        induct_route.append(workload.induct_and_route())
    status("done")
    if sys.stderr.isatty():
        sys.stderr.write("\n")

    def rate(samples: list[float]) -> float:
        return n / statistics.median(samples)

    result = {
        "messages": n,
        "repeats": args.repeats,
        "receivers": workload.receivers,
        "senders": SENDERS,
        "limits": "DEFAULT" + (" with stream/slice/round limits raised to N" if raised else ""),
        "full_round_msgs_per_s": round(rate(full)),
        "induct_route_msgs_per_s": round(rate(induct_route)),
        "commit_msgs_per_s": round(rate(commit)),
        "full_round_median_s": round(statistics.median(full), 4),
        "induct_route_median_s": round(statistics.median(induct_route), 4),
        "commit_median_s": round(statistics.median(commit), 4),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    floor_us = measure_floor_us()
    result["floor_us"] = floor_us
    for key in ("full_round", "induct_route", "commit"):
        per_msg_us = statistics.median({"full_round": full, "induct_route": induct_route, "commit": commit}[key]) / n * 1e6
        result[f"{key}_floor_units_per_msg"] = in_floor_units(per_msg_us, floor_us)
    print(f"routing benchmark: {n:,} cross-subnet messages, {workload.receivers} receivers x {SENDERS} senders, "
          f"limits {result['limits']}, median of {args.repeats}")
    for key, label in (("full_round_msgs_per_s", "(a) full round (induct + execute + route)"),
                       ("induct_route_msgs_per_s", "(b) induction + routing"),
                       ("commit_msgs_per_s", "    commit of (a)'s state (info)")):
        target = TARGETS.get(key)
        verdict = "" if target is None else f"  target {target:>9,}  {'OK' if result[key] >= target else 'BELOW'}"
        print(f"  {label:<45} {result[key]:>10,} msgs/s{verdict}")
    print(f"  peak RSS {result['peak_rss_mb']} MB; floor {floor_us} us; a full round costs "
          f"{result['full_round_floor_units_per_msg']} floor units per message")
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
