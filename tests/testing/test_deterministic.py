"""``Testnet`` in deterministic mode: every method, through the public API."""

from __future__ import annotations

import hashlib

import pytest

from replica.client import IngressTooLarge, UnknownCanister
from replica.ic.textual_ids import canister_text
from replica.testing import (
    CallNotAnswered, CallRejected, CanisterSourceError, Ed25519Identity, Secp256k1Identity, Testnet, TestingError,
    TimeRegression, UnknownMessage, UnknownNode, UnknownSubnet,
)
from state_manager.certification import Certification, verify_certification

from .apps import Greeter, GreeterV2, Probe

SECOND = 10**9


def test_the_issue_example_holds(testnet):
    a = testnet.install(Greeter, subnet=testnet.subnets[0])
    b = testnet.install(Greeter, subnet=testnet.subnets[1])
    assert testnet.update_call(a, "ask", b) == "hello, friend"
    mid = testnet.submit_call(a, "greet", "x")
    testnet.tick()
    assert testnet.await_call(mid) == "hello, x"
    assert testnet.query_call(b, "greeted") == 1
    with pytest.raises(CallRejected) as rejected:
        testnet.update_call(a, "nosuch")
    assert rejected.value.code == "CANISTER_ERROR"
    assert "nosuch" in rejected.value.message


def test_canisters_get_ids_from_their_subnets_ranges(testnet):
    topology = testnet.topology()
    assert list(topology) == testnet.subnets == ["subnet-0", "subnet-1"]
    for subnet in testnet.subnets:
        canister = testnet.install(Greeter, subnet=subnet)
        (lo, hi), = topology[subnet].canister_ranges
        assert lo <= canister <= hi
        assert testnet.get_subnet(canister) == subnet
    assert topology["subnet-0"].node_ids == ("subnet-0-node-1",)
    with pytest.raises(UnknownSubnet):
        testnet.get_subnet(10**12)
    with pytest.raises(UnknownSubnet):
        testnet.install(Greeter, subnet="nowhere")


def test_subnets_can_be_named():
    with Testnet(["gamma", "alpha", "beta"]) as net:
        assert net.subnets == ["gamma", "alpha", "beta"]
        assert net.topology()["gamma"].canister_ranges == ((0, 999),)   # ranges follow the order given
        c = net.install(Greeter, subnet="gamma")
        assert net.get_subnet(c) == "gamma" and c < 1000
        assert net.update_call(net.install(Greeter, subnet="alpha"), "ask", c) == "hello, friend"


def test_every_update_reply_comes_with_a_verified_certificate(testnet):
    a = testnet.install(Greeter)
    mid = testnet.submit_call(a, "greet", "y")
    assert testnet.ingress_status(mid).status == "unknown"   # pooled, not yet in a block
    testnet.tick()
    status = testnet.ingress_status(mid)
    assert status.status == "replied"
    certificate = status.certificate
    assert certificate.subnet_id == "subnet-0" and certificate.height >= 1
    assert certificate.time_ns == testnet.get_time()
    # The certified tree's root is signed by the subnet's threshold key from the registry.
    from state_manager.hash_tree import reconstruct

    root = reconstruct(certificate.tree)
    signature = _signature_of(testnet, certificate.height)
    verify_certification(Certification(certificate.height, root, signature), testnet.root_key("subnet-0"))
    with pytest.raises(UnknownSubnet):
        testnet.root_key("nowhere")


def _signature_of(net: Testnet, height: int) -> bytes:
    # White box: the certification the subnet's node holds for that height.
    node = net._net.subnets["subnet-0"].online_node()
    return node.state_manager.certification(height).signature


def test_rejects_carry_code_and_message_and_roll_back(testnet):
    p = testnet.install(Probe, arg=("x", 1))
    assert testnet.query_call(p, "init_arg") == ("x", 1)
    with pytest.raises(CallRejected) as rejected:
        testnet.update_call(p, "fail", "boom")
    assert rejected.value.code == "CANISTER_ERROR" and "boom" in rejected.value.message
    assert testnet.query_call(p, "touched") is False
    with pytest.raises(CallRejected) as query_rejected:
        testnet.query_call(p, "refuse")
    assert query_rejected.value.code == "CANISTER_ERROR"


def test_a_cross_subnet_reject_comes_back_as_a_reject(testnet):
    a = testnet.install(Greeter, subnet="subnet-0")
    other_subnet_empty_id = testnet.topology()["subnet-1"].canister_ranges[0][0] + 7
    with pytest.raises(CallRejected) as rejected:
        testnet.update_call(a, "ask", other_subnet_empty_id)
    assert rejected.value.code == "CANISTER_REJECT"   # Greeter rejects with the callee's reject in its text
    assert rejected.value.message.startswith("3: ")     # DESTINATION_INVALID: no such canister there


