"""``StatusReader`` (``replica testnet status``): its numbers equal the certified state.

The view is read over HTTP with verified read_state answers while the ticker is paused, then
compared with each subnet's state at its certified height: every stream's header, backlog,
the reverse stream's signals and reject signals by reason, and the encoded bytes of its
messages. A call to a canister that does not exist leaves a reject signal behind, counted
by reason in ``/metrics`` too.
"""

from __future__ import annotations

import pytest

from replica.client.agent_errors import CallRejected
from replica.observe.stream_status import StatusReader, format_view
from state_manager.codec import encode_message_leaf
from tests.integration.http_testnet import ALPHA, BETA, PINGER, agent_for, canister, running_http_testnet
from tests.observe.test_metrics import scrape

pytestmark = pytest.mark.timeout(120)


def test_status_numbers_equal_certified_state():
    with running_http_testnet() as net:
        agent = agent_for(net)
        assert agent.update_call(canister(ALPHA, PINGER), "ping",
                                 {"target": canister(BETA, PINGER), "rounds": 1})["pongs_received"] == 1
        with pytest.raises(CallRejected):   # beta has no canister 1500: a CANISTER_NOT_FOUND reject signal
            agent.update_call(canister(ALPHA, PINGER), "ping", {"target": 1500, "rounds": 1})
        with StatusReader(net.current_registry, net.http_endpoints) as reader:
            running = reader.view(interval_s=0.3)
            assert all(s.rounds_per_s is not None and s.rounds_per_s > 0 for s in running.subnets)
            with net.ticker.paused():
                view = reader.view()
                states = {}
                for subnet_id, sub in net.subnets.items():
                    node = next(iter(sub.nodes.values()))
                    trees, certification = node.state_manager.latest_certified()
                    assert trees.height == node.state.metadata.batch_number   # paused between rounds
                    states[subnet_id] = node.state
                for s in view.subnets:
                    assert s.error is None
                    assert s.certified_height == states[s.subnet].metadata.batch_number
                    assert s.certified_time_ns == states[s.subnet].metadata.batch_time
                    assert s.nodes_up == s.nodes == 4
                expected = {}
                for source, state in states.items():
                    for destination, stream in state.streams.items():
                        if destination == source:
                            continue
                        reverse = states[destination].streams.get(source)
                        rejects = {}
                        for signal in (reverse.reject_signals if reverse is not None else ()):
                            rejects[signal.reason.name] = rejects.get(signal.reason.name, 0) + 1
                        expected[(source, destination)] = (
                            stream.begin, stream.end, reverse.signals_end if reverse is not None else 0,
                            stream.end - stream.begin, sum(len(encode_message_leaf(m)) for m in stream.messages),
                            rejects)
                got = {(st.source, st.destination): (st.begin, st.end, st.signals_end, st.backlog, st.bytes,
                                                     st.reject_signals) for st in view.streams}
                assert got == expected and set(got) == {(ALPHA, BETA), (BETA, ALPHA)}
                assert all(st.oldest_unacknowledged_rounds is not None for st in view.streams)
                text = "\n".join(format_view(view))
                assert "alpha -> beta" in text and "beta -> alpha" in text
            # the reject signal beta sent for alpha's call to 1500, counted by reason on every beta node
            for address in net.http_endpoints[BETA].values():
                samples = scrape(address)
                assert samples[("replica_reject_signals_total",
                                (("reason", "CANISTER_NOT_FOUND"), ("remote", ALPHA)))] == 1
