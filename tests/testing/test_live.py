"""``Testnet`` in live mode (real processes, HTTP, gRPC) and ``Testnet.connect(DIR)``: the same
methods as the deterministic mode, on one testnet to keep the suite fast."""

from __future__ import annotations

import pytest

from replica.client import UnknownCanister
from replica.testing import CallRejected, Ed25519Identity, NotInThisMode, Testnet

from .apps import Greeter, GreeterV2, Probe


@pytest.mark.slow
def test_a_live_testnet_answers_the_same_calls(live_testnet):
    net = live_testnet
    assert net.mode == "live" and net.subnets == ["subnet-0", "subnet-1"]
    a = net.install(Greeter, subnet="subnet-0")
    b = net.install(Greeter, subnet="subnet-1")
    assert (net.get_subnet(a), net.get_subnet(b)) == ("subnet-0", "subnet-1")
    assert net.update_call(a, "ask", b) == "hello, friend"          # cross-subnet over gRPC
    mid = net.submit_call(a, "greet", "x")
    assert net.await_call(mid) == "hello, x"
    status = net.ingress_status(mid)                                 # verified by the agent
    assert status.status == "replied" and status.certificate.subnet_id == "subnet-0"
    assert net.query_call(b, "greeted") == 1
    with pytest.raises(CallRejected) as rejected:
        net.update_call(a, "nosuch")
    assert rejected.value.code == "CANISTER_ERROR"
    with pytest.raises(UnknownCanister):
        net.submit_call(a + 5, "greet", "x")
    alice = Ed25519Identity.from_seed(b"alice")
    p = net.install(Probe, subnet="subnet-1")
    assert net.update_call(p, "whoami", sender=alice) == alice.principal.raw
    net.install(GreeterV2, mode="upgrade", canister_id=a, arg="v2")
    assert net.update_call(a, "greet", "y") == "hi, y" and net.query_call(a, "greeted") == 2

    before = net.get_time()
    net.tick(2)
    assert net.get_time() > before                                   # the wall clock, certified
    assert net.root_key("subnet-1") == net.topology()["subnet-1"].public_key
    assert len(net.state_hash("subnet-0")) == 32
    for deterministic_only in (lambda: net.set_time(before), lambda: net.advance_time(1),
                               lambda: net.stop_node("subnet-0-node-1")):
        with pytest.raises(NotInThisMode):
            deterministic_only()

    with Testnet.connect(net.directory) as attached:                  # a second client, same testnet
        assert attached.subnets == net.subnets
        assert attached.query_call(b, "greeted") == 1
        assert attached.update_call(b, "ask", a) == "hi, friend"
    assert net.query_call(a, "greeted") == 3                          # connect's close left it running

    with pytest.raises(NotInThisMode):
        net.run_log()                                                 # written as the testnet stops
    net.close()
    assert net.run_log().subnet_ids() == ("subnet-0", "subnet-1")

