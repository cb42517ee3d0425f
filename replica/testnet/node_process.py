"""One replica node as its own OS process: ``replica node run --config FILE``.

Start-up (restart time does not grow with the chain: at most one checkpoint interval of
blocks is re-executed):

1. the newest checkpoint that verifies (``NodeCheckpoints.load_newest``: digest, strict decoding,
   recomputed hash); a corrupt one is moved aside (never deleted) and the next older tried;
   none: the subnet's genesis state;
2. the node's block log from there: blocks above the checkpoint are re-executed, each
   height checked against the hashes the node recorded the first time (``ExecutedLog``);
3. the agreement node, restored from the retained tail of the block log, the latest
   finalization proof and the artifacts it had signed (``AgreementLog``: it never signs two
   blocks at one height, across crashes);
4. its XNet endpoint, agreement endpoint (gRPC, mutual TLS against the registry's node
   certificates) and ingress HTTP API bind on 127.0.0.1, on the ports of its last life when
   it can have them (``replica.node.ports``), and are published (``endpoints.json``); once the
   launcher has put its XNet address into ``registry.bin`` it starts pulling slices, and the
   agreement starts: a ``Status`` to its peers brings back the finalized blocks it missed
   (``CatchUp``, verified: the hash chain and the finalization signatures).

Then the ``AgreementRunner`` drives the protocol; this module supplies its callbacks:

* ``propose``/``validate`` — the block maker and the notary on this node's state. The state
  is at the finalized tip (finalized blocks are executed before either runs), so a block on
  a notarized but not yet finalized parent has nothing to be checked against: such a block
  is proposed empty and only an empty one is accepted (``_empty_block``);
* ``Finalized`` — append to the block log (fsync), execute, record the hashes, checkpoint
  every ``checkpoint_interval`` heights, and sign a certification share for the new height
  (posted back to the protocol, which gossips and aggregates shares);
* ``Certified`` — deliver to the state manager (the XNet endpoint and queries serve it);
* ``IngressReceived`` — peers' ingress into this node's pool; ``Persist`` — the agreement log.

A node far behind (its peers no longer keep the blocks it needs) syncs state: it fetches
a peer's latest checkpoint, verifies it against the subnet's certification of that height
and continues from it (``replica.node.state_sync``); it serves its own the same way
(``replica.node.checkpoints``).

Every tick (or every ``registry_poll_s``) the main thread re-reads the registry if it
changed (``replica.node.registry_file``: a failed read is logged and retried), writes
``status.json`` (with the registry version of the latest executed batch and the newest
version read), and on the subnet's first node submits the demo traffic. SIGTERM/SIGINT stop it cleanly;
SIGKILL at any instant loses nothing committed (the files above are written so that a
crash leaves the old or the new version, never a mix).
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
from typing import Any, Callable

from consensus_stub.agreement.interface import AgreementConfig, BlockContext, Certified, Finalized, IngressReceived
from consensus_stub.agreement.messages import CatchUp, IngressGossip, Message, Status, encode_message
from consensus_stub.agreement.protocol import AgreementNode
from consensus_stub.agreement.signing import NodeKeyVerifier, node_key_signer
from consensus_stub.block import Block
from consensus_stub.block_maker import ChainTip
from consensus_stub.block_store import BlockStore, BlockStoreError, ChainBase, open_block_store, replace_block_log
from consensus_stub.genesis import decode_node_secrets
from consensus_stub.notary import DEFAULT_MAX_CLOCK_SKEW_NS, BlockNotYetValid, InvalidBlock
from message_routing.batch import encode_batch
from replica.client import decode_signed_ingress, refusal_for
from replica.client.http_wire import QueryAnswer
from replica.client.refusals import CanisterNotOnSubnet, NotCertifiedYet, UnknownCanister
from replica.errors import ReplicaError
from replica.execution import ExecutionEnvironment
from replica.node.http_api import HttpApiServer, NodeBackend
from .demo_traffic import DemoTraffic, subnet_status
from replica.node.checkpoints import NodeCheckpoints
from replica.node.ports import bind_again, read_ports, write_ports
from replica.node.registry_file import RegistryFile
from .launcher import EXIT_REFUSED, LAUNCHER_PID_ENV, LIMIT_PRESETS, TestnetLayout, has_genesis_apps
from state_manager.certification import Certification, SignatureMemo
from state_manager.encoding import decode
from state_manager.state_manager import CertificationMismatch
from state_manager.messages import Reply
from xnet.xnet_payload import DecodedXNetPayload

from replica.node.agreement_runner import AgreementRunner
from replica.node.agreement_transport import AgreementClient, AgreementServer, CheckpointFetchError, PeerAddress
from replica.node.state_sync import CheckpointServer, StateSyncError, decode_offer, verify_offer
from replica.node.batch_processor import canister_classes
from replica.node.node_store import AgreementLog, ExecutedLog, NodeStoreError, ProofFile, move_aside
from replica.node.process_config import NodeConfigError, NodeFiles, NodeProcessConfig
from replica.node.replica_node import NodeConfig, ReplicaNode
from replica.node.storage import NodeRefused

__all__ = ["NodeProcess", "main"]

_log = logging.getLogger("replica.testnet.node_process")


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

    def __init__(self, testnet_dir: Path, peers: dict[str, bytes]) -> None:
        self._files = {n: NodeFiles(testnet_dir / "nodes" / n).endpoints for n in peers}
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


class NodeProcess:
    """The node (module docstring). ``start()`` binds and starts; ``tick()`` is the main
    thread's periodic work; ``stop()`` stops everything."""

    def __init__(self, config: NodeProcessConfig, *, clock: Callable[[], int] = time.time_ns) -> None:
        self.config = config
        self.files = config.files
        self.files.root.mkdir(parents=True, exist_ok=True)
        self.layout = TestnetLayout(Path(config.testnet_dir))
        self.manifest = self.layout.read_manifest()
        self._clock = clock
        self.registry_file = RegistryFile(self.layout.registry, config.node_id)
        self.registry = self.registry_file.holder
        self._next_registry_poll = 0.0
        #: ``(height, registry version)``: the next finalized block waits for a version not read yet.
        self.awaiting_registry: tuple[int, int] | None = None
        secrets = decode_node_secrets(self.layout.secrets(config.node_id).read_bytes())
        if secrets.subnet_id != config.subnet_id:
            raise NodeConfigError(f"{config.node_id} is a node of {secrets.subnet_id}, not {config.subnet_id}")
        self._identity = secrets.identity
        self.limits = LIMIT_PRESETS[self.manifest["limits"]]
        self.environment = ExecutionEnvironment(canister_classes(self.manifest["canister_modules"]))
        self.checkpoints = NodeCheckpoints(self.files.checkpoints, self.files.certifications,
                                           interval=config.checkpoint_interval, keep=config.checkpoints_kept)
        started = time.monotonic()
        checkpoint = self.checkpoints.load_newest()
        try:
            self.block_store: BlockStore = open_block_store(self.files.blocks)
        except BlockStoreError as exc:
            raise NodeRefused(str(exc)) from exc
        base = checkpoint.height if checkpoint is not None else 0
        if base < self.block_store.base_height:
            raise NodeRefused(
                f"the block log {self.files.blocks} starts above height {self.block_store.base_height} but the newest "
                f"usable checkpoint is of height {base}: the state in between cannot be rebuilt here; move the block "
                f"log aside to start empty and sync state from a peer")
        if base > self.block_store.height:
            raise NodeRefused(f"checkpoint {base} is above the block log's height {self.block_store.height}")
        initial = checkpoint.state if checkpoint is not None else self.layout.genesis(config.subnet_id).read_bytes()
        # one memo for the node's certification pool and state manager: the certification the
        # pool just made is not pairing-checked again when delivered
        self._signature_memo = SignatureMemo()
        self.node = ReplicaNode(secrets, self.registry, initial, self.environment, self.limits,
                                NodeConfig(refresh_interval_s=min(0.5, max(0.02, config.tick_s / 2)),
                                           fetch_timeout_s=2.0), signature_memo=self._signature_memo)
        self.executed_log = ExecutedLog(self.files.executed_log)
        self.agreement_log = AgreementLog(self.files.agreement_log)
        self.proof_file = ProofFile(self.files.proof)
        self._decoded: dict[bytes, DecodedXNetPayload] = {}   # validated payloads by block hash
        self._pending_certification: Certification | None = None
        self._crash_at = _crash_point(config.node_id)
        self.replayed = 0
        for block in self.block_store.blocks_from(base + 1):
            self._execute(block, self.block_store.hash_at(block.height), replaying=True)
        self.replayed = self.block_store.height - base
        self.restore_s = time.monotonic() - started
        _log.info("%s: state of height %d (checkpoint %s, %d blocks re-executed) in %.2f s", config.node_id,
                  self.height, base or "none", self.replayed, self.restore_s)
        self.runner = AgreementRunner(self._agreement_node(), persist=self.agreement_log.append,
                                      on_finalized=self._on_finalized, on_output=self._on_output, clock=clock)
        self._peer_heights: dict[str, int] = {}
        self._progress = (self.runner.node.finalized_height, time.monotonic())
        self.synced_from: tuple[str, int] | None = None
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
        self.traffic: DemoTraffic | None = None

    # -- restoring ------------------------------------------------------------------------

    @property
    def height(self) -> int:
        return self.node.state_manager.latest_height

    def _agreement_config(self) -> AgreementConfig:
        registry = self.registry.get()
        record = registry.subnet(self.config.subnet_id, registry.latest_version)
        return AgreementConfig(
            record, self.config.node_id,
            round_timeout_ns=int(self.config.round_timeout_s * 1e9),
            rebroadcast_interval_ns=int(max(1.0, 2 * self.config.round_timeout_s) * 1e9),
            retained_heights=self.config.retained_heights,
            block_interval_ns=int(self.config.block_interval_s * 1e9),
            absent_after_ns=int(max(2.0, 3 * self.config.round_timeout_s) * 1e9),
        )

    def _agreement_callbacks(self) -> dict:
        registry = self.registry.get()
        return dict(propose=self._propose, validate=self._validate, sign=node_key_signer(self._identity),
                    verifier=NodeKeyVerifier.for_subnet(registry.latest(), self.config.subnet_id),
                    now=self._clock(), own_artifacts=self.agreement_log.artifacts,
                    signature_memo=self._signature_memo)

    def _agreement_node(self) -> AgreementNode:
        config = self._agreement_config()
        common = self._agreement_callbacks()
        proof = self.proof_file.read()
        store = self.block_store
        if proof is not None and store.hash_at(proof[0]) == proof[1] and store.block(proof[0]) is not None:
            height = proof[0]
            low = max(height - self.config.retained_heights + 1, 1)
            tail = [Finalized(store.block(h), store.hash_at(h), proof[2] if h == height else ())
                    for h in range(low, height + 1) if store.block(h) is not None]
            return AgreementNode.restore(config, finalized=tail, **common)
        if store.height == 0:
            return AgreementNode(config, **common)
        # blocks without a matching proof (a crash between the append and the proof's
        # write): our own finalized chain is trusted; peers prove what comes next
        return AgreementNode.from_synced_tip(config, height=store.height, block_hash=store.tip_hash, **common)

    # -- agreement callbacks (under the runner's lock) ------------------------------------

    def _execute_finalized_through(self, height: int) -> None:
        """Execute finalized blocks the protocol holds up to ``height`` (before proposing or
        validating on top of them: their ``Finalized`` outputs come after the step)."""
        agreement = self.runner.node
        while self.block_store.height < height:
            entry = agreement.finalized_block(self.block_store.height + 1)
            if entry is None or not self._apply(*entry):
                return

    def _propose(self, context: BlockContext, now: int) -> Block:
        self._execute_finalized_through(context.tip.height)
        registry_version = self.registry.get().latest_version
        if self.height == context.height - 1 and self.block_store.tip_hash == context.parent_hash:
            return self.node.make_block(ChainTip(context.height - 1, context.parent_hash), now, context.rank,
                                        registry_version)
        return self._empty_block(context, now)

    def _empty_block(self, context: BlockContext, now: int) -> Block:
        """A block on a parent whose state this node does not have (notarized, not finalized):
        no ingress, no XNet payload, the parent's registry version, time not before it."""
        parent = context.parent
        parent_time = parent.time if parent is not None else self.node.state.metadata.batch_time
        version = parent.registry_version if parent is not None else self.node.state.metadata.network_topology.registry_version
        return Block(context.height, context.parent_hash, max(now, parent_time), version, (), (),
                     self.config.node_id, context.rank)

    def _validate(self, block: Block, context: BlockContext, now: int) -> None:
        self.registry_file.knows(block.registry_version)   # a new version: read now, not at the next poll
        self._execute_finalized_through(context.tip.height)
        if self.height == block.height - 1 and self.block_store.tip_hash == block.parent_hash:
            self._decoded[block.parent_hash + block.height.to_bytes(8, "big") + block.maker.encode()] = \
                self.node.validate_block(block, ChainTip(block.height - 1, block.parent_hash), now)
            return
        if self.height != context.tip.height or not context.unfinalized:
            raise BlockNotYetValid(f"the state is at height {self.height}, the block's parent at {block.height - 1}")
        parent = context.parent
        if block.ingress or block.xnet_payload:
            raise BlockNotYetValid("a block on an unfinalized parent must be empty (its state is not here yet)")
        if parent is not None and (block.time < parent.time or block.registry_version != parent.registry_version):
            raise InvalidBlock("an empty block must keep its parent's registry version and not go back in time")
        if block.time > now + DEFAULT_MAX_CLOCK_SKEW_NS:
            raise InvalidBlock(f"block time {block.time} is ahead of the local clock {now}")

    def _on_finalized(self, output: Finalized) -> None:
        if self._apply(output.block, output.block_hash) and output.proof:
            self.proof_file.write(output.height, output.block_hash, output.proof)

    def _apply(self, block: Block, digest: bytes) -> bool:
        """Store and execute the next finalized block (one already stored must be the same);
        whether it is stored. A block of a registry version this node has not read (the file
        is re-read first) waits, unstored, in the agreement's finalized chain, and so do the
        blocks after it, until ``tick`` finds the version: executing needs that version's
        topology, and a block stored but not executed would leave the log ahead of the state.
        (Its peers may finalize it without this node's vote, so validating it first is not
        what makes the version known.)"""
        if block.height <= self.block_store.height:
            if self.block_store.hash_at(block.height) not in (digest, None):
                raise NodeStoreError(f"height {block.height} was finalized as another block before")
            return True
        if block.height > self.block_store.height + 1:   # the one before it waits for its registry version
            self._execute_finalized_through(block.height - 1)
            if block.height > self.block_store.height + 1:
                return False
        if not self.registry_file.knows(block.registry_version):
            if self.awaiting_registry != (block.height, block.registry_version):
                _log.warning("%s: finalized height %d is of registry version %d, which registry.bin does not hold "
                             "yet (%s): it waits", self.config.node_id, block.height, block.registry_version,
                             self.registry_file.error or f"latest {self.registry.get().latest_version}")
            self.awaiting_registry = (block.height, block.registry_version)
            return False
        self.awaiting_registry = None
        self.block_store.append(block, digest)
        self._execute(block, digest)
        return True

    def _execute(self, block: Block, digest: bytes, *, replaying: bool = False) -> None:
        key = block.parent_hash + block.height.to_bytes(8, "big") + block.maker.encode()
        batch, trees = self.node.execute(block, digest, self._decoded.pop(key, None))
        self._decoded = {k: v for k, v in self._decoded.items() if int.from_bytes(k[32:40], "big") > block.height}
        self.executed_log.record(block.height, encode_batch(batch), trees.full_hash, trees.certified_root)
        written = self.checkpoints.write_if_due(block.height, self.node.state, trees.full_hash, self._crash_hook)
        if written and not replaying:
            self._after_checkpoint(block.height)
        pending = self._pending_certification
        if pending is not None and pending.height <= block.height:
            self._pending_certification = None
            self._deliver_certification(pending)
        if not replaying and block.height + 2 >= self.runner.node.finalized_height:
            # heights caught up from peers are certified already: no shares for them
            share = self.node.sign_share(block.height)
            self.runner.post(lambda node, now: node.submit_certification_share(share, now))

    def _crash_hook(self, tmp: Path) -> None:
        if self._crash_at is not None and int(tmp.name.rsplit("-", 1)[-1]) >= self._crash_at:
            _log.warning("%s: %s=%s: killing this process before renaming %s", self.config.node_id, CRASH_ENV,
                         self._crash_at, tmp)
            os.kill(os.getpid(), signal.SIGKILL)

    def _deliver_certification(self, certification: Certification) -> None:
        if certification.height > self.height:
            self._pending_certification = certification   # delivered once executed
            return
        try:
            self.node.deliver_certification(certification)
        except CertificationMismatch as exc:   # a height this node no longer keeps
            _log.debug("certification of %d not kept: %s", certification.height, exc)
            return
        self.checkpoints.keep_certification(certification, self.block_store.hash_at(certification.height))

    # -- after a checkpoint; syncing state from a peer's ---------------------------------

    def _after_checkpoint(self, height: int) -> None:
        """Prune the block log to what peers may ask for (``retained_heights``) and what a
        restart from the oldest kept checkpoint replays; compact the agreement log."""
        keep_from = min(self.checkpoints.heights()[0], height - self.config.retained_heights) + 1
        if keep_from > self.block_store.base_height + 1:
            self.block_store.prune_below(keep_from)
        self.agreement_log.compact(self.runner.node.finalized_height)

    def _needs_state_sync(self) -> str | None:
        """Why this node should sync state from a peer now, or ``None``: peers are further
        ahead than they keep blocks, or it has been behind without finalizing for a while."""
        if not self._peer_heights:
            return None
        finalized = self.runner.node.finalized_height
        ahead = max(self._peer_heights.values())
        if finalized != self._progress[0]:
            self._progress = (finalized, time.monotonic())
        if ahead - finalized >= self.config.retained_heights:
            return f"peers are at height {ahead}, {ahead - finalized} above us: more than they keep"
        if ahead - finalized > self.config.checkpoint_interval and time.monotonic() - self._progress[1] > 10.0:
            return f"no progress for 10 s at height {finalized} while peers are at {ahead}"
        return None

    def state_sync(self, reason: str) -> bool:
        """Fetch the newest checkpoint a peer offers, verify it against the subnet's
        certification of its height and continue from it; whether it did. Main thread."""
        if self._client is None:
            return False
        registry = self.registry.get()
        key = registry.public_key_for(self.config.subnet_id, registry.latest_version)
        for peer in sorted(self._peer_heights, key=lambda n: (-self._peer_heights[n], n)):
            try:
                offer = decode_offer(self._client.fetch_checkpoint(peer, timeout_s=60.0))
                state = verify_offer(offer, key, expected_subnet=self.config.subnet_id, min_height=self.height + 1)
            except (CheckpointFetchError, StateSyncError) as exc:
                _log.warning("%s: state sync from %s failed: %s", self.config.node_id, peer, exc)
                continue
            if not self.runner.locked(lambda: self._install(offer, state)):
                return False   # the node caught up on its own meanwhile
            self.runner.submit(lambda node, now: node.start(now))
            _log.warning("%s: state sync from %s: continuing from its checkpoint at height %d (%s)",
                         self.config.node_id, peer, offer.height, reason)
            self.synced_from = (peer, offer.height)
            return True
        return False

    def _install(self, offer, state) -> bool:
        """Under the lock: the verified state, a chain starting at its block, a fresh executed
        log (the old files are moved aside, never deleted), a checkpoint of it, a new agreement
        node at that tip (keeping the artifacts this node signed). Not if the node has executed
        that height meanwhile (the offer was checked before the lock was taken)."""
        if offer.height <= self.height:
            return False
        self.block_store.close()
        self.block_store = replace_block_log(self.files.blocks, ChainBase(offer.height, offer.block_hash))
        self.executed_log.close()
        move_aside(self.files.executed_log)
        self.executed_log = ExecutedLog(self.files.executed_log)
        self.node.install_state(state, offer.certification)
        self._decoded.clear()
        self._pending_certification = None
        full_hash = self.node.state_manager.latest.full_hash
        self.checkpoints.write(offer.height, state, full_hash)
        self.checkpoints.keep_certification(offer.certification, offer.block_hash)
        self.runner.node = AgreementNode.from_synced_tip(
            self._agreement_config(), height=offer.height, block_hash=offer.block_hash,
            **self._agreement_callbacks())
        return True

    def _on_output(self, output) -> None:
        if isinstance(output, Certified):
            self._deliver_certification(output.certification)
        elif isinstance(output, IngressReceived):
            now = self._clock()
            for ingress in output.messages:
                self.node.add_ingress(ingress, now)
        else:   # Refused: counted by the protocol and in the node's metrics
            _log.info("%s: %s", self.config.node_id, output)

    def _deliver(self, sender: str, message: Message) -> None:
        if isinstance(message, Status) and message.sender == sender:
            self._peer_heights[sender] = message.finalized_height
        elif isinstance(message, CatchUp):   # the sender has finalized at least that far
            self._peer_heights[sender] = max(self._peer_heights.get(sender, 0), message.last.height)
        self.runner.deliver(sender, message)
        if self.caught_up_s is None and self._peer_heights:
            ahead = min(self._peer_heights.values())   # what every peer that spoke had
            if ahead > self.runner.node.finalized_height:
                self._was_behind = True
            elif self._was_behind:
                with self._gossip_lock:   # once, though messages arrive on several threads
                    if self.caught_up_s is not None:
                        return
                    self.caught_up_s = _process_age_s()
                _log.info("%s: caught up with its peers at height %d, %.2f s after the process started",
                          self.config.node_id, self.runner.node.finalized_height, self.caught_up_s)

    # -- ingress API ------------------------------------------------------------------------

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

    def _query(self, canister_id: int, method: str, arg: Any, caller: bytes) -> QueryAnswer:
        host = self.registry.get().latest().routing_table.lookup(canister_id)
        if host is None:
            raise UnknownCanister(f"no subnet hosts canister {canister_id}")
        if host != self.config.subnet_id:
            raise CanisterNotOnSubnet(f"canister {canister_id} is on subnet {host}, not {self.config.subnet_id}")

        def run():
            latest = self.node.state_manager.latest_certified()
            if latest is None or latest[0].height != self.height:
                return None
            return self.environment.run_query(self.node.state, canister_id, method, arg, caller), latest[0].height
        result = self.runner.locked(run)
        if result is None:
            raise NotCertifiedYet(f"{self.config.node_id}: its latest state is not certified yet")
        answer, height = result
        if isinstance(answer, Reply):
            return QueryAnswer(height, reply=answer.data)
        return QueryAnswer(height, reject_code=answer.code.name, reject_message=answer.message)

    def _certified(self):
        latest = self.node.state_manager.latest_certified()
        return None if latest is None else (latest[0].certified, latest[1])

    def _api_status(self) -> dict:
        registry = self.registry.get()
        latest = self.node.state_manager.latest_certified()
        key = registry.public_key_for(self.config.subnet_id, registry.latest_version)
        return {
            "subnet_id": self.config.subnet_id, "node_id": self.config.node_id,
            "finalized_height": self.height,
            "certified_height": latest[1].height if latest is not None else None,
            "certified_root": latest[1].root.hex() if latest is not None else None,
            "subnet_public_key": key.hex() if key is not None else None,
            "registry_version": self.node.state.metadata.network_topology.registry_version,
            "replica_version": "node-process",
        }

    # -- what status and traffic read (the ``subnet_status`` / ``DemoTraffic`` surface) ----

    def read(self, reader: Callable[[Any], Any]) -> Any:
        return self.runner.locked(lambda: reader(self.node.state))

    def latest_certification(self) -> Certification | None:
        latest = self.node.state_manager.latest_certified()
        return None if latest is None else latest[1]

    def query(self, canister_id: int, method: str, arg: Any = None, caller: bytes = b"") -> Any:
        answer = self.runner.locked(lambda: self.environment.run_query(self.node.state, canister_id, method, arg, caller))
        if type(answer) is not Reply:
            raise RuntimeError(f"query {method} on {canister_id} failed: {answer}")
        return decode(answer.data) if answer.data else None

    def submit(self, envelope: bytes) -> None:
        self._submit(decode_signed_ingress(envelope, self.limits.max_ingress_bytes))

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Bind every endpoint, publish them (``endpoints.json``) and start agreeing: peers
        find our agreement endpoint there, so catching up starts at once. Pulling slices
        starts in ``tick`` once the launcher has put our XNet address into the registry."""
        previous = read_ports(self.files.ports)   # the ports of its last life, asked for again
        self._xnet_address = bind_again("xnet", previous.get("xnet"), lambda p: self.node.start_server(port=p))
        self._servers.append(self.node)
        record = self.registry.get().latest()
        peers = {n.node_id: n.certificate_pem for n in record.nodes_of(self.config.subnet_id)}

        def agreement_server(p: int) -> tuple[AgreementServer, int]:
            server = AgreementServer(self._identity, peers, self._deliver, port=p,
                                     serve_checkpoint=CheckpointServer(self.checkpoints).offer)
            return server, server.start()
        server, port = bind_again("agreement", previous.get("agreement"), agreement_server)
        self._servers.append(server)
        backend = NodeBackend(self.config.subnet_id, self.config.node_id, self.limits, self._submit, self._query,
                              self._certified, self._api_status, self._clock, self.node.metrics)

        def http_server(p: int) -> tuple[HttpApiServer, str]:
            server = HttpApiServer(backend, port=p)
            return server, server.start()
        http, http_address = bind_again("http", previous.get("http"), http_server)
        self._servers.append(http)
        write_ports(self.files.ports, {"xnet": int(self._xnet_address.rsplit(":", 1)[1]), "agreement": port,
                                       "http": int(http_address.rsplit(":", 1)[1])})
        others = {n: pem for n, pem in peers.items() if n != self.config.node_id}
        self._client = AgreementClient(self._identity, _PeerBook(Path(self.config.testnet_dir), others))
        self._gossip_order = list(others)
        # published before the first Status goes out: the answers must find us
        self.layout.write_json(self.files.endpoints, {"xnet": self._xnet_address, "agreement": f"127.0.0.1:{port}",
                                                      "http": http_address})
        self.runner.start(self._client)
        _log.info("%s: xnet %s, agreement 127.0.0.1:%d, http %s", self.config.node_id, self._xnet_address, port,
                  http_address)
        first = record.subnet(self.config.subnet_id).node_ids[0]
        if has_genesis_apps(self.manifest) and first == self.config.node_id:
            self.traffic = DemoTraffic(self.config.subnet_id, list(self.manifest["subnets"]))

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
        if self.awaiting_registry is not None:   # a finalized block waits for a registry version
            self.runner.locked(lambda: self._execute_finalized_through(self.runner.node.finalized_height))
        self._start_fetching_once_published()
        reason = self._needs_state_sync()
        if reason is not None and time.monotonic() >= self._next_sync_at and not self.state_sync(reason):
            self._next_sync_at = time.monotonic() + 5.0   # no peer offered a newer checkpoint yet
        if self.traffic is not None and not self.layout.traffic_off.exists():
            self.traffic.tick(self)
        subnets = list(self.manifest["subnets"])
        status = subnet_status(self, subnets.index(self.config.subnet_id), has_genesis_apps(self.manifest))
        status["node_id"] = self.config.node_id
        status["finalized_height"] = self.runner.node.finalized_height
        status["restore_s"] = round(self.restore_s, 3)
        status["replayed"] = self.replayed
        status["caught_up_s"] = self.caught_up_s
        status["agreement_counters"] = dict(self.runner.node.counters)
        status["synced_from"] = list(self.synced_from) if self.synced_from else None
        status["registry_read"] = self.registry.get().latest_version   # beside the executed "registry_version"
        status["registry_error"] = self.registry_file.error
        status["awaiting_registry"] = list(self.awaiting_registry) if self.awaiting_registry else None
        self.layout.write_json(self.files.status, status)

    def stop(self) -> None:
        self.runner.stop()
        for server in reversed(self._servers):
            server.stop()
        if self._client is not None:
            self._client.close()
        for closable in (self.block_store, self.executed_log, self.agreement_log):
            closable.close()


#: Fault injection for tests: ``<node id>:<height>`` makes that node SIGKILL itself between
#: the temporary write and the rename of its first checkpoint at or above that height.
CRASH_ENV = "REPLICA_NODE_CRASH_BEFORE_CHECKPOINT_RENAME"


def _crash_point(node_id: str) -> int | None:
    node, _, height = os.environ.get(CRASH_ENV, "").partition(":")
    return int(height) if node == node_id and height.isdigit() else None


def run(config: NodeProcessConfig) -> int:
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    launcher_pid = int(os.environ.get(LAUNCHER_PID_ENV, "0") or 0)
    try:
        process = NodeProcess(config)
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


def main(argv: list[str] | None = None) -> int:
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
    return run(config)


if __name__ == "__main__":
    sys.exit(main())
