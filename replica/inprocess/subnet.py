"""One subnet in one process (shell): its n nodes with the agreement protocol between them.

Each node is a ``replica.node.node.Node`` in memory (``MemoryStorage``), the same ``Node`` a
node process runs; this driver carries its agreement messages and decides when its nodes
execute. ``Subnet.step()`` makes one height:

1. agreement: every online node runs an ``AgreementNode`` (``consensus_stub.agreement``) on
   a deterministic in-process network (``consensus_stub.agreement.network``): the maker of rank 0 at that
   height (round-robin) builds a block from its ingress pool and its slice pool
   (``get_xnet_payload``); every node validates it against its own state
   (``validate_block``) and notarization-signs it, then finalization-signs it, with its node
   key; ``q = n - f`` shares of each finalize it. A refused or missing block leads, after
   the round timeout (in agreement time, which the network simulates, so waiting costs no
   wall time), to the block of the next rank — at once for makers not heard from for
   ``absent_after_ns``. The step runs the network until every online node has finalized the
   height, or a bound of agreement time passes (``NoBlockFinalized`` if no node finalized it);
2. the final block goes to the block store; every node executes it (``Node.execute_next``:
   its XNet payload decoded into a batch, ``execute_round``, commit), all at once when the
   step ends. Every node must reach the same certified root and full state hash — a mismatch
   raises ``DivergenceError`` at once;
3. every node signs a certification share; the certification pool aggregates ``t`` of
   them; the certification goes to every node, whose XNet endpoint then serves the new
   state to peer subnets.

Blocks are stamped with the subnet's ``clock`` (agreement time never reaches them), so the
same calls give the same blocks and hashes. Rounds are paced (``AgreementTiming``): a
round's first proposal comes ``block_interval_ns`` of agreement time after it starts, so a
step finalizes its height before anyone proposes the next, and a block holds the ingress
submitted before the step that makes it. Only when finalization lags behind that pacing
(messages lost or delayed by an adversarial ``agreement_schedule``; a height notarized that
only its successor can finalize) do makers build on a parent not yet executed here: such a
block is its parent's empty successor (``replica.node.consensus_rules``), and one step then
executes every height finalized.

``offline`` nodes are crashed on the agreement network: they neither send nor receive;
their state still follows the finalized chain (as a node catching up from the block store
would) and a node back online rejoins from the executed tip (``from_synced_tip``) with the
artifacts it had signed above it. ``agreement_schedule`` (a seeded ``Schedule``: delays,
reordering, duplicates, losses, partitions, crashes) runs the same agreement under an
adversarial network, still deterministically.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional

from consensus_stub.agreement.network import AgreementNetwork, Schedule
from consensus_stub.agreement.protocol import AgreementNode, Finalized, Output, Persist, Refused
from consensus_stub.agreement.signing import MemoVerifier, NodeKeyVerifier
from consensus_stub.agreement.simulation import SafetyViolation
from consensus_stub.block import Block
from consensus_stub.block_store import BlockStore, open_block_store
from consensus_stub.agreement.certification import CertificationAggregator
from consensus_stub.agreement.divergence import CertificationStall
from consensus_stub.genesis import NodeSecrets
from consensus_stub.ingress_pool import Admission
from message_routing.batch import encode_batch
from message_routing.executor import Executor
from message_routing.limits import Limits
from state_manager.certification import Certification, SignatureMemo
from state_manager.encoding import decode
from state_manager.state_codec import encode_state
from state_manager.ingress_history import IngressStatus
from state_manager.messages import Ingress, Reject, Reply
from state_manager.state_tree import StateTrees
from xnet.grpc.server import SliceProvider
from xnet.grpc.tls import TlsIdentity

from replica.client import decode_signed_ingress, refusal_for
from replica.errors import ReplicaError
from replica.ic.textual_ids import canister_text
from replica.node.consensus_rules import EmptyBlockMismatch, FinalizedElsewhere
from replica.node.node import SEC, Node, NodeTiming
from replica.node.certification_health import executed_messages
from replica.node.replica_node import NodeConfig, RegistryHolder
from replica.node.state_sync import CheckpointOffer, verify_offer
from replica.testnet.recording import SubnetRecording


__all__ = [
    "SubnetError", "DivergenceError", "NoBlockFinalized", "CertificationStalled", "FinalizedElsewhere", "EmptyBlockMismatch",
    "SubnetRecording", "NodeHooks", "Subnet", "SEC", "AgreementTiming", "Schedule", "SafetyViolation",
]

_log = logging.getLogger(__name__)


class SubnetError(ReplicaError, RuntimeError):
    """The subnet cannot make progress."""


class DivergenceError(SubnetError):
    """Nodes of one subnet computed different state hashes at the same height."""


class NoBlockFinalized(SubnetError):
    """No node finalized a block at the next height within the step's bound of agreement time."""


