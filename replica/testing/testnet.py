"""``Testnet``: a fresh multi-subnet network for app tests, with the calls of a live testnet.

    with Testnet(subnets=2, nodes=1) as net:              # deterministic, in-process (default)
        a = net.install(Greeter, subnet=net.subnets[0])
        b = net.install(Greeter, subnet=net.subnets[1])
        assert net.update_call(a, "ask", b) == "hello, friend"   # certified, verified reply

Two modes with one set of methods:

* ``mode="deterministic"`` (``DeterministicNetwork``): one process, no sockets or threads,
  driven only by ``tick()``; time moves only by ``set_time`` / ``advance_time``. The same
  ``seed``, limits and calls give the same state hashes in every run and process.
* ``mode="live"`` (``LiveNetwork``): ``replica testnet up`` in a directory — real processes,
  rounds on a timer, XNet over gRPC with TLS, calls through the ingress HTTP API.
  ``Testnet.connect(DIR)`` attaches to a testnet already running there, and
  ``Testnet.fork(DIR, height)`` starts a new one from a stopped testnet's recorded state.

Every update call's answer counts only once a certificate of its ``/request_status`` verifies
under the subnet key (both modes). A reject raises ``CallRejected`` (``.code``, ``.message``);
a refused submission raises the client's ``IngressRefused`` subclass. Calls take ``sender=``
(an IC identity, e.g. ``Ed25519Identity.from_seed(b"alice")`` or ``Secp256k1Identity``; default: a
fixed test identity, ``Testnet.default_sender``).

Canisters are installed through the management canister from their module's source
(``create_canister``, then ``install_code``), as ``replica canister install`` does. A canister
id is an int (what ``install`` returns); every method also takes its textual principal
(``rwlgt-iiaaa-aaaaa-aaaaa-cai``, as the command line and the status page show it), and
messages show that (``replica.ic.textual_ids``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Mapping, Sequence

from consensus_stub.genesis import SubnetSpec
from message_routing.limits import DEFAULT, Limits
from replica.client.agent import RequestStatus
from replica.client.identity import Ed25519Identity, Identity
from replica.client.management import CanisterLogRecord, canister_log_records
from replica.execution.codec import EncodingError, decode_reply
from replica.ic.textual_ids import canister_text, parse_canister
from replica.testnet.launcher import canister_range
from replica.testnet.naming import subnet_names
from state_manager.messages import MANAGEMENT_CANISTER_ID

from .canister_source import canister_module
from .clock import ManualClock
from .deterministic import DeterministicNetwork, SubnetInfo
from .errors import CallNotAnswered, CallRejected, NotInThisMode, TestingError, UnknownMessage, UnknownSubnet

__all__ = ["Testnet", "SubnetInfo", "DEFAULT_MAX_TICKS", "seed_bytes"]

#: ``await_call`` / ``update_call`` give up after this many rounds without an answer.
DEFAULT_MAX_TICKS = 100
MODES = ("deterministic", "live")


def seed_bytes(seed: int | str | bytes) -> bytes:
    """The 32-byte genesis seed of a test seed (an int, text or bytes)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, str, bytes)):
        raise TestingError(f"a seed is an int, str or bytes, not {seed!r}")
    raw = seed if isinstance(seed, bytes) else str(seed).encode()
    return hashlib.sha256(b"replica.testing seed\x00" + raw).digest()


