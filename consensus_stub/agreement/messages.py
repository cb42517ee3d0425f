"""The artifacts the nodes of one subnet exchange to agree on blocks, and their encoding (pure).

Every message is canonical msgpack ``[version, kind, ...fields]`` (version 2)::

    [2, 1, block_bytes, signature]                          Proposal            (block_bytes = encode_block)
    [2, 2, height, block_hash, signer, signature]            NotarizationShare
    [2, 3, height, block_hash, signer, signature]            FinalizationShare
    [2, 4, sender, finalized_height, notarized_height]       Status              (heartbeat, asks for catch-up)
    [2, 5, [block_bytes, ...], [[signer, signature], ...]]   CatchUp             (finalization of the last block)
    [2, 6, [ingress, ...]]                                   IngressGossip       (state_codec ingress values)
    [2, 7, height, root, node_index, signature_share, height_witness]   CertificationShareGossip

The signature share is the IC's BLS variant (48 bytes, ``state_manager.certification``); it
signs the root only, and ``height_witness`` (the certified tree pruned to ``/metadata/height``,
at most ``MAX_HEIGHT_WITNESS_BYTES``) proves the height (checked by the aggregation, not here).
Version 1 carried shares of the project's own variant (96 bytes, G2, the height signed) and
no witness; it is refused (``UnsupportedMessageVersion``): nodes of one subnet run one build.

``decode_message`` is the one boundary for bytes from peers: bounded size, canonical bytes
(re-encoding gives the same bytes), known version and kind, exact arities and field types,
else a ``MalformedMessage`` subclass. Signatures are checked by the protocol, not here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Union

from state_manager.certification import MAX_HEIGHT_WITNESS_BYTES, CertificationError, CertificationShare
from state_manager.codec import CodecError, check_bytes, check_str, check_tuple, check_u64, ingress_from_value, ingress_to_value
from state_manager.encoding import EncodingError, decode, encode_unchecked, is_u64
from state_manager.messages import Ingress

from ..block import MAX_BLOCK_BYTES, Block, BlockError, decode_block, encode_block
from ..errors import ConsensusError

__all__ = [
    "MESSAGE_VERSION", "MAX_MESSAGE_BYTES", "MAX_CATCH_UP_BLOCKS", "MAX_SIGNATURE_BYTES", "MAX_GOSSIP_INGRESS",
    "Kind", "AgreementError", "MalformedMessage", "UnsupportedMessageVersion", "UnknownMessageKind",
    "Proposal", "NotarizationShare", "FinalizationShare", "Status", "CatchUp", "IngressGossip",
    "CertificationShareGossip", "Message", "encode_message", "decode_message", "artifact_height",
]

#: 2: certification shares of the IC's BLS variant (version 1's were the project's own).
MESSAGE_VERSION = 2
MAX_CATCH_UP_BLOCKS = 64
MAX_GOSSIP_INGRESS = 1_000
MAX_SIGNATURE_BYTES = 128
# A catch-up may carry several blocks; bound what a peer can make us parse.
MAX_MESSAGE_BYTES = 2 * MAX_BLOCK_BYTES
_MAX_NODE_ID_CHARS = 64


class Kind(IntEnum):
    PROPOSAL = 1
    NOTARIZATION_SHARE = 2
    FINALIZATION_SHARE = 3
    STATUS = 4
    CATCH_UP = 5
    INGRESS = 6
    CERTIFICATION_SHARE = 7


class AgreementError(ConsensusError):
    """Root of the agreement protocol's errors."""


class MalformedMessage(AgreementError):
    """Bytes or fields that are not a canonical agreement message."""


class UnsupportedMessageVersion(MalformedMessage):
    pass


class UnknownMessageKind(MalformedMessage):
    pass


def _check_node_id(value: object, what: str) -> None:
    if not isinstance(value, str) or not 0 < len(value) <= _MAX_NODE_ID_CHARS or not value.isprintable():
        raise MalformedMessage(f"{what} must be a node id of 1..{_MAX_NODE_ID_CHARS} printable characters")


def _check_signature(value: object) -> None:
    if not isinstance(value, bytes) or not 0 < len(value) <= MAX_SIGNATURE_BYTES:
        raise MalformedMessage(f"a signature must be 1..{MAX_SIGNATURE_BYTES} bytes")


def _check_share(height: object, block_hash: object, signer: object, signature: object) -> None:
    if not is_u64(height) or height < 1:  # type: ignore[operator]
        raise MalformedMessage(f"share height must be in [1, 2**64), got {height!r}")
    if not isinstance(block_hash, bytes) or len(block_hash) != 32:
        raise MalformedMessage("a block hash must be 32 bytes")
    _check_node_id(signer, "signer")
    _check_signature(signature)


