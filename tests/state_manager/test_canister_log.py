"""Canister logs (issue 24): the bound, the encoding (state version 4) and the state trees."""

from __future__ import annotations

import pytest

from state_manager.canister_log import (
    EMPTY_LOG, RECORD_OVERHEAD_BYTES, CanisterLog, LogBuffer, LogRecord, append_log, cut_log_text, record_size,
)
from state_manager.canister_snapshot import CorruptSnapshot, decode_canister_snapshot, encode_canister_snapshot
from state_manager.codec import CodecError
from state_manager.encoding import decode, encode
from state_manager.messages import Request
from state_manager.state_codec import (
    BOUNDED_WAIT_STATE_ENCODING_VERSION, LOG_STATE_ENCODING_VERSION, STATE_ENCODING_VERSION, decode_state,
    encode_state, state_to_value,
)
from state_manager.state_tree import StateTreeBuilder, build_state_trees
from tests.builders import state

BOUND = 100


def _reference(texts: list[str], max_bytes: int, timestamp: int = 5) -> CanisterLog:
    """The rule stated plainly: every text cut, numbered, then the oldest dropped while the
    sizes sum over the bound."""
    records = [LogRecord(i, timestamp, cut_log_text(t, max_bytes)) for i, t in enumerate(texts)]
    while sum(record_size(r.content) for r in records) > max_bytes:
        records.pop(0)
    return CanisterLog.of(len(texts), records)


def test_records_are_bounded_oldest_dropped_first():
    log = EMPTY_LOG
    for n in range(10):
        log = append_log(log, 1000 + n, f"record {n:02d} " + "x" * 10, BOUND)   # 20 bytes of text: 36 a record
    assert [r.index for r in log.records] == [8, 9]                           # 3 x 36 > 100 >= 2 x 36
    assert [r.timestamp_nanos for r in log.records] == [1008, 1009]
    assert log.next_index == 10 and log.size == 72
    assert sum(len(r.content.encode()) for r in log.records) <= BOUND


