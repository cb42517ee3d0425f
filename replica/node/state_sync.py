"""State sync: a node too far behind installs a peer's certified checkpoint instead of blocks.

Peers keep ``AgreementConfig.retained_heights`` finalized blocks; a node that was down longer
cannot catch up block by block. This module holds all of it:

* **deciding** (``StateSyncer.reason``): peers report heights more than they keep above ours,
  or we have been behind without finalizing for a while; or (the node process asks its
  ``Node``) our state diverged from the certified one: then an offer at or above the
  diverged height will do, even below our own height (``Node.install_synced``);
* **fetching and verifying** (``StateSyncer.sync``): ask a peer for its latest checkpoint
  (``AgreementClient.fetch_checkpoint``, the ``FetchCheckpoint`` method of the agreement gRPC
  service), get a ``CheckpointOffer`` and check it with ``verify_offer`` against the subnet's
  public key: the state must decode strictly, be of the offered height and of this subnet, and
  its certified root must be the one the subnet's threshold signature certifies (the signature
  covers the root only; the recomputed root includes the state's ``/metadata/height``, so the
  root's match authenticates the height; docs/architecture.md, *Certifications*);
* **installing**: the node takes the state, a block log starting at the offered block and a
  new agreement from the offered tip (``Node.install_synced``:
  ``AgreementNode.from_synced_tip(height=offer.height, block_hash=offer.block_hash)``);
* **serving** (``CheckpointServer``): the newest checkpoint a node keeps with its
  certification, encoded once per height for its peers' ``FetchCheckpoint``.

An offer is canonical msgpack (version 2)::

    [2, height, block_hash(32), state_bytes, certification_bytes]

``state_bytes`` is the checkpoint's ``state.bin`` (``encode_state``), ``certification_bytes``
the subnet's certification of that height (``encode_certification``), ``block_hash`` the hash
of the finalized block at that height. ``decode_offer`` is strict (bounded size, canonical
bytes, known version, exact arity and field types) and raises only ``MalformedOffer``; it
does not decode the state, ``verify_offer`` does. Version 1 carried certifications of the
project's own BLS variant: refused with ``UnsupportedOfferVersion``.

What the certification does not cover: ``block_hash``. A wrong one is caught by agreement
(every catch-up onto it is refused as not chaining); it cannot make a node accept a wrong
state. A fetch request is empty or the msgpack-encoded request version (``1``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from consensus_stub.agreement.messages import CatchUp, Message, Status

from state_manager.certification import (
    Certification, CertificationError, InvalidPublicKey, SignatureMemo, decode_certification, encode_certification,
    verify_certification,
)
from state_manager.codec import CodecError, check_bytes, check_tuple
from state_manager.encoding import EncodingError, decode, encode, encode_unchecked, is_u64
from state_manager.replicated_state import ReplicatedState
from state_manager.state_codec import decode_state
from state_manager.state_tree import build_state_trees
from state_manager.store import CheckpointStore, CorruptCheckpoint, read_checkpoint_bytes

from ..errors import ReplicaError
from .checkpoints import NodeCheckpoints

__all__ = [
    "OFFER_VERSION", "FETCH_REQUEST_VERSION", "MAX_OFFER_BYTES", "MAX_STATE_BYTES",
    "StateSyncError", "MalformedOffer", "UnsupportedOfferVersion", "MalformedFetchRequest",
    "StateSyncRefused", "OfferHeightTooLow", "CertificationMismatch", "BadCertification", "StateDoesNotDecode",
    "WrongStateHeight", "WrongSubnet", "RootMismatch",
    "CheckpointOffer", "encode_offer", "decode_offer", "verify_offer",
    "encode_fetch_request", "check_fetch_request",
    "offer_from_checkpoint_dir", "offer_from_checkpoint", "CheckpointServer", "StateSyncer",
]

_log = logging.getLogger(__name__)

#: 2: certifications of the IC's BLS variant (version 1 carried the project's own, refused).
OFFER_VERSION = 2
FETCH_REQUEST_VERSION = 1
#: The largest encoded offer (also the gRPC message limit of ``FetchCheckpoint``).
MAX_OFFER_BYTES = 256 * 1024 * 1024
#: The largest ``state_bytes``: the offer's other fields fit in the rest.
MAX_STATE_BYTES = MAX_OFFER_BYTES - 4096
_MAX_CERTIFICATION_BYTES = 1024
_MAX_REQUEST_BYTES = 16


class StateSyncError(ReplicaError, ValueError):
    """Root of the state sync errors."""


class MalformedOffer(StateSyncError):
    """Bytes or fields that are not a canonical checkpoint offer."""


class UnsupportedOfferVersion(MalformedOffer):
    pass


class MalformedFetchRequest(StateSyncError):
    """A ``FetchCheckpoint`` request body that is neither empty nor a known request version."""


class StateSyncRefused(StateSyncError):
    """A well-formed offer that must not be installed; ``reason`` names why (for metrics)."""

    reason = "refused"

    def __init__(self, detail: str) -> None:
        super().__init__(f"{self.reason}: {detail}")
        self.detail = detail

    def __reduce__(self):   # rebuilt from the detail, not the prefixed message
        return type(self), (self.detail,)


class OfferHeightTooLow(StateSyncRefused):
    reason = "height_too_low"


class CertificationMismatch(StateSyncRefused):
    """The certification is of another height than the offer."""

    reason = "certification_height"


class BadCertification(StateSyncRefused):
    """The certification's signature does not verify under the subnet key (or the key is bad)."""

    reason = "bad_certification"


