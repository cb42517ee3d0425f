"""Every node serves ``/metrics``: scraped over HTTP and parsed with Prometheus's own text parser.

The numbers are compared with the node's state, not with constants: heights, every stream's
header and backlog, the replicated state's counters; a cross-subnet call must show up as
fetch latencies and inducted messages, a refused call as a refusal by reason.
"""

from __future__ import annotations

from replica.ic.http_interface import REFUSAL_HEADER
from replica.ic.principal import canister_principal, principal_to_text

import pytest
from prometheus_client.parser import text_string_to_metric_families

from replica.execution.message_execution import MessageUsage
from replica.node.metrics import NodeMetrics, StreamAges
from tests.integration.http_testnet import (
    ALPHA, BETA, PINGER, agent_for, canister, envelope, get, post, running_http_testnet,
)

pytestmark = pytest.mark.timeout(120)


def scrape(address: str) -> dict[tuple[str, tuple], float]:
    """``{(sample name, sorted labels): value}`` of one node's ``/metrics``."""
    answer = get(address, "/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def test_metrics_of_every_node_match_its_state():
    with running_http_testnet() as net:
        agent = agent_for(net)
        # a cross-subnet round trip, twice: streams both ways, fetches, inductions
        answer = agent.update_call(canister(ALPHA, PINGER), "ping", {"target": canister(BETA, PINGER), "rounds": 2})
        assert answer["pongs_received"] == 2
        # one refused call: no such canister on alpha
        address = net.http_endpoints[ALPHA][next(iter(net.http_endpoints[ALPHA]))]
        refused = post(address, f"/api/v2/canister/{principal_to_text(canister_principal(999).raw)}/call", envelope(999))
        assert refused.status_code == 404 and refused.headers[REFUSAL_HEADER] == "unknown_canister"

        with net.ticker.paused():  # no round runs while we compare scrapes with states
            for subnet_id, endpoints in net.http_endpoints.items():
                sub = net.subnets[subnet_id]
                for node_id, node_address in endpoints.items():
                    node = sub.nodes[node_id]
                    state = node.state
                    samples = scrape(node_address)
                    assert samples[("replica_finalized_height", ())] == state.metadata.batch_number
                    assert samples[("replica_certified_height", ())] == node.state_manager.latest_certified()[1].height
                    for remote, stream in state.streams.items():
                        if remote == subnet_id:
                            continue
                        labels = (("remote", remote),)
                        assert samples[("replica_stream_begin", labels)] == stream.begin
                        assert samples[("replica_stream_end", labels)] == stream.end
                        assert samples[("replica_stream_signals_end", labels)] == stream.signals_end
                        assert samples[("replica_stream_messages", labels)] == stream.end - stream.begin
                        assert samples[("replica_stream_bytes", labels)] == stream.byte_size
                    counters = state.metadata.counters
                    assert samples[("replica_messages_inducted_total", (("kind", "xnet"),))] \
                        == counters["xnet_messages_inducted"] > 0
                    assert samples[("replica_messages_inducted_total", (("kind", "ingress"),))] \
                        == counters["ingress_inducted"]
                    assert samples[("replica_critical_errors_total", ())] == counters["critical_errors"] == 0
                    assert samples[("replica_round_duration_seconds_count", ())] >= state.metadata.batch_number
                    assert samples[("replica_certification_duration_seconds_count", ())] >= 1
                    # every node executed the round's messages and observed each (builtin canisters: 0)
                    assert samples[("replica_message_instructions_count", (("kind", "update"),))] >= 1
                    if subnet_id == ALPHA:
                        assert samples[("replica_message_instructions_count", (("kind", "callback"),))] >= 2
                    remote = BETA if subnet_id == ALPHA else ALPHA
                    assert samples[("xnet_slice_fetch_duration_seconds_count", (("remote", remote),))] >= 1
                    refusals = samples.get(("replica_ingress_refusals_total", (("reason", "unknown_canister"),)), 0)
                    assert refusals == (1 if node_address == address else 0)
                    # the subnet's first online node judged the refused call for every node (Subnet.submit_ingress)
                    pool_refusals = samples.get(("replica_ingress_pool_refusals_total",
                                                 (("reason", "unknown_canister"),)), 0)
                    assert pool_refusals == (1 if subnet_id == ALPHA and node_id == next(iter(sub.nodes)) else 0)


def test_stream_ages_count_rounds_since_the_oldest_unacknowledged_message_entered():
    ages = StreamAges()
    assert ages.observe("b", 1, 0, 0) == 0          # empty stream
    assert ages.observe("b", 2, 0, 3) == 0          # messages 0-2 enter at height 2
    assert ages.observe("b", 5, 0, 4) == 3          # 3 is added at 5; 0 is 3 rounds old
    assert ages.observe("b", 6, 3, 4) == 1          # 0-2 acknowledged; 3 entered at 5
    assert ages.observe("b", 7, 4, 4) == 0          # all acknowledged
    assert ages.observe("b", 9, 4, 6) == 0
    assert ages.observe("b", 12, 4, 6) == 3


def test_the_fetch_paths_records_and_refusals_are_exported_by_reason():
    metrics = NodeMetrics("alpha", "alpha-node-0")
    metrics.read_fetch_records(lambda: {("beta-node-1", "PeerTimeout"): 3},
                               lambda: {("beta", "CertificationSignatureInvalid"): 2})
    metrics.block_refused("InvalidBlock")
    metrics.ingress_refused("pool_full")
    metrics.ingress_refused("pool_full")
    metrics.slice_fetched("beta", 0.004)
    samples = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    assert samples[("xnet_slice_fetch_failures_total", (("peer", "beta-node-1"), ("reason", "PeerTimeout")))] == 3
    assert samples[("xnet_slice_validation_failures_total",
                    (("reason", "CertificationSignatureInvalid"), ("remote", "beta")))] == 2
    assert samples[("replica_block_validation_failures_total", (("reason", "InvalidBlock"),))] == 1
    assert samples[("replica_ingress_refusals_total", (("reason", "pool_full"),))] == 2
    assert samples[("xnet_slice_fetch_duration_seconds_count", (("remote", "beta"),))] == 1
    assert samples[("xnet_slice_fetch_duration_seconds_bucket", (("le", "0.005"), ("remote", "beta")))] == 1
    assert samples[("xnet_slice_fetch_duration_seconds_bucket", (("le", "0.0025"), ("remote", "beta")))] == 0


def test_each_executed_message_is_observed_with_its_instructions_and_limit_traps_by_kind():
    metrics = NodeMetrics("subnet-0", "node-0")
    for kind, used, trapped in (("update", 1_500, False), ("update", 50_000, True), ("query", 20, False)):
        usage = MessageUsage(kind)
        usage.instructions, usage.limit_exceeded = used, trapped
        metrics.message_executed(7, None, usage)
    samples = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    update = (("kind", "update"),)
    assert samples[("replica_message_instructions_count", update)] == 2
    assert samples[("replica_message_instructions_sum", update)] == 51_500
    assert samples[("replica_message_instructions_bucket", (("kind", "update"), ("le", "10000.0")))] == 1
    assert samples[("replica_message_instructions_count", (("kind", "query"),))] == 1
    assert samples[("replica_instruction_limit_traps_total", update)] == 1
    assert ("replica_instruction_limit_traps_total", (("kind", "query"),)) not in samples
