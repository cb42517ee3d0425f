"""The ingress HTTP APIs of an in-process subnet's nodes (thin shell).

``node_backend(subnet, node_id)`` is node ``node_id``'s own backend (``Node.backend``: queries
on its latest certified state, its certified tree and status) with the in-process subnet's
submission — ``Subnet.submit_ingress``, the stand-in for gossip — and the subnet's lock.
``SubnetHttpApis`` starts one server per node and stops them.
"""

from __future__ import annotations

import time
from typing import Callable, Mapping

from replica.client.refusals import DelegationUnavailable, NodeUnavailable
from replica.ic.certificate import CertificateDelegation
from state_manager.labeled_trie import LabeledTrie
from replica.node.delegation import covering, delegation_of
from replica.node.http_api import HttpApiServer, NodeBackend
from replica.client.subnet_ids import subnet_principal_of

from .subnet import Subnet, SubnetError

__all__ = ["node_backend", "in_process_delegation", "SubnetHttpApis"]

Delegation = Callable[[LabeledTrie], "CertificateDelegation | None"]


def node_backend(subnet: Subnet, node_id: str, clock: Callable[[], int] = time.time_ns,
                 delegation: Delegation = lambda certified: None, operators: frozenset[bytes] = frozenset()) -> NodeBackend:
    """The ``NodeBackend`` of node ``node_id`` of ``subnet`` (module docstring)."""

    def submit(ingress) -> None:
        try:
            subnet.submit_ingress(ingress)
        except SubnetError as exc:
            raise NodeUnavailable(str(exc)) from exc

    return subnet.nodes[node_id].backend(submit, subnet.locked, clock, delegation, operators)


def in_process_delegation(root: Subnet, subnet: Subnet) -> Delegation:
    """The root subnet's delegation to ``subnet`` when both run in this process: made afresh
    from the root subnet's latest certified state (``replica.node.delegation``)."""
    if root is subnet:
        return lambda certified: None
    principal = subnet_principal_of(root.registry.get().latest(), subnet.subnet_id)

    def delegation(certified: LabeledTrie) -> CertificateDelegation:
        latest = root.locked(root.nodes[next(iter(root.nodes))].certified_tree)
        if latest is None:
            raise DelegationUnavailable(f"the root subnet {root.subnet_id} has no certified state yet")
        return covering(delegation_of(*latest, principal), certified)
    return delegation


class SubnetHttpApis:
    """One ``HttpApiServer`` per node of ``subnet``; ``wrap`` may replace a node's backend
    (tests: a node that tampers with its answers)."""

    def __init__(self, subnet: Subnet, *, workers: int = 2,
                 wrap: Mapping[str, Callable[[NodeBackend], NodeBackend]] | None = None,
                 delegation: Delegation = lambda certified: None, operators: frozenset[bytes] = frozenset()) -> None:
        self.subnet = subnet
        wrap = dict(wrap or {})
        self.servers = {
            node_id: HttpApiServer(wrap.get(node_id, lambda b: b)(node_backend(subnet, node_id, delegation=delegation, operators=operators)),
                                   workers=workers)
            for node_id in subnet.nodes
        }

    def start(self) -> dict[str, str]:
        """Bind every node's API on 127.0.0.1; ``{node id: "127.0.0.1:port"}``."""
        try:
            return {node_id: server.start() for node_id, server in self.servers.items()}
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop()
