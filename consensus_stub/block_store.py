"""The finalized chain of one subnet: in memory, optionally backed by an append-only file.

``BlockStore`` keeps finalized blocks by height and checks that each one extends the last
(height + 1, ``parent_hash`` = hash of the last). A node restarted from a checkpoint at
height ``h`` catches up by executing ``blocks_from(h + 1)``.

``BlockLog`` (the only I/O here) appends one record per finalized block::

    record = len(block bytes) as 4 bytes big-endian ‖ block bytes ‖ SHA-256(block bytes)

and ``fsync``s it. ``BlockLog.open`` reads every complete, intact record and truncates a
torn or corrupt tail (a crash in the middle of an append), so the file always holds a
prefix of the chain.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from .block import GENESIS_PARENT_HASH, Block, BlockError, MalformedBlock, block_hash, decode_block, encode_block

__all__ = ["BlockStore", "BlockLog", "ChainError", "open_block_store"]

_LENGTH_BYTES = 4
_DIGEST_BYTES = 32


class ChainError(BlockError):
    """A block that does not extend the finalized chain."""


class BlockStore:
    """Finalized blocks by height; ``log`` (optional) receives every appended block."""

    def __init__(self, *, log: "BlockLog | None" = None) -> None:
        self._blocks: list[tuple[Block, bytes]] = []   # index h - 1 holds height h
        self._log = log

    @property
    def height(self) -> int:
        """Height of the last finalized block (0: none yet)."""
        return len(self._blocks)

    @property
    def tip_hash(self) -> bytes:
        return self._blocks[-1][1] if self._blocks else GENESIS_PARENT_HASH

    @property
    def tip_time(self) -> int | None:
        return self._blocks[-1][0].time if self._blocks else None

    def append(self, block: Block, hash_of_block: bytes | None = None) -> bytes:
        """Append a finalized block; return its hash. ``ChainError`` if it does not extend the chain."""
        digest = block_hash(block) if hash_of_block is None else hash_of_block
        if block.height != self.height + 1:
            raise ChainError(f"block at height {block.height} cannot follow height {self.height}")
        if block.parent_hash != self.tip_hash:
            raise ChainError(f"block at height {block.height} names another parent")
        if self._log is not None:
            self._log.append(block)
        self._blocks.append((block, digest))
        return digest

    def block(self, height: int) -> Block | None:
        return self._blocks[height - 1][0] if 1 <= height <= self.height else None

    def hash_at(self, height: int) -> bytes | None:
        if height == 0:
            return GENESIS_PARENT_HASH
        return self._blocks[height - 1][1] if 1 <= height <= self.height else None

    def blocks_from(self, height: int) -> list[Block]:
        """Finalized blocks of heights ``height, height + 1, ...`` (what a lagging node replays)."""
        return [block for block, _ in self._blocks[max(0, height - 1):]]

    def close(self) -> None:
        if self._log is not None:
            self._log.close()


class BlockLog:
    """An append-only file of finalized blocks (see the module docstring)."""

    def __init__(self, path: Path, handle) -> None:
        self.path = path
        self._handle = handle

    @classmethod
    def open(cls, path: Path | str) -> tuple["BlockLog", list[Block]]:
        """Open (or create) the log; return it with the intact blocks it holds, in order."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = path.read_bytes() if path.exists() else b""
        blocks, good_end = _read_records(data)
        handle = open(path, "r+b" if path.exists() else "w+b")
        if good_end != len(data):
            handle.truncate(good_end)
            handle.flush()
            os.fsync(handle.fileno())
        handle.seek(good_end)
        return cls(path, handle), blocks

    def append(self, block: Block) -> None:
        data = encode_block(block)
        self._handle.write(len(data).to_bytes(_LENGTH_BYTES, "big") + data + hashlib.sha256(data).digest())
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        if not self._handle.closed:
            self._handle.close()


def _read_records(data: bytes) -> tuple[list[Block], int]:
    """Intact records from the start of ``data`` and the offset where they end."""
    blocks: list[Block] = []
    pos = 0
    while pos + _LENGTH_BYTES <= len(data):
        length = int.from_bytes(data[pos:pos + _LENGTH_BYTES], "big")
        end = pos + _LENGTH_BYTES + length + _DIGEST_BYTES
        if end > len(data):
            break
        body = data[pos + _LENGTH_BYTES:pos + _LENGTH_BYTES + length]
        if hashlib.sha256(body).digest() != data[end - _DIGEST_BYTES:end]:
            break
        try:
            blocks.append(decode_block(body))
        except MalformedBlock:
            break
        pos = end
    return blocks, pos


def open_block_store(path: Path | str | None) -> BlockStore:
    """A block store, loaded from and appending to the log at ``path`` (in memory if ``None``).
    Blocks of the log that do not extend the chain are dropped with the rest of the file."""
    if path is None:
        return BlockStore()
    log, blocks = BlockLog.open(path)
    store = BlockStore()
    for block in blocks:
        try:
            store.append(block)
        except ChainError:
            break
    if store.height != len(blocks):
        log.close()
        _rewrite(Path(path), store)
        log, _ = BlockLog.open(path)
    store._log = log
    return store


def _rewrite(path: Path, store: BlockStore) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as out:
        for block in store.blocks_from(1):
            data = encode_block(block)
            out.write(len(data).to_bytes(_LENGTH_BYTES, "big") + data + hashlib.sha256(data).digest())
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
