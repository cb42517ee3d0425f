"""Reusable XNet fixtures: real certified stream slices between hand-built subnets.

* ``PeerSubnet`` — a peer subnet whose stream to ``OWN`` is set per height, committed through
  ``StateManager`` (the incremental ``StateTreeBuilder``) and certified with the subnet's real
  3-of-4 threshold BLS key; ``CertifiedSnapshot.slice(...)`` serves certified slices from it
  exactly as the XNet endpoint does (``encode_certified_stream_slice``).
* ``own_state`` — our subnet's replicated state with hand-picked streams to the peers.
* ``Registry`` — the public keys at one registry version; newer versions are "not known yet"
  (``RegistryVersionUnavailable``).
* ``decode_slice`` / ``put_slice`` — verify a slice as the refresher does and pool it.

Message contents depend only on ``(peer, index, salt)``: two snapshots of one peer agree on
every message they share, and a different ``salt`` forges another history under the same key.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from typing import Iterable, Mapping

from message_routing.limits import DEFAULT, Limits
from state_manager import certification as cm
from state_manager import bls
from state_manager.certified_slice import CertifiedSlice, decode_certified_stream_slice, encode_certified_stream_slice
from state_manager.messages import Reply, Request, Response
from state_manager.replicated_state import ReplicatedState
from state_manager.routing_table import CanisterIdRange, NetworkTopology, RoutingTable
from state_manager.state_manager import StateManager
from state_manager.state_tree import StateTrees
from state_manager.streams import RejectSignal, Stream, StreamHeader
from xnet.errors import RegistryVersionUnavailable
from xnet.slice_pool import SlicePool

__all__ = [
    "OWN", "PEERS", "P1", "P2", "P3", "REGISTRY_VERSION", "TEST_LIMITS", "deal_for", "certify", "message_for",
    "Registry", "CertifiedSnapshot", "PeerSubnet", "own_state", "decode_slice", "put_slice", "payload",
]

OWN = "subnet-own"
P1, P2, P3 = "subnet-p1", "subnet-p2", "subnet-p3"
PEERS = (P1, P2, P3)
REGISTRY_VERSION = 5
UNLIMITED = 2**32

#: Generous limits for tests that are not about limits.
TEST_LIMITS: Limits = DEFAULT.with_(max_slice_messages=100, max_slice_bytes=64 * 1024,
                                    max_block_payload_bytes=256 * 1024)


def _topology(registry_version: int = REGISTRY_VERSION) -> NetworkTopology:
    subnets = (OWN,) + PEERS
    table = RoutingTable(tuple((CanisterIdRange(100 * i, 100 * i + 99), s) for i, s in enumerate(subnets)))
    keys = tuple((s, deal_for(s).public_key) for s in subnets)
    return NetworkTopology(registry_version, table, subnet_public_keys=keys)


@functools.lru_cache(maxsize=None)
def deal_for(subnet: str) -> bls.ThresholdKeys:
    """The subnet's 3-of-4 threshold key, dealt deterministically from its name."""
    seed = hashlib.sha256(b"xnet-fixtures/" + subnet.encode("utf-8")).digest()
    return bls.deal_threshold_keys(4, bls.threshold_for(4), seed)


def certify(height: int, root: bytes, deal: bls.ThresholdKeys) -> cm.Certification:
    """Nodes 1, 2, 3 sign shares of ``root``; the shares are aggregated and verified."""
    shares = [cm.sign_certification_share(height, root, i, deal.secret_share(i)) for i in (1, 2, 3)]
    key_shares = {i: deal.public_key_share(i) for i in range(1, deal.n + 1)}
    return cm.aggregate_certification(shares, deal.t, deal.public_key, key_shares)