class Testnet:
    """A test network (module docstring). Use it as a context manager, or call ``close``."""

    __test__ = False  # not a pytest test class, despite the name
    default_sender = Ed25519Identity.from_seed(b"replica.testing default sender")

    def __init__(
        self,
        subnets: int | Sequence[str] = 2,
        nodes: int = 1,
        *,
        mode: str = "deterministic",
        seed: int | str | bytes = 0,
        limits: Limits = DEFAULT,
        directory: Path | str | None = None,
        round_ms: int = 100,
        diverge: Mapping[str, int] | None = None,
    ) -> None:
        """``diverge`` (deterministic mode; fault injection): ``{node id: height}``, that node's
        state diverges at that height (``replica.node.faults``)."""
        if mode not in MODES:
            raise TestingError(f"mode is one of {', '.join(MODES)}, not {mode!r}")
        if type(nodes) is not int or nodes < 1:
            raise TestingError(f"a subnet needs at least one node, not {nodes!r}")
        names = subnet_names(subnets) if isinstance(subnets, int) else list(subnets)
        if not names or len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names):
            raise TestingError(f"subnets is a positive count or distinct non-empty names, not {subnets!r}")
        self.mode = mode
        self.seed = seed
        self._messages: dict[bytes, tuple[int, str]] = {}
        if mode == "deterministic":
            specs = [SubnetSpec(name, nodes, (canister_range(i),)) for i, name in enumerate(names)]
            self._clock = ManualClock()
            self._net: Any = DeterministicNetwork(specs, seed=seed_bytes(seed), limits=limits, clock=self._clock,
                                                  diverge=dict(diverge or {}))
        else:
            from .live import LiveNetwork

            if not isinstance(subnets, int) or limits is not DEFAULT:
                raise NotInThisMode("a live testnet names its subnets subnet-0, subnet-1, ... and uses DEFAULT limits")
            if diverge:
                raise NotInThisMode("diverge needs a deterministic testnet: a live one's nodes take the knob "
                                    "fault_diverge_at_height in their node config")
            self._net = LiveNetwork.start(subnets, nodes, seed=str(seed), directory=directory, round_ms=round_ms)
        #: The subnet ids, in the order given (``subnets[0]`` hosts canister ids 0..999, and so on).
        self.subnets: list[str] = names if mode == "deterministic" else list(self._net.topology())

    @classmethod
    def connect(cls, directory: Path | str) -> "Testnet":
        """A ``Testnet`` on the ``replica testnet`` already running in ``directory`` (live mode;
        ``close`` leaves it running)."""
        from .live import LiveNetwork

        net = cls.__new__(cls)
        net.mode = "live"
        net.seed = None
        net._messages = {}
        net._net = LiveNetwork.attach(directory)
        net.subnets = list(net._net.topology())
        return net

    @classmethod
    def fork(cls, source: Path | str, height: int | dict[str, int], directory: Path | str | None = None, *,
             nodes: int | None = None, align: bool = False) -> "Testnet":
        """A live ``Testnet`` on a new testnet that begins at the recorded state of the stopped
        testnet ``source`` at ``height`` (per subnet: ``{"subnet-1": h}``), as ``replica testnet
        fork`` makes it (``replica.testnet.fork``): same canisters, ids, code and stable state,
        its own nodes and keys; ``source`` is only read. ``align``: the subnets ``height``
        does not name fork at the moment of the first it names. ``fork_report`` says each
        subnet's height and state hash; ``close`` stops the fork."""
        from .live import LiveNetwork

        net = cls.__new__(cls)
        net.mode = "live"
        net.seed = None
        net._messages = {}
        net._net = LiveNetwork.fork(source, height, directory, nodes, align)
        net.subnets = list(net._net.topology())
        return net

    @property
    def fork_report(self):
        """What a fork started from (``replica.testnet.fork.ForkReport``), else None."""
        return getattr(self._net, "fork_report", None)

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        close = getattr(self._net, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> "Testnet":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def directory(self) -> Path | None:
        """The testnet directory (live mode), else None."""
        return getattr(self._net, "directory", None)

    # -- topology -------------------------------------------------------------------------

    def topology(self) -> dict[str, SubnetInfo]:
        """Every subnet: its nodes, canister ranges and threshold public key."""
        return self._net.topology()

    def get_subnet(self, canister_id: int | str) -> str:
        """The subnet whose canister ranges cover ``canister_id``."""
        canister_id = parse_canister(canister_id)
        subnet = self._net.subnet_of(canister_id)
        if subnet is None:
            raise UnknownSubnet(f"no subnet hosts canister {canister_text(canister_id)}")
        return subnet

    def root_key(self, subnet: str) -> bytes:
        """``subnet``'s threshold BLS public key (what certificates are verified with)."""
        info = self.topology().get(subnet)
        if info is None:
            raise UnknownSubnet(f"no subnet {subnet!r}; the subnets are {', '.join(self.subnets)}")
        return info.public_key

    def state_hash(self, subnet: str) -> bytes:
        """Deterministic mode: the full state hash at ``subnet``'s latest height (everything:
        canisters, queues, streams, ingress history). Live mode: the latest certified root."""
        return self._net.state_hash(subnet)

    # -- time and rounds ------------------------------------------------------------------

    def tick(self, n: int = 1) -> None:
        """``n`` rounds on every subnet (live mode: wait until every subnet made ``n`` more heights)."""
        if type(n) is not int or n < 0:
            raise TestingError(f"tick takes a non-negative count, not {n!r}")
        if self.mode == "live":
            self._net.wait_heights(n)
            return
        for _ in range(n):
            self._net.tick()

    def get_time(self) -> int:
        """The testnet's time in nanoseconds (live mode: the certified time of the first subnet)."""
        if self.mode == "live":
            return self._net.certified_time(self.subnets[0])
        return self._clock()

    def set_time(self, time_ns: int) -> None:
        """Deterministic mode only: the next rounds' batch time (never backwards)."""
        self._deterministic_only("set_time")
        self._clock.set(time_ns)

    def advance_time(self, delta_ns: int) -> None:
        """Deterministic mode only: move time forward by ``delta_ns`` nanoseconds. The
        subnets' state time follows at their next round: until a ``tick`` a status read after
        a jump of more than 5 minutes fails the certificate's freshness check, as it would for
        a client whose clock ran ahead of the network."""
        self._deterministic_only("advance_time")
        self._clock.advance(delta_ns)

    def certification_health(self, subnet: str) -> dict[str, str]:
        """Per node of ``subnet`` (deterministic mode): "ok", "diverged at h: ..." or
        "certification stalled since h: ..." (``replica.node.certification_health``)."""
        self._deterministic_only("certification_health")
        return {node_id: node.health.summary() for node_id, node in self._net.subnet(subnet).nodes.items()}

    def _deterministic_only(self, what: str) -> None:
        if self.mode != "deterministic":
            raise NotInThisMode(f"{what} needs a deterministic testnet: a live one runs on the wall clock")

    # -- nodes ----------------------------------------------------------------------------

    def stop_node(self, node_id: str) -> None:
        """Take a node offline: it neither proposes, votes, signs, fetches nor answers."""
        self._deterministic_only("stop_node")
        self._net.stop_node(node_id)

    def start_node(self, node_id: str) -> None:
        """Bring a stopped node back (it rejoins at the subnet's current height)."""
        self._deterministic_only("start_node")
        self._net.start_node(node_id)

    # -- canisters ------------------------------------------------------------------------

    def install(self, canister: type | str, subnet: str | None = None, arg: Any = None, mode: str = "install", *,
                canister_id: int | str | None = None, class_name: str | None = None,
                sender: Identity | None = None) -> int:
        """Install a canister class (its module's source) or source text (with ``class_name``);
        return its id. ``mode="install"`` creates a canister on ``subnet`` (default: the first)
        first; ``"upgrade"`` / ``"reinstall"`` replace the code of ``canister_id``."""
        source, name = canister_module(canister, class_name)
        canister_id = None if canister_id is None else parse_canister(canister_id)
        if mode == "install" and canister_id is None:
            subnet = subnet if subnet is not None else self.subnets[0]
            if subnet not in self.subnets:
                raise UnknownSubnet(f"no subnet {subnet!r}; the subnets are {', '.join(self.subnets)}")
            created = self.update_call(MANAGEMENT_CANISTER_ID, "create_canister", None, sender=sender, subnet=subnet)
            canister_id = created["canister_id"]
        elif canister_id is None:
            raise TestingError(f"mode {mode!r} needs canister_id= (the canister whose code to replace)")
        host = self.get_subnet(canister_id)
        request = {"canister_id": canister_id, "mode": mode, "source": source, "class_name": name, "arg": arg}
        self.update_call(MANAGEMENT_CANISTER_ID, "install_code", request, sender=sender, subnet=host)
        return canister_id

    def migrate(self, canister_id: int | str, subnet: str, *, sender: Identity | None = None, max_ticks: int = 200):
        """Move ``canister_id`` (which ``sender`` controls) to ``subnet``: same id, same state,
        no call lost (``replica.testnet.migration``); its ``MigrationReport``. Deterministic
        mode makes the rounds each step needs (at most ``max_ticks``); live mode waits for them."""
        from replica.testnet.migration import migrate_canister

        canister_id = parse_canister(canister_id)
        if subnet not in self.subnets:
            raise UnknownSubnet(f"no subnet {subnet!r}; the subnets are {', '.join(self.subnets)}")
        sender = sender or self.default_sender
        if self.mode == "deterministic":
            from .migration_driver import TickingDriver

            return migrate_canister(TickingDriver(self, self._net, sender, max_ticks), canister_id, subnet)
        return self._net.migrate(sender, canister_id, subnet)

    # -- calls ----------------------------------------------------------------------------

    def _route(self, canister_id: int, subnet: str | None) -> str:
        if canister_id == MANAGEMENT_CANISTER_ID:
            if subnet is None:
                raise TestingError("a call to the management canister names the subnet that executes it (subnet=)")
            return subnet
        return self.get_subnet(canister_id)

    def submit_call(self, canister_id: int | str, method: str, arg: Any = None, *, sender: Identity | None = None,
                    subnet: str | None = None) -> bytes:
        """Submit an update call without waiting; its message id (no round is made)."""
        canister_id = parse_canister(canister_id)
        host = self._route(canister_id, subnet)
        message_id = self._net.submit(sender or self.default_sender, canister_id, method, arg, host)
        self._messages[message_id] = (canister_id, host)
        return message_id

    def ingress_status(self, message_id: bytes) -> RequestStatus:
        """The certified, verified status of a submitted call (``status``: unknown, received,
        processing, replied, rejected, done)."""
        canister_id, host = self._message(message_id)
        return self._net.request_status(message_id, canister_id, host)

    def await_call(self, message_id: bytes, max_ticks: int = DEFAULT_MAX_TICKS) -> Any:
        """Make rounds until the call is answered (at most ``max_ticks``); the decoded reply
        from a verified certificate, or ``CallRejected``."""
        canister_id, host = self._message(message_id)
        status = self._net.await_answer(message_id, canister_id, host, max_ticks)
        return _answer(status)

    def update_call(self, canister_id: int | str, method: str, arg: Any = None, *, sender: Identity | None = None,
                    subnet: str | None = None, max_ticks: int = DEFAULT_MAX_TICKS) -> Any:
        """``submit_call`` then ``await_call``: the certified reply, or ``CallRejected``."""
        return self.await_call(self.submit_call(canister_id, method, arg, sender=sender, subnet=subnet), max_ticks)

    def query_call(self, canister_id: int | str, method: str, arg: Any = None, *, sender: Identity | None = None) -> Any:
        """A query on the latest certified state of the canister's subnet (no round is made)."""
        canister_id = parse_canister(canister_id)
        return self._net.query(sender or self.default_sender, canister_id, method, arg, self.get_subnet(canister_id))

    def dry_run(self, canister_id: int | str, method: str, arg: Any = None, *, sender: Identity | None = None):
        """Execute an update call on a copy of the canister's subnet's latest (live: latest
        certified) state and throw the copy away: a ``replica.execution.dry_run.DryRunResult``
        (status, reply or reject, instructions, the calls it would make, the state paths it
        would change). No round is made and no hash changes."""
        canister_id = parse_canister(canister_id)
        return self._net.dry_run(sender or self.default_sender, canister_id, method, arg, self.get_subnet(canister_id))

    def canister_logs(self, canister_id: int | str, *, sender: Identity | None = None,
                      max_ticks: int = DEFAULT_MAX_TICKS) -> list[CanisterLogRecord]:
        """The canister's log, oldest record first: ``fetch_canister_logs``, an update call to
        the management canister of its subnet (certified; deterministic mode makes the rounds
        it needs). ``sender`` must control the canister (default: ``default_sender``, who
        installs canisters unless told otherwise)."""
        canister_id = parse_canister(canister_id)
        answer = self.update_call(MANAGEMENT_CANISTER_ID, "fetch_canister_logs", {"canister_id": canister_id},
                                  sender=sender, subnet=self.get_subnet(canister_id), max_ticks=max_ticks)
        return canister_log_records(answer)

    def _message(self, message_id: bytes) -> tuple[int, str]:
        try:
            return self._messages[message_id]
        except KeyError:
            raise UnknownMessage(f"message {message_id.hex()} was not submitted through this testnet") from None

    # -- recordings -----------------------------------------------------------------------

    def run_log(self, checkpoint_interval: int = 10):
        """The recording a determinism audit replays (``replica.audit.run_log.RunLog``)."""
        return self._net.run_log(checkpoint_interval)

    def save_run_log(self, directory: Path | str, checkpoint_interval: int = 10) -> Path:
        """Write ``run_log()`` to ``directory`` (for ``replica audit`` / ``replica replay-one``)."""
        from replica.audit.run_log import write_run_log

        return write_run_log(self.run_log(checkpoint_interval), directory)


def _answer(status: RequestStatus) -> Any:
    if status.status == "replied":
        try:
            return decode_reply(status.reply or b"")
        except EncodingError as exc:
            raise TestingError(f"the certified reply does not decode: {exc}") from exc
    if status.status == "rejected":
        raise CallRejected(status.reject_code or "", status.reject_message or "")
    raise CallNotAnswered(f"message {status.message_id.hex()} is {status.status}")
