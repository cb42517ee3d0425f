"""Shared pieces of the agreement tests: a dealt subnet with node keys, and a synchronous driver."""

from __future__ import annotations

import datetime
from collections import deque
from functools import lru_cache

from consensus_stub.agreement.messages import decode_message, encode_message
from consensus_stub.agreement.protocol import AgreementConfig, AgreementNode, Broadcast, Finalized, Persist, Send
from consensus_stub.agreement.signing import NodeKeyVerifier, node_key_signer
from consensus_stub.agreement.simulation import SIM_START_NS, stub_propose, stub_validate
from consensus_stub.genesis import SubnetSpec, genesis_registry

NOT_BEFORE = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
T0 = SIM_START_NS
SEC = 10**9


def dealt(nodes: int = 4):
    """``(registry, secrets, subnet record, signers, verifier)`` of subnet ``alpha`` with ``nodes`` nodes
    (dealt once per size: node keys are fresh randomness)."""
    return _dealt(nodes)


@lru_cache(maxsize=None)
def _dealt(nodes: int):
    registry, secrets = genesis_registry([SubnetSpec("alpha", nodes, ((0, 999),))],
                                         b"agreement-test-seed-of-32-bytes!", not_before=NOT_BEFORE)
    subnet = registry.subnet("alpha", 1)
    signers = {n: node_key_signer(secrets[n].identity) for n in subnet.node_ids}
    return registry, secrets, subnet, signers, NodeKeyVerifier.for_subnet(registry.record(1), "alpha")


def make_node(node_id: str, nodes: int = 4, *, now: int = T0, validate=stub_validate, propose=stub_propose,
              config: dict | None = None, **restore) -> AgreementNode:
    _, _, subnet, signers, verifier = dealt(nodes)
    return AgreementNode(AgreementConfig(subnet, node_id, **(config or {})), propose=propose, validate=validate,
                         sign=signers[node_id], verifier=verifier, now=now, **restore)


class Lockstep:
    """Deliver every output at once, in order (no delays, nothing lost), through the codec;
    ``hold`` messages to some nodes back to build a schedule by hand."""

    def __init__(self, nodes: dict[str, AgreementNode]) -> None:
        self.nodes = nodes
        self.queue: deque = deque()
        self.finalized: dict[str, list[Finalized]] = {n: [] for n in nodes}
        self.persisted: dict[str, list] = {n: [] for n in nodes}
        self.outputs: dict[str, list] = {n: [] for n in nodes}
        self.down: set[str] = set()

    def apply(self, node_id: str, outputs: list) -> None:
        self.outputs[node_id] += outputs
        for output in outputs:
            if isinstance(output, Persist):
                self.persisted[node_id].append(output.message)
            elif isinstance(output, Send):
                self.queue.append((node_id, output.to, encode_message(output.message)))
            elif isinstance(output, Broadcast):
                data = encode_message(output.message)
                self.queue.extend((node_id, peer, data) for peer in self.nodes if peer != node_id)
            elif isinstance(output, Finalized):
                self.finalized[node_id].append(output)

    def start(self, now: int) -> None:
        for node_id, node in self.nodes.items():
            if node_id not in self.down:
                self.apply(node_id, node.start(now))

    def timers(self, now: int) -> None:
        for node_id, node in self.nodes.items():
            if node_id not in self.down:
                self.apply(node_id, node.on_timer(now))

    def flush(self, now: int) -> None:
        while self.queue:
            sender, receiver, data = self.queue.popleft()
            if receiver in self.down or sender in self.down:
                continue
            self.apply(receiver, self.nodes[receiver].on_message(decode_message(data), now))

    def heights(self) -> dict[str, int]:
        return {n: len(f) for n, f in self.finalized.items()}
