"""One replica node as its own OS process: ``replica node run --config FILE`` (a thin shell).

It reads the testnet directory its config names (``replica.node.testnet_dir``), runs one
``replica.node.node.Node`` over files (``FileStorage``) and drives it with a real clock over
gRPC. Start-up (restart time does not grow with the chain: at most one checkpoint interval of
blocks is re-executed):

1. ``Node.restore``: the newest checkpoint that verifies (a corrupt one is moved aside, never
   deleted; none: the subnet's genesis state), then the node's block log above it, each
   height checked against the hashes recorded the first time;
2. its agreement, restored from the retained tail of the block log, the latest finalization
   proof and the artifacts it had signed (it never signs two blocks at one height, across
   crashes), driven by an ``AgreementRunner``: ``Finalized`` outputs are executed at once
   (``Node.on_finalized``), the node's certification share goes back to the protocol, which
   gossips and aggregates shares;
3. its XNet endpoint, agreement endpoint (gRPC, mutual TLS against the registry's node
   certificates) and ingress HTTP API bind on 127.0.0.1, on the ports of its last life when
   it can have them (``replica.node.ports``), and are published (``endpoints.json``); once the
   launcher has put its XNet address into ``registry.bin`` it starts pulling slices, and the
   agreement starts: a ``Status`` to its peers brings back the finalized blocks it missed
   (``CatchUp``, verified: the hash chain and the finalization signatures).

A submission through its ingress API is admitted to its pool, then gossiped, and answered
"accepted" once one peer holds it too. A node far behind (its peers no longer keep the blocks
it needs) syncs state from a peer's checkpoint (``replica.node.state_sync``) and serves its own
the same way. So does a node whose state diverged from the root the subnet certified: it
stops signing, keeps executing, and, once its peers are past the first checkpoint height at
or above the diverged height, asks them every 2 s for a certified checkpoint at or above it
(``Node.install_synced``). Every tick it also checks whether
certification stalls (``STALL_ROUNDS`` finalized heights past an uncertified one).

Every tick (or every ``registry_poll_s``) the main thread re-reads the registry if it changed
(``replica.node.registry_file``: a failed read is logged and retried) and writes
``status.json`` (heights, streams, the registry version of the latest executed batch and the
newest version read, restore and catch-up times, ``certification``: ok, diverged or stalled
and why (``replica.node.certification_health``); plus what an ``extension`` adds: the
testnet's demo traffic and app numbers). SIGTERM/SIGINT stop it cleanly; SIGKILL at any
instant loses nothing committed (its files are written so that a crash leaves the old or the
new version, never a mix).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

from consensus_stub.agreement.messages import IngressGossip, Message, encode_message
from consensus_stub.genesis import decode_node_secrets
from replica.client import decode_signed_ingress, refusal_for
from replica.execution import ExecutionEnvironment
from replica.ic.certificate import CertificateDelegation
from replica.ic.textual_ids import canister_text
from state_manager.certification import Certification, CertificationShare, SignatureMemo
from state_manager.encoding import decode
from state_manager.messages import Reply

from .agreement_runner import AgreementRunner
from .agreement_transport import AgreementClient, AgreementServer, CheckpointFetchError, PeerAddress
from .batch_processor import canister_classes
from .delegation import DelegationFetcher
from .http_api import HttpApiServer
from .node import Node, NodeRefused, NodeTiming
from .node_store import NodeStoreError
from .ports import bind_again, read_ports, write_ports
from .process_config import NodeConfigError, NodeFiles, NodeProcessConfig
from .registry_file import RegistryFile
from .replica_node import NodeConfig
from .state_sync import StateSyncer
from .state_status import state_status
from .storage import FileStorage
from replica.client.subnet_ids import root_subnet_id, subnet_principal_of
from .testnet_dir import EXIT_REFUSED, LAUNCHER_PID_ENV, TestnetDirectory

__all__ = ["NodeProcess", "Extension", "CRASH_ENV", "run", "main"]

_log = logging.getLogger(__name__)

#: What a testnet adds to each of its node processes, called every tick: it may submit calls
#: (``NodeProcess.submit``) and returns fields for the status file.
Extension = Callable[["NodeProcess"], dict]

#: Heights the subnet finalizes past an uncertified one before this node reports a stall
#: (certification normally follows execution within a height or two).
STALL_ROUNDS = 5

#: Fault injection for tests: ``<node id>:<height>`` makes that node SIGKILL itself between
#: the temporary write and the rename of its first checkpoint at or above that height.
CRASH_ENV = "REPLICA_NODE_CRASH_BEFORE_CHECKPOINT_RENAME"


def _process_age_s() -> float | None:
    """Seconds since this process started (interpreter start-up and imports included; Linux)."""
    try:
        start_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class _PeerBook:
    """Where the subnet's other nodes listen for agreement messages (their ``endpoints.json``).
    Each file is re-read when it changed (checked at most every 0.1 s): a restarted peer's new
    port is used at once, so answers to its first ``Status`` reach it."""

    def __init__(self, directory: TestnetDirectory, peers: dict[str, bytes]) -> None:
        self._files = {n: directory.node_files(n).endpoints for n in peers}
        self._certificates = peers
        self._seen: dict[str, tuple[int, int]] = {}
        self._book: dict[str, PeerAddress] = {}
        self._checked_at = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> dict[str, PeerAddress]:
        with self._lock:
            if time.monotonic() - self._checked_at >= 0.1:
                self._checked_at = time.monotonic()
                for node_id, path in self._files.items():
                    try:
                        st = path.stat()
                        if self._seen.get(node_id) == (st.st_ino, st.st_mtime_ns):
                            continue
                        address = json.loads(path.read_text())["agreement"]
                    except (OSError, ValueError, KeyError, TypeError):
                        self._book.pop(node_id, None)   # gone (restarting): nothing to send to
                        self._seen.pop(node_id, None)
                        continue
                    self._seen[node_id] = (st.st_ino, st.st_mtime_ns)
                    self._book[node_id] = PeerAddress(node_id, address, self._certificates[node_id])
            return dict(self._book)


def _crash_hook(node_id: str) -> Optional[Callable[[Path], None]]:
    """``CRASH_ENV``'s hook for ``node_id``, if it names this node."""
    node, _, height = os.environ.get(CRASH_ENV, "").partition(":")
    if node != node_id or not height.isdigit():
        return None
    at = int(height)

    def crash(tmp: Path) -> None:
        if int(tmp.name.rsplit("-", 1)[-1]) >= at:
            _log.warning("%s: %s=%s: killing this process before renaming %s", node_id, CRASH_ENV, at, tmp)
            os.kill(os.getpid(), signal.SIGKILL)
    return crash


