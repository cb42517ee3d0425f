"""Moving a canister to another subnet of a running testnet: the IC's sequence (shell).

``migrate_canister(driver, canister, destination)`` runs, through the management canister
(every answer certified and verified) and the registry — on a live testnet with
``AgentDriver(agent, publish)``, in process with ``replica.testing.Testnet.migrate``:

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

An ``AgentDriver``'s ``publish(change)`` applies ``change(registry) -> registry`` to the
testnet's registry and returns the result: ``update_registry_file`` for a live testnet's
directory.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from consensus_stub.registry import Registry
from replica.client.agent import Agent
from replica.errors import ReplicaError
from replica.progress import Progress
from state_manager.codec import decode_header_leaf
from state_manager.messages import MANAGEMENT_CANISTER_ID
from state_manager.routing_table import CanisterIdRange
from state_manager.streams import StreamHeader

__all__ = ["MigrationError", "MigrationReport", "RegistryPublisher", "MigrationDriver", "AgentDriver",
           "migrate_canister"]

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


class MigrationDriver(Protocol):
    """What a migration needs from a testnet: a live one (``AgentDriver``) or an in-process
    one (``replica.testing``)."""

    @property
    def registry(self) -> Registry: ...

    def manage(self, subnet: str, method: str, arg: Any) -> Any:
        """A certified, verified answer of the management canister executed by ``subnet``."""

    def publish(self, change: Callable[[Registry], Registry]) -> Registry:
        """Apply ``change`` to the testnet's registry; the new registry."""

    def registry_version(self, subnet: str) -> int:
        """The registry version of ``subnet``'s latest executed batch."""

    def height(self, subnet: str) -> int:
        """``subnet``'s finalized height."""

    def stream_header(self, here: str, there: str) -> StreamHeader:
        """The certified header of ``here``'s stream to ``there`` (empty if it has none)."""

    def wait(self, what: str, condition: Callable[[], bool], timeout_s: float) -> None:
        """Return once ``condition()`` holds (rounds go on meanwhile); ``MigrationError`` naming
        ``what`` if it does not within ``timeout_s``."""


class AgentDriver:
    """A live testnet through an ``Agent`` (every answer verified) and a registry publisher."""

    def __init__(self, agent: Agent, publish: RegistryPublisher, *, call_timeout_s: float = 60.0) -> None:
        self.agent, self._publish, self.call_timeout_s = agent, publish, call_timeout_s

    @property
    def registry(self) -> Registry:
        return self.agent.registry

    def manage(self, subnet: str, method: str, arg: Any) -> Any:
        return self.agent.update_call(MANAGEMENT_CANISTER_ID, method, arg, self.call_timeout_s, subnet=subnet)

    def publish(self, change: Callable[[Registry], Registry]) -> Registry:
        registry = self._publish(change)
        self.agent.registry = registry   # route users' calls by the new version at once
        return registry

    def _status(self, subnet: str) -> dict:
        return self.agent.status(self.agent.endpoint_for(MANAGEMENT_CANISTER_ID, subnet=subnet))

    def registry_version(self, subnet: str) -> int:
        return int(self._status(subnet).get("registry_version", 0))

    def height(self, subnet: str) -> int:
        return int(self._status(subnet)["finalized_height"])

    def stream_header(self, here: str, there: str) -> StreamHeader:
        path = [b"streams", there.encode(), b"header"]
        raw = self.agent.read_state(MANAGEMENT_CANISTER_ID, [path], subnet=here).lookup(path)
        return decode_header_leaf(raw) if raw is not None else StreamHeader(0, 0, 0)

    def wait(self, what: str, condition: Callable[[], bool], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                raise MigrationError(f"{what}: not done after {timeout_s:.0f} s")
            time.sleep(0.05)


def migrate_canister(driver: MigrationDriver, canister_id: int, destination: str, *, timeout_s: float = 120.0,
                     progress: Progress | None = None) -> MigrationReport:
    """Move ``canister_id`` to ``destination`` (module docstring); the driver's identity must
    control it. ``MigrationError`` (or the client's own error) names the step that failed;
    each wait may take ``timeout_s``."""

    def note(text: str) -> None:
        if progress is not None:
            progress.update(text)

    def change_registry(what: str, change: Callable[[Registry], Registry]) -> int:
        version = driver.publish(change).latest_version
        note(f"{what}: registry version {version}")
        driver.wait(f"{what} (registry version {version})",
                    lambda: all(driver.registry_version(s) >= version for s in both), timeout_s)
        return version

    def acknowledged(ends: dict[tuple[str, str], int]) -> bool:
        """Every message of the two streams below ``ends`` is acknowledged and gone."""
        return all(driver.stream_header(*pair).begin >= end for pair, end in ends.items())

    source = driver.registry.latest().routing_table.lookup(canister_id)
    if source is None:
        raise MigrationError(f"no subnet hosts canister {canister_id}")
    if destination == source:
        raise MigrationError(f"canister {canister_id} is on {destination} already")
    if driver.registry.latest().subnet(destination) is None:
        raise MigrationError(f"subnet {destination!r} is not in the registry")
    moving = CanisterIdRange(canister_id, canister_id)
    both = (source, destination)
    started = time.monotonic()
    start_height = driver.height(destination)
    try:
        note(f"stopping canister {canister_id} on {source}")
        driver.manage(source, "stop_canister", {"canister_id": canister_id})
        driver.wait(f"stopping canister {canister_id}", lambda: driver.manage(
            source, "canister_status", {"canister_id": canister_id})["status"] == "stopped", timeout_s)
        traced = change_registry("migration trace", lambda r: r.with_next_version(
            canister_migrations=r.latest().canister_migrations.with_trace(moving, both)))
        note(f"exporting canister {canister_id} from {source}")
        exported = driver.manage(source, "export_canister", {"canister_id": canister_id})
        snapshot, digest = exported["snapshot"], exported["snapshot_hash"]
        routed = change_registry("routing switch", lambda r: r.with_next_version(
            routing_table=r.latest().routing_table.with_assignment(moving, destination)))
        note(f"importing canister {canister_id} on {destination} ({len(snapshot)} bytes)")
        driver.manage(destination, "import_canister", {"snapshot": snapshot, "snapshot_hash": digest})
        driver.manage(destination, "start_canister", {"canister_id": canister_id})
        answering = time.monotonic()
        rounds = driver.height(destination) - start_height
        driver.manage(source, "delete_canister", {"canister_id": canister_id})
        # messages sent from now on follow the new routing table; those already in the streams
        # may still carry the old one, so the trace stays until they are acknowledged
        in_flight = {(a, b): driver.stream_header(a, b).end for a, b in (both, both[::-1])}
        note("waiting until the messages in flight at the switch are acknowledged")
        driver.wait("acknowledging the messages in flight", lambda: acknowledged(in_flight), timeout_s)
        dropped = change_registry("trace dropped", lambda r: r.with_next_version(
            canister_migrations=r.latest().canister_migrations.without(moving)))
    except ReplicaError as exc:
        if isinstance(exc, MigrationError):
            raise
        raise MigrationError(f"migrating canister {canister_id} from {source} to {destination}: "
                             f"{type(exc).__name__}: {exc}") from exc
    return MigrationReport(canister_id, source, destination, (traced, routed, dropped), rounds,
                           answering - started, len(snapshot), digest)