class StateDoesNotDecode(StateSyncRefused):
    reason = "state_does_not_decode"


class WrongStateHeight(StateSyncRefused):
    reason = "state_height"


class WrongSubnet(StateSyncRefused):
    reason = "wrong_subnet"


class RootMismatch(StateSyncRefused):
    """The state's certified root is not the certified one."""

    reason = "root_mismatch"


@dataclass(frozen=True, slots=True)
class CheckpointOffer:
    """A peer's checkpoint of ``height`` (module docstring); fields are type-checked here,
    their meaning by ``verify_offer``."""

    height: int
    block_hash: bytes
    state_bytes: bytes
    certification: Certification

    def __post_init__(self) -> None:
        if not is_u64(self.height) or self.height < 1:
            raise MalformedOffer("offer height must be in [1, 2**64)")
        if type(self.block_hash) is not bytes or len(self.block_hash) != 32:
            raise MalformedOffer("an offer's block hash must be 32 bytes")
        if type(self.state_bytes) is not bytes or not 0 < len(self.state_bytes) <= MAX_STATE_BYTES:
            raise MalformedOffer(f"an offer's state must be 1..{MAX_STATE_BYTES} bytes")
        if not isinstance(self.certification, Certification):
            raise MalformedOffer("an offer carries a Certification")

    def __repr__(self) -> str:   # never the whole state
        return (f"CheckpointOffer(height={self.height}, block_hash={self.block_hash.hex()[:16]}…, "
                f"state_bytes={len(self.state_bytes)} bytes, certification_height={self.certification.height})")


def encode_offer(offer: CheckpointOffer) -> bytes:
    """Canonical bytes of ``offer`` (module docstring)."""
    return encode_unchecked((OFFER_VERSION, offer.height, offer.block_hash, offer.state_bytes,
                             encode_certification(offer.certification)))


