"""The finalized chain of one subnet: in memory, optionally backed by an append-only file.

``BlockStore`` keeps finalized blocks by height and checks that each one extends the last
(height + 1, ``parent_hash`` = hash of the last). A node restarted from a checkpoint at
height ``h`` catches up by executing ``blocks_from(h + 1)``.

A store has a **base** ``ChainBase(height, block_hash)``: the block it continues from without
holding it — genesis (``0``, ``GENESIS_PARENT_HASH``) for a chain kept from the start, height
``H`` after a state sync from a peer's checkpoint at ``H``, or the last block dropped by
``prune_below``. Blocks at or below the base are not held (``block`` returns ``None``,
``blocks_from`` starts above it); ``hash_at(base height)`` is the base hash.

``BlockLog`` (the only I/O here) is a file of format 3::

    file   = "blocklog" ‖ version (4 bytes big-endian, = 3) ‖ base height (8 bytes big-endian) ‖
             base hash (32 bytes) ‖ record*
    record = length (4 bytes big-endian) ‖ CRC-32(length) (4 bytes) ‖ block bytes ‖ SHA-256(block bytes)

The first record has height base + 1 and names the base hash as its parent. Files of format 2
(the same without the base: they start at genesis) are still read and appended to; every new
file is written in format 3. A base of height 0 must carry ``GENESIS_PARENT_HASH`` and any
other base another hash (no block hashes to zeros), so a damaged base field of a log without
records is still caught.

Each append is ``fsync``ed. The CRC makes the length field self-checking: a corrupted length
(any error within one byte, and almost any other) fails its check instead of silently
moving every later record boundary.

Opening reads the file read-only and validates all of it before writing anything. The only
damage it repairs is a **torn last record** — an append cut short by a crash — which it
drops with a warning: the file ends inside the last record (its header, or after an intact
header, before the declared end) and the bytes present are a prefix of that record (the
block encoding, msgpack, is self-delimiting: a block that ends before the declared length,
or a partial digest that is not a prefix of the block's SHA-256, is not a torn write).
Anything else — a complete record whose checksum fails, a bad header, garbage, an
undecodable block, a broken parent-hash chain or a height gap — raises ``CorruptBlockLog``
(file, record index, byte offset) and leaves the file byte-identical. A file whose tail is
zeros (a crash that extended the file without its data) is reported as corrupt too: the
operator decides. Logs of format 1 (no file header) are refused with ``UnsupportedBlockLog``.
Opening an existing log with a ``base`` other than the one in its header raises
``BlockLogBaseMismatch``.

**Pruning** (``BlockStore.prune_below(h)``: the base becomes height ``h - 1``) writes the new
file — format 3, the new base, the kept records — to ``<log>.tmp``, fsyncs it, renames it over
the log and fsyncs the directory: the rename is the commit point, so a crash leaves the old or
the new complete file. A ``<log>.tmp`` found on opening is an uncommitted rewrite (or
creation) and is removed once the log has been validated; ``read_block_log`` ignores it.

**Replacing** (``replace_block_log``, for state sync) renames the log and its mark to
``<log>.replaced-<n>`` and ``<log>.replaced-<n>.finalized`` (``n`` the first free integer from
1) — a pair that opens like any log — and starts a fresh log at the new base. Nothing is deleted.

Beside the log, ``<log>.finalized`` (JSON, atomically replaced after each append's fsync)
records the highest height and block hash the log held (for a log created above genesis, its
base from the start). A log that reaches a lower height — a lost or restored-from-backup file
— raises ``BlockLogBehind``: the node refuses to start rather than make new blocks at heights
it had finalized (and certified, and served). A log whose base is above the mark cannot come
from pruning or replacing (both keep the base at or below the mark) and is refused as corrupt.
Fetching the missing blocks from peers comes with the node process (issue 15).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Sequence

from state_manager.durable_files import (
    fsync_directory, fsync_file, rename_durably, replacing, tmp_sibling, write_atomically,
)

from .block import MAX_BLOCK_BYTES, Block, block_hash, encode_block
from .block_log_records import (
    BASE_HASH_OFFSET, BASE_HEIGHT_OFFSET, GENESIS_BASE, LOG_VERSION, BlockLogBaseMismatch, BlockLogBehind,
    BlockStoreError, ChainBase, ChainError, CorruptBlockLog, Record, UnsupportedBlockLog, encode_record, file_header,
    mark_path, validate_log,
)

__all__ = [
    "BlockStore", "BlockLog", "ChainBase", "GENESIS_BASE", "ChainError", "BlockStoreError", "CorruptBlockLog",
    "UnsupportedBlockLog", "BlockLogBehind", "BlockLogBaseMismatch", "open_block_store", "read_block_log",
    "replace_block_log", "LOG_VERSION",
]

_log = logging.getLogger(__name__)


class BlockStore:
    """Finalized blocks above ``base`` by height; ``log`` (optional) receives every appended
    block and every prune. A ``log`` given here must hold no block above ``base`` (a log with
    blocks is loaded by ``open_block_store``)."""

    def __init__(self, *, base: ChainBase | None = None, log: "BlockLog | None" = None) -> None:
        self._base = GENESIS_BASE if base is None else base
        if log is not None and (log.base, log.height) != (self._base, self._base.height):
            raise ValueError(f"block log {log.path} (base height {log.base.height}, height {log.height}) is not "
                             f"an empty log at base height {self._base.height}: use open_block_store")
        self._blocks: list[tuple[Block, bytes]] = []   # index h - base height - 1 holds height h
        self._log = log

    @property
    def base_height(self) -> int:
        return self._base.height

    @property
    def base_hash(self) -> bytes:
        return self._base.block_hash

    @property
    def base(self) -> ChainBase:
        return self._base

    @property
    def height(self) -> int:
        """Height of the last finalized block (the base height: none held)."""
        return self._base.height + len(self._blocks)

    @property
    def tip_hash(self) -> bytes:
        return self._blocks[-1][1] if self._blocks else self._base.block_hash

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
            self._log.append(block, digest)
        self._blocks.append((block, digest))
        return digest

    def _index(self, height: int) -> int | None:
        index = height - self._base.height - 1
        return index if 0 <= index < len(self._blocks) else None

    def block(self, height: int) -> Block | None:
        index = self._index(height)
        return None if index is None else self._blocks[index][0]

    def hash_at(self, height: int) -> bytes | None:
        if height == self._base.height:
            return self._base.block_hash
        index = self._index(height)
        return None if index is None else self._blocks[index][1]

    def blocks_from(self, height: int) -> list[Block]:
        """Finalized blocks of heights ``max(height, base + 1), ...`` (what a lagging node replays)."""
        return [block for block, _ in self._blocks[max(0, height - self._base.height - 1):]]

    def prune_below(self, height: int) -> None:
        """Drop the blocks below ``height``: the base becomes height ``height - 1`` (so
        ``prune_below(self.height + 1)`` keeps no block and makes the tip the base). A no-op if
        ``height - 1`` is at or below the base; ``ValueError`` if it is above the tip. The log is
        rewritten first (see the module docstring): if that fails, the store is unchanged."""
        if type(height) is not int:
            raise TypeError(f"a height is an int, got {height!r}")
        if height - 1 > self.height:
            raise ValueError(f"cannot prune below height {height}: the tip is at height {self.height} "
                             f"(at most prune_below({self.height + 1}), which keeps no block)")
        if height - 1 <= self._base.height:
            return
        kept = self._blocks[height - 1 - self._base.height:]
        base = ChainBase(height - 1, self._blocks[height - 2 - self._base.height][1])
        if self._log is not None:
            self._log.rewrite(base, kept)
        self._blocks, self._base = kept, base

    def close(self) -> None:
        if self._log is not None:
            self._log.close()


# -- the file ---------------------------------------------------------------------------------

class BlockLog:
    """An append-only file of finalized blocks (see the module docstring)."""

    def __init__(self, path: Path, handle, base: ChainBase, height: int) -> None:
        self.path = path
        self._handle = handle
        self._base = base
        self._height = height
        self._failed: BaseException | None = None

    @property
    def base(self) -> ChainBase:
        return self._base

    @property
    def height(self) -> int:
        """Height of the last block in the file (the base height: none)."""
        return self._height

    @classmethod
    def open(cls, path: Path | str, base: ChainBase | None = None) -> tuple["BlockLog", list[Block]]:
        """Open (or create, at ``base``: genesis if ``None``) the log; return it with the blocks it
        holds, in order. Raises ``BlockStoreError`` (file untouched) for anything but a torn last
        record, and ``BlockLogBaseMismatch`` if ``base`` is given and the file has another."""
        log, records = cls._open(Path(path), base)
        return log, [r.block for r in records]

    @classmethod
    def _open(cls, path: Path, base: ChainBase | None) -> tuple["BlockLog", list[Record]]:
        data = path.read_bytes() if path.exists() else b""
        found, records, end = validate_log(path, data)
        if found is not None and base is not None and found != base:
            raise BlockLogBaseMismatch(path, found, base)
        base = found or base or GENESIS_BASE
        marked = _check_finalized(path, base, records, exists=bool(data))
        # Validated: only now write (drop an uncommitted rewrite, create the file, drop a torn
        # tail, catch the mark up).
        tmp = tmp_sibling(path)
        if tmp.exists():
            _log.warning("block log %s: removing %s, an uncommitted rewrite or creation", path, tmp)
            tmp.unlink()
        if not data:
            _create(path, base)
            data = file_header(base)
            end = len(data)
        handle = open(path, "r+b")
        try:
            if end != len(data):
                _log.warning("block log %s: dropping a torn last record at byte offset %d (%d bytes)",
                             path, end, len(data) - end)
                handle.truncate(end)
                fsync_file(handle)
            handle.seek(end)
        except BaseException:
            handle.close()
            raise
        height = base.height + len(records)
        if height and marked != height:
            _write_mark(path, height, records[-1].digest if records else base.block_hash)
        return cls(path, handle, base, height), records

    def _check_usable(self) -> None:
        if self._failed is not None:
            raise BlockStoreError(f"block log {self.path}: an earlier write failed ({self._failed})")

    def append(self, block: Block, digest: bytes | None = None) -> None:
        """Append and fsync one record, then record its height as finalized. After a failed
        append the log refuses more: its tail may be torn, and a record after it would be lost."""
        self._check_usable()
        data = encode_block(block)
        if len(data) > MAX_BLOCK_BYTES:
            raise BlockStoreError(f"block at height {block.height} has {len(data)} bytes, over {MAX_BLOCK_BYTES}")
        try:
            self._handle.write(encode_record(data))
            fsync_file(self._handle)
            self._height += 1
            _write_mark(self.path, self._height, block_hash(block) if digest is None else digest)
        except BaseException as exc:
            self._failed = exc
            raise

    def rewrite(self, base: ChainBase, blocks: Sequence[tuple[Block, bytes]]) -> None:
        """Replace the file, atomically, by one of format 3 at ``base`` holding ``blocks`` (block,
        hash), which must continue ``base`` and end at this log's height (``BlockStore.prune_below``
        checks both). Before the rename a failure leaves the old file and this log usable; after
        it (the directory fsync, reopening) the log refuses further writes."""
        self._check_usable()
        if base.height + len(blocks) != self._height:
            raise ValueError(f"a rewrite of block log {self.path} at base height {base.height} with "
                             f"{len(blocks)} blocks does not end at its height {self._height}")
        # a failure before the rename (the commit point) removes <log>.tmp: the old file is the log
        with replacing(self.path, sync_directory=False) as out:
            out.write(file_header(base))
            for block, _ in blocks:   # re-encoded from memory: the blocks validated or appended
                out.write(encode_record(encode_block(block)))
        try:
            fsync_directory(self.path.parent)
            handle = open(self.path, "r+b")
            handle.seek(0, os.SEEK_END)
        except BaseException as exc:
            self._failed = exc
            raise
        self._handle.close()   # the old file's handle: its inode is gone from the directory
        self._handle, self._base = handle, base

    def close(self) -> None:
        if not self._handle.closed:
            self._handle.close()


def _create(path: Path, base: ChainBase) -> None:
    """A new, empty log, created atomically (never a file with half a header)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, file_header(base))


