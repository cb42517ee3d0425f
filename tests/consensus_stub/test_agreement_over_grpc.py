"""Agreement between node processes over gRPC with mutual TLS (a smoke test), and the transport's refusals."""

from __future__ import annotations

import datetime
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest

from consensus_stub.agreement.messages import Status, decode_message, encode_message
from consensus_stub.agreement.protocol import AgreementConfig, AgreementNode
from consensus_stub.agreement.signing import NodeKeyVerifier, node_key_signer
from consensus_stub.agreement.simulation import stub_propose, stub_validate
from consensus_stub.genesis import SubnetSpec, encode_node_secrets, genesis_registry
from consensus_stub.node_keys import generate_node_identity
from consensus_stub.registry import encode_registry
from replica.node.agreement_runner import AgreementRunner
from replica.node.agreement_transport import DELIVER_METHOD, AgreementClient, AgreementServer, PeerAddress
from xnet.grpc.tls import tls_target_name

ROOT = Path(__file__).resolve().parents[2]
# TLS checks certificate validity against the real clock: valid from an hour ago
NOT_BEFORE = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)
NODES = [f"alpha-node-{i}" for i in range(1, 5)]


def dealt():
    return genesis_registry([SubnetSpec("alpha", 4, ((0, 999),))], b"agreement-grpc-test-seed-32bytes",
                            not_before=NOT_BEFORE)


def chain(directory: Path, node: str) -> list[str]:
    path = directory / f"{node}.chain"
    return path.read_text().splitlines() if path.exists() else []


def wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.slow
def test_four_node_processes_agree_with_one_down_and_after_a_kill(tmp_path):
    registry, secrets = dealt()
    (tmp_path / "registry.bin").write_bytes(encode_registry(registry))
    for node in NODES:
        (tmp_path / f"{node}.secrets").write_bytes(encode_node_secrets(secrets[node]))
    processes: dict[str, subprocess.Popen] = {}

    def spawn(node: str) -> None:
        (tmp_path / f"{node}.port").unlink(missing_ok=True)
        log = open(tmp_path / f"{node}.log", "ab")
        processes[node] = subprocess.Popen(
            [sys.executable, "-m", "tests.consensus_stub.agreement_process", str(tmp_path), node],
            cwd=ROOT, stdout=log, stderr=log)

    def height(node: str) -> int:
        return len(chain(tmp_path, node))

    try:
        for node in NODES[:3]:                       # node 4 is down: f = 1
            spawn(node)
        wait_for(lambda: min(height(n) for n in NODES[:3]) >= 5, 60, "three nodes to finalize 5 heights")
        spawn(NODES[3])                              # it catches up from its peers
        target = height(NODES[0]) + 3
        wait_for(lambda: min(height(n) for n in NODES) >= target, 60, "node 4 to catch up")
        victim = processes[NODES[2]]
        os.kill(victim.pid, signal.SIGKILL)          # killed at whatever instant this is
        victim.wait(timeout=10)
        spawn(NODES[2])                              # restarts from its files
        target = max(height(n) for n in NODES) + 5
        wait_for(lambda: min(height(n) for n in NODES) >= target, 60, "every node to pass the restart")
    finally:
        (tmp_path / "stop").touch()
        for process in processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
    chains = {node: chain(tmp_path, node) for node in NODES}
    shortest = min(map(len, chains.values()))
    assert shortest >= target
    assert len({tuple(c[:shortest]) for c in chains.values()}) == 1          # one chain
    assert [line.split()[0] for line in chains[NODES[0]]] == [str(h) for h in range(1, len(chains[NODES[0]]) + 1)]


def test_the_transport_refuses_unlisted_clients_and_garbage():
    registry, secrets = dealt()
    certificates = {n.node_id: n.certificate_pem for n in registry.record(1).nodes_of("alpha")}
    received = []
    server = AgreementServer(secrets[NODES[0]].identity, certificates, lambda sender, m: received.append((sender, m)))
    port = server.start()
    try:
        address = PeerAddress(NODES[0], f"127.0.0.1:{port}", certificates[NODES[0]])
        client = AgreementClient(secrets[NODES[1]].identity, lambda: {NODES[0]: address})
        status = Status(NODES[1], 0, 0)
        client.send(NODES[0], encode_message(status))
        client.send("unknown-node", b"")             # no address: skipped
        wait_for(lambda: received, 10, "the push to arrive")
        assert received == [(NODES[1], status)]      # the sender is named by its certificate
        client.close()

        def call(identity, body: bytes):
            credentials = grpc.ssl_channel_credentials(
                root_certificates=certificates[NODES[0]], private_key=identity.private_key_pem(),
                certificate_chain=identity.certificate_pem())
            with grpc.secure_channel(f"127.0.0.1:{port}", credentials, options=[
                    ("grpc.ssl_target_name_override", tls_target_name(certificates[NODES[0]]))]) as channel:
                return channel.unary_unary(DELIVER_METHOD)(body, timeout=5)

        with pytest.raises(grpc.RpcError) as garbage:
            call(secrets[NODES[1]].identity, b"\x93\x01\x63\x00")
        assert garbage.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        stranger = generate_node_identity("mallory", NOT_BEFORE)
        with pytest.raises(grpc.RpcError) as refused:
            call(stranger, encode_message(status))
        assert refused.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.PERMISSION_DENIED)
        assert len(received) == 1
    finally:
        server.stop(0)


def test_runners_drive_the_protocol_with_a_clock_and_threads():
    """Four runners wired by an in-memory transport: the timer loop, the lock and the order of
    outputs, without gRPC. A ``Status`` naming another sender than the channel's is refused."""
    registry, secrets = dealt()
    subnet = registry.subnet("alpha", 1)
    verifier = NodeKeyVerifier.for_subnet(registry.record(1), "alpha")
    runners: dict[str, AgreementRunner] = {}
    persisted: dict[str, list] = {n: [] for n in NODES}
    finalized: dict[str, list] = {n: [] for n in NODES}

    wire: queue.Queue = queue.Queue()   # sends return at once, like gRPC futures

    class Wire:
        def __init__(self, sender: str) -> None:
            self.sender = sender

        def send(self, node_id: str, data: bytes) -> None:
            wire.put((self.sender, node_id, data))

    def carry() -> None:
        while (item := wire.get()) is not None:
            sender, receiver, data = item
            runners[receiver].deliver(sender, decode_message(data))

    carrier = threading.Thread(target=carry, daemon=True)
    carrier.start()

    for node_id in NODES:
        node = AgreementNode(
            AgreementConfig(subnet, node_id, round_timeout_ns=200_000_000, block_interval_ns=5_000_000),
            propose=stub_propose, validate=lambda b, c, now: stub_validate(b, c, now + 10**9),
            sign=node_key_signer(secrets[node_id].identity), verifier=verifier, now=time.time_ns())
        runners[node_id] = AgreementRunner(node, Wire(node_id), persist=persisted[node_id].append,
                                           on_finalized=finalized[node_id].append)
    runners[NODES[0]].deliver(NODES[1], Status(NODES[2], 0, 0))
    assert runners[NODES[0]].refused_statuses == 1
    try:
        for runner in runners.values():
            runner.start()
        wait_for(lambda: min(len(f) for f in finalized.values()) >= 5, 30, "five heights")
    finally:
        for runner in runners.values():
            runner.stop()
        wire.put(None)
        carrier.join(timeout=10)
    assert all(r.failure is None for r in runners.values())
    hashes = [[f.block_hash for f in finalized[n][:5]] for n in NODES]
    assert all(h == hashes[0] for h in hashes)
    assert all(persisted[n] for n in NODES)