def decode_offer(data: bytes) -> CheckpointOffer:
    """Strict inverse of ``encode_offer``; ``MalformedOffer`` (or ``UnsupportedOfferVersion``)
    for anything else, including more than ``MAX_OFFER_BYTES``."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise MalformedOffer(f"an offer is bytes, got {type(data).__name__}")
    if len(data) > MAX_OFFER_BYTES:
        raise MalformedOffer(f"an offer of {len(data)} bytes exceeds the limit of {MAX_OFFER_BYTES}")
    try:
        value: Any = decode(bytes(data), max_bytes=MAX_OFFER_BYTES)
        fields = check_tuple(value, "offer")
        if not fields:
            raise MalformedOffer("an offer is [version, height, block_hash, state, certification]")
        version = fields[0]
        if version == 1:
            raise UnsupportedOfferVersion(
                f"offer version 1 carries a certification of the project's own BLS variant (expected {OFFER_VERSION})")
        if type(version) is not int or version != OFFER_VERSION:
            shown = version if type(version) is int else f"of type {type(version).__name__}"
            raise UnsupportedOfferVersion(f"unknown offer version {shown} (expected {OFFER_VERSION})")
        _, height, block_hash, state_bytes, certification = check_tuple(fields, "offer", 5)
        if not is_u64(height):
            raise MalformedOffer(f"offer height must be a u64, got a {type(height).__name__}")
        block_hash = check_bytes(block_hash, "block hash", 32)
        state_bytes = check_bytes(state_bytes, "state")
        certification_bytes = check_bytes(certification, "certification")
        if len(certification_bytes) > _MAX_CERTIFICATION_BYTES:
            raise MalformedOffer("the certification is too large")
        return CheckpointOffer(height, block_hash, state_bytes, decode_certification(certification_bytes))
    except MalformedOffer:
        raise
    except (EncodingError, CodecError, CertificationError) as exc:
        raise MalformedOffer(f"offer: {exc}") from exc


def verify_offer(offer: CheckpointOffer, subnet_public_key: bytes, *, expected_subnet: str, min_height: int,
                 memo: Optional[SignatureMemo] = None) -> ReplicatedState:
    """The offered state, if it may be installed; else a ``StateSyncRefused`` subclass.

    Checks, cheapest first: ``offer.height >= min_height``; the certification claims
    ``offer.height`` and its threshold signature on the root verifies under
    ``subnet_public_key`` (one pairing, before the state is touched); the state decodes
    strictly, is of height ``offer.height`` and of ``expected_subnet``; its certified root
    (recomputed) is the certified one. The last two authenticate the height: the recomputed
    tree states ``/metadata/height = offer.height``, and it is the certified tree. Installs nothing. CPU-heavy for a large state (decoding and hashing it):
    call it outside any lock the node's other work needs."""
    height, certification = offer.height, offer.certification
    if height < min_height:
        raise OfferHeightTooLow(f"offered height {height} is below {min_height}")
    if certification.height != height:
        raise CertificationMismatch(f"the certification is of height {certification.height}, the offer of {height}")
    try:
        verify_certification(certification, subnet_public_key, memo=memo)
    except InvalidPublicKey as exc:
        raise BadCertification(f"the subnet public key is unusable: {exc}") from exc
    except CertificationError as exc:
        raise BadCertification(f"{type(exc).__name__}: {exc}") from exc
    try:
        state = decode_state(offer.state_bytes)
    except Exception as exc:  # noqa: BLE001 - bytes from a peer: any decoder failure is a refusal
        raise StateDoesNotDecode(f"{type(exc).__name__}: {exc}") from exc
    if state.metadata.batch_number != height:
        raise WrongStateHeight(f"the state is of height {state.metadata.batch_number}, the offer of {height}")
    if state.own_subnet_id != expected_subnet:
        raise WrongSubnet(f"the state is of subnet {state.own_subnet_id!r}, not {expected_subnet!r}")
    root = build_state_trees(state).certified_root
    if root != certification.root:
        raise RootMismatch(f"the state's certified root {root.hex()} is not the certified {certification.root.hex()}")
    return state


# -- the fetch request ----------------------------------------------------------------------

def encode_fetch_request() -> bytes:
    """The body a client sends: the msgpack-encoded request version."""
    return encode(FETCH_REQUEST_VERSION)


def check_fetch_request(body: bytes) -> int:
    """The request version of a ``FetchCheckpoint`` body (empty means version 1), or
    ``MalformedFetchRequest``."""
    if not body:
        return FETCH_REQUEST_VERSION
    if len(body) > _MAX_REQUEST_BYTES:
        raise MalformedFetchRequest("a fetch request is at most a version number")
    try:
        version = decode(bytes(body), max_bytes=_MAX_REQUEST_BYTES)
    except EncodingError as exc:
        raise MalformedFetchRequest(f"fetch request: {exc}") from exc
    if type(version) is not int or version != FETCH_REQUEST_VERSION:
        raise MalformedFetchRequest(f"unknown fetch request version {version!r}")
    return version


# -- offers from checkpoints on disk (shell) ---------------------------------------------------

def offer_from_checkpoint_dir(directory: Path | str, *, block_hash: bytes, certification: Certification) -> CheckpointOffer:
    """The offer of the checkpoint in ``directory`` (``<root>/<height 20 digits>`` of a
    ``CheckpointStore``): its ``state.bin`` as written, checked against ``manifest.bin``'s
    height, length and SHA-256 (not decoded: the receiver verifies it), with the stored
    ``certification`` of that height and the finalized ``block_hash`` of that height.

    Raises ``CorruptCheckpoint`` for a missing, unreadable or inconsistent checkpoint, and
    ``StateSyncError`` when the certification is of another height. Reads the whole state
    into memory (tens of MB): a server may cache the encoded offer per height."""
    directory = Path(directory)
    if not (directory.name.isdigit() and len(directory.name) == 20):
        raise CorruptCheckpoint(f"{directory} is not a checkpoint directory (<height as 20 digits>)")
    height = int(directory.name)
    _, data = read_checkpoint_bytes(directory, height)
    if certification.height != height:
        raise StateSyncError(f"the certification is of height {certification.height}, the checkpoint of {height}")
    try:
        return CheckpointOffer(height, block_hash, data, certification)
    except MalformedOffer as exc:
        raise StateSyncError(f"checkpoint {directory} cannot be offered: {exc}") from exc


