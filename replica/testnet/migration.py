"""Moving a canister to another subnet of a running testnet: the IC's sequence (shell).

``migrate_canister(agent, publish, canister, destination)`` runs, through the ingress API
(every answer certified and verified by the agent) and the registry:

1. ``stop_canister`` on the source subnet; wait until it is stopped (its open calls answered);
2. registry version v+1: a migration trace ``[source, destination]`` for the canister — both
   subnets accept messages from it while it moves; wait until both execute batches at v+1;
3. ``export_canister`` on the source: the whole canister as a snapshot, with its SHA-256;
4. registry version v+2: the routing table maps the canister to ``destination``; wait until
   both subnets run at v+2. From then on the source rejects requests for it as
   ``CanisterMigrating`` and their senders reroute them to the destination; responses follow
   the routing table; users' calls go to the destination;
5. ``import_canister`` on the destination (the bytes must hash to the exported hash), then
   ``start_canister`` there: the canister answers on its new subnet, same id, same state;
6. ``delete_canister`` of the stopped copy on the source;
7. once every message that was in the streams between the two subnets when the routing
   switched is acknowledged (certified headers: ``begin`` has passed the ``end`` read after
   the switch, both ways), registry version v+3 drops the trace.

Callers see no lost call: while the canister is stopped or in transit their calls are
rejected (``CANISTER_ERROR`` "stopped", ``SYS_TRANSIENT``, ``DESTINATION_INVALID`` before the
import) or rerouted, each answered exactly once.

``publish(change)`` applies ``change(registry) -> registry`` to the testnet's registry and
returns the result: ``TestnetLayout``'s registry file for a live testnet
(``update_registry_file``), the shared holder for an in-process one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from consensus_stub.registry import Registry
from replica.client.agent import Agent
from replica.client.agent_errors import AgentError
from replica.errors import ReplicaError
from replica.progress import Progress
from state_manager.codec import decode_header_leaf
from state_manager.messages import MANAGEMENT_CANISTER_ID
from state_manager.routing_table import CanisterIdRange
from state_manager.streams import StreamHeader

__all__ = ["MigrationError", "MigrationReport", "RegistryPublisher", "migrate_canister"]

RegistryPublisher = Callable[[Callable[[Registry], Registry]], Registry]


class MigrationError(ReplicaError, RuntimeError):
    """A migration step failed or did not finish in time (the message says which)."""


@dataclass(frozen=True)
class MigrationReport:
    canister_id: int
    source: str
    destination: str
    registry_versions: tuple[int, int, int]   # trace added, routing switched, trace dropped
    rounds: int            # destination heights from the start until the canister answered there
    seconds: float         # the same, in seconds
    snapshot_bytes: int
    snapshot_hash: bytes


class _Steps:
    def __init__(self, agent: Agent, publish: RegistryPublisher, timeout_s: float, progress: Progress | None) -> None:
        self.agent, self.publish, self.timeout_s, self.progress = agent, publish, timeout_s, progress

    def note(self, text: str) -> None:
        if self.progress is not None:
            self.progress.update(text)

    def manage(self, subnet: str, method: str, arg: Any) -> Any:
        return self.agent.update_call(MANAGEMENT_CANISTER_ID, method, arg, self.timeout_s, subnet=subnet)

    def node_status(self, subnet: str) -> dict:
        return self.agent.status(self.agent.endpoint_for(MANAGEMENT_CANISTER_ID, subnet=subnet))

    def until(self, what: str, condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self.timeout_s
        while not condition():
            if time.monotonic() > deadline:
                raise MigrationError(f"{what}: not done after {self.timeout_s:.0f} s")
            time.sleep(0.05)

    def change_registry(self, what: str, change: Callable[[Registry], Registry], subnets: tuple[str, ...]) -> int:
        """Publish a new registry version and wait until every subnet in ``subnets`` runs at it."""
        registry = self.publish(change)
        self.agent.registry = registry
        version = registry.latest_version
        self.note(f"{what}: registry version {version}")
        self.until(f"{what} (registry version {version})",
                   lambda: all(self.node_status(s).get("registry_version", 0) >= version for s in subnets))
        return version

    def stream_headers(self, a: str, b: str) -> dict[tuple[str, str], StreamHeader]:
        """The certified headers of the streams ``a → b`` and ``b → a`` (absent: never used)."""
        headers = {}
        for here, there in ((a, b), (b, a)):
            path = [b"streams", there.encode(), b"header"]
            raw = self.agent.read_state(MANAGEMENT_CANISTER_ID, [path], subnet=here).lookup(path)
            headers[(here, there)] = decode_header_leaf(raw) if raw is not None else StreamHeader(0, 0, 0)
        return headers

    def acknowledged(self, a: str, b: str, ends: dict[tuple[str, str], int]) -> bool:
        """Every message of the streams between ``a`` and ``b`` below ``ends`` is acknowledged
        and gone (``begin`` has reached it): what was in flight when the routing switched."""
        headers = self.stream_headers(a, b)
        return all(headers[pair].begin >= end for pair, end in ends.items())


def migrate_canister(agent: Agent, publish: RegistryPublisher, canister_id: int, destination: str, *,
                     timeout_s: float = 120.0, progress: Progress | None = None) -> MigrationReport:
    """Move ``canister_id`` to ``destination`` (module docstring); the agent's identity must
    control it. ``MigrationError`` (or the agent's error) names the step that failed."""
    steps = _Steps(agent, publish, timeout_s, progress)
    source = agent.subnet_of(canister_id)
    if destination == source:
        raise MigrationError(f"canister {canister_id} is on {destination} already")
    if agent.registry.latest().subnet(destination) is None:
        raise MigrationError(f"subnet {destination!r} is not in the registry")
    moving = CanisterIdRange(canister_id, canister_id)
    both = (source, destination)
    started = time.monotonic()
    start_height = int(steps.node_status(destination)["finalized_height"])
    try:
        steps.note(f"stopping canister {canister_id} on {source}")
        steps.manage(source, "stop_canister", {"canister_id": canister_id})
        steps.until(f"stopping canister {canister_id}", lambda: steps.manage(
            source, "canister_status", {"canister_id": canister_id})["status"] == "stopped")
        traced = steps.change_registry(
            "migration trace", lambda r: r.with_next_version(
                canister_migrations=r.latest().canister_migrations.with_trace(moving, both)), both)
        steps.note(f"exporting canister {canister_id} from {source}")
        exported = steps.manage(source, "export_canister", {"canister_id": canister_id})
        snapshot, digest = exported["snapshot"], exported["snapshot_hash"]
        routed = steps.change_registry(
            "routing switch", lambda r: r.with_next_version(
                routing_table=r.latest().routing_table.with_assignment(moving, destination)), both)
        steps.note(f"importing canister {canister_id} on {destination} ({len(snapshot)} bytes)")
        steps.manage(destination, "import_canister", {"snapshot": snapshot, "snapshot_hash": digest})
        steps.manage(destination, "start_canister", {"canister_id": canister_id})
        answering = time.monotonic()
        rounds = int(steps.node_status(destination)["finalized_height"]) - start_height
        steps.manage(source, "delete_canister", {"canister_id": canister_id})
        # messages sent from now on follow the new routing table; those already in the streams
        # may still carry the old one, so the trace stays until they are acknowledged
        in_flight = {pair: header.end for pair, header in steps.stream_headers(source, destination).items()}
        steps.note("waiting until the messages in flight at the switch are acknowledged")
        steps.until("acknowledging the messages in flight", lambda: steps.acknowledged(source, destination, in_flight))
        dropped = steps.change_registry(
            "trace dropped", lambda r: r.with_next_version(
                canister_migrations=r.latest().canister_migrations.without(moving)), both)
    except AgentError as exc:
        raise MigrationError(f"migrating canister {canister_id} from {source} to {destination}: "
                             f"{type(exc).__name__}: {exc}") from exc
    return MigrationReport(canister_id, source, destination, (traced, routed, dropped), rounds,
                           answering - started, len(snapshot), digest)