# -- the finalized-height mark ----------------------------------------------------------------

def _check_finalized(path: Path, base: ChainBase, records: list[Record], *, exists: bool) -> int | None:
    """The recorded finalized height (``None``: no record); ``BlockLogBehind`` if the log is
    short of it, ``CorruptBlockLog`` if it holds another block (or base) at that height, or
    (an existing file) starts above it."""
    mark = mark_path(path)
    if not mark.exists():
        return None
    height, digest = _read_mark(mark)
    top = base.height + len(records)
    if top < height:
        raise BlockLogBehind(path, top, height)
    if height > base.height:
        record = records[height - base.height - 1]
        if record.digest != digest:
            raise CorruptBlockLog(path, height - base.height - 1, record.offset,
                                  f"not the block finalized at height {height} (per {mark})", base_height=base.height)
    elif height == base.height:
        if base.block_hash != digest:
            raise CorruptBlockLog(path, None, BASE_HASH_OFFSET,
                                  f"the base hash is not the block finalized at height {height} (per {mark})")
    elif exists:
        # Pruning and replacing keep the base at or below the mark; a missing file is created at
        # the base asked for (a state sync above what this node had finalized: no height made twice).
        raise CorruptBlockLog(path, None, BASE_HEIGHT_OFFSET, f"the base height {base.height} is above the height "
                                                        f"{height} finalized (per {mark})")
    return height