def offer_from_checkpoint(store: CheckpointStore, height: int, *, block_hash: bytes,
                          certification: Certification) -> CheckpointOffer:
    """``offer_from_checkpoint_dir`` of ``store``'s checkpoint of ``height``."""
    return offer_from_checkpoint_dir(store.root / f"{height:020d}", block_hash=block_hash,
                                     certification=certification)


class CheckpointServer:
    """The offer a node serves to peers that sync state from it: its newest checkpoint kept
    with its certification, encoded once per height (a checkpoint never changes once renamed
    into place, so reading it needs no lock)."""

    def __init__(self, checkpoints: NodeCheckpoints) -> None:
        self._checkpoints = checkpoints
        self._cache: tuple[int, bytes] | None = None

    def offer(self) -> bytes | None:
        for height in reversed(self._checkpoints.heights()):
            cached = self._cache
            if cached is not None and cached[0] == height:
                return cached[1]
            kept = self._checkpoints.kept_certification(height)
            if kept is None:
                continue
            try:
                offer = offer_from_checkpoint(self._checkpoints.store, height, block_hash=kept[0],
                                              certification=kept[1])
            except (OSError, CorruptCheckpoint, StateSyncError) as exc:
                _log.warning("checkpoint %d not offered: %s", height, exc)
                continue
            data = encode_offer(offer)
            self._cache = (height, data)
            return data
        return None


#: Behind peers by more than a checkpoint interval without finalizing for this long: sync.
STALLED_S = 10.0


class StateSyncer:
    """When a node syncs state from a peer, and the sync itself (module docstring).

    ``heard`` notes the heights peers report (their ``Status``, the last block of a
    ``CatchUp``); ``reason`` says why to sync now, or ``None``; ``sync`` fetches, verifies and
    has the node install the newest checkpoint a peer offers."""

    def __init__(self, node_id: str, subnet_id: str, *, retained_heights: int, checkpoint_interval: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.node_id, self.subnet_id = node_id, subnet_id
        self.retained_heights, self.checkpoint_interval = retained_heights, checkpoint_interval
        self._clock = clock
        #: The finalized height each peer last reported.
        self.peer_heights: dict[str, int] = {}
        self._progress: tuple[int, float] = (0, clock())
        #: ``(peer, height)`` of the last state sync.
        self.synced_from: tuple[str, int] | None = None
        #: The peer ``sync`` asks now (what ``install`` installs comes from it).
        self.asking = ""

    def heard(self, sender: str, message: Message) -> None:
        if isinstance(message, Status) and message.sender == sender:
            self.peer_heights[sender] = message.finalized_height
        elif isinstance(message, CatchUp):   # the sender has finalized at least that far
            self.peer_heights[sender] = max(self.peer_heights.get(sender, 0), message.last.height)

    def reason(self, finalized_height: int) -> str | None:
        """Why this node should sync state from a peer now, or ``None``: peers are further
        ahead than they keep blocks, or it has been behind without finalizing for ``STALLED_S``."""
        if not self.peer_heights:
            return None
        ahead = max(self.peer_heights.values())
        if finalized_height != self._progress[0]:
            self._progress = (finalized_height, self._clock())
        if ahead - finalized_height >= self.retained_heights:
            return f"peers are at height {ahead}, {ahead - finalized_height} above us: more than they keep"
        if ahead - finalized_height > self.checkpoint_interval and self._clock() - self._progress[1] > STALLED_S:
            return f"no progress for {STALLED_S:g} s at height {finalized_height} while peers are at {ahead}"
        return None

    def sync(self, fetch: Callable[[str], bytes], fetch_errors: tuple[type[Exception], ...], subnet_public_key: bytes,
             height: int, install: Callable[[CheckpointOffer, ReplicatedState], bool], reason: str) -> bool:
        """Fetch the newest checkpoint a peer offers (``fetch(peer)``, peers furthest ahead
        first), verify it against the subnet's certification of its height and ``install`` it
        (which may decline: the node caught up meanwhile); whether it was installed. A peer
        whose fetch fails (one of ``fetch_errors``) or whose offer is refused is logged and the
        next one asked."""
        for peer in sorted(self.peer_heights, key=lambda n: (-self.peer_heights[n], n)):
            self.asking = peer
            try:
                offer = decode_offer(fetch(peer))
                state = verify_offer(offer, subnet_public_key, expected_subnet=self.subnet_id, min_height=height + 1)
            except (StateSyncError, *fetch_errors) as exc:
                _log.warning("%s: state sync from %s failed: %s", self.node_id, peer, exc)
                continue
            if not install(offer, state):
                return False   # the node caught up on its own meanwhile
            _log.warning("%s: state sync from %s: continuing from its checkpoint at height %d (%s)",
                         self.node_id, peer, offer.height, reason)
            self.synced_from = (peer, offer.height)
            return True
        return False
