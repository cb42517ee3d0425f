"""The finalized chain of one subnet: in memory, optionally backed by an append-only file.

``BlockStore`` keeps finalized blocks by height and checks that each one extends the last
(height + 1, ``parent_hash`` = hash of the last). A node restarted from a checkpoint at
height ``h`` catches up by executing ``blocks_from(h + 1)``.

``BlockLog`` (the only I/O here) is a file of format 2::

    file   = "blocklog" ‖ version (4 bytes big-endian, = 2) ‖ record*
    record = length (4 bytes big-endian) ‖ CRC-32(length) (4 bytes) ‖ block bytes ‖ SHA-256(block bytes)

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

Beside the log, ``<log>.finalized`` (JSON, atomically replaced after each append's fsync)
records the highest height and block hash the log held. A log that holds fewer blocks than
that — a lost or restored-from-backup file — raises ``BlockLogBehind``: the node refuses to
start rather than make new blocks at heights it had finalized (and certified, and served).
Fetching the missing blocks from peers comes with the node process (issue 15).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

import msgpack

from .block import (
    GENESIS_PARENT_HASH, MAX_BLOCK_BYTES, Block, BlockError, MalformedBlock, block_hash, decode_block, encode_block,
)

__all__ = [
    "BlockStore", "BlockLog", "ChainError", "BlockStoreError", "CorruptBlockLog", "UnsupportedBlockLog",
    "BlockLogBehind", "open_block_store", "read_block_log", "LOG_VERSION",
]

_log = logging.getLogger(__name__)

LOG_VERSION = 2
_MAGIC = b"blocklog"
_FILE_HEADER = _MAGIC + LOG_VERSION.to_bytes(4, "big")
_LENGTH_BYTES = 4
_HEADER_BYTES = 8          # length ‖ CRC-32(length)
_DIGEST_BYTES = 32


class ChainError(BlockError):
    """A block that does not extend the finalized chain."""


class BlockStoreError(BlockError):
    """The block log cannot be used: the node must not start on it (see the module docstring)."""


class CorruptBlockLog(BlockStoreError):
    """Damage other than a torn last record. ``index`` is the 0-based record (height
    ``index + 1``), ``None`` for the file header; ``offset`` is where that record starts."""

    def __init__(self, path: Path, index: int | None, offset: int, reason: str) -> None:
        self.path, self.index, self.offset, self.reason = path, index, offset, reason
        where = "the file header" if index is None else f"record {index} (height {index + 1})"
        super().__init__(f"block log {path} is corrupt at {where}, byte offset {offset}: {reason}; "
                         f"the file was left untouched")


class UnsupportedBlockLog(BlockStoreError):
    """A block log of a format this version does not read."""


class BlockLogBehind(BlockStoreError):
    """The log holds fewer blocks than the node had finalized."""

    def __init__(self, path: Path, height: int, finalized: int) -> None:
        self.path, self.height, self.finalized = path, height, finalized
        super().__init__(
            f"block log {path} holds {height} blocks but height {finalized} was finalized "
            f"(per {_mark_path(path)}): refusing to start rather than make blocks at finalized heights again; "
            f"restore the log (fetching the missing blocks from peers is not supported yet)")


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
            self._log.append(block, digest)
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


# -- the file ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Record:
    offset: int     # where the record starts
    end: int        # where it ends
    block: Block
    digest: bytes   # block_hash(block)


class BlockLog:
    """An append-only file of finalized blocks (see the module docstring)."""

    def __init__(self, path: Path, handle, height: int) -> None:
        self.path = path
        self._handle = handle
        self._height = height
        self._failed: BaseException | None = None

    @classmethod
    def open(cls, path: Path | str) -> tuple["BlockLog", list[Block]]:
        """Open (or create) the log; return it with the blocks it holds, in order.
        Raises ``BlockStoreError`` (file untouched) for anything but a torn last record."""
        log, records = cls._open(Path(path))
        return log, [r.block for r in records]

    @classmethod
    def _open(cls, path: Path) -> tuple["BlockLog", list[_Record]]:
        data = path.read_bytes() if path.exists() else b""
        records, end = _validate(path, data)
        marked = _check_finalized(path, records)
        # Validated: only now write (create the file, drop a torn tail, catch the mark up).
        if not data:
            _create(path)
            data = _FILE_HEADER
            end = len(data)
        handle = open(path, "r+b")
        try:
            if end != len(data):
                _log.warning("block log %s: dropping a torn last record at byte offset %d (%d bytes)",
                             path, end, len(data) - end)
                handle.truncate(end)
                handle.flush()
                os.fsync(handle.fileno())
            handle.seek(end)
        except BaseException:
            handle.close()
            raise
        if records and marked != len(records):
            _write_mark(path, len(records), records[-1].digest)
        return cls(path, handle, len(records)), records

    def append(self, block: Block, digest: bytes | None = None) -> None:
        """Append and fsync one record, then record its height as finalized. After a failed
        append the log refuses more: its tail may be torn, and a record after it would be lost."""
        if self._failed is not None:
            raise BlockStoreError(f"block log {self.path}: an earlier append failed ({self._failed})")
        data = encode_block(block)
        if len(data) > MAX_BLOCK_BYTES:
            raise BlockStoreError(f"block at height {block.height} has {len(data)} bytes, over {MAX_BLOCK_BYTES}")
        try:
            self._handle.write(_record(data))
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._height += 1
            _write_mark(self.path, self._height, block_hash(block) if digest is None else digest)
        except BaseException as exc:
            self._failed = exc
            raise

    def close(self) -> None:
        if not self._handle.closed:
            self._handle.close()


def _record(data: bytes) -> bytes:
    length = len(data).to_bytes(_LENGTH_BYTES, "big")
    return length + zlib.crc32(length).to_bytes(4, "big") + data + hashlib.sha256(data).digest()


def _validate(path: Path, data: bytes) -> tuple[list[_Record], int]:
    """Every record of ``data`` (chained from genesis) and where the last intact one ends;
    ``CorruptBlockLog`` / ``UnsupportedBlockLog`` for anything but a torn last record."""
    if not data:
        return [], 0
    _check_file_header(path, data)
    records: list[_Record] = []
    pos = len(_FILE_HEADER)
    while pos < len(data):
        record = _read_record(path, data, len(records), pos)
        if record is None:
            break   # a torn last record
        _check_chain(path, records, record)
        records.append(record)
        pos = record.end
    return records, pos


def _check_file_header(path: Path, data: bytes) -> None:
    if data.startswith(_FILE_HEADER):
        return
    if data.startswith(_MAGIC) and len(data) >= len(_FILE_HEADER):
        version = int.from_bytes(data[len(_MAGIC):len(_FILE_HEADER)], "big")
        raise UnsupportedBlockLog(f"block log {path} has format {version}; this version reads format {LOG_VERSION} "
                                  f"only (the file was left untouched)")
    if _looks_like_format_1(data):
        raise UnsupportedBlockLog(
            f"block log {path} has format 1 (no file header), written by an older version; this version reads "
            f"format {LOG_VERSION} only: start from a fresh directory (the file was left untouched)")
    raise CorruptBlockLog(path, None, 0, "no block-log file header")


def _looks_like_format_1(data: bytes) -> bool:
    """The first record of a format-1 log: length ‖ block ‖ SHA-256(block), intact."""
    length = int.from_bytes(data[:_LENGTH_BYTES], "big")
    body = data[_LENGTH_BYTES:_LENGTH_BYTES + length]
    digest = data[_LENGTH_BYTES + length:_LENGTH_BYTES + length + _DIGEST_BYTES]
    return len(body) == length and hashlib.sha256(body).digest() == digest


def _read_record(path: Path, data: bytes, index: int, pos: int) -> _Record | None:
    """The record at ``pos``, ``None`` if it is a torn last record, else ``CorruptBlockLog``."""
    header = data[pos:pos + _HEADER_BYTES]
    if len(header) < _HEADER_BYTES:
        return None   # the file ends inside a record header: nothing there to check
    length_bytes = header[:_LENGTH_BYTES]
    if zlib.crc32(length_bytes).to_bytes(4, "big") != header[_LENGTH_BYTES:]:
        raise CorruptBlockLog(path, index, pos, "the record header fails its check (a corrupt length field, "
                                                "or garbage between records)")
    length = int.from_bytes(length_bytes, "big")
    if not 0 < length <= MAX_BLOCK_BYTES:
        raise CorruptBlockLog(path, index, pos, f"a record of {length} bytes (a block has 1 to {MAX_BLOCK_BYTES})")
    start = pos + _HEADER_BYTES
    end = start + length + _DIGEST_BYTES
    body = data[start:start + length]
    if end > len(data):
        _check_torn(path, index, pos, length, body, data[start + length:])
        return None
    if hashlib.sha256(body).digest() != data[end - _DIGEST_BYTES:end]:
        raise CorruptBlockLog(path, index, pos, "the block's SHA-256 checksum fails")
    try:
        block = decode_block(body)
    except MalformedBlock as exc:
        raise CorruptBlockLog(path, index, pos, f"an undecodable block ({exc})") from exc
    return _Record(pos, end, block, block_hash(block))


def _check_torn(path: Path, index: int, pos: int, length: int, body: bytes, partial_digest: bytes) -> None:
    """The file ends before this record's declared end: accept it as torn only if the bytes
    present are a prefix of a record of that length (a block cut short, or a complete block
    followed by a prefix of its digest)."""
    ends_at = _object_end(body)
    if ends_at is None:
        return
    if ends_at == length and hashlib.sha256(body).digest().startswith(partial_digest):
        return
    raise CorruptBlockLog(path, index, pos, f"the last record declares {length} bytes past the end of the file, "
                                            f"but its bytes are not a cut-short record")


def _object_end(body: bytes) -> int | None:
    """Where the msgpack value at the start of ``body`` ends; ``None`` if ``body`` ends first
    (or is empty); ``-1`` if ``body`` does not start with one."""
    unpacker = msgpack.Unpacker(raw=True, strict_map_key=False, max_buffer_size=MAX_BLOCK_BYTES + 1)
    unpacker.feed(body)
    try:
        unpacker.unpack()
    except msgpack.OutOfData:
        return None
    except Exception:  # noqa: BLE001 - any other decoding failure: not the start of a block
        return -1
    return unpacker.tell()


def _check_chain(path: Path, records: list[_Record], record: _Record) -> None:
    height = len(records) + 1
    parent = records[-1].digest if records else GENESIS_PARENT_HASH
    if record.block.height != height:
        raise CorruptBlockLog(path, len(records), record.offset,
                              f"a block of height {record.block.height} where height {height} belongs")
    if record.block.parent_hash != parent:
        raise CorruptBlockLog(path, len(records), record.offset, "the block names another parent than the block before")


def _create(path: Path) -> None:
    """A new, empty log, created atomically (never a file with half a header)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _replace_atomically(path, _FILE_HEADER)