def test_a_call_to_no_canister_is_refused_at_submission(testnet):
    with pytest.raises(UnknownCanister):
        testnet.submit_call(5, "greet", "x")


def test_sender_is_the_authenticated_caller(testnet):
    p = testnet.install(Probe)
    alice = Ed25519Identity.from_seed(b"alice")
    assert testnet.update_call(p, "whoami", sender=alice) == alice.principal.raw
    assert testnet.update_call(p, "whoami") == Testnet.default_sender.principal.raw
    bob = Secp256k1Identity.from_seed(b"bob")   # the IC's other user key type
    assert testnet.update_call(p, "whoami", sender=bob) == bob.principal.raw == \
        hashlib.sha224(bob.der_public_key).digest() + b"\x02"


def test_upgrade_keeps_stable_state_and_reinstall_wipes_it(testnet):
    g = testnet.install(Greeter)
    testnet.update_call(g, "greet", "a")
    assert testnet.install(GreeterV2, mode="upgrade", canister_id=g, arg="v2") == g
    assert testnet.update_call(g, "greet", "b") == "hi, b"
    assert testnet.query_call(g, "greeted") == 2
    assert testnet.query_call(g, "upgraded_with") == "v2"
    testnet.install(Greeter, mode="reinstall", canister_id=g)
    assert testnet.query_call(g, "greeted") == 0
    with pytest.raises(TestingError):
        testnet.install(Greeter, mode="upgrade")          # which canister?
    with pytest.raises(CallRejected) as rejected:
        testnet.install(Greeter, mode="install", canister_id=g)   # it has code already
    assert rejected.value.code == "CANISTER_ERROR"


def test_install_takes_source_text(testnet):
    source = (
        "from replica.sdk import Canister, update\n"
        "class Echo(Canister):\n"
        "    VERSION = 1\n"
        "    @update\n"
        "    def echo(self, value):\n"
        "        return value\n"
    )
    e = testnet.install(source, class_name="Echo")
    assert testnet.update_call(e, "echo", [1, "two"]) == (1, "two")
    with pytest.raises(CanisterSourceError):
        testnet.install(source)                            # no class name
    with pytest.raises(CallRejected) as rejected:
        testnet.install("def broken(:\n", class_name="X")
    assert rejected.value.code == "CANISTER_ERROR" and "SyntaxError" in rejected.value.message


def test_classes_defined_in_functions_are_refused(testnet):
    from replica.sdk import Canister

    class Local(Canister):
        VERSION = 1

    with pytest.raises(CanisterSourceError):
        testnet.install(Local)
    with pytest.raises(CanisterSourceError):
        testnet.install(42)


def test_time_moves_only_when_the_test_moves_it(testnet):
    p = testnet.install(Probe)
    start = testnet.get_time()
    testnet.tick(5)
    assert testnet.get_time() == start
    assert testnet.update_call(p, "now") == start
    testnet.advance_time(7 * SECOND)
    assert testnet.update_call(p, "now") == start + 7 * SECOND
    testnet.set_time(start + 3600 * SECOND)
    assert testnet.update_call(p, "now") == start + 3600 * SECOND
    with pytest.raises(TimeRegression):
        testnet.set_time(start)
    with pytest.raises(TimeRegression):
        testnet.advance_time(-1)


def test_an_expired_call_is_refused_when_time_jumps_past_its_expiry(testnet):
    p = testnet.install(Probe)
    mid = testnet.submit_call(p, "now")
    testnet.advance_time(3600 * SECOND)   # past the 5-minute ingress TTL
    with pytest.raises(CallNotAnswered):
        testnet.await_call(mid, max_ticks=3)


def test_await_call_gives_up_after_max_ticks_and_unknown_ids_are_refused(testnet):
    a = testnet.install(Greeter, subnet="subnet-0")
    b = testnet.install(Greeter, subnet="subnet-1")
    mid = testnet.submit_call(a, "ask", b)
    with pytest.raises(CallNotAnswered):
        testnet.await_call(mid, max_ticks=1)              # a cross-subnet round trip takes 2 rounds
    assert testnet.await_call(mid, max_ticks=5) == "hello, friend"
    with pytest.raises(UnknownMessage):
        testnet.await_call(b"\x00" * 32)
    with pytest.raises(TestingError):
        testnet.tick(-1)


