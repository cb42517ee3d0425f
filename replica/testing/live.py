"""The live network: ``Testnet``'s methods over a running ``replica testnet`` (thin shell).

``LiveNetwork.start`` runs ``replica testnet up`` in a directory (a fresh temporary one by
default) and owns it: ``close`` runs ``replica testnet down``, which settles and writes the
run log to ``DIR/run``. ``LiveNetwork.attach(DIR)`` uses a testnet someone else started and
leaves it running. Calls go through the ingress HTTP API with one ``Agent`` per sender; the
agent verifies every certificate against the directory's registry, so a reply counts only
once its certified status verifies, exactly as for ``replica call``.

Rounds run on the launcher's timer: ``wait_heights(n)`` waits until every subnet reports
``n`` more heights; time is the wall clock (``set_time`` does not exist here).
"""

from __future__ import annotations

import io
import tempfile
import time
from pathlib import Path
from typing import Any

from replica.client.agent import Agent, RequestStatus
from replica.client.agent_errors import RequestRefused
from replica.client.identity import Ed25519Identity, Identity
from replica.client.refusals import NodeUnavailable, NotCertifiedYet
from replica.testnet.http_endpoints import agent_for_testnet
from replica.testnet.launcher import TestnetLayout
from replica.processes import lifecycle
from state_manager.messages import MANAGEMENT_CANISTER_ID

from .deterministic import SubnetInfo, subnet_infos
from .errors import CallNotAnswered, NotInThisMode, TestingError, UnknownSubnet

__all__ = ["LiveNetwork"]

#: Answers that end a wait (``done``: answered, the answer since forgotten).
_FINAL = ("replied", "rejected", "done")


