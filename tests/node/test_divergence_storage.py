"""What a diverged node process keeps when it takes a certified state (FileStorage.repair and
set_aside_from), and the fault knob's perturbation (replica.node.faults)."""

from __future__ import annotations

import datetime

import pytest

from consensus_stub.genesis import SubnetSpec, genesis_registry
from replica.node.faults import FAULT_COUNTER, diverge_state
from replica.inprocess.subnet import NodeHooks, SubnetError
from replica.node.process_config import NodeConfigError, NodeFiles, NodeProcessConfig
from replica.node.storage import FileStorage
from state_manager.certification import Certification, aggregate_certification, sign_certification_share
from state_manager.state_tree import build_state_trees
from tests.builders import state

NOT_BEFORE = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
SUBNET = "alpha"
BLOCK_HASH = bytes(range(32))


def certify(height: int, root: bytes) -> Certification:
    registry, secrets = genesis_registry([SubnetSpec(SUBNET, 4, ((0, 999),))], b"divergence-storage-seed-32-bytes",
                                         not_before=NOT_BEFORE)
    record = registry.subnet(SUBNET, 1)
    shares = [sign_certification_share(height, root, secrets[n].node_index, secrets[n].secret_share)
              for n in record.node_ids[: record.threshold]]
    return aggregate_certification(shares, record.threshold, record.public_key, record.key_shares_by_index())


def at(height: int, time_ns: int = 1_700_000_000 * 10**9):
    s = state(SUBNET)
    s.metadata.batch_number = height
    s.metadata.batch_time = time_ns + height
    return s


def test_the_fault_moves_time_back_by_the_node_index_and_changes_the_certified_root():
    healthy, one, two = at(7), at(7), at(7)
    diverge_state(one, 1)
    diverge_state(two, 2)
    roots = {build_state_trees(s).certified_root for s in (healthy, one, two)}
    assert len(roots) == 3
    assert one.metadata.batch_time == healthy.metadata.batch_time - 1 and one.metadata.counters[FAULT_COUNTER] == 1
    again = at(7)
    diverge_state(again, 1)
    assert build_state_trees(again).certified_root == build_state_trees(one).certified_root   # deterministic


def test_repair_sets_the_diverged_checkpoints_aside_and_keeps_the_certified_state(tmp_path):
    files = NodeFiles(tmp_path / "node")
    storage = FileStorage(files, checkpoint_interval=5, checkpoints_kept=5, retained_heights=100)
    try:
        for height in (5, 10, 15):
            s = at(height)
            if height >= 10:
                diverge_state(s, 3)   # diverged from height 7 on (in this node's checkpoints of 10 and 15)
            assert storage.checkpoint_if_due(height, s, build_state_trees(s).full_hash)
        good5 = at(5)
        storage.keep_certification(certify(5, build_state_trees(good5).certified_root), BLOCK_HASH)
        certified = at(10)
        trees = build_state_trees(certified)
        storage.repair(10, BLOCK_HASH, certified, trees.full_hash, certify(10, trees.certified_root), diverged_at=7)
        aside = sorted(p.name for p in files.checkpoints.iterdir() if not p.name.isdigit())
        assert aside == [f"{10:020d}.replaced-1", f"{15:020d}.replaced-1"]   # moved, never deleted
        assert storage.checkpoints.heights() == [5, 10]
        assert build_state_trees(storage.checkpoints.store.load(10).state).certified_root == trees.certified_root
        assert storage.checkpoints.kept_certification(10)[0] == BLOCK_HASH
        assert storage.checkpoints.kept_certification(5) is not None   # below the divergence: kept
        assert (tmp_path / "node" / "executed.log.replaced-1").exists()
        assert storage.offer() is not None   # it serves the certified state to its peers
    finally:
        storage.close()


def test_the_knobs_refuse_what_is_not_a_height(tmp_path):
    config = NodeProcessConfig(str(tmp_path), "alpha-node-1", SUBNET, fault_diverge_at_height=12)
    assert NodeProcessConfig.from_file(_written(tmp_path, config.to_json())).fault_diverge_at_height == 12
    for bad in (-1, 1.5, "12", True):
        with pytest.raises(NodeConfigError, match="fault_diverge_at_height"):
            NodeProcessConfig(str(tmp_path), "alpha-node-1", SUBNET, fault_diverge_at_height=bad)
    with pytest.raises(SubnetError, match="diverge_at"):
        NodeHooks(diverge_at=0)


def _written(tmp_path, text: str):
    path = tmp_path / "config.json"
    path.write_text(text)
    return path
