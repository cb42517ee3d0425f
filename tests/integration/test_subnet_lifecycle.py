"""A subnet's life beyond the happy path: a crashed node, a restart from the block log,
and nodes that disagree on a state hash."""

from __future__ import annotations

import time

import pytest

from replica.inprocess.subnet import DivergenceError, NodeHooks
from tests.integration.harness import ALPHA, BETA, check_invariants, drive, make_testnet, run_to_settlement

pytestmark = pytest.mark.timeout(120)


def test_a_crashed_node_does_not_stop_its_subnet():
    """alpha-node-3 neither proposes, votes nor fetches: t = 3 of the other 4 - 1 nodes still
    finalize every height, and the next-ranked maker takes the crashed node's turns."""
    with make_testnet(hooks={"alpha-node-3": NodeHooks(offline=True)}) as net:
        traffic = drive(net, rounds=2, transfers=2)
        run_to_settlement(net, traffic)
        check_invariants(net, traffic)
        assert net.subnets[ALPHA].height >= 3
        # the heights whose designated maker is the crashed node were made by the next rank
        assert net.subnets[ALPHA].fallback_heights > 0
        assert net.subnets[ALPHA].refusals == {}


def test_restart_from_the_block_log_continues_the_chain(tmp_path):
    genesis_time = time.time_ns()
    with make_testnet(block_log_dir=tmp_path, genesis_time=genesis_time) as net:
        traffic = drive(net, rounds=2, transfers=2)
        run_to_settlement(net, traffic)
        before = {s: (net.subnets[s].height, net.subnets[s].recording.hashes[-1]) for s in (ALPHA, BETA)}
    with make_testnet(block_log_dir=tmp_path, genesis_time=genesis_time) as again:
        for subnet in (ALPHA, BETA):
            sub = again.subnets[subnet]
            assert (sub.height, sub.recording.hashes[-1]) == before[subnet]
            assert sub.latest_certification().height == sub.height
        more = drive(again, rounds=2, transfers=1)
        run_to_settlement(again, more)
        for subnet in (ALPHA, BETA):
            assert again.subnets[subnet].height > before[subnet][0]


class _Tampering:
    """An execution environment that changes one node's state behind its back."""

    def __init__(self, inner):
        self.inner = inner

    def execute_round(self, state, randomness, limits):
        state = self.inner.execute_round(state, randomness, limits)
        state.metadata.count("critical_errors")
        return state

    def run_query(self, *args, **kwargs):
        return self.inner.run_query(*args, **kwargs)


def test_nodes_that_disagree_on_a_hash_stop_the_subnet_loudly():
    with make_testnet() as net:
        node = net.subnets[ALPHA].nodes["alpha-node-4"]
        node.environment = _Tampering(node.environment)
        with pytest.raises(DivergenceError, match="alpha-node-4"):
            net.subnets[ALPHA].step()
