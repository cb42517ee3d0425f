"""Full-state encoding, checkpoints on disk, and the state manager's commits/certifications."""

from __future__ import annotations

import os

import pytest

from examples.ledger import Ledger
from message_routing.limits import MINIMAL
from replica.execution import ExecutionEnvironment, install_canister
from replica.inprocess.simulation import NetworkKnobs, Simulation
from state_manager.certification import CertificationError, sign_certification_share, aggregate_certification
from state_manager.codec import CodecError
from state_manager.state_codec import decode_state, encode_state
from state_manager.state_manager import CertificationMismatch, HeightMismatch, StateManager
from state_manager.state_tree import build_state_trees
from state_manager.store import CheckpointStore, CorruptCheckpoint
from state_manager.bls import deal_threshold_keys
from replica.execution.codec import encode_value
from state_manager.messages import Ingress
from tests.builders import A, B


def busy_state():
    """A state with canisters, queues, call contexts, streams and history, from a real run."""
    sim = Simulation({A: (0, 99), B: (100, 199)}, ExecutionEnvironment([Ledger]), limits=MINIMAL,
                     knobs=NetworkKnobs(max_delay_ticks=1), seed=3)
    install_canister(sim.state_of(A), 1, Ledger, {"balances": (("aa", 1000),)})
    install_canister(sim.state_of(B), 100, Ledger, {"balances": (("bb", 1000),)})
    for n in range(6):
        sim.submit(Ingress(bytes.fromhex("aa"), 1, "transfer", encode_value({"to_ledger": 100, "to": "bb", "amount": 5}),
                           n.to_bytes(32, "big"), sim.now + 30 * 10**9))
    sim.run(3)
    return sim.state_of(A)


def test_state_round_trips_through_its_encoding_with_the_same_hashes():
    s = busy_state()
    assert s.canisters[1].call_contexts or s.streams  # the state is not trivial
    restored = decode_state(encode_state(s))
    assert restored == s
    assert build_state_trees(restored).full_hash == build_state_trees(s).full_hash
    assert encode_state(restored) == encode_state(s)


@pytest.mark.parametrize("mutate", [lambda b: b[:-1], lambda b: b + b"\x00", lambda b: b"\x93" + b[1:]])
def test_damaged_state_bytes_are_refused_with_a_codec_error(mutate):
    with pytest.raises(CodecError):
        decode_state(mutate(encode_state(busy_state())))


def test_checkpoint_round_trip(tmp_path):
    s = busy_state()
    full = build_state_trees(s).full_hash
    store = CheckpointStore(tmp_path, interval=1)
    store.write(s.metadata.batch_number, s, full)
    loaded = store.load_latest()
    assert loaded.height == s.metadata.batch_number and loaded.full_hash == full and loaded.state == s


def test_crash_between_temp_write_and_rename_recovers_the_previous_checkpoint(tmp_path, monkeypatch):
    s = busy_state()
    store = CheckpointStore(tmp_path, interval=1)
    h = s.metadata.batch_number
    store.write(h, s, build_state_trees(s).full_hash)

    s.metadata.batch_number = h + 1
    def crash(src, dst):
        raise KeyboardInterrupt("power cut")
    monkeypatch.setattr(os, "rename", crash)
    with pytest.raises(KeyboardInterrupt):
        store.write(h + 1, s, build_state_trees(s).full_hash)
    monkeypatch.undo()
    assert any(p.name.startswith("tmp-") for p in tmp_path.iterdir())

    loaded = CheckpointStore(tmp_path, interval=1).load_latest()
    assert loaded.height == h
    assert not any(p.name.startswith("tmp-") for p in tmp_path.iterdir())


def test_corrupted_checkpoint_is_refused_with_a_clear_error(tmp_path):
    s = busy_state()
    store = CheckpointStore(tmp_path, interval=1)
    directory = store.write(s.metadata.batch_number, s, build_state_trees(s).full_hash)
    data = bytearray((directory / "state.bin").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (directory / "state.bin").write_bytes(bytes(data))
    with pytest.raises(CorruptCheckpoint, match="digest"):
        store.load_latest()


def test_checkpoint_with_a_wrong_manifest_hash_is_refused(tmp_path):
    s = busy_state()
    store = CheckpointStore(tmp_path, interval=1)
    store.write(s.metadata.batch_number, s, b"\x00" * 32)
    with pytest.raises(CorruptCheckpoint, match="full-state hash"):
        store.load_latest()


def test_state_manager_commits_chain_hashes_and_accepts_only_matching_certifications():
    sim = Simulation({A: (0, 99)}, ExecutionEnvironment([]), seed=1)
    sim.run(3)  # the simulation commits through its own StateManager
    manager: StateManager = sim.subnets[A].state_manager
    assert manager.heights() == [0, 1, 2, 3]
    h2, h3 = manager.snapshot(2), manager.snapshot(3)
    assert sim.state_of(A).metadata.prev_state_hash == h2.full_hash
    with pytest.raises(HeightMismatch):
        manager.commit(sim.state_of(A))

    deal = deal_threshold_keys(4, 3, b"s" * 32)
    shares = [sign_certification_share(3, h3.certified_root, i, deal.secret_share(i)) for i in (1, 2, 3)]
    cert = aggregate_certification(shares, 3, deal.public_key, {i: deal.public_key_share(i) for i in (1, 2, 3, 4)})
    manager.deliver_certification(cert, deal.public_key)
    assert manager.latest_certified() == (h3, cert)

    wrong = [sign_certification_share(2, h3.certified_root, i, deal.secret_share(i)) for i in (1, 2, 3)]
    wrong_cert = aggregate_certification(wrong, 3, deal.public_key, {i: deal.public_key_share(i) for i in (1, 2, 3, 4)})
    with pytest.raises(CertificationMismatch):
        manager.deliver_certification(wrong_cert, deal.public_key)  # height 2 has another root
    other = deal_threshold_keys(4, 3, b"o" * 32)
    with pytest.raises(CertificationError):
        manager.deliver_certification(cert, other.public_key)


def test_state_manager_keeps_the_last_heights_and_the_latest_certified_one():
    sim = Simulation({A: (0, 99)}, ExecutionEnvironment([]), seed=1)
    sim.run(1)
    manager: StateManager = sim.subnets[A].state_manager
    manager.keep_heights = 3
    deal = deal_threshold_keys(1, 1, b"k" * 32)
    root = manager.snapshot(1).certified_root
    share = sign_certification_share(1, root, 1, deal.secret_share(1))
    manager.deliver_certification(aggregate_certification([share], 1, deal.public_key, {1: deal.public_key_share(1)}),
                                  deal.public_key)
    sim.run(6)
    assert manager.heights() == [1, 5, 6, 7]
