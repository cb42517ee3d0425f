"""``replica trace``: a call followed across two subnets from the recorded blocks alone, and
calls located where they are stuck (a destination subnet that stopped, a full stream).

Two subnets of 4 nodes over real gRPC, stepped by the test (so a subnet can be stopped).
What the trace says is checked against what the test saw while stepping: the heights at
which the ingress status changed, the stream indices in the live state.
"""

from __future__ import annotations

import time

import pytest

from consensus_stub.block_store import read_block_log
from consensus_stub.genesis import SubnetSpec
from message_routing.limits import DEFAULT
from replica.client import sign_ingress
from replica.execution import ExecutionEnvironment, install_canister
from replica.ic.textual_ids import canister_text
from replica.observe.call_events import collect_events
from replica.inprocess.local import LocalTestnet
from replica.observe.trace import format_trace, trace_message
from state_manager.ingress_history import IngressState
from tests.integration.harness import CONFIG, SEED
from tests.integration.http_testnet import ALICE, Greeter

pytestmark = pytest.mark.timeout(120)

ALPHA, BETA = "alpha", "beta"
RANGES = {ALPHA: (0, 999), BETA: (1000, 1999)}
HERE, THERE = 1, 1001          # a Greeter on each subnet
ROUND_S = 0.05
_nonce = iter(range(1, 2**62))


def _setup(subnet: str, state) -> None:
    install_canister(state, RANGES[subnet][0] + 1, Greeter)


def _testnet(tmp_path, limits=DEFAULT) -> LocalTestnet:
    specs = [SubnetSpec(s, 4, (RANGES[s],)) for s in (ALPHA, BETA)]
    return LocalTestnet(specs, ExecutionEnvironment([Greeter]), limits, seed=SEED, setup=_setup, config=CONFIG,
                        block_log_dir=tmp_path)


def _ask(net: LocalTestnet) -> bytes:
    envelope = sign_ingress(ALICE, HERE, "ask", THERE, next(_nonce), time.time_ns() + 60 * 10**9)
    return net.subnets[ALPHA].submit(envelope).message_id


def _step(net: LocalTestnet, subnets=(ALPHA, BETA)) -> None:
    for subnet in subnets:
        net.subnets[subnet].step()
    time.sleep(ROUND_S)   # the refreshers fetch the new certified slices meanwhile


def _timelines(net: LocalTestnet, tmp_path, watch):
    registry = net.current_registry
    return {s: collect_events(s, sub.recording.genesis, read_block_log(tmp_path / f"{s}.blocks"), registry,
                              net.environment, net.limits, watch=watch)
            for s, sub in net.subnets.items()}


def test_trace_follows_a_call_across_two_subnets_and_back(tmp_path):
    with _testnet(tmp_path) as net:
        message_id = _ask(net)
        changed = {}
        for _ in range(60):
            _step(net)
            status = net.subnets[ALPHA].ingress_status(message_id)
            if status is not None and status.state.name.lower() not in changed:
                changed[status.state.name.lower()] = net.subnets[ALPHA].height
            if status is not None and status.state is IngressState.REPLIED:
                break
        assert "replied" in changed
        trace = trace_message(message_id, _timelines(net, tmp_path, [message_id]), now_ns=time.time_ns(),
                              round_s=ROUND_S)
    assert trace.found and trace.status == "replied" and not trace.stuck
    assert (trace.subnet, trace.canister) == (ALPHA, HERE)
    assert trace.as_json()["canister"] == canister_text(HERE)   # people read the textual principal
    assert f"ingress ask to canister {canister_text(HERE)} in block" in trace.hops[0].text
    kinds = [(h.kind, h.subnet) for h in trace.hops]
    assert kinds == [
        ("ingress", ALPHA), ("processing", ALPHA), ("executed", ALPHA), ("call", ALPHA), ("routed", ALPHA), ("inducted", BETA),
        ("executed", BETA), ("response", BETA), ("inducted", ALPHA), ("callback", ALPHA), ("replied", ALPHA),
    ], format_trace(trace)
    heights = [h.height for h in trace.hops]
    assert heights[-1] == changed["replied"]          # the height the test saw the reply at
    assert heights[0] <= heights[1] == heights[2] == heights[4] < heights[5] and heights[-2] <= heights[-1]
    assert heights[1] == changed["processing"]
    routed = trace.hops[4]
    assert f"stream {ALPHA} → {BETA} at index 0" in routed.text   # the first message alpha ever sent beta
    # each execution carries the instructions it used (builtin canisters are not metered: 0), in the JSON too
    executions = [h for h in trace.hops if h.kind in ("executed", "callback")]
    assert len(executions) == 3 and all(h.instructions == 0 and h.text.endswith("; 0 instructions")
                                        for h in executions)
    assert [h["instructions"] for h in trace.as_json()["hops"] if h["kind"] == "executed"] == [0, 0]
    assert any("inducted on beta" in line for line in format_trace(trace))


