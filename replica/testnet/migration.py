"""Moving a canister to another subnet of a running testnet: the IC's sequence (shell).

``migrate_canister(driver, canister, destination)`` runs, through the management canister
(every answer certified and verified) and the registry — on a live testnet with
``AgentDriver(agent, publish)``, in process with ``replica.testing.Testnet.migrate``:

1. ``stop_canister`` on the source subnet; wait until it is stopped (its open calls answered);
2. registry version v+1: a migration trace ``[source, destination]`` for the canister — both
   subnets accept messages from it while it moves; wait until every node of both executes
   batches at v+1 (``ADOPTION_ROUNDS``, below);
3. ``export_canister`` on the source: the whole canister as a snapshot, with its SHA-256;
4. registry version v+2: the routing table maps the canister to ``destination``; wait until
   every node of both subnets runs v+2. From then on the source rejects requests for it as
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

A registry version is run by a node once it executed a batch of that version. Every node
of both subnets must run a new version before the next step, and within ``ADOPTION_ROUNDS``
heights of its subnet (counted from the first look after the version was published);
otherwise the step fails with a ``MigrationError`` naming each node that does not, with
what it reported (``replica.testnet.registry_status``) — never a silent wait.

An ``AgentDriver``'s ``publish(change)`` applies ``change(registry) -> registry`` to the
testnet's registry and returns the result; ``AgentDriver.for_testnet(agent, directory)``
publishes into a live testnet's ``registry.bin`` and reads every node's status file.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

from consensus_stub.registry import Registry
from replica.client.agent import Agent
from replica.errors import ReplicaError
from replica.ic.textual_ids import canister_text
from replica.progress import Progress
from state_manager.codec import decode_header_leaf
from state_manager.messages import MANAGEMENT_CANISTER_ID
from state_manager.routing_table import CanisterIdRange
from state_manager.streams import StreamHeader

from .launcher import TestnetLayout, update_registry_file
from .registry_status import NodeRegistryStatus, node_registry_statuses

__all__ = ["MigrationError", "MigrationReport", "RegistryPublisher", "MigrationDriver", "AgentDriver",
           "ADOPTION_ROUNDS", "migrate_canister"]

RegistryPublisher = Callable[[Callable[[Registry], Registry]], Registry]

#: Heights a subnet may make after a registry version is published until all its nodes run
#: it (a maker reads the new version within a tick, a round finalizes its block, and every
#: node executes that block: a few rounds; a node lagging further is named in the error).
ADOPTION_ROUNDS = 20


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

    def node_registry_statuses(self, subnets: tuple[str, ...]) -> list[NodeRegistryStatus]:
        """Each node of ``subnets``: its height, the registry version of its latest executed
        batch, and whatever it reports about reading the registry."""

    def height(self, subnet: str) -> int:
        """``subnet``'s finalized height."""

    def stream_header(self, here: str, there: str) -> StreamHeader:
        """The certified header of ``here``'s stream to ``there`` (empty if it has none)."""

    def wait(self, what: str, condition: Callable[[], bool], timeout_s: float) -> None:
        """Return once ``condition()`` holds (rounds go on meanwhile); ``MigrationError`` naming
        ``what`` if it does not within ``timeout_s``."""


class AgentDriver:
    """A live testnet through an ``Agent`` (every answer verified) and a registry publisher."""

    def __init__(self, agent: Agent, publish: RegistryPublisher, *, call_timeout_s: float = 60.0,
                 statuses: Callable[[tuple[str, ...]], list[NodeRegistryStatus]] | None = None) -> None:
        self.agent, self._publish, self.call_timeout_s = agent, publish, call_timeout_s
        self._statuses = statuses

    @classmethod
    def for_testnet(cls, agent: Agent, directory: Path, *, call_timeout_s: float = 60.0) -> "AgentDriver":
        """The live testnet in ``directory``: new versions go into its ``registry.bin``, and
        every node's status file says which version it runs."""
        layout = TestnetLayout(directory)
        return cls(agent, lambda change: update_registry_file(layout, change), call_timeout_s=call_timeout_s,
                   statuses=lambda subnets: node_registry_statuses(layout, subnets))

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

    def node_registry_statuses(self, subnets: tuple[str, ...]) -> list[NodeRegistryStatus]:
        if self._statuses is not None:
            return self._statuses(subnets)
        statuses = []   # without status files: the one node per subnet this agent asks
        for subnet in subnets:
            status = self._status(subnet)
            statuses.append(NodeRegistryStatus(str(status.get("node_id", subnet)), subnet,
                                               int(status["finalized_height"]), int(status.get("registry_version", 0))))
        return statuses

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


