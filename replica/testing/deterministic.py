"""The deterministic network: every subnet and node in the test's process, driven by ``tick``.

No socket, no thread, no wall clock. It is built from the replica's own parts — each subnet is
a ``replica.inprocess.subnet.Subnet`` (block making, validation on every node, execution,
commit, threshold-BLS certification) — with three substitutions:

* the clock is a ``ManualClock`` the test moves (``set_time`` / ``advance_time``);
* XNet: before a subnet makes its block, each of its online nodes pulls certified slices from
  a peer node's slice provider in-process (``inprocess_xnet``), through the same encode →
  decode/verify → validate path a live network uses;
* a call's answer is read as a client would: a read_state-style certificate of
  ``/request_status/<id>``, verified under the subnet key (``certified_status``).

``tick()`` is one round: for each subnet in name order, pull slices, then ``Subnet.step``. A
subnet without a quorum of online nodes makes no block that round (``stalled`` counts it).

Certification on demand. A live subnet certifies every height; here a height is certified
(real threshold BLS: share, aggregation, every node's check) only when something needs it:
a status read by the test, or XNet. For XNet each subnet has a *served* snapshot — the
certified height its endpoint answers peers from — moved to its latest height (certifying
it) when a peer's pull finds the stream to that peer changed: at once for new messages or
reject signals; for a change that only acknowledges (``signals_end`` / ``begin`` moving)
once ``SIGNAL_LAG`` heights have passed, like a slice pool refreshed a little late. Reads by
the test never move a served snapshot, so reading statuses changes nothing in the run. The
policy is itself deterministic, so hashes depend on nothing but the calls. It turns an idle
round from ~5 ms of signing and pairing checks per subnet into ~0.1-0.2 ms of block making
and execution (see ``benchmarks/python_api.py``).

The same seed, limits and sequence of calls give the same state hashes in every run and
process: nothing here depends on hash seeds, addresses or time.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from consensus_stub.genesis import SubnetSpec
from consensus_stub.registry import RegistryRecord
from message_routing.limits import Limits
from replica.client.agent import RequestStatus, reject_code_name
from replica.client.envelope import sign_request
from replica.client.identity import Identity, source_of
from replica.execution import ExecutionEnvironment
from replica.execution.codec import RawPayload, decode_payload, decode_reply, encode_value
from replica.execution.dry_run import dry_run
from replica.client.certificate import SignatureCache
from replica.client.subnet_ids import root_subnet_id, subnet_principal_of
from replica.node.delegation import delegation_of
from replica.ic.textual_ids import canister_text, subnet_text
from replica.node.replica_node import NodeConfig, RegistryHolder
from replica.inprocess.subnet import NoBlockFinalized, NodeHooks, Subnet
from xnet.slice_provider import CertifiedSliceProvider
from state_manager.certification import Certification, SignatureMemo
from state_manager.ingress_history import IngressState
from state_manager.messages import Reply
from state_manager.replicated_state import ReplicatedState
from state_manager.state_codec import encode_state
from state_manager.state_tree import StateTrees
from state_manager.streams import StreamHeader

from .certified_status import status_from_certificate, verified_certificate
from .clock import ManualClock
from .errors import CallNotAnswered, CallRejected, TestingError, UnknownNode, UnknownSubnet
from .genesis_cache import dealt_genesis
from .inprocess_xnet import LastPulls, pull_slices

__all__ = ["DeterministicNetwork", "ANSWERED"]

#: Ingress states in which the answer is final (replied or rejected; ``done`` has forgotten it).
ANSWERED = (IngressState.REPLIED, IngressState.REJECTED, IngressState.DONE)
#: A certificate older than this fails verification (the agent's default).
MAX_CERTIFICATE_AGE_NS = 300 * 10**9
#: Heights an acknowledgement-only change of a stream may wait to be served (``_worth_serving``).
SIGNAL_LAG = 4
# Nodes in a test process keep few heights: nobody fetches old snapshots here.
_CONFIG = NodeConfig(keep_heights=3)


@dataclass(frozen=True)
class SubnetInfo:
    """One subnet of a testnet's topology."""

    subnet_id: str
    node_ids: tuple[str, ...]
    canister_ranges: tuple[tuple[int, int], ...]
    public_key: bytes

    @property
    def principal(self) -> str:
        """The subnet's IC principal (textual), from its threshold key."""
        return subnet_text(self.public_key)

    def __repr__(self) -> str:   # ids as people read them; not the key's 96 bytes
        ranges = ", ".join(f"{canister_text(a)}..{canister_text(b)}" for a, b in self.canister_ranges)
        return (f"SubnetInfo({self.subnet_id!r}, principal {self.principal}, nodes {', '.join(self.node_ids)}, "
                f"canisters {ranges or 'none'})")


