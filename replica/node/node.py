"""One member of a subnet: ``Node``, run by both drivers (docs/architecture.md, *The node*).

A ``Node`` is a ``ReplicaNode`` (its state, pools, execution, XNet endpoint and client) that
also takes part in agreement and keeps what it must keep. It owns

* **restore** (``Node.restore``): the newest checkpoint its storage has (none: the subnet's
  genesis), then the blocks of its own chain above it re-executed, each height checked
  against what it recorded the first time;
* **the agreement's callbacks** (``boot_agreement``): ``propose`` and ``validate`` apply the
  block rules of ``replica.node.consensus_rules`` to its executed tip; ``on_output`` carries out
  what the protocol asks of it (signed artifacts to keep, certifications, peers' ingress);
* **execution**: ``execute_next`` stores, executes and records the next finalized block,
  checkpoints when due and signs its certification share (``on_share``); ``apply`` is the
  same for a block the node's own agreement finalized, which may have to wait for a registry
  version the node has not read yet;
* **certification**: ``certified`` delivers a certification once its height is executed;
* **state sync**: ``install_synced`` continues from a verified peer checkpoint
  (``replica.node.state_sync`` decides and verifies);
* **divergence** (``certification_health``): a certification of a root other than its own
  marks the node diverged: it stops signing shares, keeps executing the finalized chain, and
  ``install_synced`` replaces its state with a certified checkpoint at or above the diverged
  height, re-executing its own blocks above it; ``check_certification`` notes a stall;
* **the ingress API's backend** (``backend``): queries at the latest certified height, the
  certified tree, status; submission is the driver's (how a message reaches the other nodes).

What it needs comes as arguments: the registry view, its secrets, limits, the execution
environment, a clock for block times, its storage (files or memory) and its timing. The two
drivers differ in *when* a finalized block is executed:

* a node process (``replica.node.process``; ``execute_at_once=True``) executes each block as
  soon as its agreement finalizes it. The protocol may finalize blocks and then, within the
  same step, ask for a proposal or a verdict on top of them, before the driver has carried
  out the ``Finalized`` outputs; so ``propose`` and ``validate`` first execute what the
  protocol holds finalized (``_apply_finalized_through``), and the later outputs find those
  heights done;
* the in-process subnet (``execute_at_once=False``) executes a height on all its nodes at
  once when its step ends, so that every node of a step proposes on the same executed tip and
  a run depends only on its steps. It hands every node the blocks decided meanwhile
  (``decide``), which ``propose`` and ``validate`` find as parents not yet executed.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from typing import Any, Callable, Optional

from consensus_stub.agreement.divergence import Divergence, SharesAtHeight
from consensus_stub.agreement.interface import (
    AgreementConfig, BlockContext, Certified, Finalized, IngressReceived, Output, Persist, Verifier,
)
from consensus_stub.agreement.protocol import AgreementNode
from consensus_stub.agreement.signing import NodeKeyVerifier, node_key_signer
from consensus_stub.block import Block
from consensus_stub.block_maker import ChainTip
from consensus_stub.genesis import NodeSecrets
from consensus_stub.notary import BlockNotYetValid
from consensus_stub.registry import SubnetRecord
from message_routing.batch import Batch
from message_routing.executor import Executor
from message_routing.limits import Limits
from replica.client.answers import QueryAnswer
from replica.client.refusals import CanisterNotOnSubnet, NotCertifiedYet, UnknownCanister
from replica.execution import ExecutionEnvironment
from replica.execution.codec import RawPayload
from replica.execution.dry_run import DryRunResult, dry_run
from replica.ic.certificate import CertificateDelegation
from replica.execution.message_execution import MessageUsage
from replica.ic.identities import Ed25519Identity
from replica.ic.textual_ids import canister_text
from state_manager.certification import (
    Certification, CertificationError, CertificationShare, SignatureMemo, verify_certification,
)
from state_manager.labeled_trie import LabeledTrie
from state_manager.messages import Ingress, Reject, Reply
from state_manager.replicated_state import ReplicatedState
from state_manager.state_manager import CertificationMismatch
from state_manager.state_tree import StateTrees
from xnet.grpc.server import SliceProvider
from xnet.grpc.tls import TlsIdentity

from .certification_health import CertificationHealth, executed_messages
from .consensus_rules import check_empty_successor, check_executed, empty_successor, parent_of
from .backend import NodeBackend
from .node_store import NodeStoreError
from .replica_node import NodeConfig, RegistryHolder, ReplicaNode
from .storage import FileStorage, MemoryStorage, NodeRefused
from replica.client.subnet_ids import root_key_of, subnet_principal_of

__all__ = ["NodeTiming", "Node", "NodeRefused", "replica_version"]

_log = logging.getLogger(__name__)

SEC = 1_000_000_000


@dataclass(frozen=True, slots=True)
class NodeTiming:
    """The agreement protocol's timing on a node, in nanoseconds (``AgreementConfig``'s fields)."""

    round_timeout_ns: int = 1 * SEC
    block_interval_ns: int = 1 * SEC
    rebroadcast_interval_ns: int = 3 * SEC
    absent_after_ns: int = 6 * SEC
    retained_heights: int = 64

    def config(self, record: SubnetRecord, node_id: str) -> AgreementConfig:
        return AgreementConfig(record, node_id, round_timeout_ns=self.round_timeout_ns,
                               rebroadcast_interval_ns=self.rebroadcast_interval_ns,
                               retained_heights=self.retained_heights, block_interval_ns=self.block_interval_ns,
                               absent_after_ns=self.absent_after_ns)


@lru_cache(maxsize=1)
def replica_version() -> str:
    """The version the ingress API's status reports: the installed package's."""
    try:
        return metadata.version("subnet-replica")
    except metadata.PackageNotFoundError:
        return "unknown"


Storage = MemoryStorage | FileStorage


class Node(ReplicaNode):
    """A node of subnet ``secrets.subnet_id`` (module docstring)."""

    def __init__(
        self,
        secrets: NodeSecrets,
        registry: RegistryHolder,
        state: bytes | ReplicatedState,
        environment: Executor,
        limits: Limits,
        *,
        storage: Optional[Storage] = None,
        config: NodeConfig = NodeConfig(),
        timing: NodeTiming = NodeTiming(),
        clock: Callable[[], int] = time.time_ns,
        execute_at_once: bool = True,
        verifier: Optional[Verifier] = None,
        knows_registry_version: Optional[Callable[[int], bool]] = None,
        on_share: Optional[Callable[[CertificationShare], None]] = None,
        signature_memo: Optional[SignatureMemo] = None,
        serve_with: Optional[Callable[[SliceProvider], SliceProvider]] = None,
        server_identity: Optional[TlsIdentity] = None,
        diverge_at: Optional[int] = None,
    ) -> None:
        super().__init__(secrets, registry, state, environment, limits, config, serve_with=serve_with,
                         server_identity=server_identity, signature_memo=signature_memo)
        self.storage: Storage = storage if storage is not None else MemoryStorage()
        self.timing = timing
        self._clock = clock
        self.execute_at_once = execute_at_once
        self._verifier = verifier
        self._knows = knows_registry_version or (lambda version: self.registry.get().has_version(version))
        self._on_share = on_share
        self._sign = node_key_signer(secrets.identity)
        #: The node's Ed25519 signing identity (the key the registry lists): it signs query answers.
        self.signing_identity = Ed25519Identity.from_private_bytes(secrets.signing_key)
        #: The agreement this node runs (``boot_agreement``); its driver feeds it.
        self.agreement: Optional[AgreementNode] = None
        #: Blocks known final but not executed here yet, by height (``decide``).
        self._decided: dict[int, Finalized] = {}
        #: Blocks validated above the executed tip, with their decoded XNet payloads.
        self._validated: list[tuple[Block, Any]] = []
        self._pending_certification: Optional[Certification] = None
        #: ``(height, registry version)``: the next finalized block waits for a version not read yet.
        self.awaiting_registry: Optional[tuple[int, int]] = None
        #: Blocks this node could not judge yet, per reason (``BlockNotYetValid`` subclass name).
        self.not_yet_valid: Counter[str] = Counter()
        self.replayed = 0
        self.restore_s = 0.0
        #: Fault injection only (``replica.node.faults``): perturb the state computed at this height.
        self.diverge_at_height = diverge_at
        #: Whether this node diverged or sees certification stall (``certification_health``).
        self.health = CertificationHealth(self.node_id, self.metrics)

    @classmethod
    def restore(cls, secrets: NodeSecrets, registry: RegistryHolder, genesis_state: bytes, environment: Executor,
                limits: Limits, *, storage: Storage, **options: Any) -> "Node":
        """The node at the newest state its storage can rebuild (module docstring): its newest
        usable checkpoint, or ``genesis_state``, with the blocks of its chain above re-executed."""
        started = time.monotonic()
        checkpoint = storage.load_checkpoint()
        base = checkpoint.height if checkpoint is not None else 0
        node = cls(secrets, registry, checkpoint.state if checkpoint is not None else genesis_state, environment,
                   limits, storage=storage, **options)
        blocks = storage.blocks
        for block in blocks.blocks_from(base + 1):
            node._execute(block, blocks.hash_at(block.height), replaying=True)   # type: ignore[arg-type]
        node.replayed = blocks.height - base
        node.restore_s = time.monotonic() - started
        _log.info("%s: state of height %d (checkpoint %s, %d blocks re-executed) in %.2f s", node.node_id,
                  node.height, base or "none", node.replayed, node.restore_s)
        return node

    @property
    def block_store(self):
        return self.storage.blocks

    @property
    def height(self) -> int:
        """The executed height."""
        return self.state_manager.latest_height

    # -- agreement ------------------------------------------------------------------------

    def boot_agreement(self, now: int) -> AgreementNode:
        """A new agreement for this node (``self.agreement``): restored from the retained tail
        of its chain ending in its latest finalization proof, or at genesis, or else at its
        executed tip (a chain without a matching proof: a crash between the append and the
        proof's write, or a node whose storage keeps no proofs), with the artifacts it signed."""
        registry = self.registry.get()
        config = self.timing.config(registry.subnet(self.subnet_id, registry.latest_version), self.node_id)
        verifier = self._verifier or NodeKeyVerifier.for_subnet(registry.latest(), self.subnet_id)
        common: dict[str, Any] = dict(propose=self.propose, validate=self.validate, sign=self._sign, verifier=verifier,
                                      now=now, own_artifacts=self.storage.own_artifacts(),
                                      signature_memo=self._signature_memo)
        store, proof = self.block_store, self.storage.proof()
        if proof is not None and store.hash_at(proof[0]) == proof[1] and store.block(proof[0]) is not None:
            height = proof[0]
            low = max(height - config.retained_heights + 1, 1)
            tail = [Finalized(store.block(h), store.hash_at(h), proof[2] if h == height else ())  # type: ignore[arg-type]
                    for h in range(low, height + 1) if store.block(h) is not None]
            self.agreement = AgreementNode.restore(config, finalized=tail, **common)
        elif store.height == 0:
            self.agreement = AgreementNode(config, **common)
        else:
            self.agreement = AgreementNode.from_synced_tip(config, height=store.height, block_hash=store.tip_hash,
                                                           **common)
        return self.agreement

    def propose(self, context: BlockContext, now: int) -> Block:
        """The block this node makes in ``context``, stamped with its clock (not agreement time):
        from its pools on its executed tip, else its parent's empty successor."""
        if self.execute_at_once:
            self._apply_finalized_through(context.tip.height)
        time_ns = self._clock()
        store = self.block_store
        if context.height == store.height + 1 and context.parent_hash == store.tip_hash:
            return self.make_block(ChainTip(store.height, context.parent_hash), time_ns, context.rank,
                                   self.registry.get().latest_version)
        return empty_successor(context, parent_of(context, self._decided), self.state, time_ns, self.node_id)

    def validate(self, block: Block, context: BlockContext, now: int) -> None:
        """Judge ``block`` by the rules of ``consensus_rules``: completely on the executed tip
        (its decoded payload kept for execution), as an empty successor above it, as the block
        executed at a height executed here."""
        self._knows(block.registry_version)   # a new version: read it now, not at the next poll
        if self.execute_at_once:
            self._apply_finalized_through(context.tip.height)
        store, clock = self.block_store, self._clock()
        if block.height == store.height + 1:
            try:
                decoded = self.validate_block(block, ChainTip(store.height, store.tip_hash), clock)
            except BlockNotYetValid as exc:
                self.not_yet_valid[type(exc).__name__] += 1
                _log.info("%s cannot judge the block of %s at height %d yet: %s", self.node_id, block.maker,
                          block.height, exc)
                raise
            self._validated.append((block, decoded))
            return
        if block.height <= store.height:
            check_executed(block, store.hash_at)
            return
        check_empty_successor(block, parent_of(context, self._decided), clock)

    def on_output(self, output: Output) -> None:
        """Carry out what the protocol asks of this node besides sending and finalizing."""
        if isinstance(output, Persist):
            self.storage.persist(output.message)
        elif isinstance(output, Certified):
            self.certified(output.certification)
        elif isinstance(output, IngressReceived):
            now = self._clock()
            for ingress in output.messages:
                self.add_ingress(ingress, now)
        else:   # Refused: counted by the protocol and in the node's metrics
            _log.info("%s: %s", self.node_id, output)

    def on_finalized(self, output: Finalized) -> None:
        """A block this node's agreement finalized: executed now (or once its registry version
        is read), its proof kept."""
        if self.apply(output.block, output.block_hash) and output.proof:
            self.storage.write_proof(output.height, output.block_hash, output.proof)

    def decide(self, output: Finalized) -> None:
        """A block known final that its driver will have this node execute later."""
        self._decided.setdefault(output.height, output)

    # -- execution ------------------------------------------------------------------------

    def execute_finalized(self) -> None:
        """Execute what the agreement has finalized and this node has not (blocks that waited
        for a registry version it had not read)."""
        if self.agreement is not None:
            self._apply_finalized_through(self.agreement.finalized_height)

    def _apply_finalized_through(self, height: int) -> None:
        """Execute the finalized blocks the agreement holds up to ``height``."""
        agreement = self.agreement
        while agreement is not None and self.block_store.height < height:
            entry = agreement.finalized_block(self.block_store.height + 1)
            if entry is None or not self.apply(*entry):
                return

    def apply(self, block: Block, digest: bytes) -> bool:
        """Store and execute the next finalized block (one already stored must be the same);
        whether it is stored. A block of a registry version this node has not read (the
        registry is re-read first) waits, unstored, and so do the blocks after it, until the
        version is known: executing needs that version's topology, and a block stored but not
        executed would leave the chain ahead of the state. (Its peers may finalize it without
        this node's vote, so validating it first is not what makes the version known.)"""
        store = self.block_store
        if block.height <= store.height:
            if store.hash_at(block.height) not in (digest, None):
                raise NodeStoreError(f"height {block.height} was finalized as another block before")
            return True
        if block.height > store.height + 1:   # the one before it waits for its registry version
            self._apply_finalized_through(block.height - 1)
            if block.height > store.height + 1:
                return False
        if not self._knows(block.registry_version):
            if self.awaiting_registry != (block.height, block.registry_version):
                _log.warning("%s: finalized height %d is of registry version %d, which it has not read yet "
                             "(latest %d): it waits", self.node_id, block.height, block.registry_version,
                             self.registry.get().latest_version)
            self.awaiting_registry = (block.height, block.registry_version)
            return False
        self.awaiting_registry = None
        self.execute_next(block, digest)
        return True

    def execute_next(self, block: Block, digest: bytes) -> tuple[Batch, StateTrees]:
        """Store and execute the block at the next height (the caller knows it is final)."""
        self.block_store.append(block, digest)
        return self._execute(block, digest)

    def _execute(self, block: Block, digest: bytes, *, replaying: bool = False) -> tuple[Batch, StateTrees]:
        decoded = next((payload for seen, payload in self._validated if seen == block), None)
        batch, trees = self.execute(block, digest, decoded)
        if self._validated:
            self._validated = [entry for entry in self._validated if entry[0].height > block.height]
        self._decided.pop(block.height, None)
        self.storage.executed(block, batch, trees)
        if self.storage.checkpoint_if_due(block.height, self.state, trees.full_hash) and not replaying:
            finalized = self.agreement.finalized_height if self.agreement is not None else block.height
            self.storage.after_checkpoint(block.height, finalized)
        pending = self._pending_certification
        if pending is not None and pending.height <= block.height:
            self._pending_certification = None
            self.certified(pending)
        if not replaying and self._on_share is not None and self.agreement is not None \
                and block.height + 2 >= self.agreement.finalized_height and self.health.divergence is None:
            # heights caught up from peers are certified already: no shares for them; a
            # diverged node signs none (its roots are not the subnet's)
            self._on_share(self.sign_share(block.height))
        return batch, trees

    # -- certification and state sync -----------------------------------------------------

    def own_share(self, height: int) -> Optional[CertificationShare]:
        """This node's share of ``height``; none while it is diverged."""
        return None if self.health.divergence is not None else self.sign_share(height)

    def certified(self, certification: Certification, shares: Optional[SharesAtHeight] = None) -> None:
        """Deliver the subnet's certification of a height (kept until that height is executed);
        one of a height no longer kept is dropped; one of a root other than this node's at
        that height makes it diverged (``shares``: who signed what there; by default what its
        agreement received)."""
        if certification.height > self.height:
            self._pending_certification = certification
            return
        trees = self.state_manager.snapshot(certification.height)
        if trees is not None and trees.certified_root != certification.root:
            self._diverged(certification, trees.certified_root, shares)
            return
        try:
            self.deliver_certification(certification)
        except CertificationMismatch as exc:
            _log.debug("certification of %d not kept: %s", certification.height, exc)
            return
        self.storage.keep_certification(certification, self.block_store.hash_at(certification.height))

    def _diverged(self, certification: Certification, own_root: bytes, shares: Optional[SharesAtHeight]) -> None:
        """The subnet certified another root than ours at a height: diverged, if the
        certification verifies (a bad one proves nothing and is dropped). Once diverged, the
        later heights' certifications differ too: the first one is what is reported."""
        if self.health.divergence is not None:
            return
        registry = self.registry.get()
        key = registry.public_key_for(self.subnet_id, registry.latest_version)
        try:
            if key is None:
                raise CertificationError(f"no public key for {self.subnet_id}")
            verify_certification(certification, key, memo=self._signature_memo)
        except CertificationError as exc:
            _log.warning("%s: a certification of height %d with another root does not verify: %s", self.node_id,
                         certification.height, exc)
            return
        height = certification.height
        if shares is None:
            shares = (self.agreement.certification_shares(height) if self.agreement is not None
                      else SharesAtHeight(height, ()))
        shares = shares.with_signer(own_root, self.node_id)   # ours, whether or not it came back to us
        self.health.diverged(Divergence(height, own_root, certification.root, shares),
                             executed_messages(self.block_store.block(height)))

    def check_certification(self, rounds: int) -> None:
        """Note whether certification stalls: a height with shares but no certification
        while the agreement finalized ``rounds`` heights above it."""
        if self.agreement is None:
            return
        stall = self.agreement.certification_stall(rounds)
        messages = executed_messages(self.block_store.block(stall.height)) if stall is not None else ()
        self.health.observe_stall(stall, messages)

    def install_synced(self, height: int, block_hash: bytes, state: ReplicatedState,
                       certification: Certification, source: str = "a peer") -> bool:
        """Continue from a verified peer checkpoint of ``height``: its state, a chain starting at
        its block, a checkpoint of it, a new agreement at that tip (keeping the artifacts this
        node signed); not if the node has executed that height meanwhile — unless it diverged
        at or below ``height``: then ``_repair``, or, if it no longer keeps the blocks above
        ``height``, this same install (its checkpoints from the diverged height up set aside)."""
        divergence = self.health.divergence
        if divergence is not None and divergence.height <= height <= self.height:
            if self._repair(height, block_hash, state, certification, source):
                return True
            if self.block_store.hash_at(height) not in (block_hash, None):
                _log.warning("%s: the certified checkpoint of height %d is not on its chain; not installed",
                             self.node_id, height)
                return False
        elif height <= self.height:
            return False
        if divergence is not None:
            self.storage.set_aside_from(divergence.height)
        self.install_state(state, certification)
        self._validated.clear()
        self._decided.clear()
        self._pending_certification = None
        self.storage.install(height, block_hash, state, self.state_manager.latest.full_hash, certification)
        self.boot_agreement(self._clock())
        self.health.recovered(height, source)
        return True

    def _repair(self, height: int, block_hash: bytes, state: ReplicatedState, certification: Certification,
                source: str) -> bool:
        """A diverged node takes a certified state of a height it executed (on the same
        finalized chain) and re-executes its own blocks above it; its agreement goes on. Its
        checkpoints from the diverged height up are moved aside. Whether it did (not when its
        chain there differs or lacks a block above)."""
        store, tip = self.block_store, self.height
        if store.hash_at(height) != block_hash or any(store.block(h) is None for h in range(height + 1, tip + 1)):
            return False
        blocks = [(store.block(h), store.hash_at(h)) for h in range(height + 1, tip + 1)]
        self.install_state(state, certification)
        self.storage.repair(height, block_hash, state, self.state_manager.latest.full_hash, certification,
                            self.health.divergence.height)   # type: ignore[union-attr]
        self._pending_certification = None
        self.health.recovered(height, source)
        for block, digest in blocks:
            self._execute(block, digest)   # type: ignore[arg-type]
        return True

    # -- the ingress API ------------------------------------------------------------------

    def query_certified(self, canister_id: int, method: str, arg: Any,
                        caller: bytes) -> Optional[tuple[Reply | Reject, int]]:
        """A query on the latest state if that height is certified: ``(answer, height)``."""
        latest = self.state_manager.latest_certified()
        if latest is None or latest[0].height != self.state_manager.latest_height:
            return None
        environment = self.environment
        if not isinstance(environment, ExecutionEnvironment):
            return environment.run_query(self.state, canister_id, method, arg, caller, limits=self.limits), latest[0].height
        usage = MessageUsage("query")
        answer = environment.run_query(self.state, canister_id, method, arg, caller, limits=self.limits, usage=usage)
        self.metrics.message_executed(canister_id, None, usage)
        return answer, latest[0].height

    def dry_run_certified(self, canister_id: int, method: str, payload: bytes,
                          caller: bytes) -> Optional[DryRunResult]:
        """An update executed on a copy of the latest state if that height is certified, never
        committed (``replica.execution.dry_run``); ``None`` if it is not certified."""
        latest = self.state_manager.latest_certified()
        if latest is None or latest[0].height != self.state_manager.latest_height:
            return None
        return dry_run(self.environment, self.state, latest[0].full, canister_id, method, payload, caller,
                       self.limits)

    def certified_tree(self):
        latest = self.state_manager.latest_certified()
        return None if latest is None else (latest[0].certified, latest[1])

    def api_status(self) -> dict:
        """The ingress API's ``status``: heights, the certified root, the subnet key and the
        registry version of the latest executed batch (reading the current state's attribute
        needs no lock; a migration waits for every node to reach a version)."""
        registry = self.registry.get()
        latest = self.state_manager.latest_certified()
        key = registry.public_key_for(self.subnet_id, registry.latest_version)
        return {
            "subnet_id": self.subnet_id, "node_id": self.node_id,
            "finalized_height": self.state_manager.latest_height,
            "certified_height": latest[1].height if latest is not None else None,
            "certified_root": latest[1].root.hex() if latest is not None else None,
            "subnet_public_key": key.hex() if key is not None else None,
            "registry_version": self.state.metadata.network_topology.registry_version,
            "replica_version": replica_version(),
        }

    def backend(self, submit: Callable[[Ingress], None], locked: Callable[[Callable[[], Any]], Any],
                clock: Callable[[], int] = time.time_ns,
                delegation: "Callable[[LabeledTrie], CertificateDelegation | None]" = lambda certified: None,
                operators: frozenset[bytes] = frozenset()) -> NodeBackend:
        """This node's ``NodeBackend`` for the ingress HTTP API: ``submit`` is how its driver
        admits and spreads a message; ``locked(action)`` runs ``action`` while nothing else
        changes the node's state; ``delegation(certified)`` is the root subnet's delegation to
        this subnet (``replica.node.delegation``; None on the root subnet)."""

        def on_certified_state(canister_id: int, run: Callable[[], Any]) -> Any:
            """``run()`` under the lock, for a canister this subnet hosts, on a certified state."""
            host = self.registry.get().latest().routing_table.lookup(canister_id)
            if host is None:
                raise UnknownCanister(f"no subnet hosts canister {canister_text(canister_id)}")
            if host != self.subnet_id:
                raise CanisterNotOnSubnet(f"canister {canister_text(canister_id)} is on subnet {host}, "
                                          f"not {self.subnet_id}")
            result = locked(run)
            if result is None:
                raise NotCertifiedYet(f"{self.node_id}: its latest state is not certified yet")
            return result

        def query(canister_id: int, method: str, payload: bytes, caller: bytes) -> QueryAnswer:
            arg = RawPayload(payload)   # decoded by the method's declaration: Candid or msgpack
            answer, height = on_certified_state(
                canister_id, lambda: self.query_certified(canister_id, method, arg, caller))
            if isinstance(answer, Reply):
                return QueryAnswer(height, reply=answer.data)
            return QueryAnswer(height, reject_code=answer.code.name, reject_message=answer.message)

        def dry_run_call(canister_id: int, method: str, payload: bytes, caller: bytes) -> DryRunResult:
            return on_certified_state(
                canister_id, lambda: self.dry_run_certified(canister_id, method, payload, caller))

        def request_sender(request_id: bytes) -> bytes | None:
            status = self.state.ingress_history.statuses.get(request_id)
            return None if status is None else status.source

        record = self.registry.get().latest()
        return NodeBackend(self.subnet_id, self.node_id, self.limits, submit, query, self.certified_tree,
                           self.api_status, clock, self.metrics, dry_run_call,
                           subnet_principal=subnet_principal_of(record, self.subnet_id),
                           root_key=lambda: root_key_of(self.registry.get().latest()),
                           delegation=delegation, request_sender=request_sender, operators=operators,
                           node_signer=self.signing_identity)

    def close(self) -> None:
        """Stop serving and fetching and close the storage."""
        self.stop()
        self.storage.close()