class _Adoption:
    """Waiting until every node of ``subnets`` runs registry ``version`` (module docstring)."""

    def __init__(self, driver: MigrationDriver, subnets: tuple[str, ...], version: int, label: str) -> None:
        self.driver, self.subnets, self.version, self.label = driver, subnets, version, label
        self.first: dict[str, int] = {}       # each subnet's height at the first look
        self.behind: list[NodeRegistryStatus] = []
        self.late = False

    def done(self) -> bool:
        """Whether every node runs the version; ``MigrationError`` once one is too late."""
        nodes = self.driver.node_registry_statuses(self.subnets)
        heights = {s: max((n.height for n in nodes if n.subnet == s), default=0) for s in self.subnets}
        for subnet, height in heights.items():
            self.first.setdefault(subnet, height)
        self.behind = [n for n in nodes if n.registry_version < self.version]
        late = [n for n in self.behind if heights[n.subnet] - self.first[n.subnet] > ADOPTION_ROUNDS]
        if late:
            self.late = True
            raise MigrationError(f"{self.label}: not run within {ADOPTION_ROUNDS} rounds by {self._describe(late)}")
        return not self.behind

    def failure(self, exc: MigrationError) -> MigrationError:
        """``exc`` (a wait that ended without every node running the version), naming who lags."""
        if self.late or not self.behind:
            return exc
        return MigrationError(f"{exc}; not run by {self._describe(self.behind)}")

    def _describe(self, nodes: list[NodeRegistryStatus]) -> str:
        return "; ".join(f"{n.node} ({n.lag(self.version)})" for n in nodes)


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
        label = f"{what} (registry version {version})"
        note(f"{what}: registry version {version}")
        adoption = _Adoption(driver, both, version, label)
        try:
            driver.wait(label, adoption.done, timeout_s)
        except MigrationError as exc:
            raise adoption.failure(exc) from None
        return version

    def acknowledged(ends: dict[tuple[str, str], int]) -> bool:
        """Every message of the two streams below ``ends`` is acknowledged and gone."""
        return all(driver.stream_header(*pair).begin >= end for pair, end in ends.items())

    shown = canister_text(canister_id)   # as people read it; canister_id stays the u64
    source = driver.registry.latest().routing_table.lookup(canister_id)
    if source is None:
        raise MigrationError(f"no subnet hosts canister {shown}")
    if destination == source:
        raise MigrationError(f"canister {shown} is on {destination} already")
    if driver.registry.latest().subnet(destination) is None:
        raise MigrationError(f"subnet {destination!r} is not in the registry")
    moving = CanisterIdRange(canister_id, canister_id)
    both = (source, destination)
    started = time.monotonic()
    start_height = driver.height(destination)
    try:
        note(f"stopping canister {shown} on {source}")
        driver.manage(source, "stop_canister", {"canister_id": canister_id})
        driver.wait(f"stopping canister {shown}", lambda: driver.manage(
            source, "canister_status", {"canister_id": canister_id})["status"] == "stopped", timeout_s)
        traced = change_registry("migration trace", lambda r: r.with_next_version(
            canister_migrations=r.latest().canister_migrations.with_trace(moving, both)))
        note(f"exporting canister {shown} from {source}")
        exported = driver.manage(source, "export_canister", {"canister_id": canister_id})
        snapshot, digest = exported["snapshot"], exported["snapshot_hash"]
        routed = change_registry("routing switch", lambda r: r.with_next_version(
            routing_table=r.latest().routing_table.with_assignment(moving, destination)))
        note(f"importing canister {shown} on {destination} ({len(snapshot)} bytes)")
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
        raise MigrationError(f"migrating canister {shown} from {source} to {destination}: "
                             f"{type(exc).__name__}: {exc}") from exc
    return MigrationReport(canister_id, source, destination, (traced, routed, dropped), rounds,
                           answering - started, len(snapshot), digest)
