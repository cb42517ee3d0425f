"""The recorded-run format: round trips and strict loading."""

from __future__ import annotations

import dataclasses

import pytest

from message_routing.limits import MINIMAL
from replica.audit.errors import RecordError, RunLogError
from replica.testnet.recording import record_run, run_log_from_simulation
from replica.audit.run_log import (
    MANIFEST_FILE, decode_run_log, encode_run_log, limits_preset_name, load_run_log, write_run_log,
)
from state_manager.encoding import decode, encode

from .runs import A, B, recorded_run, recorded_simulation, small_run


@pytest.fixture(scope="module")
def log():
    return recorded_run(ticks=6, checkpoint_interval=2)


def test_blob_round_trip(log):
    blob = encode_run_log(log)
    assert decode_run_log(blob) == log
    assert encode_run_log(decode_run_log(blob)) == blob


def test_directory_round_trip(log, tmp_path):
    write_run_log(log, tmp_path / "run")
    assert load_run_log(tmp_path / "run") == log
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [MANIFEST_FILE, "subnet-000.bin", "subnet-001.bin"]


def test_record_run_writes_what_the_simulation_recorded(tmp_path):
    sim = recorded_simulation(ticks=5)
    written = record_run(sim, tmp_path, checkpoint_interval=2)
    loaded = load_run_log(tmp_path)
    assert loaded == written
    assert loaded.subnet_ids() == (A, B)
    a = loaded.subnet(A)
    assert a.height == 5 and a.checkpoint_heights() == (2, 4)
    assert list(a.hashes) == [tuple(h) for h in sim.subnets[A].hashes]
    assert loaded.canister_modules == ("examples.counter:Counter", "examples.ledger:Ledger", "examples.ping_pong:PingPong")
    assert loaded.limits_name == "DEFAULT"


def test_record_refuses_an_unrecorded_simulation():
    sim = recorded_simulation(ticks=0)
    with pytest.raises(RecordError, match="nothing is recorded"):
        run_log_from_simulation(sim)


def test_record_refuses_a_run_that_does_not_replay_to_its_hashes():
    sim = recorded_simulation(ticks=3)
    height, full, certified = sim.subnets[B].hashes[1]
    sim.subnets[B].hashes[1] = (height, bytes(32), certified)
    with pytest.raises(RecordError, match="subnet-b.*height 2"):
        run_log_from_simulation(sim)


def test_limit_presets():
    assert limits_preset_name(MINIMAL) == "MINIMAL"
    assert limits_preset_name(MINIMAL.with_(queue_capacity=9)) == "custom"


def test_generated_run_is_reproducible():
    assert encode_run_log(small_run(batches=4)) == encode_run_log(small_run(batches=4))


# -- strictness ----------------------------------------------------------------------------------

def test_missing_directory(tmp_path):
    with pytest.raises(RunLogError, match="not a recorded run"):
        load_run_log(tmp_path / "nothing")


def test_tampered_subnet_file(log, tmp_path):
    write_run_log(log, tmp_path)
    path = tmp_path / "subnet-001.bin"
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(RunLogError, match="does not match its manifest digest"):
        load_run_log(tmp_path)


def test_missing_subnet_file(log, tmp_path):
    write_run_log(log, tmp_path)
    (tmp_path / "subnet-000.bin").unlink()
    with pytest.raises(RunLogError, match="missing"):
        load_run_log(tmp_path)


def _rewrite_manifest(tmp_path, position, value):
    manifest = list(decode((tmp_path / MANIFEST_FILE).read_bytes()))
    manifest[position] = value
    (tmp_path / MANIFEST_FILE).write_bytes(encode(tuple(manifest)))