def test_a_text_longer_than_the_bound_keeps_its_first_bytes_on_a_character_boundary():
    room = BOUND - RECORD_OVERHEAD_BYTES
    assert cut_log_text("a" * 500, BOUND) == "a" * room
    cut = cut_log_text("é" * 100, BOUND)   # two bytes each: an odd room cuts before the last one
    assert cut == "é" * (room // 2) and len(cut.encode()) <= room
    assert cut_log_text("short", BOUND) == "short"
    log = append_log(append_log(EMPTY_LOG, 1, "before", BOUND), 2, "z" * 1000, BOUND)
    assert [(r.index, r.content) for r in log.records] == [(1, "z" * room)]   # it fills the log alone
    assert append_log(EMPTY_LOG, 1, "anything", 10).records == ()             # no room at all: counted, not kept


def test_empty_texts_take_room_so_the_number_of_records_is_bounded_too():
    log = EMPTY_LOG
    for n in range(100):
        log = append_log(log, n, "", BOUND)
    assert len(log.records) == BOUND // RECORD_OVERHEAD_BYTES and log.next_index == 100


@pytest.mark.parametrize("texts", [
    [], ["a"], ["a" * 90, "b", "c" * 40], ["x" * 30] * 9, ["é" * 70, "", "", "y" * 84, "z"], ["q" * 500, "r"],
])
@pytest.mark.parametrize("before", [0, 1, 4])
def test_a_buffered_message_gives_what_logging_one_by_one_gives(texts, before):
    earlier = [f"earlier {n}" for n in range(before)]
    log = EMPTY_LOG
    for n, text in enumerate(earlier):
        log = append_log(log, 5, text, BOUND)
    buffer = LogBuffer(BOUND)
    for text in texts:
        buffer.add(text)
        assert buffer.size <= BOUND                      # the buffer never holds more than the log could
    assert buffer.merged_into(log, 5) == _reference(earlier + texts, BOUND)


def test_a_purge_drops_the_records_and_keeps_counting():
    log = append_log(append_log(EMPTY_LOG, 1, "a", BOUND), 2, "b", BOUND)
    purged = log.purged()
    assert purged == CanisterLog(2) and purged.size == 0
    assert append_log(purged, 3, "c", BOUND).records == (LogRecord(2, 3, "c"),)
    assert EMPTY_LOG.purged() is EMPTY_LOG


def _logged_state():
    s = state(canisters=(1, 2, 3))
    s.canisters[1].log = CanisterLog.of(7, (LogRecord(4, 10, "four"), LogRecord(6, 11, "six \u2713")))
    s.canisters[3].log = CanisterLog(2)          # logged, then purged
    return s


def test_states_with_logs_use_version_4_and_round_trip():
    s = _logged_state()
    assert state_to_value(s)[0] == LOG_STATE_ENCODING_VERSION
    decoded = decode_state(encode_state(s))
    assert [decoded.canisters[c].log for c in (1, 2, 3)] == [s.canisters[c].log for c in (1, 2, 3)]
    assert build_state_trees(decoded).full_hash == build_state_trees(s).full_hash
    assert encode_state(decoded) == encode_state(s)


def test_version_4_holds_deadlines_too_and_states_without_logs_keep_their_versions():
    plain = state(canisters=(1,))
    assert state_to_value(plain)[0] == STATE_ENCODING_VERSION
    bounded = state(canisters=(1,))
    bounded.canisters[1].queues.push_output_request(Request(1, 100, "m", b"", 0, 1_700_000_030), 10)
    assert state_to_value(bounded)[0] == BOUNDED_WAIT_STATE_ENCODING_VERSION
    bounded.canisters[1].log = CanisterLog(1)
    assert state_to_value(bounded)[0] == LOG_STATE_ENCODING_VERSION
    assert decode_state(encode_state(bounded)).canisters[1].queues == bounded.canisters[1].queues


def _tampered(s, change) -> bytes:
    value = list(decode(encode_state(s)))
    canisters = [list(c) for c in value[7]]
    change(value, canisters)
    value[7] = tuple(tuple(c) for c in canisters)
    return encode(tuple(value))


def test_decoding_refuses_non_canonical_logs():
    s = _logged_state()

    def version_4_without_logs(value, canisters):
        for c in canisters:
            c[16] = (0, ())
    with pytest.raises(CodecError, match="no canister log"):
        decode_state(_tampered(s, version_4_without_logs))

    def records_out_of_order(value, canisters):
        canisters[0][16] = (7, ((6, 11, "six"), (4, 10, "four")))
    with pytest.raises(CodecError, match="out of order"):
        decode_state(_tampered(s, records_out_of_order))

    def index_not_below_next(value, canisters):
        canisters[0][16] = (5, ((6, 11, "six"),))
    with pytest.raises(CodecError, match="not below"):
        decode_state(_tampered(s, index_not_below_next))

    def content_not_text(value, canisters):
        canisters[0][16] = (7, ((4, 10, b"four"),))
    with pytest.raises(CodecError, match="log record"):
        decode_state(_tampered(s, content_not_text))


def test_the_log_is_in_the_full_state_hash_but_not_in_the_certified_tree():
    s = _logged_state()
    bare = decode_state(encode_state(s))
    for c in bare.canisters.values():
        c.log = EMPTY_LOG
    logged, unlogged = build_state_trees(s), build_state_trees(bare)
    assert logged.certified_root == unlogged.certified_root
    assert logged.full_hash != unlogged.full_hash
    s.canisters[1].log = append_log(s.canisters[1].log, 12, "seven", 4096)
    assert build_state_trees(s).full_hash != logged.full_hash


def test_the_incremental_tree_follows_every_log_change():
    s = _logged_state()
    builder = StateTreeBuilder()
    builder.update(s)
    for step in range(6):
        canister = s.canisters[1 + step % 3]
        if step == 4:
            canister.log = canister.log.purged()
        else:
            canister.log = append_log(canister.log, 20 + step, f"step {step}", 64)
        s.metadata.batch_number += 1
        assert builder.update(s).full_hash == build_state_trees(s).full_hash
    s.metadata.batch_number += 1
    assert builder.update(s).full_hash == build_state_trees(s).full_hash   # nothing changed: the cached subtree


def test_a_snapshot_carries_the_log():
    s = _logged_state()
    for cid in (1, 3):
        snapshot = encode_canister_snapshot(s.canisters[cid])
        assert decode(snapshot)[1] == LOG_STATE_ENCODING_VERSION
        assert decode_canister_snapshot(snapshot).log == s.canisters[cid].log
    assert decode(encode_canister_snapshot(s.canisters[2]))[1] == STATE_ENCODING_VERSION
    version, _, canister = decode(encode_canister_snapshot(s.canisters[2]))
    unlogged = list(canister) + [(0, ())]
    with pytest.raises(CorruptSnapshot, match="without a log"):
        decode_canister_snapshot(encode([version, LOG_STATE_ENCODING_VERSION, tuple(unlogged)]))