def _read_mark(mark: Path) -> tuple[int, bytes]:
    try:
        value = json.loads(mark.read_bytes())
        height, digest = value["finalized_height"], bytes.fromhex(value["block_hash"])
        if type(height) is not int or height < 0 or len(digest) != 32:
            raise ValueError("bad height or hash")
    except (ValueError, KeyError, TypeError) as exc:
        raise BlockStoreError(f"unreadable finalized-height file {mark} ({exc}): refusing to start") from exc
    return height, digest


def _write_mark(path: Path, height: int, digest: bytes) -> None:
    body = json.dumps({"finalized_height": height, "block_hash": digest.hex()}, sort_keys=True).encode()
    write_atomically(mark_path(path), body + b"\n")


def read_block_log(path: Path | str) -> list[Block]:
    """The blocks of a log, read-only (a live log a node is appending to: a record being
    written is not there yet). Raises ``BlockStoreError`` for a damaged log, like ``open``."""
    path = Path(path)
    return [r.block for r in validate_log(path, path.read_bytes())[1]]


def open_block_store(path: Path | str | None, base: ChainBase | None = None) -> BlockStore:
    """A block store, loaded from and appending to the log at ``path`` (in memory if ``None``).
    A new log starts at ``base`` (genesis if ``None``); an existing one at the base in its file,
    which must be ``base`` if given (``BlockLogBaseMismatch``). Raises ``BlockStoreError`` —
    the file untouched — for a log the node must not start on."""
    if path is None:
        return BlockStore(base=base)
    log, records = BlockLog._open(Path(path), base)
    store = BlockStore(base=log.base)
    for record in records:
        store.append(record.block, record.digest)   # chained: BlockLog.open checked it
    store._log = log
    return store


def _aside_path(path: Path, n: int) -> Path:
    return path.with_name(f"{path.name}.replaced-{n}")


def replace_block_log(path: Path | str, base: ChainBase) -> BlockStore:
    """Start the chain at ``path`` afresh at ``base`` (after a state sync): an existing log and
    its mark are renamed to ``<log>.replaced-<n>`` / ``<log>.replaced-<n>.finalized`` (never
    deleted), then a new log is created at ``base`` and returned open. The caller must not hold
    the old log open."""
    path = Path(path)
    mark = mark_path(path)
    if path.exists() or mark.exists():
        n = 1
        while _aside_path(path, n).exists() or mark_path(_aside_path(path, n)).exists():
            n += 1
        aside = _aside_path(path, n)
        # The log first: a crash before the mark moves leaves a mark without its log, which
        # refuses to start (BlockLogBehind) until the replacement is run again.
        if path.exists():
            rename_durably(path, aside)
        if mark.exists():
            rename_durably(mark, mark_path(aside))
        _log.warning("block log %s: the previous chain was moved aside to %s to start at base height %d",
                     path, aside, base.height)
    return open_block_store(path, base)