class CertificationStalled(SubnetError):
    """No root of a height has ``t`` shares (``stall``: who signed which root)."""

    def __init__(self, message: str, stall: CertificationStall | None = None) -> None:
        super().__init__(message)
        self.stall = stall

    def __reduce__(self):
        return type(self), (str(self), self.stall)


@dataclass(frozen=True, slots=True)
class AgreementTiming(NodeTiming):
    """The protocol's timing inside a ``Subnet`` (agreement time: simulated, free in wall time).

    ``block_interval_ns`` paces heights: a round's first proposal comes that long after it
    starts, so a ``Subnet.step`` that ends as soon as every node finalized its height has
    made no proposal for the next one (a block carries the ingress submitted before the
    ``step`` that makes it). It must exceed the time the network takes to finalize a
    notarized block (message delays); ``absent_after_ns`` must exceed it (or nodes that took
    part in the last height would count as absent at the next). ``max_wait_ns`` bounds one
    ``step`` (``None``: enough for every rank's timeout and two rebroadcasts).
    """

    max_wait_ns: Optional[int] = None

    def __post_init__(self) -> None:
        if self.block_interval_ns < 1:
            raise ValueError("block_interval_ns must be positive: it keeps a step to one height")
        if self.absent_after_ns and self.absent_after_ns <= self.block_interval_ns:
            raise ValueError("absent_after_ns must exceed block_interval_ns")

    def step_budget_ns(self, nodes: int, schedule: Optional[Schedule]) -> int:
        if self.max_wait_ns is not None:
            return self.max_wait_ns
        delay = 0 if schedule is None else schedule.max_delay_ns
        return (self.block_interval_ns + (nodes + 1) * self.round_timeout_ns
                + 2 * self.rebroadcast_interval_ns + 8 * delay)