def subnet_infos(record: RegistryRecord) -> dict[str, SubnetInfo]:
    """Every subnet of a registry version, with its canister ranges."""
    return {
        s.subnet_id: SubnetInfo(
            s.subnet_id, s.node_ids,
            tuple((r.start, r.end) for r in record.routing_table.ranges_of(s.subnet_id)), s.public_key)
        for s in record.subnets
    }


class DeterministicNetwork:
    """The in-process network (module docstring); ``replica.testing.Testnet`` is its face."""

    def __init__(self, specs: list[SubnetSpec], *, seed: bytes, limits: Limits, clock: ManualClock,
                 diverge: dict[str, int] | None = None) -> None:
        registry, secrets = dealt_genesis(tuple(sorted(specs, key=lambda s: s.subnet_id)), seed)
        unknown = sorted(set(diverge or {}) - set(secrets))
        if unknown:
            raise UnknownNode(f"diverge names nodes this testnet does not have: {unknown}")
        bad = {n: h for n, h in (diverge or {}).items() if type(h) is not int or h < 1}
        if bad:
            raise TestingError(f"diverge takes a height of at least 1 per node, not {bad}")
        self.registry = RegistryHolder(registry)
        self.limits = limits
        self.clock = clock
        self.environment = ExecutionEnvironment()
        self.subnets: dict[str, Subnet] = {}
        #: The pairing checks passed in this process, by every subnet's nodes and by the client
        #: verifying their certificates (and the root subnet's delegations) as an agent would.
        self._signature_memo = SignatureMemo()
        self.stalled: dict[str, int] = {}
        topology = registry.topology(registry.latest_version)
        for spec in sorted(specs, key=lambda s: s.subnet_id):
            state = ReplicatedState(spec.subnet_id, topology)
            state.metadata.batch_time = clock()
            node_secrets = [s for s in secrets.values() if s.subnet_id == spec.subnet_id]
            hooks = {s.node_id: NodeHooks(diverge_at=diverge[s.node_id]) for s in node_secrets
                     if s.node_id in (diverge or {})}
            self.subnets[spec.subnet_id] = Subnet(
                spec.subnet_id, self.registry, node_secrets, encode_state(state), self.environment, limits,
                config=_CONFIG, clock=clock, hooks=hooks, signature_memo=self._signature_memo)
            self.stalled[spec.subnet_id] = 0
        self._nonce = 0
        self._verified_heights: dict[str, int] = {}
        self._certificates = SignatureCache()
        #: Per subnet: the certified snapshot its XNet endpoint serves, its stream headers, its height.
        self._served: dict[str, tuple[StateTrees, Certification]] = {}
        self._served_headers: dict[str, dict[str, StreamHeader]] = {s: {} for s in self.subnets}
        self._served_heights: dict[str, int] = {s: 0 for s in self.subnets}
        self._providers = {s: CertifiedSliceProvider(s, partial(self._served.get, s)) for s in self.subnets}
        self._last_pulls: LastPulls = {}

    # -- topology -------------------------------------------------------------------------

    def subnet(self, subnet_id: str) -> Subnet:
        try:
            return self.subnets[subnet_id]
        except KeyError:
            raise UnknownSubnet(f"no subnet {subnet_id!r}; the subnets are {', '.join(self.subnets)}") from None

    def topology(self) -> dict[str, SubnetInfo]:
        return subnet_infos(self.registry.get().latest())

    def subnet_of(self, canister_id: int) -> str | None:
        return self.registry.get().latest().routing_table.lookup(canister_id)

    def _node(self, node_id: str) -> tuple[Subnet, str]:
        for subnet in self.subnets.values():
            if node_id in subnet.nodes:
                return subnet, node_id
        raise UnknownNode(f"no node {node_id!r}")

    def stop_node(self, node_id: str) -> None:
        subnet, node_id = self._node(node_id)
        subnet.offline.add(node_id)

    def start_node(self, node_id: str) -> None:
        # An offline node kept executing the finalized chain (as one catching up from the
        # block store would), so it rejoins at the current height.
        subnet, node_id = self._node(node_id)
        subnet.offline.discard(node_id)

    # -- rounds ---------------------------------------------------------------------------

    def tick(self) -> None:
        for subnet_id, subnet in self.subnets.items():
            self._pull(subnet_id, subnet)
            try:
                subnet.step(certify=False)
            except NoBlockFinalized:
                self.stalled[subnet_id] += 1   # too few nodes online: this subnet waits

    def _worth_serving(self, peer_id: str, peer: Subnet, header: StreamHeader | None,
                       served: StreamHeader | None) -> bool:
        """Whether a peer's stream to us changed enough to serve (and certify) the peer's latest
        height now (module docstring)."""
        if header is None or header == served:
            return False
        if served is None or header.end > served.end or header.reject_signals != served.reject_signals:
            return True
        return peer.height - self._served_heights[peer_id] >= SIGNAL_LAG

    def certify(self, subnet_id: str) -> None:
        """Certify ``subnet_id``'s latest height if it is not yet."""
        self.subnets[subnet_id].certify_latest()

    def _serve_latest(self, subnet_id: str) -> None:
        """Certify ``subnet_id``'s latest height and make it the snapshot its endpoint serves."""
        subnet = self.subnets[subnet_id]
        subnet.certify_latest()
        latest = subnet.online_node().state_manager.latest_certified()
        if latest is not None:
            self._served[subnet_id] = latest
            self._served_headers[subnet_id] = subnet.read(_stream_headers)
            self._served_heights[subnet_id] = latest[0].height

    def _pull(self, subnet_id: str, subnet: Subnet) -> None:
        servers = []
        for peer_id, peer in self.subnets.items():
            if peer_id == subnet_id or len(peer.offline) == len(peer.nodes):
                continue   # no node of the peer is online to answer
            header = peer.read(lambda state: _stream_header(state, subnet_id))
            if self._worth_serving(peer_id, peer, header, self._served_headers[peer_id].get(subnet_id)):
                self._serve_latest(peer_id)
            if peer_id in self._served:
                servers.append((peer_id, self._providers[peer_id], self._served_headers[peer_id].get(subnet_id)))
        if not servers:
            return
        for node_id, node in subnet.nodes.items():
            if node_id not in subnet.offline:
                pull_slices(node, servers, self._last_pulls)

    # -- calls ----------------------------------------------------------------------------

    def submit(self, sender: Identity | None, canister_id: int, method: str, arg: Any, subnet_id: str) -> bytes:
        """Sign an envelope, hand it to ``subnet_id``'s nodes (``Subnet.submit`` checks it
        completely, as the HTTP API would); the message id (its request id)."""
        self._nonce += 1
        expiry = self.clock() + self.limits.max_ingress_ttl_ns
        signed = sign_request(sender, canister_id, method, encode_value(arg), nonce=self._nonce, expiry=expiry)
        self.subnet(subnet_id).submit(signed.envelope)
        return signed.message_id

    def is_answered(self, message_id: bytes, subnet_id: str) -> bool:
        """Unverified peek at the ingress history (cheap); answers are then read verified."""
        status = self.subnet(subnet_id).ingress_status(message_id)
        return status is not None and status.state in ANSWERED

    def await_answer(self, message_id: bytes, canister_id: int, subnet_id: str, max_ticks: int) -> RequestStatus:
        """Tick until the call is answered (at most ``max_ticks`` rounds); its verified status."""
        ticks = 0
        while not self.is_answered(message_id, subnet_id):
            if ticks >= max_ticks:
                status = self.request_status(message_id, canister_id, subnet_id)
                raise CallNotAnswered(f"message {message_id.hex()} to canister {canister_text(canister_id)} is "
                                      f"{status.status} after {max_ticks} ticks")
            self.tick()
            ticks += 1
        return self.request_status(message_id, canister_id, subnet_id)

    def request_status(self, message_id: bytes, canister_id: int, subnet_id: str) -> RequestStatus:
        subnet = self.subnet(subnet_id)
        self.certify(subnet_id)
        certified = subnet.online_node().state_manager.latest_certified()
        if certified is None:
            raise TestingError(f"subnet {subnet_id} has not certified a state yet")
        trees, certification = certified
        record = self.registry.get().latest()
        root = root_subnet_id(record)
        delegation = None
        if subnet_id != root:   # as a live node: the root subnet's delegation, the root key trusted
            self.certify(root)
            root_latest = self.subnet(root).online_node().state_manager.latest_certified()
            if root_latest is None:
                raise TestingError(f"the root subnet {root} has not certified a state yet")
            delegation = delegation_of(root_latest[0].certified, root_latest[1], subnet_principal_of(record, subnet_id))
        certificate = verified_certificate(
            trees.certified, certification, [[b"request_status", message_id]], subnet_id=subnet_id,
            public_key=record.subnet(subnet_id).public_key, now_ns=self.clock(), max_age_ns=MAX_CERTIFICATE_AGE_NS,
            min_height=self._verified_heights.get(subnet_id, 0), root_key=record.subnets[0].public_key,
            subnet_principal=subnet_principal_of(record, subnet_id), delegation=delegation, cache=self._certificates,
            memo=self._signature_memo)
        self._verified_heights[subnet_id] = max(self._verified_heights.get(subnet_id, 0), certificate.height)
        return status_from_certificate(certificate, message_id)

    def query(self, sender: Identity | None, canister_id: int, method: str, arg: Any, subnet_id: str) -> Any:
        """A query on the latest state of the subnet's first online node (the state a live node
        answers from once it is certified; certifying it first would change no answer)."""
        subnet = self.subnet(subnet_id)
        # The argument travels encoded, as over HTTP: the canister sees what a live one would.
        value = arg if type(arg) is RawPayload else decode_payload(encode_value(arg))
        reply = subnet.read(lambda state: self.environment.run_query(state, canister_id, method, value,
                                                                     source_of(sender), limits=self.limits))
        if type(reply) is not Reply:
            raise CallRejected(reject_code_name(reply.code), reply.message)
        return decode_reply(reply.data) if reply.data else None

    def dry_run(self, sender: Identity | None, canister_id: int, method: str, arg: Any, subnet_id: str):
        """An update executed on a copy of the subnet's latest state (what ``query`` answers
        from), never committed (``replica.execution.dry_run``)."""
        node = self.subnet(subnet_id).online_node()
        return dry_run(self.environment, node.state, node.state_manager.latest.full, canister_id, method,
                       encode_value(arg), source_of(sender), self.limits)

    def state_hash(self, subnet_id: str) -> bytes:
        subnet = self.subnet(subnet_id)
        hashes = subnet.recording.hashes
        if hashes:
            return hashes[-1][1]
        node = subnet.online_node()
        genesis = node.state_manager.snapshot(node.state_manager.latest_height)
        if genesis is None:
            raise TestingError(f"subnet {subnet_id} keeps no snapshot of its latest height")
        return genesis.full_hash

    def run_log(self, checkpoint_interval: int):
        from replica.testnet.recording import run_log_from_recordings

        registry = self.registry.get()
        classes = [self.environment.registry.class_of(n) for n in self.environment.registry.names()]
        return run_log_from_recordings(
            [s.recording for s in self.subnets.values()], classes, self.limits,
            [record.topology() for record in registry.records], checkpoint_interval=checkpoint_interval)


def _stream_header(state: ReplicatedState, dst: str) -> StreamHeader | None:
    stream = state.streams.get(dst)
    return None if stream is None else stream.header()


def _stream_headers(state: ReplicatedState) -> dict[str, StreamHeader]:
    return {dst: stream.header() for dst, stream in state.streams.items()}