def test_trace_locates_calls_stuck_behind_a_stopped_subnet_and_a_full_stream(tmp_path):
    # tiny limits: a stream holds at most 2 messages until the receiver acknowledges them
    with _testnet(tmp_path, DEFAULT.with_(max_stream_messages=2)) as net:
        _step(net)
        _step(net)
        beta_height = net.subnets[BETA].height
        asks = [_ask(net) for _ in range(3)]   # one block executes all three: two fit the stream
        for _ in range(4):
            _step(net, (ALPHA,))               # beta is stopped: it makes no more blocks
        stream = net.subnets[ALPHA].read(lambda state: state.streams[BETA])
        assert (stream.begin, stream.end) == (0, 2)
        alpha_height = net.subnets[ALPHA].height
        ages = {node.metrics.snapshot()[0].streams[BETA].oldest_unacknowledged_rounds
                for node in net.subnets[ALPHA].nodes.values()}
        timelines = _timelines(net, tmp_path, asks)
        traces = [trace_message(m, timelines, now_ns=time.time_ns(), round_s=ROUND_S) for m in asks]
    in_stream = [t for t in traces if any("in stream" in s for s in t.stuck)]
    held = [t for t in traces if any("output queue" in s for s in t.stuck)]
    assert len(in_stream) == 2 and len(held) == 1, [format_trace(t) for t in traces]
    indices = set()
    for trace in in_stream:
        (where,) = trace.stuck
        routed = next(h for h in trace.hops if h.kind == "routed")
        index = int(where.split("at index ")[1].split(",")[0])
        indices.add(index)
        waited = alpha_height - routed.height
        assert f"in stream {ALPHA} → {BETA} at index {index}, {waited} rounds unacknowledged" in where
        assert f"{BETA} last made a block at height {beta_height}" in where
        assert trace.status == "processing"
    assert indices == {0, 1}
    # every alpha node's /metrics reports the same age for the oldest unacknowledged message
    oldest = min(next(h for h in t.hops if h.kind == "routed").height for t in in_stream)
    assert ages == {alpha_height - oldest}
    (where,) = held[0].stuck
    assert f"held in the output queue of canister {canister_text(HERE)} on {ALPHA}" in where and "at most 2 messages" in where


def test_trace_shows_a_request_the_receiving_subnet_rejected_and_the_synthetic_reject(tmp_path):
    with _testnet(tmp_path) as net:
        envelope = sign_ingress(ALICE, HERE, "ask", 1500, next(_nonce), time.time_ns() + 60 * 10**9)  # no such canister
        message_id = net.subnets[ALPHA].submit(envelope).message_id
        for _ in range(60):
            _step(net)
            status = net.subnets[ALPHA].ingress_status(message_id)
            if status is not None and status.state is IngressState.REJECTED:
                break
        rejected_at = net.subnets[ALPHA].height
        trace = trace_message(message_id, _timelines(net, tmp_path, [message_id]), now_ns=time.time_ns(),
                              round_s=ROUND_S)
    assert trace.status == "rejected" and not trace.stuck, format_trace(trace)
    kinds = [(h.kind, h.subnet) for h in trace.hops]
    assert kinds[-4:] == [("rejected", BETA), ("synthetic_reject", ALPHA), ("callback", ALPHA), ("rejected", ALPHA)]
    assert "CANISTER_NOT_FOUND" in trace.hops[-4].text and trace.hops[-1].height == rejected_at
    # the Greeter rejects its caller with the synthetic reject's code (3: DESTINATION_INVALID) and message
    assert "CANISTER_REJECT 3: Canister 1500 not found" in trace.hops[-1].text


def test_an_ingress_answered_within_its_round_shows_its_execution_and_its_instructions():
    from replica.observe.call_events import BlockInfo, Executed, IngressChange, Timeline

    mid = b"\x01" * 32
    timeline = Timeline(ALPHA, blocks=[BlockInfo(3, 10**9, "node-0", ((mid, HERE, "spin"),), {})],
                        ingress=[IngressChange(3, mid, "rejected", 5, "exceeded the instruction limit")],
                        executed=[Executed(3, HERE, ("ingress", mid), "update", 2_000_000, True)])
    trace = trace_message(mid, {ALPHA: timeline}, now_ns=2 * 10**9, round_s=ROUND_S)
    executed = [h for h in trace.hops if h.kind == "executed"]
    assert len(executed) == 1 and executed[0].instructions == 2_000_000 and executed[0].height == 3
    assert "2000000 instructions (the instruction limit: trapped)" in executed[0].text