@dataclass(frozen=True, slots=True)
class Proposal:
    """A block, signed by its maker over ``compute_proposal_message(block_hash(block))``."""

    block: Block
    signature: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.block, Block):
            raise MalformedMessage("a proposal holds a Block")
        _check_signature(self.signature)


@dataclass(frozen=True, slots=True)
class NotarizationShare:
    """``signer`` found the block ``block_hash`` at ``height`` valid (step one)."""

    height: int
    block_hash: bytes
    signer: str
    signature: bytes

    def __post_init__(self) -> None:
        _check_share(self.height, self.block_hash, self.signer, self.signature)


@dataclass(frozen=True, slots=True)
class FinalizationShare:
    """``signer`` notarization-signed no other block than ``block_hash`` at ``height`` (step two)."""

    height: int
    block_hash: bytes
    signer: str
    signature: bytes

    def __post_init__(self) -> None:
        _check_share(self.height, self.block_hash, self.signer, self.signature)


@dataclass(frozen=True, slots=True)
class Status:
    """``sender``'s finalized and notarized heights: a heartbeat that peers ahead answer with data."""

    sender: str
    finalized_height: int
    notarized_height: int

    def __post_init__(self) -> None:
        _check_node_id(self.sender, "sender")
        if not is_u64(self.finalized_height) or not is_u64(self.notarized_height):
            raise MalformedMessage("status heights must be u64")
        if self.notarized_height < self.finalized_height:
            raise MalformedMessage("the notarized height is never below the finalized height")


@dataclass(frozen=True, slots=True)
class CatchUp:
    """Consecutive finalized blocks; ``signatures`` finalize the last one (and so all of them)."""

    blocks: tuple[Block, ...]
    signatures: tuple[tuple[str, bytes], ...]

    def __post_init__(self) -> None:
        if not 0 < len(self.blocks) <= MAX_CATCH_UP_BLOCKS or not all(isinstance(b, Block) for b in self.blocks):
            raise MalformedMessage(f"a catch-up holds 1..{MAX_CATCH_UP_BLOCKS} blocks")
        for earlier, later in zip(self.blocks, self.blocks[1:]):
            if later.height != earlier.height + 1:
                raise MalformedMessage("catch-up blocks must have consecutive heights")
        signers = [s for s, _ in self.signatures]
        if signers != sorted(set(signers)):
            raise MalformedMessage("catch-up signers must be unique and sorted")
        for signer, signature in self.signatures:
            _check_node_id(signer, "signer")
            _check_signature(signature)

    @property
    def last(self) -> Block:
        return self.blocks[-1]


@dataclass(frozen=True, slots=True)
class IngressGossip:
    """Validated ingress one node forwards to its peers' pools."""

    messages: tuple[Ingress, ...]

    def __post_init__(self) -> None:
        if not 0 < len(self.messages) <= MAX_GOSSIP_INGRESS or not all(isinstance(i, Ingress) for i in self.messages):
            raise MalformedMessage(f"ingress gossip holds 1..{MAX_GOSSIP_INGRESS} messages")


@dataclass(frozen=True, slots=True)
class CertificationShareGossip:
    """A node's certification share, for every node to aggregate."""

    share: CertificationShare


Message = Union[Proposal, NotarizationShare, FinalizationShare, Status, CatchUp, IngressGossip,
                CertificationShareGossip]


def artifact_height(message: Message) -> int:
    """The height a signed artifact (a proposal or a share) is about: once that height is
    finalized the artifact can never matter again, so a node's record of it may go."""
    block = getattr(message, "block", None)
    return block.height if block is not None else message.height  # type: ignore[union-attr]


def _value(message: Message) -> tuple:
    v = MESSAGE_VERSION
    if isinstance(message, Proposal):
        return (v, Kind.PROPOSAL, encode_block(message.block), message.signature)
    if isinstance(message, NotarizationShare):
        return (v, Kind.NOTARIZATION_SHARE, message.height, message.block_hash, message.signer, message.signature)
    if isinstance(message, FinalizationShare):
        return (v, Kind.FINALIZATION_SHARE, message.height, message.block_hash, message.signer, message.signature)
    if isinstance(message, Status):
        return (v, Kind.STATUS, message.sender, message.finalized_height, message.notarized_height)
    if isinstance(message, CatchUp):
        return (v, Kind.CATCH_UP, tuple(encode_block(b) for b in message.blocks),
                tuple((s, sig) for s, sig in message.signatures))
    if isinstance(message, IngressGossip):
        return (v, Kind.INGRESS, tuple(ingress_to_value(i) for i in message.messages))
    if isinstance(message, CertificationShareGossip):
        s = message.share
        return (v, Kind.CERTIFICATION_SHARE, s.height, s.root, s.node_index, s.signature_share, s.height_witness)
    raise TypeError(f"not an agreement message: {type(message).__name__}")


