"""A block log's bytes: the file header and the records, written and read back strictly.

The format, the torn-record rule and the errors are described in ``block_store``'s docstring;
this module is the part that needs no file handle: encoding a header and a record, and
validating the bytes of a whole file (``validate_log``) before ``block_store.BlockLog`` writes
anything.
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass
from pathlib import Path

import msgpack

from .block import GENESIS_PARENT_HASH, MAX_BLOCK_BYTES, Block, BlockError, MalformedBlock, block_hash, decode_block

__all__ = [
    "LOG_VERSION", "ChainBase", "GENESIS_BASE", "ChainError", "BlockStoreError", "CorruptBlockLog",
    "UnsupportedBlockLog", "BlockLogBehind", "BlockLogBaseMismatch", "Record", "file_header", "encode_record",
    "validate_log", "mark_path", "BASE_HEIGHT_OFFSET", "BASE_HASH_OFFSET",
]

LOG_VERSION = 3
_MAGIC = b"blocklog"
_VERSION_END = len(_MAGIC) + 4                        # where the base starts (format 3) or records (format 2)
_BASE_HEIGHT_BYTES = 8
_FILE_HEADER_BYTES = _VERSION_END + _BASE_HEIGHT_BYTES + 32
_LENGTH_BYTES = 4
_HEADER_BYTES = 8          # length ‖ CRC-32(length)
_DIGEST_BYTES = 32
#: Where the base height and the base hash are in a format-3 file header (for error offsets).
BASE_HEIGHT_OFFSET = _VERSION_END
BASE_HASH_OFFSET = _VERSION_END + _BASE_HEIGHT_BYTES


@dataclass(frozen=True, slots=True)
class ChainBase:
    """The block a store continues from without holding it (see ``block_store``'s docstring)."""

    height: int
    block_hash: bytes

    def __post_init__(self) -> None:
        if type(self.height) is not int or not 0 <= self.height < 2**64 - 1:
            raise ValueError(f"a base height is in [0, 2**64 - 1), got {self.height!r}")
        if not isinstance(self.block_hash, bytes) or len(self.block_hash) != 32:
            raise ValueError("a base hash is 32 bytes")
        if (self.height == 0) != (self.block_hash == GENESIS_PARENT_HASH):
            raise ValueError(f"a base at height {self.height} with {'another' if self.height == 0 else 'the'} "
                             f"hash than GENESIS_PARENT_HASH (height 0 is genesis, and no block hashes to it)")


GENESIS_BASE = ChainBase(0, GENESIS_PARENT_HASH)


def file_header(base: ChainBase) -> bytes:
    return (_MAGIC + LOG_VERSION.to_bytes(4, "big") + base.height.to_bytes(_BASE_HEIGHT_BYTES, "big")
            + base.block_hash)


def mark_path(path: Path) -> Path:
    return path.with_name(path.name + ".finalized")


class ChainError(BlockError):
    """A block that does not extend the finalized chain."""


class BlockStoreError(BlockError):
    """The block log cannot be used: the node must not start on it (see ``block_store``'s docstring)."""


class CorruptBlockLog(BlockStoreError):
    """Damage other than a torn last record. ``index`` is the 0-based record (height
    ``base_height + index + 1``), ``None`` for the file header; ``offset`` is where that record
    (or the damaged header field) starts."""

    def __init__(self, path: Path, index: int | None, offset: int, reason: str, *, base_height: int = 0) -> None:
        self.path, self.index, self.offset, self.reason = path, index, offset, reason
        self.height = None if index is None else base_height + index + 1
        where = "the file header" if index is None else f"record {index} (height {self.height})"
        super().__init__(f"block log {path} is corrupt at {where}, byte offset {offset}: {reason}; "
                         f"the file was left untouched")


class UnsupportedBlockLog(BlockStoreError):
    """A block log of a format this version does not read."""


class BlockLogBehind(BlockStoreError):
    """The log reaches a lower height than the node had finalized."""

    def __init__(self, path: Path, height: int, finalized: int) -> None:
        self.path, self.height, self.finalized = path, height, finalized
        super().__init__(
            f"block log {path} holds blocks up to height {height} but height {finalized} was finalized "
            f"(per {mark_path(path)}): refusing to start rather than make blocks at finalized heights again; "
            f"restore the log (fetching the missing blocks from peers is not supported yet)")


class BlockLogBaseMismatch(BlockStoreError):
    """An existing log starts from another base than the caller expects."""

    def __init__(self, path: Path, found: ChainBase, expected: ChainBase) -> None:
        self.path, self.found, self.expected = path, found, expected
        super().__init__(
            f"block log {path} starts from base height {found.height} (hash {found.block_hash.hex()}), "
            f"not the requested base height {expected.height} (hash {expected.block_hash.hex()}): "
            f"the file was left untouched; open it without a base, or start a new chain with replace_block_log")


# -- records -------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Record:
    offset: int     # where the record starts
    end: int        # where it ends
    block: Block
    digest: bytes   # block_hash(block)


def encode_record(data: bytes) -> bytes:
    length = len(data).to_bytes(_LENGTH_BYTES, "big")
    return length + zlib.crc32(length).to_bytes(4, "big") + data + hashlib.sha256(data).digest()


def validate_log(path: Path, data: bytes) -> tuple[ChainBase | None, list[Record], int]:
    """The base of ``data`` (``None``: empty), every record (chained from the base) and where
    the last intact one ends; ``CorruptBlockLog`` / ``UnsupportedBlockLog`` for anything but a
    torn last record."""
    if not data:
        return None, [], 0
    base, pos = _readfile_header(path, data)
    records: list[Record] = []
    while pos < len(data):
        record = _read_record(path, data, len(records), pos, base.height)
        if record is None:
            break   # a torn last record
        _check_chain(path, base, records, record)
        records.append(record)
        pos = record.end
    return base, records, pos


def _readfile_header(path: Path, data: bytes) -> tuple[ChainBase, int]:
    """The base the file continues from and where its records start."""
    if data.startswith(_MAGIC) and len(data) >= _VERSION_END:
        version = int.from_bytes(data[len(_MAGIC):_VERSION_END], "big")
        if version == 2:
            return GENESIS_BASE, _VERSION_END
        if version != 3:
            raise UnsupportedBlockLog(f"block log {path} has format {version}; this version reads formats 2 and "
                                      f"{LOG_VERSION} only (the file was left untouched)")
        if len(data) < _FILE_HEADER_BYTES:
            # A new file appears by a rename, whole: a short header is not a torn write.
            raise CorruptBlockLog(path, None, 0, f"the file header is cut short ({len(data)} of "
                                                 f"{_FILE_HEADER_BYTES} bytes)")
        height = int.from_bytes(data[_VERSION_END:_VERSION_END + _BASE_HEIGHT_BYTES], "big")
        try:
            base = ChainBase(height, data[_VERSION_END + _BASE_HEIGHT_BYTES:_FILE_HEADER_BYTES])
        except ValueError as exc:
            raise CorruptBlockLog(path, None, _VERSION_END, f"an impossible base ({exc})") from exc
        return base, _FILE_HEADER_BYTES
    if _looks_like_format_1(data):
        raise UnsupportedBlockLog(
            f"block log {path} has format 1 (no file header), written by an older version; this version reads "
            f"formats 2 and {LOG_VERSION} only: start from a fresh directory (the file was left untouched)")
    raise CorruptBlockLog(path, None, 0, "no block-log file header")


def _looks_like_format_1(data: bytes) -> bool:
    """The first record of a format-1 log: length ‖ block ‖ SHA-256(block), intact."""
    length = int.from_bytes(data[:_LENGTH_BYTES], "big")
    body = data[_LENGTH_BYTES:_LENGTH_BYTES + length]
    digest = data[_LENGTH_BYTES + length:_LENGTH_BYTES + length + _DIGEST_BYTES]
    return len(body) == length and hashlib.sha256(body).digest() == digest


def _read_record(path: Path, data: bytes, index: int, pos: int, base_height: int) -> Record | None:
    """The record at ``pos``, ``None`` if it is a torn last record, else ``CorruptBlockLog``."""
    def corrupt(reason: str) -> CorruptBlockLog:
        return CorruptBlockLog(path, index, pos, reason, base_height=base_height)

    header = data[pos:pos + _HEADER_BYTES]
    if len(header) < _HEADER_BYTES:
        return None   # the file ends inside a record header: nothing there to check
    length_bytes = header[:_LENGTH_BYTES]
    if zlib.crc32(length_bytes).to_bytes(4, "big") != header[_LENGTH_BYTES:]:
        raise corrupt("the record header fails its check (a corrupt length field, or garbage between records)")
    length = int.from_bytes(length_bytes, "big")
    if not 0 < length <= MAX_BLOCK_BYTES:
        raise corrupt(f"a record of {length} bytes (a block has 1 to {MAX_BLOCK_BYTES})")
    start = pos + _HEADER_BYTES
    end = start + length + _DIGEST_BYTES
    body = data[start:start + length]
    if end > len(data):
        if not _is_torn(length, body, data[start + length:]):
            raise corrupt(f"the last record declares {length} bytes past the end of the file, "
                          f"but its bytes are not a cut-short record")
        return None
    if hashlib.sha256(body).digest() != data[end - _DIGEST_BYTES:end]:
        raise corrupt("the block's SHA-256 checksum fails")
    try:
        block = decode_block(body)
    except MalformedBlock as exc:
        raise corrupt(f"an undecodable block ({exc})") from exc
    return Record(pos, end, block, block_hash(block))


def _is_torn(length: int, body: bytes, partial_digest: bytes) -> bool:
    """The file ends before this record's declared end: it is torn only if the bytes present
    are a prefix of a record of that length (a block cut short, or a complete block followed
    by a prefix of its digest)."""
    ends_at = _object_end(body)
    if ends_at is None:
        return True
    return ends_at == length and hashlib.sha256(body).digest().startswith(partial_digest)


def _object_end(body: bytes) -> int | None:
    """Where the msgpack value at the start of ``body`` ends; ``None`` if ``body`` ends first
    (or is empty); ``-1`` if ``body`` does not start with one."""
    unpacker = msgpack.Unpacker(raw=True, strict_map_key=False, max_buffer_size=MAX_BLOCK_BYTES + 1)
    unpacker.feed(body)
    try:
        unpacker.unpack()
    except msgpack.OutOfData:
        return None
    except (ValueError, TypeError, msgpack.UnpackException):
        # malformed (FormatError, StackError, a bad length or ext type) or an unhashable map key;
        # anything else propagates out of opening, before the file is written to
        return -1
    return unpacker.tell()


def _check_chain(path: Path, base: ChainBase, records: list[Record], record: Record) -> None:
    height = base.height + len(records) + 1
    if record.block.height != height:
        raise CorruptBlockLog(path, len(records), record.offset,
                              f"a block of height {record.block.height} where height {height} belongs",
                              base_height=base.height)
    if records and record.block.parent_hash != records[-1].digest:
        raise CorruptBlockLog(path, len(records), record.offset, "the block names another parent than the block before",
                              base_height=base.height)
    if not records and record.block.parent_hash != base.block_hash:
        raise CorruptBlockLog(path, 0, record.offset, f"the first block names another parent than the base hash "
                                                      f"{base.block_hash.hex()} of the file header",
                              base_height=base.height)
