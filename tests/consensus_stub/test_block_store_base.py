"""The block store above genesis: a base ``(height, hash)`` in memory and in the log's file
header (format 3, format 2 still read), pruning (an atomic rewrite of the log) and replacing
the chain for a state sync (the old log moved aside, never deleted)."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consensus_stub import block_store as bs
from consensus_stub.block import GENESIS_PARENT_HASH, Block, block_hash, encode_block
from consensus_stub.block_log_records import encode_record
from consensus_stub.block_store import (
    GENESIS_BASE, BlockLog, BlockLogBaseMismatch, BlockLogBehind, BlockStore, BlockStoreError, ChainBase,
    CorruptBlockLog, open_block_store, read_block_log, replace_block_log,
)
from tests.consensus_stub.test_block_store import TORN, assert_refused, chain, mark

CHAIN = chain(40)   # heights 1..40 from genesis
HASHES = [GENESIS_PARENT_HASH] + [block_hash(b) for b in CHAIN]   # HASHES[h]: the hash at height h
V2_HEADER = b"blocklog" + (2).to_bytes(4, "big")


def base_at(height: int) -> ChainBase:
    return ChainBase(height, HASHES[height])


def header(base: ChainBase) -> bytes:
    return b"blocklog" + (3).to_bytes(4, "big") + base.height.to_bytes(8, "big") + base.block_hash


def records(blocks: list[Block]) -> bytes:
    return b"".join(encode_record(encode_block(b)) for b in blocks)


def blocks_between(low: int, high: int) -> list[Block]:
    """The blocks of heights ``low..high``."""
    return CHAIN[low - 1:high]


def write_based(path: Path, base: int, top: int) -> bytes:
    store = open_block_store(path, base_at(base))
    for blk in blocks_between(base + 1, top):
        store.append(blk)
    store.close()
    return path.read_bytes()


def assert_store(store: BlockStore, base: int, top: int) -> None:
    """``store`` holds exactly the blocks ``base + 1..top`` of ``CHAIN`` on base ``base``."""
    assert (store.base_height, store.base_hash, store.base) == (base, HASHES[base], base_at(base))
    assert (store.height, store.tip_hash) == (top, HASHES[top])
    assert store.blocks_from(0) == store.blocks_from(base) == blocks_between(base + 1, top)
    for h in range(0, len(CHAIN) + 2):
        assert store.block(h) == (CHAIN[h - 1] if base < h <= top else None)
        assert store.hash_at(h) == (HASHES[h] if base <= h <= top else None)
        assert store.blocks_from(h) == blocks_between(max(h, base + 1), top)


# -- the base ---------------------------------------------------------------------------------

def test_a_base_survives_reopening_and_appends_continue(tmp_path):
    path = tmp_path / "a.blocks"
    store = open_block_store(path, base_at(10))
    assert_store(store, 10, 10)
    assert store.tip_time is None
    with pytest.raises(bs.ChainError):
        store.append(CHAIN[0])            # height 1 does not follow the base
    for blk in blocks_between(11, 13):
        store.append(blk)
    store.close()
    assert path.read_bytes() == header(base_at(10)) + records(blocks_between(11, 13))
    assert b'"finalized_height": 13' in mark(path).read_bytes()
    store = open_block_store(path)        # no base given: the file's
    assert_store(store, 10, 13)
    store.append(CHAIN[13])
    store.close()
    store = open_block_store(path, base_at(10))   # the same base given: accepted
    assert_store(store, 10, 14)
    store.close()
    assert read_block_log(path) == blocks_between(11, 14)
    log, blocks = BlockLog.open(path)
    assert (log.base, log.height, blocks) == (base_at(10), 14, blocks_between(11, 14))
    log.close()


def test_an_in_memory_store_with_a_base(tmp_path):
    store = open_block_store(None, base_at(5))
    assert_store(store, 5, 5)
    for blk in blocks_between(6, 8):
        store.append(blk)
    assert_store(store, 5, 8)
    assert_store(BlockStore(), 0, 0)
    # a log handed to the constructor must be empty at the store's base
    log, _ = BlockLog.open(tmp_path / "a.blocks", base_at(5))
    assert_store(BlockStore(base=base_at(5), log=log), 5, 5)
    with pytest.raises(ValueError):
        BlockStore(base=base_at(4), log=log)
    log.close()


@pytest.mark.parametrize("height, digest", [(0, b"\x01" * 32), (3, GENESIS_PARENT_HASH), (-1, HASHES[1]),
                                            (2, b"short"), (2**64 - 1, HASHES[1])])
def test_impossible_bases_are_refused(height, digest):
    with pytest.raises(ValueError):
        ChainBase(height, digest)


def test_a_fresh_log_is_format_3_at_genesis(tmp_path):
    path = tmp_path / "a.blocks"
    open_block_store(path).close()
    assert path.read_bytes() == header(GENESIS_BASE)
    assert not mark(path).exists()        # nothing finalized yet (as in format 2)
    assert not list(tmp_path.glob("*.tmp"))


def test_a_log_created_above_genesis_marks_its_base_finalized(tmp_path):
    path = tmp_path / "a.blocks"
    open_block_store(path, base_at(7)).close()
    assert b'"finalized_height": 7' in mark(path).read_bytes()
    path.unlink()                          # the log lost: not silently restarted from genesis
    error = assert_refused(path, BlockLogBehind)
    assert (error.height, error.finalized) == (0, 7)
    # asked for its base again (what a state-synced node knows), it is created there afresh
    assert_store(open_block_store(path, base_at(7)), 7, 7)


def test_a_format_2_log_still_opens_appends_and_prunes(tmp_path):
    path = tmp_path / "a.blocks"
    data = V2_HEADER + records(blocks_between(1, 3))
    path.write_bytes(data)
    store = open_block_store(path)
    assert_store(store, 0, 3)
    assert path.read_bytes() == data       # opening does not convert it
    store.append(CHAIN[3])
    assert path.read_bytes() == data + records([CHAIN[3]])   # appended in place: still format 2
    store.close()
    assert_store(open_block_store(path, GENESIS_BASE), 0, 4)
    with pytest.raises(BlockLogBaseMismatch):
        open_block_store(path, base_at(2))
    store = open_block_store(path)
    store.prune_below(3)                   # a rewrite is format 3
    store.close()
    assert path.read_bytes() == header(base_at(2)) + records(blocks_between(3, 4))
    assert_store(open_block_store(path), 2, 4)


# -- refusals ---------------------------------------------------------------------------------

def test_a_first_record_that_does_not_continue_the_base_is_refused(tmp_path):
    path = tmp_path / "a.blocks"
    base = header(base_at(10))
    # another parent than the base hash
    path.write_bytes(header(ChainBase(10, HASHES[9])) + records([CHAIN[10]]))
    error = assert_refused(path)
    assert (error.index, error.offset, error.height) == (0, len(base), 11)
    assert "record 0 (height 11)" in str(error) and "base hash" in str(error)
    # a height gap after the base
    path.write_bytes(base + records([CHAIN[11]]))
    error = assert_refused(path)
    assert (error.index, error.offset) == (0, len(base)) and "height 12 where height 11 belongs" in str(error)
    # the chain from genesis under a base header
    path.write_bytes(base + records(blocks_between(1, 3)))
    assert assert_refused(path).index == 0


def test_damage_in_a_based_log_names_the_height(tmp_path):
    path = tmp_path / "a.blocks"
    data = bytearray(write_based(path, 10, 13))
    second = len(header(base_at(10))) + len(records([CHAIN[10]]))
    data[second + 20] ^= 0x40
    path.write_bytes(bytes(data))
    error = assert_refused(path)
    assert (error.index, error.offset, error.height) == (1, second, 12) and "record 1 (height 12)" in str(error)


@pytest.mark.parametrize("damage", ["short header", "genesis height with a hash", "zero hash above genesis"])
def test_bad_bases_in_the_file_header_are_refused(tmp_path, damage):
    path = tmp_path / "a.blocks"
    if damage == "short header":
        data = header(base_at(3))[:30]
    elif damage == "genesis height with a hash":
        data = header(base_at(3))[:12] + (0).to_bytes(8, "big") + HASHES[3]
    else:
        data = header(GENESIS_BASE)[:12] + (3).to_bytes(8, "big") + GENESIS_PARENT_HASH
    path.write_bytes(data)
    assert assert_refused(path).index is None


def test_a_base_other_than_the_one_asked_for_is_refused(tmp_path):
    path = tmp_path / "a.blocks"
    data = write_based(path, 10, 12)
    marked = mark(path).read_bytes()
    for other in (base_at(9), GENESIS_BASE, ChainBase(10, b"\x05" * 32)):
        with pytest.raises(BlockLogBaseMismatch) as info:
            open_block_store(path, other)
        assert isinstance(info.value, BlockStoreError)
        assert (info.value.path, info.value.found, info.value.expected) == (path, base_at(10), other)
        assert str(path) in str(info.value) and "base height 10" in str(info.value)
        assert path.read_bytes() == data and mark(path).read_bytes() == marked


def test_the_mark_checks_the_base(tmp_path):
    path = tmp_path / "a.blocks"
    write_based(path, 10, 10)              # no records: the mark holds the base
    mark(path).write_text(f'{{"finalized_height": 10, "block_hash": "{HASHES[11].hex()}"}}')
    error = assert_refused(path)
    assert error.index is None and "base hash" in str(error)
    # a base above the finalized mark cannot come from pruning or replacing
    mark(path).write_text(f'{{"finalized_height": 9, "block_hash": "{HASHES[9].hex()}"}}')
    assert "above the height 9 finalized" in str(assert_refused(path))
    write_based(tmp_path / "b.blocks", 10, 14)
    data = (tmp_path / "b.blocks").read_bytes()
    path.write_bytes(data[:len(data) - len(records([CHAIN[13]]))])   # a clean cut: height 13 of 14
    mark(path).write_bytes(mark(tmp_path / "b.blocks").read_bytes())
    error = assert_refused(path, BlockLogBehind)
    assert (error.height, error.finalized) == (13, 14)


@pytest.mark.parametrize("cut", TORN)
def test_a_torn_last_record_of_a_format_3_log_is_dropped(tmp_path, caplog, cut):
    path = tmp_path / "a.blocks"
    data = write_based(path, 10, 12)
    body = encode_block(CHAIN[12])
    torn = TORN[cut](encode_record(body), len(body))
    path.write_bytes(data + torn)
    with caplog.at_level(logging.WARNING, logger="consensus_stub.block_store"):
        store = open_block_store(path)
    assert_store(store, 10, 12)
    assert any(f"offset {len(data)}" in r.getMessage() for r in caplog.records)
    assert path.read_bytes() == data
    store.append(CHAIN[12])
    store.close()
    assert_store(open_block_store(path), 10, 13)


@pytest.mark.parametrize("top", [10, 12])
def test_every_single_byte_flip_in_a_based_log_is_refused(tmp_path, top):
    path = tmp_path / "a.blocks"
    data = write_based(path, 10, top)      # with its mark: a log without records is checked by it
    for at in range(len(data)):
        for xor in (0x01, 0x80, 0xFF):
            damaged = bytearray(data)
            damaged[at] ^= xor
            path.write_bytes(bytes(damaged))
            with pytest.raises(BlockStoreError):
                open_block_store(path)
            assert path.read_bytes() == bytes(damaged)


# -- pruning ----------------------------------------------------------------------------------

def test_prune_then_reopen(tmp_path):
    path = tmp_path / "a.blocks"
    store = open_block_store(path)
    for blk in blocks_between(1, 10):
        store.append(blk)
    store.prune_below(5)                   # keeps 5..10 on base 4
    assert_store(store, 4, 10)
    assert path.read_bytes() == header(base_at(4)) + records(blocks_between(5, 10))
    store.append(CHAIN[10])
    store.close()
    store = open_block_store(path)
    assert_store(store, 4, 11)
    store.prune_below(3)                   # below the base: nothing to do
    store.prune_below(5)                   # the base itself: nothing to do
    assert_store(store, 4, 11)
    with pytest.raises(ValueError):
        store.prune_below(13)              # base 12: above the tip
    assert_store(store, 4, 11)
    store.prune_below(12)                  # keeps no block: the tip becomes the base
    assert_store(store, 11, 11)
    assert path.read_bytes() == header(base_at(11))
    store.append(CHAIN[11])
    store.close()
    assert_store(open_block_store(path), 11, 12)
    assert b'"finalized_height": 12' in mark(path).read_bytes()
    assert not list(tmp_path.glob("*.tmp"))


def test_prune_in_memory():
    store = open_block_store(None)
    for blk in blocks_between(1, 6):
        store.append(blk)
    store.prune_below(4)
    assert_store(store, 3, 6)
    store.append(CHAIN[6])
    assert_store(store, 3, 7)


def test_a_leftover_temp_file_is_ignored_and_removed_on_open(tmp_path, caplog):
    """A crash before the rename leaves the old log whole and ``<log>.tmp`` (complete or not):
    the old log is the log; the temp file, never committed, is removed once it validated."""
    path = tmp_path / "a.blocks"
    data = write_based(path, 0, 6)
    tmp = path.with_name(path.name + ".tmp")
    for leftover in (header(base_at(3)) + records(blocks_between(4, 6)), header(base_at(3))[:20]):
        tmp.write_bytes(leftover)
        assert read_block_log(path) == blocks_between(1, 6) and tmp.exists()   # read-only: untouched
        with caplog.at_level(logging.WARNING, logger="consensus_stub.block_store"):
            store = open_block_store(path)
        assert_store(store, 0, 6)
        store.close()
        assert not tmp.exists() and path.read_bytes() == data
        assert any(str(tmp) in r.getMessage() for r in caplog.records)
    # a refused log keeps its temp file too: nothing is written before validation
    tmp.write_bytes(b"leftover")
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    assert_refused(path)
    assert tmp.read_bytes() == b"leftover"


def test_a_prune_that_fails_before_the_rename_changes_nothing(tmp_path, monkeypatch):
    path = tmp_path / "a.blocks"
    data = write_based(path, 0, 6)
    store = open_block_store(path)

    def no_rename(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(bs.os, "replace", no_rename)
    with pytest.raises(OSError, match="disk full"):
        store.prune_below(4)
    monkeypatch.undo()
    assert path.read_bytes() == data and not list(tmp_path.glob("*.tmp"))
    assert_store(store, 0, 6)
    store.append(CHAIN[6])                 # the old log is still in use
    store.prune_below(4)
    store.close()
    assert_store(open_block_store(path), 3, 7)


def test_a_prune_that_fails_after_the_rename_refuses_more_writes(tmp_path, monkeypatch):
    path = tmp_path / "a.blocks"
    write_based(path, 0, 6)
    store = open_block_store(path)

    def no_fsync(directory):
        raise OSError("I/O error")

    monkeypatch.setattr(bs, "fsync_directory", no_fsync)
    with pytest.raises(OSError):
        store.prune_below(4)
    monkeypatch.undo()
    with pytest.raises(BlockStoreError, match="an earlier write failed"):
        store.append(CHAIN[6])
    with pytest.raises(BlockStoreError):
        store.prune_below(5)
    store.close()
    assert_store(open_block_store(path), 3, 6)   # the new file was committed


# -- replacing the chain ----------------------------------------------------------------------

def test_replace_moves_the_old_log_aside_and_never_deletes_it(tmp_path, caplog):
    path = tmp_path / "a.blocks"
    old = write_based(path, 0, 5)
    old_mark = mark(path).read_bytes()
    with caplog.at_level(logging.WARNING, logger="consensus_stub.block_store"):
        store = replace_block_log(path, base_at(20))
    assert_store(store, 20, 20)
    store.append(CHAIN[20])
    store.close()
    aside = tmp_path / "a.blocks.replaced-1"
    assert aside.read_bytes() == old and mark(aside).read_bytes() == old_mark
    assert any(str(aside) in r.getMessage() for r in caplog.records)
    assert_store(open_block_store(aside), 0, 5)    # the pair moved aside still opens
    assert_store(open_block_store(path), 20, 21)
    # again: the next free number; a stray mark without its log is moved aside too
    (tmp_path / "a.blocks.replaced-2.finalized").write_text("not mine")
    second = path.read_bytes()
    replace_block_log(path, base_at(30)).close()
    assert (tmp_path / "a.blocks.replaced-3").read_bytes() == second
    assert (tmp_path / "a.blocks.replaced-2.finalized").read_text() == "not mine"
    assert aside.read_bytes() == old
    path.unlink()
    replace_block_log(path, base_at(32)).close()   # the mark left alone is moved aside as well
    assert (tmp_path / "a.blocks.replaced-4.finalized").exists() and not (tmp_path / "a.blocks.replaced-4").exists()
    assert_store(open_block_store(path), 32, 32)


def test_replace_on_a_new_path_just_creates(tmp_path):
    path = tmp_path / "sub" / "a.blocks"
    assert_store(replace_block_log(path, base_at(3)), 3, 3)
    assert sorted(p.name for p in path.parent.iterdir()) == ["a.blocks", "a.blocks.finalized"]


# -- against a model --------------------------------------------------------------------------

OPS = st.lists(st.one_of(st.tuples(st.just("append"), st.integers(1, 4)),
                         st.tuples(st.just("prune"), st.integers(-2, 8)),
                         st.tuples(st.just("reopen"), st.booleans())), max_size=12)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(start=st.integers(0, 10), ops=OPS)
def test_appends_prunes_and_reopens_match_a_model(start, ops):
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "a.blocks"
        store = open_block_store(path, base_at(start) if start else None)
        base, top = start, start           # the model: CHAIN's blocks base + 1..top
        for op, arg in ops:
            if op == "append":
                for blk in blocks_between(top + 1, min(top + arg, len(CHAIN))):
                    store.append(blk)
                top = min(top + arg, len(CHAIN))
            elif op == "prune":
                height = top + 1 - arg     # from the tip (+1: keep none) down to below the base
                if height - 1 > top:
                    with pytest.raises(ValueError):
                        store.prune_below(height)
                else:
                    store.prune_below(height)
                    base = max(base, height - 1)
            else:
                store.close()
                store = open_block_store(path, base_at(base) if arg else None)
            assert_store(store, base, top)
        store.close()
        assert_store(open_block_store(path), base, top)
        assert read_block_log(path) == blocks_between(base + 1, top)
        assert sorted(os.listdir(directory)) == ["a.blocks"] + (["a.blocks.finalized"] if top else [])
