"""Small builders for hand-made states in tests."""

from __future__ import annotations

from state_manager.canister_state import CanisterState
from state_manager.messages import Ingress, Reject, RejectCode, Reply, Request, Response
from state_manager.replicated_state import ReplicatedState
from state_manager.routing_table import CanisterIdRange, CanisterMigrations, NetworkTopology, RoutingTable

A, B, C = "subnet-a", "subnet-b", "subnet-c"
#: canisters 0-99 live on A, 100-199 on B, 200-299 on C.
RANGES = {A: (0, 99), B: (100, 199), C: (200, 299)}


def topology(registry_version: int = 1, migrations=(), ranges=None) -> NetworkTopology:
    ranges = ranges or RANGES
    table = RoutingTable(tuple((CanisterIdRange(lo, hi), subnet) for subnet, (lo, hi) in ranges.items()))
    return NetworkTopology(registry_version, table, CanisterMigrations(tuple(migrations)))


def state(subnet: str = A, canisters=(), **topology_args) -> ReplicatedState:
    s = ReplicatedState(subnet, topology(**topology_args))
    for cid in canisters:
        s.add_canister(CanisterState(cid, "tests:Noop", b"\x00" * 32))
    return s


def request(sender: int, receiver: int, callback: int = 0, payload: bytes = b"", method: str = "m") -> Request:
    return Request(sender, receiver, method, payload, callback)


def reply(originator: int, respondent: int, callback: int = 0, data: bytes = b"ok") -> Response:
    return Response(originator, respondent, callback, Reply(data))


def reject(originator: int, respondent: int, callback: int, code: RejectCode, message: str) -> Response:
    return Response(originator, respondent, callback, Reject(code, message))


def ingress(receiver: int, n: int = 0, expiry: int = 10**12, payload: bytes = b"", method: str = "m") -> Ingress:
    return Ingress(b"user", receiver, method, payload, n.to_bytes(32, "big"), expiry)
