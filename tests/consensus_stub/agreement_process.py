"""One node's agreement as an OS process, for the multi-process smoke test (empty blocks).

``python -m tests.consensus_stub.agreement_process DIR NODE_ID`` reads ``DIR/registry.bin``
and ``DIR/<node>.secrets``, serves agreement on 127.0.0.1 (mutual TLS against the
registry's certificates), writes its port to ``DIR/<node>.port`` and finds its peers' ports
there. Its "disk": ``DIR/<node>.artifacts`` (the messages it ``Persist``s) and
``DIR/<node>.finalized`` (every finalized block with its proof, if any), both
length-prefixed records, a torn last record dropped on restart; ``DIR/<node>.chain`` lists
``height hash`` per finalized block for the test to compare. Killed at any instant and
started again on the same directory, it resumes from those files. It exits when
``DIR/stop`` appears.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from consensus_stub.agreement.messages import decode_message, encode_message
from consensus_stub.agreement.protocol import AgreementConfig, AgreementNode, Finalized
from consensus_stub.agreement.signing import NodeKeyVerifier, node_key_signer
from consensus_stub.agreement.simulation import stub_propose, stub_validate
from consensus_stub.block import decode_block, encode_block
from consensus_stub.genesis import decode_node_secrets
from consensus_stub.registry import decode_registry
from replica.node.agreement_runner import AgreementRunner
from replica.node.agreement_transport import AgreementClient, AgreementServer, PeerAddress
from state_manager.encoding import decode, encode

ROUND_TIMEOUT_NS = 300_000_000
REBROADCAST_NS = 600_000_000
BLOCK_INTERVAL_NS = 20_000_000
CLOCK_SKEW_NS = 1_000_000_000


def read_records(path: Path) -> list[bytes]:
    """Length-prefixed records; a torn last one (a kill mid-write) is dropped."""
    data = path.read_bytes() if path.exists() else b""
    records, offset = [], 0
    while offset + 4 <= len(data):
        size = int.from_bytes(data[offset:offset + 4], "big")
        if offset + 4 + size > len(data):
            break
        records.append(data[offset + 4: offset + 4 + size])
        offset += 4 + size
    with open(path, "r+b" if path.exists() else "wb") as file:   # cut a torn tail before appending
        file.truncate(offset)
    return records


class RecordFile:
    def __init__(self, path: Path) -> None:
        self._file = open(path, "ab")

    def append(self, record: bytes) -> None:
        self._file.write(len(record).to_bytes(4, "big") + record)   # one write per record
        self._file.flush()


def main(directory: str, node_id: str) -> None:
    root = Path(directory)
    registry = decode_registry((root / "registry.bin").read_bytes())
    secrets = decode_node_secrets((root / f"{node_id}.secrets").read_bytes())
    record = registry.record(registry.latest_version)
    subnet = record.subnet(secrets.subnet_id)
    certificates = {n.node_id: n.certificate_pem for n in record.nodes_of(subnet.subnet_id)}

    own = [decode_message(r) for r in read_records(root / f"{node_id}.artifacts")]
    finalized = []
    for raw in read_records(root / f"{node_id}.finalized"):
        block, digest, proof = decode(raw)
        finalized.append(Finalized(decode_block(block), digest, tuple((s, sig) for s, sig in proof)))
    while finalized and not finalized[-1].proof:   # a kill between a step's blocks: back to its last proof
        finalized.pop()
    artifacts, blocks = RecordFile(root / f"{node_id}.artifacts"), RecordFile(root / f"{node_id}.finalized")
    chain = open(root / f"{node_id}.chain", "w")   # rewritten from the disk on every start
    for entry in finalized:
        chain.write(f"{entry.height} {entry.block_hash.hex()}\n")
    chain.flush()

    def on_finalized(output: Finalized) -> None:
        blocks.append(encode((encode_block(output.block), output.block_hash, output.proof)))
        chain.write(f"{output.height} {output.block_hash.hex()}\n")
        chain.flush()

    config = AgreementConfig(subnet, node_id, round_timeout_ns=ROUND_TIMEOUT_NS,
                             rebroadcast_interval_ns=REBROADCAST_NS, block_interval_ns=BLOCK_INTERVAL_NS)
    node = AgreementNode(
        config, propose=stub_propose, sign=node_key_signer(secrets.identity),
        validate=lambda block, context, now: stub_validate(block, context, now + CLOCK_SKEW_NS),
        verifier=NodeKeyVerifier(certificates), now=time.time_ns(), finalized=finalized, own_artifacts=own)

    known: dict[str, PeerAddress] = {}
    last_read = [0.0]

    def peers() -> dict[str, PeerAddress]:
        """Peers' addresses from their port files, re-read at most every 0.2 s (a restarted
        peer writes a new port). Called under the runner's lock only."""
        if time.monotonic() - last_read[0] < 0.2 and len(known) == len(subnet.node_ids) - 1:
            return known
        last_read[0] = time.monotonic()
        for peer in subnet.node_ids:
            port_file = root / f"{peer}.port"
            if peer != node_id and port_file.exists():
                text = port_file.read_text().strip()
                if text:
                    known[peer] = PeerAddress(peer, f"127.0.0.1:{text}", certificates[peer])
        return known

    client = AgreementClient(secrets.identity, peers)
    runner = AgreementRunner(node, client, persist=lambda m: artifacts.append(encode_message(m)),
                             on_finalized=on_finalized)
    server = AgreementServer(secrets.identity, certificates, runner.deliver)
    port = server.start()
    temporary = root / f"{node_id}.port.tmp"
    temporary.write_text(str(port))
    os.replace(temporary, root / f"{node_id}.port")
    runner.start()
    try:
        while not (root / "stop").exists() and runner.failure is None:
            time.sleep(0.05)
    finally:
        runner.stop()
        server.stop(0)
        client.close()
    if runner.failure is not None:
        raise SystemExit(f"{node_id}: {runner.failure!r}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
