"""Subnet processes serve the ingress HTTP API: each publishes ``http/<subnet>.json`` once its
nodes listen, ``agent_for_testnet`` finds them through the directory, calls (also across
subnets, and on the subnet that is not the root, whose certificates carry the delegation its
nodes fetch from the root subnet's over HTTP) come back with verified certified replies, every
node states the root subnet's key, and a stopped process withdraws its file."""

from __future__ import annotations

import io
import time

import pytest

from replica.client import identity_from_seed
from replica.client.subnet_ids import root_key_of, subnet_principal_of
from replica.ic.bls import public_key_to_der
from replica.ic.certificate import decode_certificate, verify_certificate
from replica.ic.http_interface import decode_read_state_answer
from tests.integration.http_testnet import post, read_state_envelope, subnet_url
from replica.testnet import launcher as tn
from replica.processes import supervisor as sv
from replica.testnet.http_endpoints import agent_for_testnet, read_http_endpoints

pytestmark = pytest.mark.timeout(120)

SEED = b"http-process-test-seed-32-bytes!"


def _wait_for(condition, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        time.sleep(0.05)
    return value


def test_subnet_processes_serve_verified_calls(tmp_path):
    layout = tn.create_testnet(tmp_path / "net", 2, 1, seed=SEED, tick_s=0.05)
    layout.traffic_off.parent.mkdir(parents=True, exist_ok=True)
    layout.traffic_off.write_bytes(b"")
    supervisor = sv.Supervisor(layout, ["subnet-0", "subnet-1"], io.StringIO())
    try:
        supervisor.start_all()
        supervisor.wait_published()
        endpoints = _wait_for(lambda: len(read_http_endpoints(layout.root)) == 2 and read_http_endpoints(layout.root),
                              60)
        assert set(endpoints) == {"subnet-0", "subnet-1"}
        assert all(address.startswith("127.0.0.1:") for nodes in endpoints.values() for address in nodes.values())
        user = identity_from_seed(b"process-test-user")
        base0, base1 = tn.canister_range(0)[0], tn.canister_range(1)[0]
        with agent_for_testnet(layout.root, user) as agent:
            assert agent.update_call(base0 + tn.COUNTER, "increment", 5, timeout_s=30) >= 5
            counts = agent.update_call(base0 + tn.PINGER, "ping", {"target": base1 + tn.PINGER, "rounds": 1},
                                       timeout_s=30)
            assert counts["pongs_received"] == 1
            assert agent.query_call(base1 + tn.PINGER, "stats")["pongs_sent"] == 1
            # subnet-1's certificates verify through the root subnet's delegation (the root key only)
            assert agent.update_call(base1 + tn.COUNTER, "increment", 2, timeout_s=60) >= 2
            assert agent.verified_height("subnet-1") > 0
            record = agent.registry.latest()
            assert record.subnets[0].subnet_id == "subnet-0"
            root_key = public_key_to_der(record.subnets[0].public_key)
            assert root_key == root_key_of(record)
            for subnet, nodes in endpoints.items():
                own = subnet_principal_of(record, subnet)
                for address in nodes.values():
                    status = agent.status(address)
                    assert status["root_key"] == root_key and status["subnet_id"] == subnet
                    # a subnet read_state, anonymous, verified with the root key alone
                    answer = post(address, subnet_url(own), read_state_envelope([[b"subnet", own, b"public_key"]],
                                                                                key=None))
                    assert answer.status_code == 200, answer.text
                    certificate = decode_read_state_answer(answer.content, 1 << 24)
                    delegation = decode_certificate(certificate).delegation
                    assert (delegation is None) == (subnet == "subnet-0")
                    verified = verify_certificate(certificate, root_key=record.subnets[0].public_key, subnet_id=own)
                    assert verified.subnet_id == (None if subnet == "subnet-0" else own)
        with agent_for_testnet(layout.root, user, subnet="subnet-1") as pinned:
            assert pinned.query_call(base1 + tn.COUNTER, "get") >= 0
        with pytest.raises(tn.TestnetError):
            agent_for_testnet(layout.root, user, subnet="subnet-9")
    finally:
        supervisor.stop()
    assert read_http_endpoints(layout.root) == {}
    with pytest.raises(tn.TestnetError):
        agent_for_testnet(layout.root, identity_from_seed(b"x"))
