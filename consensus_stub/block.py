"""Blocks: what a subnet's nodes agree on at one height, their encoding, hash and batch.

``Block{height, parent_hash, time, registry_version, ingress, xnet_payload, maker, rank}``:
``xnet_payload`` is the XNet payload as certified slice bytes per peer subnet, sorted by
subnet id; ``maker`` is the node that proposed it and ``rank`` its place in the height's
round-robin order (0 = the designated maker, 1 = the first fallback, ...).

Encoding (canonical msgpack)::

    [1, height, parent_hash, time, registry_version, [ingress, ...], [[subnet, slice], ...], maker, rank]

``block_hash = SHA-256(domain_sep("ic-block") ‖ encode(block))``; the parent of height 1 is
``GENESIS_PARENT_HASH``. The batch's randomness is
``SHA-256(domain_sep("ic-random-tape") ‖ block_hash)``, so it is fixed once the block is.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from message_routing.batch import Batch
from state_manager.codec import (
    CodecError, check_bytes, check_str, check_tuple, check_u64, ingress_from_value, ingress_to_value,
)
from state_manager.encoding import EncodingError, decode, encode_unchecked, is_u64
from state_manager.messages import Ingress
from xnet.xnet_payload import DecodedXNetPayload, XNetPayload

from .errors import ConsensusError

__all__ = [
    "BLOCK_VERSION", "GENESIS_PARENT_HASH", "MAX_BLOCK_BYTES", "Block", "BlockError", "MalformedBlock",
    "encode_block", "decode_block", "block_hash", "block_randomness", "to_batch",
    "payload_byte_size",
]

BLOCK_VERSION = 1
GENESIS_PARENT_HASH = bytes(32)
MAX_BLOCK_BYTES = 64 * 1024 * 1024
_BLOCK_DOMAIN = b"\x08ic-block"
_RANDOM_DOMAIN = b"\x0eic-random-tape"


class BlockError(ConsensusError):
    """Root of block errors."""


class MalformedBlock(BlockError):
    """Bytes or fields that are not a canonical block."""


@dataclass(frozen=True, slots=True)
class Block:
    height: int
    parent_hash: bytes
    time: int
    registry_version: int
    ingress: tuple[Ingress, ...]
    xnet_payload: XNetPayload
    maker: str
    rank: int = 0

    def __post_init__(self) -> None:
        if not is_u64(self.height) or self.height < 1:
            raise MalformedBlock(f"height must be in [1, 2**64), got {self.height!r}")
        if not isinstance(self.parent_hash, bytes) or len(self.parent_hash) != 32:
            raise MalformedBlock("parent hash must be 32 bytes")
        for name in ("time", "registry_version", "rank"):
            if not is_u64(getattr(self, name)):
                raise MalformedBlock(f"{name} must be a u64")
        if not all(isinstance(i, Ingress) for i in self.ingress):
            raise MalformedBlock("ingress must hold Ingress values")
        subnets = [entry[0] for entry in self.xnet_payload]
        if subnets != sorted(set(subnets)):
            raise MalformedBlock("the XNet payload holds at most one slice per subnet, sorted by subnet id")
        if not all(isinstance(s, str) and isinstance(b, bytes) for s, b in self.xnet_payload):
            raise MalformedBlock("the XNet payload maps subnet ids to slice bytes")
        if not isinstance(self.maker, str) or not self.maker:
            raise MalformedBlock("maker must be a node id")


def _block_value(block: Block) -> tuple:
    return (BLOCK_VERSION, block.height, block.parent_hash, block.time, block.registry_version,
            tuple(ingress_to_value(i) for i in block.ingress), tuple(block.xnet_payload), block.maker, block.rank)


def encode_block(block: Block) -> bytes:
    return encode_unchecked(_block_value(block))


def decode_block(data: bytes) -> Block:
    """Strict inverse of ``encode_block``; ``MalformedBlock`` for anything else."""
    try:
        value: Any = decode(data, max_bytes=MAX_BLOCK_BYTES)
        fields = check_tuple(value, "block")
        if not fields or type(fields[0]) is not int or fields[0] != BLOCK_VERSION:
            raise CodecError(f"unknown block version {fields[0] if fields else None!r}")
        _, height, parent, time, registry_version, ingress, payload, maker, rank = check_tuple(value, "block", 9)
        return Block(
            check_u64(height, "height"), check_bytes(parent, "parent hash", 32), check_u64(time, "time"),
            check_u64(registry_version, "registry version"),
            tuple(ingress_from_value(i) for i in check_tuple(ingress, "ingress")),
            tuple((check_str(s, "subnet"), check_bytes(b, "slice"))
                  for s, b in (check_tuple(e, "payload entry", 2) for e in check_tuple(payload, "xnet payload"))),
            check_str(maker, "maker"), check_u64(rank, "rank"),
        )
    except (EncodingError, CodecError) as exc:
        raise MalformedBlock(f"block: {exc}") from exc


def block_hash(block: Block) -> bytes:
    """``SHA-256(domain_sep("ic-block") ‖ encode(block))``."""
    return hashlib.sha256(_BLOCK_DOMAIN + encode_block(block)).digest()


def block_randomness(hash_of_block: bytes) -> bytes:
    """The batch randomness: ``SHA-256(domain_sep("ic-random-tape") ‖ block_hash)``."""
    return hashlib.sha256(_RANDOM_DOMAIN + hash_of_block).digest()


def payload_byte_size(block: Block) -> int:
    """Ingress ``count_bytes`` plus certified slice lengths: what the block budget counts."""
    return sum(i.count_bytes() for i in block.ingress) + sum(len(b) for _, b in block.xnet_payload)


def to_batch(block: Block, xnet_slices: DecodedXNetPayload, hash_of_block: bytes | None = None) -> Batch:
    """The batch a finalized block becomes, given its XNet payload decoded into stream slices."""
    digest = block_hash(block) if hash_of_block is None else hash_of_block
    return Batch(
        batch_number=block.height,
        time=block.time,
        registry_version=block.registry_version,
        randomness=block_randomness(digest),
        ingress=block.ingress,
        xnet_payload=xnet_slices,
    )
