"""One subnet in one process (shell): its n nodes with the consensus stub between them.

``Subnet.step()`` makes one height:

1. the maker of rank 0 at that height (round-robin) builds a block from its ingress pool
   and its slice pool (``get_xnet_payload``); every node validates it against its own
   state (``validate_block``) and accepts or refuses it; it is final once ``t`` nodes
   accept. If not, the maker of the next rank proposes, and so on;
2. the final block goes to the block store; every node decodes its XNet payload into a
   batch, runs ``execute_round`` and commits. Every node must reach the same certified
   root and full state hash — a mismatch raises ``DivergenceError`` at once;
3. every node signs a certification share; the certification pool aggregates ``t`` of
   them; the certification goes to every node, whose XNet endpoint then serves the new
   state to peer subnets.

Each height is recorded (genesis state bytes, batch bytes, hashes) so a determinism audit
can replay the run. With a ``block_log`` every finalized block is also appended to a file;
a subnet restarted on the same log re-executes those blocks before it makes new ones. ``step`` can be driven by the caller (tests, a deterministic loop) or by
``run_in_background`` (a timer thread). All methods are thread-safe.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from consensus_stub.block import Block, block_hash
from consensus_stub.block_maker import ChainTip, block_maker_for
from consensus_stub.block_store import BlockStore, open_block_store
from consensus_stub.certification_pool import CertificationPool
from consensus_stub.finalizer import Tally
from consensus_stub.genesis import NodeSecrets
from consensus_stub.ingress_pool import Admission
from consensus_stub.notary import BlockNotYetValid, InvalidBlock
from message_routing.batch import encode_batch
from message_routing.executor import Executor
from message_routing.limits import Limits
from state_manager.certification import Certification, SignatureMemo
from state_manager.encoding import decode
from state_manager.ingress_history import IngressStatus
from state_manager.messages import Ingress, Reject, Reply
from state_manager.state_tree import StateTrees
from xnet.grpc.server import SliceProvider
from xnet.grpc.tls import TlsIdentity

from replica.client import decode_signed_ingress, refusal_for
from replica.errors import ReplicaError
from replica.node.replica_node import NodeConfig, RegistryHolder, ReplicaNode

__all__ = [
    "SubnetError", "DivergenceError", "NoBlockFinalized", "SubnetRecording", "NodeHooks", "Subnet",
]

_log = logging.getLogger(__name__)


class SubnetError(ReplicaError, RuntimeError):
    """The subnet cannot make progress."""


class DivergenceError(SubnetError):
    """Nodes of one subnet computed different state hashes at the same height."""


class NoBlockFinalized(SubnetError):
    """No maker of any rank got a block accepted by ``t`` nodes."""


@dataclass
class SubnetRecording:
    """What a determinism audit replays: genesis, every batch, and the hashes committed."""

    subnet_id: str
    genesis: bytes
    batches: list[bytes] = field(default_factory=list)
    hashes: list[tuple[int, bytes, bytes]] = field(default_factory=list)   # (height, full hash, certified root)


@dataclass(frozen=True)
class NodeHooks:
    """Test and fault-injection hooks of one node: wrap its slice provider, replace the TLS
    identity its endpoint presents, or take it ``offline`` — it neither proposes, votes,
    signs nor fetches (its state still follows the finalized chain, as a node catching up
    from the block store would)."""

    serve_with: Callable[[SliceProvider], SliceProvider] | None = None
    server_identity: TlsIdentity | None = None
    offline: bool = False


class Subnet:
    """The nodes of ``subnet_id`` and the agreement between them (module docstring)."""

    def __init__(
        self,
        subnet_id: str,
        registry: RegistryHolder,
        secrets: Iterable[NodeSecrets],
        genesis_state: bytes,
        environment: Executor,
        limits: Limits,
        *,
        config: NodeConfig = NodeConfig(),
        clock: Callable[[], int] = time.time_ns,
        block_log: Path | str | None = None,
        hooks: Mapping[str, NodeHooks] | None = None,
    ) -> None:
        hooks = dict(hooks or {})
        self.subnet_id = subnet_id
        self.registry = registry
        self.limits = limits
        self._clock = clock
        self._lock = threading.RLock()
        record = registry.get().subnet(subnet_id, registry.get().latest_version)
        if record is None:
            raise SubnetError(f"subnet {subnet_id!r} is not in the registry")
        by_id = {s.node_id: s for s in secrets if s.subnet_id == subnet_id}
        missing = [n for n in record.node_ids if n not in by_id]
        if missing:
            raise SubnetError(f"no secrets for nodes {missing}")
        self.nodes: dict[str, ReplicaNode] = {}
        self.offline: set[str] = set()
        #: The nodes of one process verify the same shares and certifications: once is enough.
        self.signature_memo = SignatureMemo()
        for node_id in record.node_ids:
            hook = hooks.pop(node_id, NodeHooks())
            self.nodes[node_id] = ReplicaNode(
                by_id[node_id], registry, genesis_state, environment, limits, config,
                serve_with=hook.serve_with, server_identity=hook.server_identity, signature_memo=self.signature_memo)
            if hook.offline:
                self.offline.add(node_id)
        if hooks:
            raise SubnetError(f"hooks for unknown nodes {sorted(hooks)}")
        self.block_store: BlockStore = open_block_store(block_log)
        self.certification_pool = CertificationPool(record, self.signature_memo)
        self.recording = SubnetRecording(subnet_id, genesis_state)
        #: Refused proposals per reason (error class name), and heights that needed a fallback maker.
        self.refusals: Counter[str] = Counter()
        self.fallback_heights = 0
        #: Admitted ingress that a later node refused (it already held it, its pool is full), per reason.
        self.ingress_disagreements: Counter[str] = Counter()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.failure: BaseException | None = None
        self._catch_up()

    def _catch_up(self) -> None:
        """Re-execute the finalized blocks of the block log (a restart): every node replays
        them from genesis, hashes are checked per height, and the last height is certified."""
        blocks = self.block_store.blocks_from(1)
        for block in blocks:
            self._execute(block, self.block_store.hash_at(block.height), {})
        if blocks:
            self._certify(blocks[-1].height)

    # -- lifecycle ------------------------------------------------------------------------

    def start_servers(self) -> dict[str, str]:
        """Bind every node's XNet endpoint on 127.0.0.1; return ``{node id: address}``."""
        return {node_id: node.start_server() for node_id, node in self.nodes.items()}

    def start_fetching(self) -> None:
        for node_id, node in self.nodes.items():
            if node_id not in self.offline:
                node.start_fetching()

    def stop_fetching(self) -> None:
        """Stop the timer thread (if any) and every node's refresher and client."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=30)
        for node in self.nodes.values():
            node.stop_fetching()

    def stop(self) -> None:
        """Stop the timer thread (if any), every refresher, client and endpoint."""
        self.stop_fetching()
        for node in self.nodes.values():
            node.stop()
        self.block_store.close()

    def run_in_background(self, interval_s: float) -> None:
        """Make one height every ``interval_s`` seconds on a timer thread until ``stop``;
        a failure ends the thread and is kept in ``failure`` (``check`` re-raises it)."""
        if self._thread is not None:
            raise SubnetError("already running")
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(interval_s):
                try:
                    self.step()
                except BaseException as exc:  # noqa: BLE001 - kept and re-raised by check()
                    _log.exception("subnet %s stopped", self.subnet_id)
                    self.failure = exc
                    return

        self._thread = threading.Thread(target=loop, name=f"subnet-{self.subnet_id}", daemon=True)
        self._thread.start()

    def check(self) -> None:
        """Re-raise a failure of the timer thread."""
        if self.failure is not None:
            raise self.failure

    # -- ingress and queries --------------------------------------------------------------

    def submit(self, envelope: bytes) -> Ingress:
        """Decode and authenticate a signed envelope (``decode_signed_ingress``) and admit it
        (``submit_ingress``); return the authenticated message. A refusal raises its
        ``IngressRefused`` subclass (``replica.client.envelope``) and leaves every pool as it was.

        The envelope is decoded once: decoding is a pure function of the bytes and the
        subnet's limits, so every node would reach the same verdict on it."""
        ingress = decode_signed_ingress(envelope, self.limits.max_ingress_bytes)
        return self.submit_ingress(ingress)

    def submit_ingress(self, ingress: Ingress) -> Ingress:
        """Hand an authenticated message to every online node, each of which checks it itself
        (``ReplicaNode.add_ingress``); return it, or raise the ``IngressRefused`` subclass of
        the refusal.

        The first online node's verdict is the caller's — it plays the node whose API the
        caller reached. If it refuses, no other node sees the message. If it admits, the
        message is in flight; a later node that refuses it (it already holds it, its pool is
        full) just leaves it to the pools that have it, and the refusal is counted in
        ``ingress_disagreements`` by reason."""
        with self._lock:
            now = self._clock()
            online = self._online()
            if not online:
                raise SubnetError("no node is online")
            first, others = online[0], online[1:]
            refusal = refusal_for(first.add_ingress(ingress, now), ingress, now)
            if refusal is not None:
                raise refusal
            for node in others:
                verdict = node.add_ingress(ingress, now)
                if verdict is not Admission.ADDED:
                    self.ingress_disagreements[verdict.reason] += 1
                    _log.info("%s refused message %s that %s admitted: %s", node.node_id,
                              ingress.message_id.hex(), first.node_id, verdict.description)
            return ingress

    def _reader(self) -> ReplicaNode:
        for node_id, node in self.nodes.items():
            if node_id not in self.offline:
                return node
        raise SubnetError("no node is online")

    def online_node(self) -> ReplicaNode:
        """The first online node: the one that answers reads (``SubnetError`` if none is online)."""
        with self._lock:
            return self._reader()

    def ingress_status(self, message_id: bytes) -> IngressStatus | None:
        with self._lock:
            return self._reader().state.ingress_history.get(message_id)

    def query(self, canister_id: int, method: str, arg: Any = None, caller: bytes | int = b"") -> Any:
        """Run a query on the latest state; the decoded reply, or ``SubnetError`` for a reject."""
        with self._lock:
            node = self._reader()
            answer = node.environment.run_query(node.state, canister_id, method, arg, caller)
        if type(answer) is not Reply:
            if isinstance(answer, Reject):
                raise SubnetError(f"query {method} on {canister_id} rejected: {answer.message}")
            raise SubnetError(f"query {method} on {canister_id} failed")
        return decode(answer.data) if answer.data else None

    def query_certified(self, node_id: str, canister_id: int, method: str, arg: Any,
                        caller: bytes) -> tuple[Reply | Reject, int] | None:
        """Run a query on ``node_id``'s latest state if that height is certified: ``(answer,
        height)``, else ``None`` (the ingress API's queries: answers at a certified height)."""
        with self._lock:
            node = self.nodes[node_id]
            latest = node.state_manager.latest_certified()
            if latest is None or latest[0].height != node.state_manager.latest_height:
                return None
            return node.environment.run_query(node.state, canister_id, method, arg, caller), latest[0].height

    def read(self, reader: Callable[[Any], Any]) -> Any:
        """``reader(state)`` on the latest state of the first online node, under the lock."""
        with self._lock:
            return reader(self._reader().state)

    @property
    def height(self) -> int:
        return self.block_store.height

    def latest_certification(self) -> Certification | None:
        with self._lock:
            latest = self._reader().state_manager.latest_certified()
            return None if latest is None else latest[1]

    # -- one height -----------------------------------------------------------------------

    def step(self, *, certify: bool = True) -> StateTrees:
        """Agree on, execute, check, record and certify the next height (module docstring).
        With ``certify=False`` the height stays uncertified until ``certify_latest`` (a
        driver that certifies only what someone reads: ``replica.testing``)."""
        with self._lock:
            block, digest, decoded = self._agree()
            self.block_store.append(block, digest)
            trees = self._execute(block, digest, decoded)
            if certify:
                self._certify(block.height)
            return trees

    def certify_latest(self) -> bool:
        """Certify the latest height unless it is certified already; whether it signed now."""
        with self._lock:
            height = self.block_store.height
            latest = self._reader().state_manager.latest_certified()
            if height == 0 or (latest is not None and latest[0].height >= height):
                return False
            self._certify(height)
            return True

    def _online(self) -> list[ReplicaNode]:
        return [node for node_id, node in self.nodes.items() if node_id not in self.offline]

    def _agree(self) -> tuple[Block, bytes, dict]:
        registry = self.registry.get()
        version = registry.latest_version
        record = registry.subnet(self.subnet_id, version)
        height = self.block_store.height + 1
        tip = ChainTip(self.block_store.height, self.block_store.tip_hash)
        now = self._clock()
        for rank in range(record.size):
            maker_id = block_maker_for(record, height, rank)
            if maker_id in self.offline:
                continue
            block = self.nodes[maker_id].make_block(tip, now, rank, version)
            digest = block_hash(block)
            tally = Tally(height, record.threshold, record.node_ids)
            decoded: dict[str, Any] = {}
            for node in self._online():
                try:
                    decoded[node.node_id] = node.validate_block(block, tip, now)
                except (InvalidBlock, BlockNotYetValid) as exc:
                    self.refusals[type(exc).__name__] += 1
                    _log.warning("%s refused the block of %s at height %d: %s", node.node_id, maker_id, height, exc)
                    continue
                tally.vote(node.node_id, digest)
            if tally.final == digest:
                if rank:
                    self.fallback_heights += 1
                return block, digest, decoded
        raise NoBlockFinalized(f"subnet {self.subnet_id}: no block finalized at height {height}")

    def _execute(self, block: Block, digest: bytes, decoded: dict) -> StateTrees:
        results = {}
        for node in self.nodes.values():
            results[node.node_id] = node.execute(block, digest, decoded.get(node.node_id))
        (first_id, (batch, trees)), *others = results.items()
        for node_id, (_, other) in others:
            if (other.certified_root, other.full_hash) != (trees.certified_root, trees.full_hash):
                raise DivergenceError(
                    f"subnet {self.subnet_id} height {block.height}: {node_id} computed certified root "
                    f"{other.certified_root.hex()} / full hash {other.full_hash.hex()}, but {first_id} computed "
                    f"{trees.certified_root.hex()} / {trees.full_hash.hex()}")
        self.recording.batches.append(encode_batch(batch))
        self.recording.hashes.append((trees.height, trees.full_hash, trees.certified_root))
        return trees

    def _certify(self, height: int) -> None:
        certification = None
        for node in self._online():
            certification = self.certification_pool.add_share(node.sign_share(height))
            if certification is not None:
                break
        if certification is None:
            raise SubnetError(f"subnet {self.subnet_id}: height {height} was not certified")
        for node in self.nodes.values():
            node.deliver_certification(certification)
        self.certification_pool.purge_below(height)