def encode_message(message: Message) -> bytes:
    """Canonical bytes of ``message`` (module docstring)."""
    return encode_unchecked(tuple(int(x) if isinstance(x, Kind) else x for x in _value(message)))


def _from_value(kind: int, fields: tuple) -> Message:
    if kind == Kind.PROPOSAL:
        block_bytes, signature = check_tuple(fields, "proposal", 2)
        return Proposal(decode_block(check_bytes(block_bytes, "block")), signature)
    if kind in (Kind.NOTARIZATION_SHARE, Kind.FINALIZATION_SHARE):
        height, digest, signer, signature = check_tuple(fields, "share", 4)
        cls = NotarizationShare if kind == Kind.NOTARIZATION_SHARE else FinalizationShare
        return cls(height, digest, signer, signature)
    if kind == Kind.STATUS:
        sender, finalized, notarized = check_tuple(fields, "status", 3)
        return Status(sender, finalized, notarized)
    if kind == Kind.CATCH_UP:
        blocks, signatures = check_tuple(fields, "catch-up", 2)
        blocks = check_tuple(blocks, "catch-up blocks")
        if len(blocks) > MAX_CATCH_UP_BLOCKS:  # before decoding any of them
            raise MalformedMessage(f"a catch-up holds at most {MAX_CATCH_UP_BLOCKS} blocks")
        return CatchUp(tuple(decode_block(check_bytes(b, "block")) for b in blocks),
                       tuple((check_str(s, "signer"), check_bytes(sig, "signature"))
                             for s, sig in (check_tuple(p, "signature", 2) for p in check_tuple(signatures, "signatures"))))
    if kind == Kind.INGRESS:
        (messages,) = check_tuple(fields, "ingress gossip", 1)
        messages = check_tuple(messages, "ingress")
        if len(messages) > MAX_GOSSIP_INGRESS:
            raise MalformedMessage(f"ingress gossip holds at most {MAX_GOSSIP_INGRESS} messages")
        return IngressGossip(tuple(ingress_from_value(i) for i in messages))
    if kind == Kind.CERTIFICATION_SHARE:
        height, root, node_index, signature_share, witness = check_tuple(fields, "certification share", 5)
        witness = check_bytes(witness, "height witness")
        if len(witness) > MAX_HEIGHT_WITNESS_BYTES:
            raise MalformedMessage(f"a height witness is at most {MAX_HEIGHT_WITNESS_BYTES} bytes")
        return CertificationShareGossip(CertificationShare(check_u64(height, "height"), check_bytes(root, "root", 32),
                                                           check_u64(node_index, "node index"),
                                                           check_bytes(signature_share, "signature share"), witness))
    raise UnknownMessageKind(f"unknown message kind {kind!r}")


def decode_message(data: bytes) -> Message:
    """Strict inverse of ``encode_message``; a ``MalformedMessage`` (subclass) for anything else."""
    try:
        value: Any = decode(data, max_bytes=MAX_MESSAGE_BYTES)
        fields = check_tuple(value, "message")
        if len(fields) < 2:
            raise MalformedMessage("a message is [version, kind, ...]")
        version, kind = fields[0], fields[1]
        if version == 1:
            raise UnsupportedMessageVersion(
                f"message version 1 carries certification shares of the project's own BLS variant (expected "
                f"{MESSAGE_VERSION})")
        if type(version) is not int or version != MESSAGE_VERSION:
            raise UnsupportedMessageVersion(f"unknown message version {version!r}")
        if type(kind) is not int:
            raise UnknownMessageKind(f"message kind must be an int, got {kind!r}")
        message = _from_value(kind, fields[2:])
    except MalformedMessage:
        raise
    except (EncodingError, CodecError, BlockError, CertificationError) as exc:
        raise MalformedMessage(f"message: {exc}") from exc
    # One encoding per message: a re-encoding that differs means non-minimal ints, wrong
    # container types or the like, which a signature over the bytes would not catch.
    if encode_message(message) != bytes(data):
        raise MalformedMessage("message bytes are not canonical")
    return message
