"""The block log: a torn last record is dropped with a warning; any other damage refuses to
open with the file, record index and offset, and leaves the file byte-identical; a log short
of its recorded finalized height refuses to open."""

from __future__ import annotations

import hashlib
import logging
import tempfile
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consensus_stub.block import GENESIS_PARENT_HASH, Block, block_hash, encode_block
from consensus_stub.block_log_records import encode_record
from consensus_stub.block_store import (
    BlockLog, BlockLogBehind, BlockStoreError, CorruptBlockLog, UnsupportedBlockLog, open_block_store,
)
from tests.builders import ingress

T0 = 1_700_000_000 * 10**9
# what the store writes: format 3 at genesis (format 2 files: tests/consensus_stub/test_block_store_base.py)
FILE_HEADER = b"blocklog" + (3).to_bytes(4, "big") + (0).to_bytes(8, "big") + GENESIS_PARENT_HASH
N = 5
POSITIONS = {"first": 0, "middle": N // 2, "last": N - 1}


def chain(n: int = N, payload: bytes = b"x", start: int = 1, parent: bytes = GENESIS_PARENT_HASH) -> list[Block]:
    blocks = []
    for height in range(start, start + n):
        blk = Block(height, parent, T0 + height, 1, (ingress(7, n=height, payload=payload * height),), (),
                    "alpha-node-1", 0)
        blocks.append(blk)
        parent = block_hash(blk)
    return blocks


def raw_log(blocks: list[Block]) -> bytes:
    return FILE_HEADER + b"".join(encode_record(encode_block(blk)) for blk in blocks)


def spans(blocks: list[Block]) -> list[tuple[int, int]]:
    """(start, end) of every record of ``raw_log(blocks)``."""
    out, pos = [], len(FILE_HEADER)
    for blk in blocks:
        end = pos + len(encode_record(encode_block(blk)))
        out.append((pos, end))
        pos = end
    return out


def write_log(path: Path, blocks: list[Block]) -> bytes:
    """A log written by the store (so with its finalized-height mark); its bytes."""
    store = open_block_store(path)
    for blk in blocks:
        store.append(blk)
    store.close()
    return path.read_bytes()


def mark(path: Path) -> Path:
    return path.with_name(path.name + ".finalized")


def assert_refused(path: Path, error=CorruptBlockLog):
    """Opening raises ``error`` twice (a relaunch does not get further) and changes nothing."""
    before = path.read_bytes() if path.exists() else None
    marked = mark(path).read_bytes() if mark(path).exists() else None
    for _ in range(2):
        with pytest.raises(error) as info:
            open_block_store(path)
        assert str(path) in str(info.value)
        assert (path.read_bytes() if path.exists() else None) == before
        assert (mark(path).read_bytes() if mark(path).exists() else None) == marked
    return info.value


def test_a_written_log_reopens_and_continues(tmp_path):
    path = tmp_path / "a.blocks"
    blocks = chain()
    data = write_log(path, blocks[:3])
    assert data == raw_log(blocks[:3])
    store = open_block_store(path)
    assert store.blocks_from(1) == blocks[:3]
    for blk in blocks[3:]:
        store.append(blk)
    store.close()
    assert open_block_store(path).blocks_from(1) == blocks
    assert b'"finalized_height": 5' in mark(path).read_bytes()


# -- corruption: refused, file untouched ------------------------------------------------------

def _flip(data: bytearray, at: int) -> None:
    data[at] ^= 0x5A


def _with_length(data: bytearray, start: int, length: int) -> None:
    """Rewrite a record's length field with a matching CRC (a damage the CRC cannot see)."""
    field = length.to_bytes(4, "big")
    data[start:start + 8] = field + zlib.crc32(field).to_bytes(4, "big")


def corrupt(kind: str, i: int) -> tuple[bytes, int]:
    """A log of ``N`` blocks damaged at record ``i`` and the offset the error must name."""
    blocks = chain()
    data = bytearray(raw_log(blocks))
    start, end = spans(blocks)[i]
    length = end - start - 8 - 32
    if kind == "checksum byte":
        _flip(data, end - 7)
    elif kind == "payload byte":
        _flip(data, start + 8 + length // 2)
    elif kind == "length byte":
        _flip(data, start + 3)
    elif kind == "crc byte":
        _flip(data, start + 5)
    elif kind == "length into later data":
        _with_length(data, start, length + 10)
    elif kind == "length shorter":
        _with_length(data, start, length - 1)
    elif kind == "length zero":
        _with_length(data, start, 0)
    elif kind == "length past eof":
        _with_length(data, start, len(data))
    elif kind == "garbage between records":
        data[start:start] = b"\x00garbage\x00"
    elif kind in ("broken parent chain", "height gap", "undecodable block"):
        blk = blocks[i]
        if kind == "broken parent chain":
            bad = encode_block(Block(blk.height, b"\x07" * 32, blk.time, 1, blk.ingress, (), blk.maker, 0))
        elif kind == "height gap":
            bad = encode_block(Block(blk.height + 1, blk.parent_hash, blk.time, 1, blk.ingress, (), blk.maker, 0))
        else:
            bad = b"\x93\x01\x02\x03"   # a msgpack array, not a block
        data[start:end] = encode_record(bad)
    else:
        raise AssertionError(kind)
    return bytes(data), start


KINDS = ["checksum byte", "payload byte", "length byte", "crc byte", "length into later data", "length shorter",
         "length zero", "length past eof", "garbage between records", "broken parent chain", "height gap",
         "undecodable block"]


@pytest.mark.parametrize("where", POSITIONS)
@pytest.mark.parametrize("kind", KINDS)
def test_corruption_is_refused_with_file_record_and_offset(tmp_path, kind, where):
    index = POSITIONS[where]
    data, offset = corrupt(kind, index)
    path = tmp_path / "a.blocks"
    path.write_bytes(data)
    error = assert_refused(path)
    assert (error.path, error.index, error.offset) == (path, index, offset)
    assert f"record {index}" in str(error) and f"byte offset {offset}" in str(error)
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("kind", ["checksum byte", "payload byte", "length byte"])
def test_corruption_of_a_written_log_is_refused_even_with_its_mark(tmp_path, kind):
    path = tmp_path / "a.blocks"
    assert write_log(path, chain()) == raw_log(chain())
    damaged, offset = corrupt(kind, 2)
    path.write_bytes(damaged)
    assert assert_refused(path).offset == offset


def test_bad_file_headers_are_refused(tmp_path):
    path = tmp_path / "a.blocks"
    blocks = chain(2)
    path.write_bytes(b"not a log at all, just text")
    assert assert_refused(path).index is None
    # a log of format 1 (no header, records without the length check) is named as such
    path.write_bytes(b"".join(len(d).to_bytes(4, "big") + d + hashlib.sha256(d).digest()
                              for d in map(encode_block, blocks)))
    assert "format 1" in str(assert_refused(path, UnsupportedBlockLog))
    path.write_bytes(b"blocklog" + (4).to_bytes(4, "big") + raw_log(blocks)[len(FILE_HEADER):])
    assert "format 4" in str(assert_refused(path, UnsupportedBlockLog))


# -- torn last records: dropped with a warning -----------------------------------------------

TORN = {
    "partial length prefix": lambda rec, length: rec[:2],
    "length without its crc": lambda rec, length: rec[:6],
    "header only": lambda rec, length: rec[:8],
    "partial payload": lambda rec, length: rec[:8 + length // 2],
    "payload without digest": lambda rec, length: rec[:8 + length],
    "partial digest": lambda rec, length: rec[:8 + length + 17],
}


@pytest.mark.parametrize("cut", TORN)
def test_a_torn_last_record_is_dropped_and_logged(tmp_path, caplog, cut):
    path = tmp_path / "a.blocks"
    blocks = chain()
    data = write_log(path, blocks[:4])
    body = encode_block(blocks[4])
    torn = TORN[cut](encode_record(body), len(body))
    path.write_bytes(data + torn)
    with caplog.at_level(logging.WARNING, logger="consensus_stub.block_store"):
        store = open_block_store(path)
    assert store.height == 4 and store.tip_hash == block_hash(blocks[3])
    warning, = [r for r in caplog.records if r.levelno == logging.WARNING]
    message = warning.getMessage()
    assert str(path) in message and f"offset {len(data)}" in message and f"({len(torn)} bytes)" in message
    assert path.read_bytes() == data
    store.append(blocks[4])   # the height is made again: it was never finalized
    store.close()
    assert open_block_store(path).blocks_from(1) == blocks


@pytest.mark.parametrize("tail", ["digest", "extra"])
def test_a_cut_short_last_record_that_is_not_a_torn_write_is_refused(tmp_path, tail):
    path = tmp_path / "a.blocks"
    blocks = chain()
    data = write_log(path, blocks[:4])
    body = encode_block(blocks[4])
    rec = encode_record(body)
    if tail == "digest":   # the digest bytes present are not the block's
        torn = rec[:8 + len(body)] + bytes(10)
    else:                  # a complete block, then more than its digest would explain
        field = (len(body) + 40).to_bytes(4, "big")
        torn = field + zlib.crc32(field).to_bytes(4, "big") + body + rec[-32:] + b"x"
    path.write_bytes(data + torn)
    assert assert_refused(path).offset == len(data)


@pytest.mark.parametrize("body", [b"\xc1" * 40,                      # a reserved byte
                                  b"\x81\x81\x01\x02\x03" + bytes(40),   # a map as a map key
                                  b"\x91" * 5000])                   # nested deeper than allowed
def test_a_cut_short_record_that_is_not_msgpack_is_refused(tmp_path, body):
    """Only a prefix of a block is taken for a torn write; bytes that cannot start one are
    damage (refused with where, not an unexpected exception)."""
    path = tmp_path / "a.blocks"
    data = write_log(path, chain()[:4])
    field = (len(body) + 100).to_bytes(4, "big")   # declared longer than what is there
    path.write_bytes(data + field + zlib.crc32(field).to_bytes(4, "big") + body)
    assert assert_refused(path).offset == len(data)
    assert path.read_bytes()[:len(data)] == data


# -- the finalized height ---------------------------------------------------------------------

def test_a_log_behind_its_finalized_height_is_refused(tmp_path):
    path = tmp_path / "a.blocks"
    blocks = chain()
    data = write_log(path, blocks)
    cut = spans(blocks)[2][1]
    path.write_bytes(data[:cut])          # a clean cut after height 3 (say, an older backup)
    error = assert_refused(path, BlockLogBehind)
    assert (error.height, error.finalized) == (3, 5)
    path.write_bytes(data[:cut + 20])     # cut inside height 4: not taken for a torn write
    assert assert_refused(path, BlockLogBehind).height == 3
    path.unlink()                         # the log lost altogether
    assert assert_refused(path, BlockLogBehind).height == 0
    assert not path.exists()


def test_a_log_with_another_block_at_the_finalized_height_is_refused(tmp_path):
    path = tmp_path / "a.blocks"
    write_log(path, chain())
    path.write_bytes(raw_log(chain(payload=b"y")))   # another, well-formed chain
    assert assert_refused(path).index == N - 1


def test_an_unreadable_mark_is_refused(tmp_path):
    path = tmp_path / "a.blocks"
    write_log(path, chain(2))
    mark(path).write_text("{}")
    assert_refused(path, BlockStoreError)


def test_a_missing_mark_is_written_on_open(tmp_path):
    path = tmp_path / "a.blocks"
    write_log(path, chain())
    mark(path).unlink()
    open_block_store(path).close()
    path.write_bytes(raw_log(chain(3)))
    assert_refused(path, BlockLogBehind)


def test_a_failed_append_refuses_more_appends(tmp_path):
    path = tmp_path / "a.blocks"
    log, _ = BlockLog.open(path)
    blocks = chain(2)
    log._handle.close()                   # the next write fails
    with pytest.raises(ValueError):
        log.append(blocks[0])
    with pytest.raises(BlockStoreError):
        log.append(blocks[0])


# -- a byte flip anywhere is always refused ---------------------------------------------------

def _refused_unchanged(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    with pytest.raises(BlockStoreError):
        open_block_store(path)
    assert path.read_bytes() == data


def test_every_single_byte_flip_is_refused(tmp_path):
    path = tmp_path / "a.blocks"
    data = write_log(path, chain(3))
    for at in range(len(data)):
        for xor in (0x01, 0x80, 0xFF):
            damaged = bytearray(data)
            damaged[at] ^= xor
            _refused_unchanged(path, bytes(damaged))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 4), payload=st.binary(min_size=1, max_size=40), where=st.floats(0, 1, exclude_max=True),
       xor=st.integers(1, 255))
def test_a_random_byte_flip_in_a_random_log_is_refused(n, payload, where, xor):
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "a.blocks"
        data = bytearray(write_log(path, chain(n, payload=payload)))
        data[int(where * len(data))] ^= xor
        _refused_unchanged(path, bytes(data))