@pytest.mark.parametrize("position, value, message", [
    (1, 6, "unsupported version"),
    (0, "something-else", "not a replica-run-log"),
    (4, "MINIMAL", "differ from the MINIMAL preset"),
    (4, "HUGE", "unknown preset"),
    (6, 0, "checkpoint interval"),
    (2, ("subnet-b", "subnet-a"), "sorted"),
])
def test_bad_manifest(log, tmp_path, position, value, message):
    write_run_log(log, tmp_path)
    _rewrite_manifest(tmp_path, position, value)
    with pytest.raises(RunLogError, match=message):
        load_run_log(tmp_path)


#: The limits run log version 4 added (the canister sandbox's).
SANDBOX_LIMITS = ("max_instructions_per_message", "max_instructions_per_query", "max_instructions_per_install",
                  "max_instructions_per_round", "max_message_memory_bytes", "max_stable_state_bytes")
#: The limit run log version 5 added (canister logs).
LOG_LIMITS = ("max_canister_log_bytes",)


def test_version_4_manifest_decodes_with_the_preset_log_limit(log, tmp_path):
    """Run logs written before canister logs have no ``max_canister_log_bytes``: version 4
    decodes with its preset's value; version 5 must list it."""
    write_run_log(log, tmp_path)
    manifest = list(decode((tmp_path / MANIFEST_FILE).read_bytes()))
    _rewrite_manifest(tmp_path, 5, tuple(p for p in manifest[5] if p[0] not in LOG_LIMITS))
    with pytest.raises(RunLogError, match="expected the fields"):
        load_run_log(tmp_path)
    _rewrite_manifest(tmp_path, 1, 4)
    assert load_run_log(tmp_path).limits == log.limits


def test_version_3_manifest_decodes_with_the_preset_sandbox_limits(log, tmp_path):
    """Run logs written before the sandbox have no instruction or memory limits: version 3
    decodes with its preset's values; version 4 must list them."""
    write_run_log(log, tmp_path)
    manifest = list(decode((tmp_path / MANIFEST_FILE).read_bytes()))
    _rewrite_manifest(tmp_path, 5, tuple(p for p in manifest[5] if p[0] not in SANDBOX_LIMITS + LOG_LIMITS))
    with pytest.raises(RunLogError, match="expected the fields"):
        load_run_log(tmp_path)
    _rewrite_manifest(tmp_path, 1, 3)
    assert load_run_log(tmp_path).limits == log.limits


def test_version_2_manifest_decodes_with_the_preset_budget(log, tmp_path):
    """Run logs written before bounded-wait calls have no ``bounded_wait_message_memory_capacity``:
    version 2 decodes with the value of its preset; version 3 must list it."""
    write_run_log(log, tmp_path)
    manifest = list(decode((tmp_path / MANIFEST_FILE).read_bytes()))
    old_limits = tuple(p for p in manifest[5]
                       if p[0] != "bounded_wait_message_memory_capacity" and p[0] not in SANDBOX_LIMITS + LOG_LIMITS)
    _rewrite_manifest(tmp_path, 5, old_limits)
    with pytest.raises(RunLogError, match="expected the fields"):
        load_run_log(tmp_path)
    _rewrite_manifest(tmp_path, 1, 2)
    assert load_run_log(tmp_path).limits == log.limits


def test_non_canonical_bytes_are_refused(log):
    blob = encode_run_log(log)
    with pytest.raises(RunLogError):
        decode_run_log(blob + b"\x00")
    with pytest.raises(RunLogError):
        decode_run_log(blob[:-3])


def test_hashes_must_match_batches(log):
    subnet = log.subnets[0]
    broken = dataclasses.replace(log, subnets=(dataclasses.replace(subnet, hashes=subnet.hashes[:-1]),) + log.subnets[1:])
    with pytest.raises(RunLogError, match="recorded hashes"):
        decode_run_log(encode_run_log(broken))


def test_checkpoints_must_be_in_range(log):
    subnet = log.subnets[0]
    broken = dataclasses.replace(subnet, checkpoints=((99, b"x"),))
    with pytest.raises(RunLogError, match="checkpoint heights"):
        decode_run_log(encode_run_log(dataclasses.replace(log, subnets=(broken,) + log.subnets[1:])))