@pytest.mark.testnet(subnets=1, nodes=4)
def test_a_subnet_progresses_with_a_quorum_and_stalls_without(testnet):
    g = testnet.install(Greeter)
    nodes = testnet.topology()["subnet-0"].node_ids
    assert len(nodes) == 4
    testnet.stop_node(nodes[1])                             # 3 of 4 online: t = 3
    assert testnet.update_call(g, "greet", "a") == "hello, a"
    testnet.stop_node(nodes[2])                             # 2 of 4: no block is finalized
    mid = testnet.submit_call(g, "greet", "b")
    with pytest.raises(CallNotAnswered):
        testnet.await_call(mid, max_ticks=3)
    testnet.start_node(nodes[1])
    assert testnet.await_call(mid) == "hello, b"
    with pytest.raises(UnknownNode):
        testnet.stop_node("subnet-9-node-1")


def test_run_log_replays_to_the_recorded_hashes(testnet, tmp_path):
    from replica.audit.run_log import load_run_log

    a = testnet.install(Greeter, subnet="subnet-0")
    b = testnet.install(Greeter, subnet="subnet-1")
    testnet.update_call(a, "ask", b)
    log = testnet.run_log(checkpoint_interval=2)   # building it replays every subnet and checks its hashes
    assert log.subnet_ids() == ("subnet-0", "subnet-1")
    path = testnet.save_run_log(tmp_path / "run")
    assert load_run_log(path).subnet_ids() == log.subnet_ids()
    final = {s.subnet_id: s.hashes[-1][1] for s in log.subnets}
    assert final == {s: testnet.state_hash(s) for s in testnet.subnets}


def test_options_are_checked():
    with pytest.raises(TestingError):
        Testnet(mode="fast")
    with pytest.raises(TestingError):
        Testnet(nodes=0)
    with pytest.raises(TestingError):
        Testnet(["a", "a"])
    with pytest.raises(TestingError):
        Testnet(seed=1.5)
    with pytest.raises(TestingError):
        Testnet().update_call(2**64 - 1, "create_canister")   # the management canister needs subnet=


def test_deterministic_mode_opens_no_socket_and_starts_no_thread(monkeypatch):
    import socket
    import threading

    def refuse(*args, **kwargs):
        raise AssertionError("the deterministic testnet opened a socket")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    threads = threading.active_count()
    with Testnet(seed="no-io") as net:
        a = net.install(Greeter, subnet="subnet-0")
        b = net.install(Greeter, subnet="subnet-1")
        assert net.update_call(a, "ask", b) == "hello, friend"
        assert threading.active_count() == threads


def test_limits_are_the_testnets():
    import dataclasses

    from message_routing.limits import DEFAULT, MINIMAL

    with pytest.raises(IngressTooLarge):
        Testnet(limits=MINIMAL).install(Greeter)             # MINIMAL admits 512-byte envelopes: no module fits
    short_ttl = dataclasses.replace(DEFAULT, max_ingress_ttl_ns=60 * SECOND)
    with Testnet(limits=short_ttl) as net:
        a = net.install(Greeter, subnet="subnet-0")
        b = net.install(Greeter, subnet="subnet-1")
        assert net.update_call(a, "ask", b) == "hello, friend"
        mid = net.submit_call(a, "greet", "late")
        net.advance_time(61 * SECOND)                        # expired under this TTL, not under DEFAULT's 5 minutes
        with pytest.raises(CallNotAnswered):
            net.await_call(mid, max_ticks=2)


COUNTER_SOURCE = '''
from replica.sdk import Canister, query, update


class Counter(Canister):
    @query
    def count_to(self, n):
        total = 0
        for i in range(n):
            total += i % 7
        return total

    @update
    def count_to_in_update(self, n):
        return self.count_to(n)
'''


def test_queries_run_under_the_testnets_query_limit():
    """A query is bounded by the testnet's ``max_instructions_per_query``, not by the default:
    the same work passes as an update (larger limit) and traps as a query."""
    import dataclasses

    from message_routing.limits import DEFAULT

    tight = dataclasses.replace(DEFAULT, max_instructions_per_query=20_000)
    with Testnet(limits=tight) as net:
        cid = net.install(COUNTER_SOURCE, class_name="Counter")
        assert net.query_call(cid, "count_to", 10) == sum(i % 7 for i in range(10))
        assert net.update_call(cid, "count_to_in_update", 20_000) == sum(i % 7 for i in range(20_000))
        with pytest.raises(CallRejected) as refused:
            net.query_call(cid, "count_to", 20_000)
        assert refused.value.message == f"Canister {canister_text(cid)} exceeded the instruction limit for single message execution"
