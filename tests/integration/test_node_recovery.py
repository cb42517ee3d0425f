"""Crash recovery of real node processes: SIGKILL at any instant, restart from the latest
verified checkpoint + the node's own block log + its peers' finalized blocks (issue 15)."""

from __future__ import annotations

import re

import pytest

from replica.node.process import CRASH_ENV

from .node_processes import NodeProcesses

pytestmark = pytest.mark.timeout(240)

SUBNET = "subnet-0"


@pytest.fixture
def cluster(tmp_path):
    nodes = NodeProcesses(tmp_path / "testnet", checkpoint_interval=10)
    try:
        yield nodes
    finally:
        nodes.stop()


def _restored_from(log: str) -> list[str]:
    return re.findall(r"state of height \d+ \(checkpoint (\w+), (\d+) blocks re-executed\)", log)


def test_a_killed_node_restarts_from_its_checkpoint_and_catches_up_while_the_others_go_on(cluster):
    cluster.start()
    victim, others = "subnet-0-node-2", ["subnet-0-node-1", "subnet-0-node-3", "subnet-0-node-4"]
    cluster.wait_heights(15)
    cluster.kill(victim)
    down_at = cluster.height(victim)
    # f = 1 of 4 down: the subnet keeps finalizing
    cluster.wait_heights(down_at + 15, others)
    cluster.start(victim)
    target = max(cluster.height(n) for n in others) + 3
    cluster.wait_heights(target, timeout_s=60)
    checkpoint, replayed = _restored_from(cluster.log(victim))[-1]
    assert checkpoint != "none" and int(checkpoint) >= 10 and int(replayed) < 10
    assert cluster.assert_converged(SUBNET) >= target
    # certification follows execution (shares gossiped, then aggregated) and status.json is
    # rewritten every tick: wait for it rather than read it at one instant
    cluster.wait_until(lambda: (cluster.status(victim).get("certified_height") or 0) >= target - 2, 30,
                       "the restarted node to hold a certification near the tip")
    assert cluster.status(victim)["critical_errors"] == 0


def test_a_node_killed_between_a_checkpoints_temporary_write_and_its_rename_recovers_from_the_previous_one(cluster):
    victim = "subnet-0-node-3"
    cluster.start(env={CRASH_ENV: f"{victim}:20"})
    assert cluster.wait_exit(victim) == -9
    checkpoints = cluster.files(victim).checkpoints
    assert sorted(p.name for p in checkpoints.iterdir()) == [f"{10:020d}", f"tmp-{20:020d}"]
    cluster.wait_heights(30, ["subnet-0-node-1", "subnet-0-node-2", "subnet-0-node-4"])
    cluster.start(victim)
    cluster.wait_heights(35, timeout_s=60)
    assert _restored_from(cluster.log(victim))[-1][0] == "10"
    assert not any(p.name.startswith("tmp-") for p in checkpoints.iterdir())
    assert (checkpoints / f"{30:020d}").is_dir()   # it checkpoints again as it goes on
    cluster.assert_converged(SUBNET)


def test_a_corrupt_checkpoint_is_refused_moved_aside_and_an_older_one_used(cluster):
    cluster.start()
    victim = "subnet-0-node-4"
    cluster.wait_heights(25)
    cluster.kill(victim)
    checkpoints = cluster.files(victim).checkpoints
    newest = max(p for p in checkpoints.iterdir() if p.name.isdigit())
    state = newest / "state.bin"
    data = bytearray(state.read_bytes())
    data[len(data) // 2] ^= 0x40
    state.write_bytes(bytes(data))
    cluster.start(victim)
    cluster.wait_heights(cluster.height("subnet-0-node-1") + 3, timeout_s=60)
    log = cluster.log(victim)
    assert f"refusing checkpoint {int(newest.name)}" in log
    assert int(_restored_from(log)[-1][0]) < int(newest.name)
    assert (checkpoints / f"{newest.name}.replaced-1").is_dir()   # kept for the operator, never deleted
    cluster.assert_converged(SUBNET)


def test_a_node_down_for_longer_than_its_peers_keep_blocks_syncs_state_from_a_peers_checkpoint(tmp_path):
    cluster = NodeProcesses(tmp_path / "testnet", checkpoint_interval=10, retained_heights=20)
    try:
        cluster.start()
        victim, others = "subnet-0-node-2", ["subnet-0-node-1", "subnet-0-node-3", "subnet-0-node-4"]
        cluster.wait_heights(12)
        cluster.kill(victim)
        down_at = cluster.height(victim)
        cluster.wait_heights(down_at + 45, others, timeout_s=120)
        cluster.start(victim)
        cluster.wait_until(lambda: cluster.status(victim).get("synced_from"), 60, "a state sync")
        peer, height = cluster.status(victim)["synced_from"]
        assert peer in others and height >= down_at + 30
        target = max(cluster.height(n) for n in others) + 3
        cluster.wait_heights(target, timeout_s=60)
        # it executes from the synced height on, to the same hashes as the others
        executed = cluster.executed(victim)
        assert min(executed) == height + 1 and max(executed) >= target
        cluster.assert_converged(SUBNET)
        files = cluster.files(victim)
        assert files.blocks.with_name("blocks.log.replaced-1").exists()        # moved aside, not deleted
        assert files.executed_log.with_name("executed.log.replaced-1").exists()
        cluster.wait_until(lambda: (cluster.status(victim).get("certified_height") or 0) >= target - 2, 30,
                           "the synced node to hold a certification near the tip")
    finally:
        cluster.stop()