class LiveNetwork:
    """A running testnet directory (module docstring)."""

    def __init__(self, directory: Path, *, owned: bool, round_s: float) -> None:
        self.directory = directory
        self.owned = owned
        self.round_s = round_s
        #: The directory was made for this testnet (the pytest plugin removes it after a passing test).
        self.temporary = False
        #: A fork's ``ForkReport`` (``LiveNetwork.fork``), else None.
        self.fork_report = None
        self._agents: dict[bytes, Agent] = {}
        self._senders: dict[bytes, Identity] = {}   # who sent each call: only they may read its status
        self._default = Ed25519Identity.from_seed(b"replica.testing live reader")
        self.registry = self._agent(self._default).registry

    @classmethod
    def start(cls, subnets: int, nodes: int, *, seed: str, directory: Path | str | None,
              round_ms: int) -> "LiveNetwork":
        path = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="replica-testnet-"))
        lifecycle.up(path, subnets=subnets, nodes=nodes, round_ms=round_ms, seed=seed, out=io.StringIO())
        try:
            network = cls(path, owned=True, round_s=round_ms / 1000)
        except BaseException:
            lifecycle.down(path, out=io.StringIO())
            raise
        network.temporary = directory is None
        return network

    @classmethod
    def fork(cls, source: Path | str, at, directory: Path | str | None, nodes: int | None = None,
             align: bool = False) -> "LiveNetwork":
        """Fork the stopped testnet ``source`` at ``at`` (``replica.testnet.fork``) into
        ``directory`` (a fresh temporary one by default) and start the fork; ``fork_report``
        says what it started from."""
        from replica.testnet.fork import fork_testnet

        path = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="replica-fork-"))
        report = fork_testnet(source, at, path, nodes=nodes, align=align)
        lifecycle.up(path, out=io.StringIO())
        try:
            network = cls(path, owned=True, round_s=float(TestnetLayout(path).read_manifest().get("tick_s", 0.5)))
        except BaseException:
            lifecycle.down(path, out=io.StringIO())
            raise
        network.temporary = directory is None
        network.fork_report = report
        return network

    @classmethod
    def attach(cls, directory: Path | str) -> "LiveNetwork":
        path = Path(directory)
        layout = TestnetLayout(path)
        if lifecycle.running_launcher(layout) is None:
            raise TestingError(f"no testnet is running in {path}; start one with `replica testnet up --dir {path}`")
        return cls(path, owned=False, round_s=float(layout.read_manifest().get("tick_s", 0.5)))

    def close(self) -> None:
        agents, self._agents = self._agents, {}
        for agent in agents.values():
            agent.close()
        if self.owned:
            self.owned = False
            lifecycle.down(self.directory, out=io.StringIO())

    def _agent(self, sender: Identity) -> Agent:
        agent = self._agents.get(sender.der_public_key)
        if agent is None:
            agent = self._agents[sender.der_public_key] = agent_for_testnet(self.directory, sender)
        return agent

    # -- topology -------------------------------------------------------------------------

    def topology(self) -> dict[str, SubnetInfo]:
        return subnet_infos(self.registry.latest())

    def subnet_of(self, canister_id: int) -> str | None:
        return self.registry.latest().routing_table.lookup(canister_id)

    def migrate(self, sender: Identity, canister_id: int, subnet: str):
        """``migrate_canister`` through ``sender``'s agent; every agent then routes by the new registry."""
        from replica.testnet.migration import AgentDriver, migrate_canister

        driver = AgentDriver.for_testnet(self._agent(sender), self.directory)
        report = migrate_canister(driver, canister_id, subnet)
        self.registry = driver.registry
        for agent in self._agents.values():
            agent.registry = self.registry
        return report

    def _rows(self) -> dict[str, lifecycle.SubnetStatus]:
        return {row.subnet: row for row in lifecycle.status(self.directory)}

    def wait_heights(self, n: int) -> None:
        """Wait until every subnet has made ``n`` more heights than now."""
        start = {s: row.height or 0 for s, row in self._rows().items()}
        deadline = time.monotonic() + 10.0 + 5 * n * self.round_s
        while True:
            rows = self._rows()
            if all((rows[s].height or 0) >= h + n for s, h in start.items()):
                return
            if time.monotonic() > deadline:
                raise CallNotAnswered(f"the subnets did not make {n} heights in time: "
                                      + ", ".join(f"{s}={r.height}" for s, r in rows.items()))
            time.sleep(min(0.05, self.round_s / 2))

    def certified_time(self, subnet_id: str) -> int:
        return self._agent(self._default).read_state(MANAGEMENT_CANISTER_ID, [[b"time"]], subnet=subnet_id).time_ns

    def state_hash(self, subnet_id: str) -> bytes:
        row = self._rows().get(subnet_id)
        if row is None:
            raise UnknownSubnet(f"no subnet {subnet_id!r}")
        if not row.certified_root:
            raise TestingError(f"subnet {subnet_id} has not reported a certified root yet")
        return bytes.fromhex(row.certified_root)

    def stop_node(self, node_id: str) -> None:
        raise NotInThisMode("a live subnet runs its nodes in one process: stop_node needs a deterministic testnet")

    start_node = stop_node

    def run_log(self, checkpoint_interval: int):
        from replica.audit.run_log import load_run_log

        run = TestnetLayout(self.directory).run
        if not run.exists():
            raise NotInThisMode(f"a live testnet writes its run log to {run} when it stops: close() it first")
        return load_run_log(run)

    # -- calls ----------------------------------------------------------------------------

    @staticmethod
    def _subnet_arg(canister_id: int, subnet_id: str) -> str | None:
        return subnet_id if canister_id == MANAGEMENT_CANISTER_ID else None

    def submit(self, sender: Identity, canister_id: int, method: str, arg: Any, subnet_id: str) -> bytes:
        message_id = self._agent(sender).submit_call(canister_id, method, arg,
                                                     subnet=self._subnet_arg(canister_id, subnet_id))
        self._senders[message_id] = sender
        return message_id

    def request_status(self, message_id: bytes, canister_id: int, subnet_id: str) -> RequestStatus:
        """Read as the call's sender: a node shows a request's status to its sender only."""
        sender = self._senders.get(message_id, self._default)
        return self._agent(sender).request_status(message_id, canister_id, subnet=self._subnet_arg(canister_id, subnet_id))

    def await_answer(self, message_id: bytes, canister_id: int, subnet_id: str, max_ticks: int) -> RequestStatus:
        """Poll the verified status until it is final; give up after about ``max_ticks`` rounds."""
        # Rounds are timer-driven and slices are pulled on their own interval: be generous.
        deadline = time.monotonic() + 10.0 + 2 * max_ticks * self.round_s
        status = None
        while True:
            try:
                status = self.request_status(message_id, canister_id, subnet_id)
                if status.status in _FINAL:
                    return status
            except RequestRefused as refusal:
                if refusal.reason not in (NotCertifiedYet.reason, NodeUnavailable.reason):   # else: ask again
                    raise
            if time.monotonic() > deadline:
                state = status.status if status is not None else "not certified yet"
                raise CallNotAnswered(f"message {message_id.hex()} is {state} after about {max_ticks} rounds")
            time.sleep(min(0.05, self.round_s / 2))

    def query(self, sender: Identity, canister_id: int, method: str, arg: Any, subnet_id: str) -> Any:
        return self._agent(sender).query_call(canister_id, method, arg)

    def dry_run(self, sender: Identity, canister_id: int, method: str, arg: Any, subnet_id: str):
        return self._agent(sender).dry_run(canister_id, method, arg)