# -- the finalized-height mark ----------------------------------------------------------------

def _mark_path(path: Path) -> Path:
    return path.with_name(path.name + ".finalized")


def _check_finalized(path: Path, records: list[_Record]) -> int | None:
    """The recorded finalized height (``None``: no record); ``BlockLogBehind`` if the log is
    short of it, ``CorruptBlockLog`` if it holds another block at that height."""
    mark = _mark_path(path)
    if not mark.exists():
        return None
    height, digest = _read_mark(mark)
    if len(records) < height:
        raise BlockLogBehind(path, len(records), height)
    if height and records[height - 1].digest != digest:
        raise CorruptBlockLog(path, height - 1, records[height - 1].offset,
                              f"not the block finalized at height {height} (per {mark})")
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
    _replace_atomically(_mark_path(path), body + b"\n")


def _replace_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def read_block_log(path: Path | str) -> list[Block]:
    """The blocks of a log, read-only (a live log a node is appending to: a record being
    written is not there yet). Raises ``BlockStoreError`` for a damaged log, like ``open``."""
    path = Path(path)
    return [r.block for r in _validate(path, path.read_bytes())[0]]


def open_block_store(path: Path | str | None) -> BlockStore:
    """A block store, loaded from and appending to the log at ``path`` (in memory if ``None``).
    Raises ``BlockStoreError`` — the file untouched — for a log the node must not start on."""
    if path is None:
        return BlockStore()
    log, records = BlockLog._open(Path(path))
    store = BlockStore()
    for record in records:
        store.append(record.block, record.digest)   # chained: BlockLog.open checked it
    store._log = log
    return store
