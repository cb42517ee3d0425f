"""A node's addresses outlive its restarts (``replica.node.ports``).

Real ``replica node run`` processes: a node SIGKILLed while peers, a client and its own
servers hold connections comes back on exactly the ports it had (XNet, agreement, ingress
HTTP), at once, and answers there; a node whose old port another process took meanwhile binds
a new one and says so in ``endpoints.json`` and ``ports.json``. And ``bind_again`` /
``read_ports`` on their own."""

from __future__ import annotations

import json
import logging
import socket

import httpx
import pytest

from replica.ic.http_interface import decode_status
from replica.node.ports import bind_again, read_ports, write_ports
from tests.integration.node_processes import NodeProcesses

pytestmark = pytest.mark.timeout(240)


def test_bind_again_asks_for_the_old_port_and_takes_a_new_one_only_if_it_is_taken(caplog):
    asked = []

    def bind(port: int) -> int:
        asked.append(port)
        if port == 0:
            return 50_001
        if port == 40_000:
            raise OSError("address already in use")
        return port

    assert bind_again("http", 40_001, bind) == 40_001 and asked == [40_001]
    assert bind_again("http", None, bind) == 50_001 and asked[-1] == 0
    with caplog.at_level(logging.WARNING, logger="replica.node.ports"):
        assert bind_again("xnet", 40_000, bind) == 50_001
    assert asked[-2:] == [40_000, 0] and "xnet port 40000 is taken" in caplog.text


def test_recorded_ports_round_trip_and_an_unusable_file_means_new_ports(tmp_path):
    path = tmp_path / "ports.json"
    assert read_ports(path) == {}
    write_ports(path, {"xnet": 41_000, "agreement": 41_001, "http": 41_002})
    assert read_ports(path) == {"xnet": 41_000, "agreement": 41_001, "http": 41_002}
    path.write_text(json.dumps({"xnet": 0, "agreement": "41001", "http": 70_000, "other": 5}))
    assert read_ports(path) == {}
    path.write_text("{not json")
    assert read_ports(path) == {}


def test_a_sigkilled_node_comes_back_on_its_ports_and_one_whose_port_was_taken_moves(tmp_path):
    cluster = NodeProcesses(tmp_path / "testnet", apps=False)
    node, other = "subnet-0-node-2", "subnet-0-node-3"
    try:
        cluster.start()
        cluster.wait_heights(3, timeout_s=90)
        before = json.loads(cluster.files(node).endpoints.read_text())
        with httpx.Client(trust_env=False, timeout=5.0) as client:
            # a kept-alive connection to its API, and its peers' gRPC channels to it, at the kill
            assert client.get(f"http://{before['http']}/api/v2/status").status_code == 200
            height = cluster.height(node)
            cluster.kill(node)
            cluster.start(node)
            after = json.loads(cluster.files(node).endpoints.read_text())
            assert after == before, "the restarted node bound other ports"
            assert read_ports(cluster.files(node).ports) == {k: int(v.rsplit(":", 1)[1]) for k, v in before.items()}
            cluster.wait_until(lambda: cluster.height(node) > height + 2, 60, f"{node} to finalize again")
            status = decode_status(client.get(f"http://{before['http']}/api/v2/status").content)   # the same address answers
            assert status["node_id"] == node and status["finalized_height"] > height

        moved = json.loads(cluster.files(other).endpoints.read_text())
        cluster.kill(other)
        taker = socket.socket()
        try:   # another process takes its ingress port while it is down
            taker.bind(("127.0.0.1", int(moved["http"].rsplit(":", 1)[1])))
            taker.listen()
            cluster.start(other)
            now = json.loads(cluster.files(other).endpoints.read_text())
        finally:
            taker.close()
        assert now["http"] != moved["http"] and (now["xnet"], now["agreement"]) == (moved["xnet"], moved["agreement"])
        assert read_ports(cluster.files(other).ports)["http"] == int(now["http"].rsplit(":", 1)[1])
        assert f"http port {moved['http'].rsplit(':', 1)[1]} is taken" in cluster.log(other)
        cluster.wait_until(lambda: httpx.get(f"http://{now['http']}/api/v2/status", timeout=5.0).status_code == 200,
                           30, "the moved node's API")
        cluster.wait_heights(cluster.height(node) + 2, timeout_s=60)
    finally:
        cluster.stop()