class NodeProcess:
    """The node process (module docstring): ``start()`` binds and starts; ``tick()`` is the
    main thread's periodic work; ``stop()`` stops everything."""

    def __init__(self, config: NodeProcessConfig, *, clock: Callable[[], int] = time.time_ns,
                 extension: Optional[Extension] = None) -> None:
        self.config = config
        self.files: NodeFiles = config.files
        self.directory = TestnetDirectory(Path(config.testnet_dir))
        self.manifest = self.directory.read_manifest()
        self._clock = clock
        self.extension = extension
        self.registry_file = RegistryFile(self.directory.registry, config.node_id)
        self.registry = self.registry_file.holder
        self._next_registry_poll = 0.0
        secrets = decode_node_secrets(self.directory.secrets(config.node_id).read_bytes())
        if secrets.subnet_id != config.subnet_id:
            raise NodeConfigError(f"{config.node_id} is a node of {secrets.subnet_id}, not {config.subnet_id}")
        listed = self.registry.get().latest().node(config.node_id)
        if listed is not None and listed.signing_key != secrets.signing_public_key:
            # its query answers would name a node id whose key does not verify them
            raise NodeConfigError(f"{config.node_id}: its secrets hold another signing key than the registry lists")
        self._identity = secrets.identity
        self.limits = self.directory.limits(self.manifest)
        self.environment = ExecutionEnvironment(canister_classes(self.manifest["canister_modules"]))
        storage = FileStorage(self.files, checkpoint_interval=config.checkpoint_interval,
                              checkpoints_kept=config.checkpoints_kept, retained_heights=config.retained_heights,
                              before_checkpoint_rename=_crash_hook(config.node_id))
        timing = NodeTiming(round_timeout_ns=int(config.round_timeout_s * 1e9),
                            block_interval_ns=int(config.block_interval_s * 1e9),
                            rebroadcast_interval_ns=int(max(1.0, 2 * config.round_timeout_s) * 1e9),
                            absent_after_ns=int(max(2.0, 3 * config.round_timeout_s) * 1e9),
                            retained_heights=config.retained_heights)
        try:
            self.node = Node.restore(
                secrets, self.registry, self.directory.genesis(config.subnet_id).read_bytes(), self.environment,
                self.limits, storage=storage, timing=timing, clock=clock, execute_at_once=True,
                knows_registry_version=self.registry_file.knows, on_share=self._share,
                diverge_at=config.fault_diverge_at_height or None,
                # one memo for the node's certification pool and state manager: the certification
                # the pool just made is not pairing-checked again when delivered
                signature_memo=SignatureMemo(),
                config=NodeConfig(refresh_interval_s=min(0.5, max(0.02, config.tick_s / 2)), fetch_timeout_s=2.0))
        except BaseException:
            storage.close()
            raise
        #: ``[height, full state hash]`` once restored, before any new block: a fork shows by it
        #: that it starts from the state its source recorded (``replica.testnet.fork``).
        self._started_at = (self.node.height, self.node.state_manager.latest.full_hash.hex())
        self.runner = AgreementRunner(self.node.boot_agreement(clock()), persist=storage.persist,
                                      on_finalized=self.node.on_finalized, on_output=self.node.on_output, clock=clock)
        self.state_sync = StateSyncer(config.node_id, config.subnet_id, retained_heights=config.retained_heights,
                                      checkpoint_interval=config.checkpoint_interval)
        #: Seconds from the process's start until it had finalized what a peer reported.
        self.caught_up_s: float | None = None
        self._was_behind = False
        self._next_sync_at = 0.0
        self._servers: list[Any] = []
        self._gossip_order: list[str] = []
        self._gossip_lock = threading.Lock()
        self._client: AgreementClient | None = None
        self._xnet_address = ""
        self._fetching = False

    @property
    def height(self) -> int:
        return self.node.height

    def _share(self, share: CertificationShare) -> None:
        """The node's certification share of a height it executed: to the protocol, after the
        outputs being carried out (``post``: it runs inside an output callback)."""
        self.runner.post(lambda agreement, now: agreement.submit_certification_share(share, now))

    # -- messages from peers ----------------------------------------------------------------

    def _deliver(self, sender: str, message: Message) -> None:
        self.state_sync.heard(sender, message)
        self.runner.deliver(sender, message)
        peer_heights = self.state_sync.peer_heights
        if self.caught_up_s is None and peer_heights:
            ahead = min(peer_heights.values())   # what every peer that spoke had
            if ahead > self.runner.node.finalized_height:
                self._was_behind = True
            elif self._was_behind:
                with self._gossip_lock:   # once, though messages arrive on several threads
                    if self.caught_up_s is not None:
                        return
                    self.caught_up_s = _process_age_s()
                _log.info("%s: caught up with its peers at height %d, %.2f s after the process started",
                          self.config.node_id, self.runner.node.finalized_height, self.caught_up_s)

    def _sync_state(self, reason: str, min_height: int) -> bool:
        """Sync state from a peer's checkpoint of ``min_height`` or above (``StateSyncer.sync``);
        main thread."""
        client = self._client
        if client is None:
            return False
        registry = self.registry.get()
        key = registry.public_key_for(self.config.subnet_id, registry.latest_version)

        def install(offer, state) -> bool:
            def locked() -> bool:
                if not self.node.install_synced(offer.height, offer.block_hash, state, offer.certification,
                                                f"{self.state_sync.asking}'s certified checkpoint"):
                    return False
                self.runner.node = self.node.agreement   # type: ignore[assignment]
                return True
            if not self.runner.locked(locked):
                return False
            self.runner.submit(lambda agreement, now: agreement.start(now))
            return True
        return self.state_sync.sync(lambda peer: client.fetch_checkpoint(peer, timeout_s=60.0), (CheckpointFetchError,),
                                    key, min_height - 1, install, reason)

    # -- the ingress API ------------------------------------------------------------------

    def _submit(self, ingress) -> None:
        """Admit to our pool, then gossip — and wait until one peer holds it too before the
        caller hears "accepted": a SIGKILL right after the answer cannot lose the call while
        at most f nodes are down."""
        def admit():
            now = self._clock()
            return refusal_for(self.node.add_ingress(ingress, now), ingress, now)
        refusal = self.runner.locked(admit)
        if refusal is not None:
            raise refusal
        self._gossip(ingress)

    def _gossip(self, ingress) -> None:
        client = self._client
        if client is None:
            return
        data = encode_message(IngressGossip((ingress,)))
        acked = None
        with self._gossip_lock:
            order = list(self._gossip_order)
        for peer in order:
            if acked is None and client.send_wait(peer, data, timeout_s=1.0):
                acked = peer
            elif acked is None:   # silent: ask it last from now on
                with self._gossip_lock:
                    self._gossip_order = [p for p in self._gossip_order if p != peer] + [peer]
            else:
                client.send(peer, data)
        if acked is None:
            _log.warning("%s: no peer took ingress %s; it waits in our pool only", self.config.node_id,
                         ingress.message_id.hex())

    # -- what an extension reads and submits ----------------------------------------------

    def read(self, reader: Callable[[Any], Any]) -> Any:
        return self.runner.locked(lambda: reader(self.node.state))

    def latest_certification(self) -> Certification | None:
        latest = self.node.state_manager.latest_certified()
        return None if latest is None else latest[1]

    def query(self, canister_id: int, method: str, arg: Any = None, caller: bytes = b"") -> Any:
        answer = self.runner.locked(lambda: self.environment.run_query(self.node.state, canister_id, method, arg,
                                                                       caller, limits=self.limits))
        if type(answer) is not Reply:
            raise RuntimeError(f"query {method} on {canister_text(canister_id)} failed: {answer}")
        return decode(answer.data) if answer.data else None

    def submit(self, envelope: bytes) -> None:
        """Decode a call envelope at the node's time (its delegations' expiry) and admit it."""
        self._submit(decode_signed_ingress(envelope, self.limits.max_ingress_bytes, now_ns=self._clock()))

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Bind every endpoint, publish them (``endpoints.json``) and start agreeing: peers
        find our agreement endpoint there, so catching up starts at once. Pulling slices
        starts in ``tick`` once the launcher has put our XNet address into the registry."""
        previous = read_ports(self.files.ports)   # the ports of its last life, asked for again
        self._xnet_address = bind_again("xnet", previous.get("xnet"), lambda p: self.node.start_server(port=p))
        record = self.registry.get().latest()
        peers = {n.node_id: n.certificate_pem for n in record.nodes_of(self.config.subnet_id)}

        def agreement_server(p: int) -> tuple[AgreementServer, int]:
            server = AgreementServer(self._identity, peers, self._deliver, port=p,
                                     serve_checkpoint=self.node.storage.offer)
            return server, server.start()
        server, port = bind_again("agreement", previous.get("agreement"), agreement_server)
        self._servers.append(server)
        operator = self.directory.operator().principal.raw
        backend = self.node.backend(self._submit, self.runner.locked, self._clock, self._start_delegation(),
                                    frozenset({operator}))

        def http_server(p: int) -> tuple[HttpApiServer, str]:
            server = HttpApiServer(backend, port=p)
            return server, server.start()
        http, http_address = bind_again("http", previous.get("http"), http_server)
        self._servers.append(http)
        write_ports(self.files.ports, {"xnet": int(self._xnet_address.rsplit(":", 1)[1]), "agreement": port,
                                       "http": int(http_address.rsplit(":", 1)[1])})
        others = {n: pem for n, pem in peers.items() if n != self.config.node_id}
        self._client = AgreementClient(self._identity, _PeerBook(self.directory, others))
        self._gossip_order = list(others)
        # published before the first Status goes out: the answers must find us
        self.directory.write_json(self.files.endpoints, {"xnet": self._xnet_address,
                                                         "agreement": f"127.0.0.1:{port}", "http": http_address})
        self.runner.start(self._client)
        _log.info("%s: xnet %s, agreement 127.0.0.1:%d, http %s", self.config.node_id, self._xnet_address, port,
                  http_address)

    def _start_delegation(self) -> Callable[[], CertificateDelegation | None]:
        """The root subnet's delegation to this subnet, asked of the root subnet's nodes over
        HTTP (``replica.node.delegation``); none on the root subnet itself."""
        record = self.registry.get().latest()
        root = root_subnet_id(record)
        if root == self.config.subnet_id:
            return lambda certified: None
        root_nodes = [n.node_id for n in record.nodes_of(root)]

        def endpoints() -> list[str]:
            found = []
            for node_id in root_nodes:
                try:
                    found.append(json.loads(self.directory.node_files(node_id).endpoints.read_text())["http"])
                except (OSError, ValueError, KeyError, TypeError):
                    continue   # not started yet, or restarting
            return found

        fetcher = DelegationFetcher(subnet_principal_of(record, self.config.subnet_id),
                                    subnet_principal_of(record, root), record.subnets[0].public_key, endpoints)
        fetcher.start()
        self._servers.append(fetcher)
        return fetcher.current

    def _start_fetching_once_published(self) -> None:
        if self._fetching or self.registry.get().latest().node(self.config.node_id).xnet_address != self._xnet_address:
            return
        self.node.start_fetching()
        self._fetching = True

    def _poll_registry(self) -> None:
        """The routine re-read of ``registry.bin``: every tick until our XNet address is
        published there, then every ``registry_poll_s``."""
        now = time.monotonic()
        if self._fetching and now < self._next_registry_poll:
            return
        self._next_registry_poll = now + self.config.registry_poll_s
        self.registry_file.poll()

    def tick(self) -> None:
        if self.runner.failure is not None:
            raise self.runner.failure
        self._poll_registry()
        if self.node.awaiting_registry is not None:   # a finalized block waits for a registry version
            self.runner.locked(self.node.execute_finalized)
        self._start_fetching_once_published()
        self.runner.locked(lambda: self.node.check_certification(STALL_ROUNDS))
        divergence = self.node.health.divergence
        if divergence is not None:   # the minority: a certified checkpoint at or above the diverged height
            interval = self.config.checkpoint_interval
            due = -(-divergence.height // interval) * interval   # peers' first checkpoint height that may do
            peers_at = max(self.state_sync.peer_heights.values(), default=0)
            reason: str | None = f"its state diverged at height {divergence.height}" if peers_at >= due else None
            min_height, retry_s = divergence.height, 2.0
        else:
            reason = self.state_sync.reason(self.runner.node.finalized_height)
            min_height, retry_s = self.height + 1, 5.0
        if reason is not None and time.monotonic() >= self._next_sync_at and not self._sync_state(reason, min_height):
            self._next_sync_at = time.monotonic() + retry_s   # no peer offered a checkpoint high enough yet
        extra = self.extension(self) if self.extension is not None else {}
        self.directory.write_json(self.files.status, {**self.status(), **extra})

    def status(self) -> dict:
        """What ``status.json`` says of the node (module docstring)."""
        status = self.read(state_status)
        certification = self.latest_certification()
        synced_from = self.state_sync.synced_from
        status.update({
            "certified_height": certification.height if certification else 0,
            "certified_root": certification.root.hex() if certification else "",
            "node_id": self.config.node_id,
            "finalized_height": self.runner.node.finalized_height,
            "restore_s": round(self.node.restore_s, 3),
            "replayed": self.node.replayed,
            "started_at": list(self._started_at),
            "caught_up_s": self.caught_up_s,
            "agreement_counters": dict(self.runner.node.counters),
            "synced_from": list(synced_from) if synced_from else None,
            "registry_read": self.registry.get().latest_version,   # beside the executed "registry_version"
            "registry_error": self.registry_file.error,
            "awaiting_registry": list(self.node.awaiting_registry) if self.node.awaiting_registry else None,
            "certification": self.runner.locked(self.node.health.as_json),
        })
        return status

    def stop(self) -> None:
        self.runner.stop()
        for server in reversed(self._servers):
            server.stop()
        if self._client is not None:
            self._client.close()
        self.node.close()


def run(config: NodeProcessConfig, extension: Optional[Extension] = None) -> int:
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    launcher_pid = int(os.environ.get(LAUNCHER_PID_ENV, "0") or 0)
    try:
        process = NodeProcess(config, extension=extension)
    except (NodeRefused, NodeStoreError) as exc:
        _log.error("%s refused to start: %s (exit code %d: do not restart)", config.node_id, exc, EXIT_REFUSED)
        return EXIT_REFUSED
    try:
        process.start()
        while not stop.wait(config.tick_s):
            if launcher_pid and os.getppid() != launcher_pid:
                _log.warning("%s: the launcher (pid %d) is gone; stopping", config.node_id, launcher_pid)
                break
            process.tick()
    finally:
        process.stop()
    _log.info("%s: stopped at height %d", config.node_id, process.height)
    return 0


def main(argv: list[str] | None = None, extension: Optional[Extension] = None) -> int:
    import argparse
    parser = argparse.ArgumentParser(prog="replica node run")
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = NodeProcessConfig.from_file(args.config)
    except NodeConfigError as exc:
        print(f"replica node run: {exc}", file=sys.stderr)
        return 2
    return run(config, extension)
