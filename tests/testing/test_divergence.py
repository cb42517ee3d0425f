"""A node's state diverges (the fault knob ``diverge``, not a canister): it is reported, and it
recovers from the certified majority; diverged on too many nodes, certification stalls and
says why (docs/architecture.md, *Guarantees, and where each is tested*)."""

from __future__ import annotations

import logging

import pytest

from replica.ic.textual_ids import canister_text
from replica.inprocess.subnet import CertificationStalled
from replica.testing import NotInThisMode, Testnet, TestingError, UnknownNode

from .apps import Greeter

HEIGHT = 10   # the knob's height: above the install's heights


def _subnet(net: Testnet):
    return net._net.subnet(net.subnets[0])


def _metric(node, name: str) -> float:
    value = node.metrics.registry.get_sample_value(name)
    return 0.0 if value is None else value


def _call_executed_at(net: Testnet, canister: int, height: int) -> bytes:
    """Submit a call that the block of ``height`` carries."""
    subnet = _subnet(net)
    while subnet.height < height - 1:
        net.tick()
    message_id = net.submit_call(canister, "greet", "at the knob")
    net.tick()
    assert subnet.height == height
    return message_id


def test_one_diverged_node_is_reported_and_recovers_while_the_subnet_certifies(caplog):
    diverged = "subnet-0-node-3"
    with Testnet(1, 4, diverge={diverged: HEIGHT}) as net:
        canister = net.install(Greeter)
        with caplog.at_level(logging.WARNING, logger="replica.node.certification_health"):
            message_id = _call_executed_at(net, canister, HEIGHT)
            assert net.await_call(message_id) == "hello, at the knob"   # certified by the other three
        subnet = _subnet(net)
        node = subnet.nodes[diverged]
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert len(errors) == 1, errors
        error = errors[0]
        certified = subnet.latest_certification()
        assert f"{diverged}: state diverged at height {HEIGHT}: own root " in error
        assert f"certified {certified.root.hex()[:8]}…" in error
        assert (f"root {certified.root.hex()[:8]}…: subnet-0-node-1,subnet-0-node-2,subnet-0-node-4; root "
                in error) and error.count(diverged) >= 2   # it signed the other root
        assert f"ingress {message_id.hex()} to canister {canister_text(canister)} method greet" in error
        assert any("recovered from the divergence" in r.getMessage() for r in caplog.records)
        assert _metric(node, "replica_state_divergences_total") == 1
        assert _metric(node, "replica_state_recoveries_total") == 1
        assert _metric(node, "replica_diverged_height") == 0
        health = node.health.as_json()
        assert health["state"] == "ok" and health["last_recovery"]["diverged_at"] == HEIGHT
        assert net.certification_health(net.subnets[0]) == {n: "ok" for n in subnet.nodes}
        # it signs again, the majority's root, and the subnet goes on certifying
        assert net.update_call(canister, "greet", "after") == "hello, after"
        height = subnet.height
        roots = {n.node_id: n.state_manager.latest.certified_root for n in subnet.nodes.values()}
        assert len(set(roots.values())) == 1
        assert diverged in subnet.certification.shares_at(height).signers_of(roots[diverged])
        assert net.query_call(canister, "greeted") == 2


def test_diverged_beyond_f_nodes_certification_stalls_and_says_why(caplog):
    with Testnet(1, 4, diverge={"subnet-0-node-3": HEIGHT, "subnet-0-node-4": HEIGHT}) as net:
        canister = net.install(Greeter)
        with caplog.at_level(logging.ERROR, logger="replica.node.certification_health"):
            message_id = _call_executed_at(net, canister, HEIGHT)
            with pytest.raises(CertificationStalled) as stalled:
                net.await_call(message_id)
        text = str(stalled.value)
        assert text.startswith(f"certification stalled since {HEIGHT}: shares disagree (root ")
        assert "subnet-0-node-1,subnet-0-node-2; root " in text
        assert text.count("; root ") == 2   # three roots: the two healthy nodes', and one each
        stall = stalled.value.stall
        assert stall.height == HEIGHT and len(stall.shares.roots) == 3
        health = net.certification_health(net.subnets[0])
        assert set(health.values()) == {text}
        node = _subnet(net).nodes["subnet-0-node-1"]
        assert _metric(node, "replica_certification_stalled_height") == HEIGHT
        assert node.metrics.registry.get_sample_value(
            "replica_certification_stalls_total", {"reason": "shares_disagree"}) == 1
        assert any(f"ingress {message_id.hex()}" in r.getMessage() for r in caplog.records)
        # no node recovers: there is no certified majority to recover from
        assert all(n.health.divergence is None for n in _subnet(net).nodes.values())


def test_the_knob_refuses_unknown_nodes_bad_heights_and_the_live_mode():
    with pytest.raises(UnknownNode, match="subnet-0-node-9"):
        Testnet(1, 4, diverge={"subnet-0-node-9": 3})
    with pytest.raises(TestingError, match="at least 1"):
        Testnet(1, 4, diverge={"subnet-0-node-1": 0})
    with pytest.raises(NotInThisMode, match="fault_diverge_at_height"):
        Testnet(1, 4, mode="live", diverge={"subnet-0-node-1": 3})