@dataclass(frozen=True)
class NodeHooks:
    """Test and fault-injection hooks of one node: wrap its slice provider, replace the TLS
    identity its endpoint presents, take it ``offline`` — it neither proposes, votes,
    signs nor fetches (its state still follows the finalized chain, as a node catching up
    from the block store would) — or make its state diverge (``diverge_at``)."""

    serve_with: Callable[[SliceProvider], SliceProvider] | None = None
    server_identity: TlsIdentity | None = None
    offline: bool = False
    #: Fault injection (``replica.node.faults``): the node's state diverges at this height. Its
    #: hashes are then not checked against its peers'; certification finds it diverged.
    diverge_at: int | None = None

    def __post_init__(self) -> None:
        if self.diverge_at is not None and (type(self.diverge_at) is not int or self.diverge_at < 1):
            raise SubnetError(f"diverge_at is a height of at least 1 (or None), not {self.diverge_at!r}")


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
        agreement_schedule: Schedule | None = None,
        agreement_timing: AgreementTiming = AgreementTiming(),
        signature_memo: SignatureMemo | None = None,
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
        #: The nodes of one process verify the same shares and certifications: once is enough
        #: (``signature_memo``: one several subnets of a process share, keyed by the key too).
        self.signature_memo = signature_memo if signature_memo is not None else SignatureMemo()
        self._verifier = MemoVerifier(NodeKeyVerifier.for_subnet(registry.get().latest(), subnet_id))
        self.agreement_timing = agreement_timing
        self.nodes: dict[str, Node] = {}
        self.offline: set[str] = set()
        #: Nodes given a divergence fault (``NodeHooks.diverge_at``).
        self.faulted: set[str] = set()
        #: Why the last height could not be certified (``None`` once one is).
        self.certification_stall: CertificationStall | None = None
        for node_id in record.node_ids:
            hook = hooks.pop(node_id, NodeHooks())
            self.nodes[node_id] = Node(
                by_id[node_id], registry, genesis_state, environment, limits, config=config, timing=agreement_timing,
                clock=clock, execute_at_once=False, verifier=self._verifier, signature_memo=self.signature_memo,
                serve_with=hook.serve_with, server_identity=hook.server_identity, diverge_at=hook.diverge_at)
            if hook.diverge_at is not None:
                self.faulted.add(node_id)
            if hook.offline:
                self.offline.add(node_id)
        if hooks:
            raise SubnetError(f"hooks for unknown nodes {sorted(hooks)}")
        self.block_store: BlockStore = open_block_store(block_log)
        self.certification = CertificationAggregator(record, self.signature_memo)
        self.recording = SubnetRecording(subnet_id, genesis_state)
        #: Refused proposals per reason (error class name); ``refusals`` adds the nodes' not-yet-valid counts.
        self._refused: Counter[str] = Counter()
        #: Heights that needed a fallback maker.
        self.fallback_heights = 0
        #: Admitted ingress that a later node refused (it already held it, its pool is full), per reason.
        self.ingress_disagreements: Counter[str] = Counter()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.failure: BaseException | None = None
        self._catch_up()
        self._step_budget_ns = agreement_timing.step_budget_ns(record.size, agreement_schedule)
        #: Blocks finalized above the executed height (the first node's ``Finalized`` of each).
        self._decided: dict[int, Finalized] = {}
        #: The agreement network (its ``nodes`` are the running ``AgreementNode``s).
        self.agreement = AgreementNetwork(record.node_ids, boot=self._boot_agreement,
                                          on_output=self._on_agreement_output, schedule=agreement_schedule)
        self._sync_offline()

    def _catch_up(self) -> None:
        """Re-execute the finalized blocks of the block log (a restart): every node replays
        them from genesis, hashes are checked per height, and the last height is certified."""
        blocks = self.block_store.blocks_from(1)
        for block in blocks:
            self._execute(block, self.block_store.hash_at(block.height))
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
            node.close()
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

        The envelope is decoded once: decoding is a pure function of the bytes, the subnet's
        limits and its clock's time (delegations' expiry), so every node would reach the same
        verdict on it."""
        ingress = decode_signed_ingress(envelope, self.limits.max_ingress_bytes, now_ns=self._clock())
        return self.submit_ingress(ingress)

    def submit_ingress(self, ingress: Ingress) -> Ingress:
        """Hand an authenticated message to every online node, each of which checks it itself
        (``Node.add_ingress``); return it, or raise the ``IngressRefused`` subclass of
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

    def _reader(self) -> Node:
        for node_id, node in self.nodes.items():
            if node_id not in self.offline:
                return node
        raise SubnetError("no node is online")

    def online_node(self) -> Node:
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
            answer = node.environment.run_query(node.state, canister_id, method, arg, caller, limits=self.limits)
        if type(answer) is not Reply:
            if isinstance(answer, Reject):
                raise SubnetError(f"query {method} on {canister_text(canister_id)} rejected: {answer.message}")
            raise SubnetError(f"query {method} on {canister_text(canister_id)} failed")
        return decode(answer.data) if answer.data else None

    def query_certified(self, node_id: str, canister_id: int, method: str, arg: Any,
                        caller: bytes) -> tuple[Reply | Reject, int] | None:
        """Run a query on ``node_id``'s latest state if that height is certified: ``(answer,
        height)``, else ``None`` (the ingress API's queries: answers at a certified height)."""
        with self._lock:
            return self.nodes[node_id].query_certified(canister_id, method, arg, caller)

    def locked(self, action: Callable[[], Any]) -> Any:
        """``action()`` while no step, submission or read runs."""
        with self._lock:
            return action()

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
            trees = None
            for block, digest in self._agree():
                self.block_store.append(block, digest)
                trees = self._execute(block, digest)
            assert trees is not None
            if certify:
                self._certify(trees.height)
            return trees

    @property
    def refusals(self) -> Counter[str]:
        """Refused proposals per reason, and the blocks a node could not judge yet per reason."""
        counts = Counter(self._refused)
        for node in self.nodes.values():
            counts.update(node.not_yet_valid)
        return counts

    def certify_latest(self) -> bool:
        """Certify the latest height unless it is certified already; whether it signed now."""
        with self._lock:
            height = self.block_store.height
            latest = self._reader().state_manager.latest_certified()
            if height == 0 or (latest is not None and latest[0].height >= height):
                return False
            self._certify(height)
            return True

    def _online(self) -> list[Node]:
        return [node for node_id, node in self.nodes.items() if node_id not in self.offline]

    def _agree(self) -> list[tuple[Block, bytes]]:
        """Run the agreement network until every online node finalized the next height (or
        the step's bound passes); every height finalized meanwhile, in order."""
        height = self.block_store.height + 1
        self._sync_offline()
        network = self.agreement
        nodes = network.nodes

        def done() -> bool:
            running = [node for node in nodes.values() if node is not None]
            return bool(running) and all(node.finalized_height >= height for node in running)

        if not network.running():
            raise NoBlockFinalized(f"subnet {self.subnet_id}: no node is online at height {height}")
        network.run_until(done, network.now + self._step_budget_ns)
        if height not in self._decided:
            raise NoBlockFinalized(f"subnet {self.subnet_id}: no block finalized at height {height}")
        finalized = []
        while height in self._decided:
            output = self._decided.pop(height)
            if output.block.rank:
                self.fallback_heights += 1
            finalized.append((output.block, output.block_hash))
            height += 1
        return finalized

    def _sync_offline(self) -> None:
        """Crash the ``offline`` nodes on the agreement network; boot the others that are down."""
        for node_id in self.agreement.node_ids:
            if node_id in self.offline:
                self.agreement.stop(node_id)
            else:
                self.agreement.start(node_id)

    def _boot_agreement(self, node_id: str, now: int) -> AgreementNode:
        """``node_id``'s agreement at the executed tip, with the artifacts it signed above it."""
        return self.nodes[node_id].boot_agreement(now)

    def _on_agreement_output(self, node_id: str, output: Output) -> None:
        kind = type(output)
        if kind is Persist:
            self.nodes[node_id].storage.persist(output.message)  # type: ignore[union-attr]
        elif kind is Finalized:
            self._on_finalized(node_id, output)  # type: ignore[arg-type]
        elif kind is Refused:
            reason = output.reason  # type: ignore[union-attr]
            self._refused[reason.split(":", 1)[0]] += 1
            _log.warning("%s refused block %s at height %d: %s", node_id, output.block_hash.hex()[:16],  # type: ignore[union-attr]
                         output.height, reason)  # type: ignore[union-attr]
        # IngressReceived / Certified do not occur: ingress reaches every pool through
        # ``submit_ingress``, certifications come from the certification pool.

    def _on_finalized(self, node_id: str, output: Finalized) -> None:
        """Keep the first ``Finalized`` of each height; any other block final at a height is a
        safety violation (the protocol's guarantee, checked on every node's outputs)."""
        height = output.height
        if height <= self.block_store.height:
            known = self.block_store.hash_at(height)
            if known is not None and known != output.block_hash:
                raise SafetyViolation(f"subnet {self.subnet_id} height {height}: {node_id} finalized "
                                      f"{output.block_hash.hex()}, the chain has {known.hex()}")
            return
        seen = self._decided.get(height)
        if seen is None:
            self._decided[height] = output
            for node in self.nodes.values():   # each finds it as a parent it has not executed yet
                node.decide(output)
        elif seen.block_hash != output.block_hash:
            raise SafetyViolation(f"subnet {self.subnet_id} height {height}: {node_id} finalized "
                                  f"{output.block_hash.hex()}, another node {seen.block_hash.hex()}")

    def _execute(self, block: Block, digest: bytes) -> StateTrees:
        """Every node executes the block (offline ones too: they follow the finalized chain);
        their hashes must agree; the first node's batch and hashes are recorded."""
        results = {}
        for node in self.nodes.values():
            results[node.node_id] = node.execute_next(block, digest)
        # a node given a divergence fault is left to certification to find
        checked = {n: r for n, r in results.items() if n not in self.faulted} or results
        (first_id, (batch, trees)), *others = checked.items()
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
        """Every online node signs ``height`` (``t`` shares suffice when no node has a fault:
        their roots agree), the certification goes to every node; a node whose root differs
        is diverged and recovers at once from a peer's state, verified as state sync verifies
        a checkpoint. No certification: ``CertificationStalled``, every node told why."""
        certification = None
        for node in self._online():
            share = node.own_share(height)
            made = self.certification.add(share) if share is not None else None
            certification = certification or made
            if certification is not None and not self.faulted:
                break
        if certification is None or certification.height != height:
            stall = self.certification.stall(height, 0)
            if stall is None:
                raise SubnetError(f"subnet {self.subnet_id}: height {height} was not certified")
            self.certification_stall = stall
            messages = executed_messages(self.block_store.block(height))
            for node in self.nodes.values():
                node.health.observe_stall(stall, messages)
            raise CertificationStalled(stall.describe(), stall)
        if self.certification_stall is not None:
            self.certification_stall = None
            for node in self.nodes.values():
                node.health.observe_stall(None)
        diverged = [n for n in self.nodes.values() if n.state_manager.latest.certified_root != certification.root]
        shares = self.certification.shares_at(height) if diverged else None
        for node in self.nodes.values():
            node.certified(certification, shares)
        for node in diverged:
            if node.health.divergence is not None:
                self._recover(node, certification)

    def _recover(self, node: Node, certification: Certification) -> None:
        """State sync in one process: the state of a node whose root is the certified one, as
        a checkpoint offer, verified and installed on the diverged ``node``."""
        height = certification.height
        peer = next((p for p in self.nodes.values() if p.health.divergence is None and p.height == height
                     and p.state_manager.latest.certified_root == certification.root), None)
        if peer is None:
            return
        registry = self.registry.get()
        offer = CheckpointOffer(height, self.block_store.hash_at(height), encode_state(peer.state), certification)
        state = verify_offer(offer, registry.public_key_for(self.subnet_id, registry.latest_version),
                             expected_subnet=self.subnet_id, min_height=node.health.divergence.height,  # type: ignore[union-attr]
                             memo=self.signature_memo)
        node.install_synced(height, offer.block_hash, state, certification, f"{peer.node_id}'s certified state")

