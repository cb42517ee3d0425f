"""One replica node (shell): state manager, execution, pools, and its XNet endpoint and client.

A ``ReplicaNode`` owns

* a ``StateManager`` over the subnet's genesis state (its own decoded copy), the
  ``Executor`` and the limits — ``execute`` turns a finalized block into a batch,
  runs ``execute_round`` and commits;
* an ``IngressPool``, and a ``SlicePool`` inside the XNet ``SharedSliceFetcher`` (shared with
  the refresher threads, under its lock) — ``make_block`` and ``validate_block`` are the
  consensus stub's pure functions applied to this node's state and pools;
* an ``XNetServer`` serving ``GetStreamSlice`` / ``ListStreams`` from the latest
  *certified* snapshot, to callers whose TLS certificate the registry lists;
* an ``XNetClient`` and a ``SlicePoolRefresher`` pulling slices of peer subnets' streams to
  us from their nodes, through the ``SharedSliceFetcher`` (``xnet.slice_fetcher``: what to
  ask for; every answer decoded and verified under the registry's key and checked against
  what was asked for before it may enter the pool); a replica whose bytes fail is penalised
  and the next replica of that subnet is asked. After each block the node hands the fetcher
  its new state, so requests continue from the new expected indices.

Signing keys (the secret key share, the TLS key) come from ``NodeSecrets`` and stay here.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from contextlib import nullcontext
from functools import partial
from typing import Callable, ContextManager

from consensus_stub.block import Block
from consensus_stub.block_maker import ChainTip, build_block
from consensus_stub.genesis import NodeSecrets
from consensus_stub.ingress_pool import Admission, IngressPool
from consensus_stub.notary import BlockNotYetValid, InvalidBlock, registry_key_lookup, validate_block
from consensus_stub.registry import Registry
from message_routing.batch import Batch
from message_routing.executor import Executor
from message_routing.limits import Limits
from replica.execution import ExecutionEnvironment
from state_manager.certification import (
    Certification, CertificationShare, SignatureMemo, certified_height_witness, sign_certification_share,
)
from state_manager.messages import MANAGEMENT_CANISTER_ID, Ingress
from state_manager.replicated_state import ReplicatedState
from state_manager.state_codec import decode_state
from state_manager.state_manager import StateManager
from state_manager.state_tree import StateTrees
from xnet.grpc.client import PeerEndpoint, XNetClient
from xnet.grpc.refresher import SlicePoolRefresher
from xnet.grpc.server import SliceProvider, XNetServer
from xnet.grpc.shared_fetcher import SharedSliceFetcher
from xnet.grpc.tls import TlsIdentity
from xnet.payload_validator import PublicKeyLookup
from xnet.peer_selection import PeerSelector
from xnet.slice_fetcher import SliceFetcher
from xnet.slice_pool import SlicePool
from xnet.slice_provider import CertifiedSliceProvider
from xnet.xnet_payload import DecodedXNetPayload, decode_xnet_payload

from .batch_processor import process_block
from .faults import diverge_state
from .metrics import NodeMetrics

__all__ = ["NodeConfig", "RegistryHolder", "ReplicaNode"]


@dataclass(frozen=True)
class NodeConfig:
    """Knobs of the node shell (none of them affects the replicated state)."""

    refresh_interval_s: float = 0.5
    fetch_timeout_s: float = 5.0
    max_response_bytes: int = 16 * 1024 * 1024
    slice_pool_bytes: int = 32 * 1024 * 1024
    keep_heights: int = 8
    server_workers: int = 4
    max_parallel_fetches: int = 4
    ingress_pool_messages: int = 10_000
    ingress_pool_bytes: int = 64 * 1024 * 1024


class RegistryHolder:
    """The registry a shell currently knows; replaced whole when a new version arrives."""

    def __init__(self, registry: Registry) -> None:
        self._lock = threading.Lock()
        self._registry = registry

    def get(self) -> Registry:
        with self._lock:
            return self._registry

    def set(self, registry: Registry) -> None:
        with self._lock:
            self._registry = registry


class ReplicaNode:
    """A node of subnet ``secrets.subnet_id`` (module docstring)."""

    def __init__(
        self,
        secrets: NodeSecrets,
        registry: RegistryHolder,
        genesis_state: bytes | ReplicatedState,
        environment: Executor,
        limits: Limits,
        config: NodeConfig = NodeConfig(),
        *,
        serve_with: Callable[[SliceProvider], SliceProvider] | None = None,
        server_identity: TlsIdentity | None = None,
        signature_memo: SignatureMemo | None = None,
    ) -> None:
        self.node_id = secrets.node_id
        self.subnet_id = secrets.subnet_id
        self.node_index = secrets.node_index
        self._secret_share = secrets.secret_share
        self._identity = secrets.identity
        self.registry = registry
        self.environment = environment
        self.limits = limits
        self.config = config
        # nodes sharing a process share a memo: each certification is pairing-checked once
        # a node process restarted from a checkpoint passes the decoded state of that height
        initial = decode_state(genesis_state) if isinstance(genesis_state, bytes) else genesis_state
        self._signature_memo = signature_memo
        self.state_manager = StateManager(initial, keep_heights=config.keep_heights,
                                          signature_memo=signature_memo)
        self.ingress_pool = IngressPool(max_messages=config.ingress_pool_messages, max_bytes=config.ingress_pool_bytes)
        self.fetcher = SharedSliceFetcher(
            SliceFetcher(SlicePool(self.subnet_id, config.slice_pool_bytes), limits, config.max_response_bytes),
            self._registry_keys, name=self.node_id)
        # through ``self``: a state sync replaces the state manager (``install_state``)
        provider: SliceProvider = CertifiedSliceProvider(self.subnet_id, lambda: self.state_manager.latest_certified())
        if serve_with is not None:
            provider = serve_with(provider)
        self.provider = provider
        self._server_identity = server_identity or self._identity
        self._server: XNetServer | None = None
        self._client: XNetClient | None = None
        self._refresher: SlicePoolRefresher | None = None
        self.address: str | None = None
        #: Every number this node exports (``replica.node.metrics``), served at ``/metrics``.
        self.metrics = NodeMetrics(self.subnet_id, self.node_id)
        self.metrics.read_fetch_records(self._fetch_failures, self.fetcher.rejected_slices)
        self._remember_indices(self.state_manager.take_tip())
        self.metrics.restored(self.state_manager.take_tip())
        #: Fault injection only (``replica.node.faults``): the height whose state this node perturbs.
        self.diverge_at_height: int | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def start_server(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Bind the XNet endpoint and return its ``host:port``."""
        if self._server is not None:
            raise RuntimeError(f"{self.node_id}: the XNet endpoint is already started")
        server = XNetServer(self.provider, self._server_identity, self._allowed_certificates,
                            host=host, port=port, max_workers=self.config.server_workers)
        bound = server.start()
        self._server = server
        self.address = f"{host}:{bound}"
        return self.address

    def start_fetching(self) -> None:
        """Start pulling slices from peer subnets (the registry must list their addresses)."""
        if self._refresher is not None:
            return
        self._client = XNetClient(self._identity, timeout_s=self.config.fetch_timeout_s,
                                  max_response_bytes=self.config.max_response_bytes)
        self._refresher = SlicePoolRefresher(
            self._client, PeerSelector(), self._peer_directory, self.fetcher.wanted, self.fetcher.deliver,
            interval_s=self.config.refresh_interval_s, max_parallel_fetches=self.config.max_parallel_fetches,
            on_fetched=self.metrics.slice_fetched,
        )
        self._refresher.start()

    def stop_fetching(self) -> None:
        refresher = self._refresher  # kept after stopping: its counters stay readable
        if refresher is not None and refresher.running:
            refresher.stop(timeout=self.config.fetch_timeout_s + 1.0)
        client, self._client = self._client, None
        if client is not None:
            client.close()

    def stop(self) -> None:
        self.stop_fetching()
        server, self._server = self._server, None
        if server is not None:
            server.stop(0)

    @property
    def refresher(self) -> SlicePoolRefresher | None:
        return self._refresher

    def _fetch_failures(self) -> dict[tuple[str, str], int]:
        refresher = self._refresher
        return {} if refresher is None else refresher.error_counts_by_kind()

    @property
    def rejected_slices(self) -> dict[tuple[str, str], int]:
        """Fetched slices refused, per ``(remote subnet, error class name)``."""
        return self.fetcher.rejected_slices()

    def install_state(self, state: ReplicatedState, certification: Certification) -> None:
        """Continue from ``state`` (a verified checkpoint of a peer, state sync) and its
        certification: a new state manager, the fetcher's indices from the new state."""
        self.state_manager = StateManager(state, keep_heights=self.config.keep_heights,
                                          signature_memo=self._signature_memo)
        self.deliver_certification(certification)
        self._remember_indices(state)
        self.metrics.restored(state)

    # -- consensus-facing -----------------------------------------------------------------

    @property
    def state(self) -> ReplicatedState:
        """The state at the latest height (read it only between rounds)."""
        return self.state_manager.take_tip()

    def add_ingress(self, ingress: Ingress, now: int) -> Admission:
        """Admit an authenticated message into this node's ingress pool, or say why not:

        * ``CANISTER_NOT_ON_SUBNET`` — the routing table at the latest registry version puts
          the receiver on another subnet; ``UNKNOWN_CANISTER`` — it puts it on none, or on
          ours but the latest state has no such canister. The management canister
          (``MANAGEMENT_CANISTER_ID``) is every subnet's: neither check applies to it;
        * ``DUPLICATE`` — the latest state's ingress history has the message id already;
        * then the pool's own checks (``IngressPool.add``: duplicate, expiry, size, bounds).

        A refused message is not pooled, so it can never reach a block; the refusal is counted
        by reason in the node's metrics (``replica_ingress_pool_refusals_total``)."""
        verdict = self._admit(ingress, now)
        if verdict is not Admission.ADDED:
            self.metrics.ingress_pool_refused(verdict.reason)
        return verdict

    def _admit(self, ingress: Ingress, now: int) -> Admission:
        state = self.state
        if ingress.receiver != MANAGEMENT_CANISTER_ID:
            host = self.registry.get().latest().routing_table.lookup(ingress.receiver)
            if host is not None and host != self.subnet_id:
                return Admission.CANISTER_NOT_ON_SUBNET
            if host is None or ingress.receiver not in state.canisters:
                return Admission.UNKNOWN_CANISTER
        if ingress.message_id in state.ingress_history:
            return Admission.DUPLICATE
        return self.ingress_pool.add(ingress, now, self.limits.max_ingress_ttl_ns, self.limits.max_ingress_bytes)

    def make_block(self, tip: ChainTip, now: int, rank: int, registry_version: int) -> Block:
        registry, own = self.registry.get(), self.subnet_id
        with self.fetcher.pool() as slice_pool:
            return build_block(
                tip=tip, now=now, registry_version=registry_version, maker=self.node_id, rank=rank,
                state=self.state, past_payloads=(), ingress_pool=self.ingress_pool, slice_pool=slice_pool,
                limits=self.limits, routing_table=registry.record(registry_version).routing_table,
                hosted_before=lambda canister_id: registry.has_hosted(own, canister_id, registry_version),
            )

    def validate_block(self, block: Block, tip: ChainTip, now: int | None) -> DecodedXNetPayload:
        """``notary.validate_block`` against this node's state; raises ``InvalidBlock`` /
        ``BlockNotYetValid``, else returns the decoded XNet payload."""
        try:
            return validate_block(block, tip=tip, state=self.state, past_payloads=(), registry=self.registry.get(),
                                  limits=self.limits, now=now)
        except (InvalidBlock, BlockNotYetValid) as exc:
            self.metrics.block_refused(type(exc).__name__)
            raise

    def execute(self, block: Block, block_hash: bytes, decoded: DecodedXNetPayload | None = None) -> tuple[Batch, StateTrees]:
        """Apply a finalized block: batch, ``execute_round``, commit; return the batch and trees."""
        if decoded is None:
            decoded = decode_xnet_payload(block.xnet_payload)
        topology = self.registry.get().topology(block.registry_version)
        started = time.monotonic()
        fault = None
        if self.diverge_at_height == block.height:   # fault injection (replica.node.faults)
            fault = partial(diverge_state, node_index=self.node_index)
        with self._observed():
            batch, state, trees = process_block(self.state_manager, block, block_hash, decoded, topology,
                                                self.environment, self.limits, fault=fault)
        self.metrics.committed(state, time.monotonic() - started)
        self.ingress_pool.remove(block.ingress)
        self.ingress_pool.purge_expired(block.time)
        self._remember_indices(state)
        return batch, trees

    def _observed(self) -> ContextManager[None]:
        """The round's messages, seen by this node's metrics (nodes of one process may share
        an environment: each observes while it executes)."""
        environment = self.environment
        if isinstance(environment, ExecutionEnvironment):
            return environment.observed_by(self.metrics.message_executed)
        return nullcontext()

    def sign_share(self, height: int) -> CertificationShare:
        trees = self.state_manager.snapshot(height)
        if trees is None:
            raise LookupError(f"{self.node_id} keeps no state at height {height}")
        # the witness proves the height to the peers: the signature covers the root only
        return sign_certification_share(height, trees.certified_root, self.node_index, self._secret_share,
                                        certified_height_witness(trees.certified))

    def deliver_certification(self, certification: Certification) -> None:
        registry = self.registry.get()
        key = registry.public_key_for(self.subnet_id, registry.latest_version)
        if key is None:
            raise LookupError(f"no public key for {self.subnet_id} in the registry")
        self.state_manager.deliver_certification(certification, key)
        self.metrics.certified(certification.height)

    # -- XNet fetching ---------------------------------------------------------------------

    def _remember_indices(self, state: ReplicatedState) -> None:
        self.fetcher.remember_indices(state, self.registry.get().latest().subnet_ids())

    def _registry_keys(self) -> tuple[PublicKeyLookup, int]:
        registry = self.registry.get()
        return registry_key_lookup(registry), registry.latest_version

    def _allowed_certificates(self) -> tuple[bytes, ...]:
        registry = self.registry.get()
        return registry.allowed_certificates(registry.latest_version)

    def _peer_directory(self) -> dict[str, list[PeerEndpoint]]:
        record = self.registry.get().latest()
        directory = {}
        for subnet in record.subnet_ids():
            if subnet == self.subnet_id:
                continue
            directory[subnet] = [
                PeerEndpoint(n.node_id, n.xnet_address, n.certificate_pem)
                for n in record.nodes_of(subnet) if not n.xnet_address.endswith(":0")
            ]
        return directory