def message_for(remote: str, index: int, size: int = 16, salt: bytes = b""):
    """Message ``index`` of ``remote``'s stream to us: a request, every third one a reply."""
    body = hashlib.sha256(remote.encode("utf-8") + index.to_bytes(8, "big") + salt).digest()
    body = (body * (size // 32 + 1))[:size]
    if index % 3 == 2:
        return Response(originator=7, respondent=9, originator_reply_callback=index, response_payload=Reply(body))
    return Request(sender=100 + index % 50, receiver=7, method_name="ping", method_payload=body,
                   sender_reply_callback=index)


class Registry:
    """Subnet public keys known up to ``version``; later versions raise ``RegistryVersionUnavailable``."""

    def __init__(self, subnets: Iterable[str] = (OWN,) + PEERS, version: int = REGISTRY_VERSION) -> None:
        self.version = version
        self.keys = {subnet: deal_for(subnet).public_key for subnet in subnets}

    def public_key_for(self, subnet: str, version: int) -> bytes | None:
        if version > self.version:
            raise RegistryVersionUnavailable(f"registry version {version} not known yet (latest {self.version})")
        return self.keys.get(subnet)


@dataclass(frozen=True)
class CertifiedSnapshot:
    """One certified height of a peer subnet."""

    remote: str
    own: str
    trees: StateTrees
    certification: cm.Certification
    header: StreamHeader

    @property
    def height(self) -> int:
        return self.trees.height

    def slice(self, witness_begin: int | None = None, msg_begin: int | None = None,
              msg_limit: int = UNLIMITED, byte_limit: int = UNLIMITED) -> bytes:
        """``GetStreamSlice(own, witness_begin, msg_begin, msg_limit, byte_limit)`` against this
        snapshot; both indices default to the header's ``begin``."""
        msg_begin = self.header.begin if msg_begin is None else msg_begin
        witness_begin = msg_begin if witness_begin is None else witness_begin
        return encode_certified_stream_slice(self.trees.certified, self.certification, self.own,
                                             witness_begin, msg_begin, msg_limit, byte_limit)

    def header_only(self, witness_begin: int | None = None, msg_begin: int | None = None) -> bytes:
        return self.slice(witness_begin, msg_begin, msg_limit=0)


class PeerSubnet:
    """A peer subnet whose stream to ``own`` is set freely at every height, then committed and certified."""

    def __init__(self, subnet: str, own: str = OWN, *, salt: bytes = b"", message_size: int = 16,
                 registry_version: int = REGISTRY_VERSION) -> None:
        self.subnet = subnet
        self.own = own
        self.salt = salt
        self.message_size = message_size
        self.deal = deal_for(subnet)
        self.state = ReplicatedState(subnet, _topology(registry_version))
        self.manager = StateManager(self.state)

    def commit(self, begin: int, end: int, signals_end: int, reject_signals: Iterable[RejectSignal] = (), *,
               sizes: Mapping[int, int] | None = None) -> CertifiedSnapshot:
        """The next height, where the stream to ``own`` holds messages ``[begin, end)`` and
        the signals ``signals_end`` / ``reject_signals`` for ``own``'s stream to us; message ``i``
        has a ``sizes.get(i, message_size)``-byte body."""
        sizes = sizes or {}
        messages = [message_for(self.subnet, i, sizes.get(i, self.message_size), self.salt) for i in range(begin, end)]
        self.state.metadata.batch_number += 1
        self.state.streams[self.own] = Stream(begin, messages, signals_end, reject_signals)
        trees = self.manager.commit(self.state)
        certification = certify(trees.height, trees.certified_root, self.deal)
        self.manager.deliver_certification(certification, self.deal.public_key)
        return CertifiedSnapshot(self.subnet, self.own, trees, certification, self.state.streams[self.own].header())


def own_state(streams: Mapping[str, tuple[int, int, int]], own: str = OWN,
              registry_version: int = REGISTRY_VERSION) -> ReplicatedState:
    """Our state with, per peer, a stream ``(begin, end, signals_end)``: we sent ``[begin,
    end)`` to the peer (below ``begin`` acknowledged) and received its messages below
    ``signals_end`` (so the next message we expect from it is ``signals_end``)."""
    state = ReplicatedState(own, _topology(registry_version))
    for remote, (begin, end, signals_end) in sorted(streams.items()):
        messages = [message_for(own, i) for i in range(begin, end)]
        state.streams[remote] = Stream(begin, messages, signals_end)
    return state


def decode_slice(remote: str, data: bytes, registry: Registry | None = None, own: str = OWN,
                 version: int = REGISTRY_VERSION) -> CertifiedSlice:
    """Decode and verify ``data`` from ``remote`` as the refresher does before pooling it."""
    registry = registry or Registry()
    return decode_certified_stream_slice(own, remote, registry.public_key_for, version, data)


def put_slice(pool: SlicePool, remote: str, data: bytes, registry: Registry | None = None) -> bool:
    return pool.put(remote, data, decode_slice(remote, data, registry, own=pool.own_subnet))


def payload(*entries: tuple[str, bytes]) -> tuple[tuple[str, bytes], ...]:
    """An XNet payload from ``(subnet, slice)`` pairs, sorted by subnet."""
    return tuple(sorted(entries))
