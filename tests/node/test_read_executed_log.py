"""``read_executed_log``: another process's executed log read without writing it (a fork of a
running testnet reads its nodes' logs): a torn last record is left out and the file kept as
it is; other damage is refused with the record named, as ``ExecutedLog`` refuses it."""

from __future__ import annotations

from pathlib import Path

import pytest

from replica.node.node_store import CorruptRecordFile, ExecutedLog, read_executed_log


def _log(path: Path, heights: int) -> None:
    log = ExecutedLog(path)
    for h in range(1, heights + 1):
        log.record(h, bytes([h]) * 10, bytes([h]) * 32, bytes([h + 1]) * 32)
    log.close()


def test_a_torn_record_is_left_out_and_nothing_is_written(tmp_path: Path) -> None:
    path = tmp_path / "executed.log"
    _log(path, 3)
    whole = path.read_bytes()
    assert [e[0] for e in read_executed_log(path)] == [1, 2, 3]
    path.write_bytes(whole[:-5])   # an append cut short, as a running node's may be when read
    entries = read_executed_log(path)
    assert [e[0] for e in entries] == [1, 2]
    assert entries[1] == (2, b"\x02" * 10, b"\x02" * 32, b"\x03" * 32)
    assert path.read_bytes() == whole[:-5]   # read only: a node's own open would truncate it


def test_damage_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "executed.log"
    _log(path, 2)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordFile, match="record 1"):
        read_executed_log(path)
    (tmp_path / "other").write_bytes(b"agrlog01")
    with pytest.raises(CorruptRecordFile, match="not a"):
        read_executed_log(tmp_path / "other")
