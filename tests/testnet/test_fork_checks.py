"""The checks a fork makes before it writes anything (``replica.testnet.fork``): states whose
streams disagree are refused naming the pair; heights outside the run, a target that is not
empty or lies inside the source, and a source without a recorded run are refused."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from message_routing.batch import Batch, encode_batch
from message_routing.limits import DEFAULT
from replica.audit.run_log import RunLog, SubnetLog
from replica.testnet.fork import (
    ForkError, ForkInconsistent, aligned_heights, check_streams, fork_base_hash, fork_heights, fork_testnet,
)
from state_manager.messages import Request
from state_manager.streams import Stream


def _state(height: int, streams: dict[str, Stream]):
    return SimpleNamespace(metadata=SimpleNamespace(batch_number=height), streams=streams)


def _stream(begin: int, count: int, signals_end: int) -> Stream:
    return Stream(begin, [Request(1, 1001, "m", b"", i) for i in range(count)], signals_end)


def test_states_that_agree_on_their_streams_pass() -> None:
    # a sent 5 (0..4) of which b inducted 3; b sent 2, of which a inducted both
    check_streams({"a": _state(10, {"b": _stream(0, 5, 2)}), "b": _state(12, {"a": _stream(0, 2, 3)})})
    check_streams({"a": _state(10, {}), "b": _state(12, {})})


def test_a_receiver_that_inducted_more_than_was_sent_is_refused() -> None:
    with pytest.raises(ForkInconsistent, match="b at height 12 has inducted 4 messages of a's stream"):
        check_streams({"a": _state(10, {"b": _stream(0, 3, 0)}), "b": _state(12, {"a": _stream(0, 0, 4)})})


def test_a_sender_that_dropped_what_was_not_acknowledged_is_refused() -> None:
    with pytest.raises(ForkInconsistent, match="a at height 10 has dropped its stream to b below index 3"):
        check_streams({"a": _state(10, {"b": _stream(3, 2, 0)}), "b": _state(7, {"a": _stream(0, 0, 1)})})


def test_a_height_is_an_integer_or_one_per_subnet() -> None:
    log = SimpleNamespace(subnet_ids=lambda: ("subnet-0", "subnet-1"),
                          subnet=lambda s: SimpleNamespace(height=100))
    assert fork_heights(log, 40) == {"subnet-0": 40, "subnet-1": 40}
    assert fork_heights(log, {"subnet-1": 30}) == {"subnet-0": 30, "subnet-1": 30}
    assert fork_heights(log, {"subnet-0": 50, "subnet-1": 30}) == {"subnet-0": 50, "subnet-1": 30}
    for bad, reason in ((True, "an integer or"), ("40", "an integer or"), (0, "positive integer"),
                        (101, "recorded heights 1..100"), ({"subnet-9": 5}, "no subnet subnet-9"), ({}, "none given")):
        with pytest.raises(ForkError, match=reason):
            fork_heights(log, bad)


def _timed_log(times: dict[str, list[int]]) -> RunLog:
    """A run log whose batch of height h of each subnet has block time ``times[subnet][h - 1]``."""
    subnets = tuple(SubnetLog(s, b"", tuple(encode_batch(Batch(h, t, 1)) for h, t in enumerate(ts, start=1)),
                              tuple((h, bytes(32), bytes(32)) for h in range(1, len(ts) + 1)))
                    for s, ts in sorted(times.items()))
    return RunLog(subnets, (), "DEFAULT", DEFAULT, 10, ())


def test_aligned_heights_are_of_one_moment() -> None:
    # subnet-1 started later and runs faster: its height 2 is subnet-0's height 5's moment
    log = _timed_log({"subnet-0": [10, 20, 30, 40, 50, 60], "subnet-1": [45, 49, 52, 53, 54, 70, 80],
                      "subnet-2": [5, 50, 95]})
    assert aligned_heights(log, {"subnet-0": 5}) == {"subnet-0": 5, "subnet-1": 2, "subnet-2": 2}
    assert aligned_heights(log, {"subnet-0": 6}) == {"subnet-0": 6, "subnet-1": 5, "subnet-2": 2}
    assert aligned_heights(log, {"subnet-1": 7, "subnet-2": 1}) == {"subnet-0": 6, "subnet-1": 7, "subnet-2": 1}
    with pytest.raises(ForkError, match="subnet-1 had executed no height when subnet-0 executed 3"):
        aligned_heights(log, {"subnet-0": 3})
    with pytest.raises(ForkError, match="recorded heights 1..6"):
        aligned_heights(log, {"subnet-0": 9})


def test_the_base_hash_is_the_forks_own() -> None:
    one = fork_base_hash("subnet-0", 5, b"\x01" * 32, b"\x02" * 48)
    assert one != fork_base_hash("subnet-0", 5, b"\x01" * 32, b"\x03" * 48)   # another fork's key
    assert len(one) == 32


def test_targets_and_sources_that_cannot_be_forked(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "manifest.json").write_text(json.dumps({"subnets": ["subnet-0"], "nodes": 1}))
    with pytest.raises(ForkError, match="recorded run of .* cannot be read"):
        fork_testnet(source, 5, tmp_path / "fork")
    with pytest.raises(ForkError, match="inside the source"):
        fork_testnet(source, 5, source / "fork")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("kept")
    with pytest.raises(ForkError, match="not an empty directory"):
        fork_testnet(source, 5, tmp_path / "full")
    assert (tmp_path / "full" / "x").read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full", "source"]   # nothing half-made
