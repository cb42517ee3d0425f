"""The replay engine reproduces the live run under every harmless perturbation, and a
fault (or another hash seed with a nondeterministic canister) is visible from its height."""

from __future__ import annotations

import random

import pytest

from replica.audit.errors import ReplayError
from replica.audit.executor import replay_replica
from replica.audit.inputs import prepare_run
from replica.audit.isolation import run_isolated
from replica.inprocess.workload import generate_isolated
from replica.audit.perturbation import Fault, Perturbation, parse_perturbation
from replica.audit.run_log import decode_run_log, encode_run_log
from replica.audit.shuffle import present_xnet_payload, shuffle_state_value, shuffled_state
from replica.audit.tree_diff import diff_tries
from replica.inprocess.workload import NONDETERMINISTIC_FIRST, WorkloadConfig
from state_manager.encoding import decode
from state_manager.state_codec import decode_state, encode_state
from state_manager.state_tree import build_state_trees

from .runs import A, recorded_run, small_run


@pytest.fixture(scope="module")
def generated():
    return prepare_run(small_run())


@pytest.fixture(scope="module")
def recorded():
    return prepare_run(recorded_run())


def _live(run, subnet):
    return {h: (f, c) for h, f, c in run.subnet(subnet).hashes}


@pytest.mark.parametrize("text", ["none", "shuffle:11", "restart@3", "checkpoint@4", "checkpoint@8+restart@9+shuffle:2"])
def test_harmless_perturbations_reproduce_the_live_hashes(generated, recorded, text):
    for run in (generated, recorded):
        for subnet in run.subnets:
            steps = list(run.replay(subnet, parse_perturbation(text)))
            start = parse_perturbation(text).start
            assert [s.height for s in steps] == list(range(start, run.subnet(subnet).height + 1))
            live = _live(run, subnet)
            assert all(live[s.height] == (s.full_hash, s.certified_root) for s in steps if s.height)


def test_genesis_row_is_the_hash_of_the_genesis_state(recorded):
    (first,) = list(recorded.replay(A, Perturbation(), until=0))
    assert first.full_hash == build_state_trees(decode_state(recorded.subnet(A).genesis)).full_hash


def test_a_fault_diverges_from_its_height_on(generated):
    subnet = "subnet-0"
    live = _live(generated, subnet)
    steps = list(generated.replay(subnet, Perturbation(fault=Fault("flip", 5, 0))))
    differs = [s.height for s in steps if s.height and live[s.height] != (s.full_hash, s.certified_root)]
    assert differs and differs[0] == 5


def test_missing_checkpoint(generated):
    with pytest.raises(ReplayError, match="no checkpoint at height 3"):
        list(generated.replay("subnet-0", Perturbation(start=3)))


def test_failed_replica_yields_an_error_row(generated):
    rows = list(replay_replica(generated, 9, "subnet-0", "checkpoint@3"))
    assert rows == [(9, "subnet-0", 3, None, None, "ReplayError: the run has no checkpoint at height 3")]
    rows = list(replay_replica(generated, 9, "subnet-0", "fault:drop@2:999"))
    assert len(rows) == 3 and rows[-1][2] == 2 and "only" in rows[-1][5]


def test_shuffled_state_is_the_same_state():
    log = small_run()
    data = log.subnets[0].checkpoints[-1][1]
    value = decode(data)
    assert shuffle_state_value(value, random.Random(1)) != value  # the fill order really changes
    state = shuffled_state(data, random.Random(1))
    assert state == decode_state(data)
    assert build_state_trees(state).full_hash == build_state_trees(decode_state(data)).full_hash


def test_a_state_whose_topology_lists_node_keys_is_shuffled_too():
    """A node's checkpoints carry its subnets' node keys in the topology (a fifth item)."""
    from dataclasses import replace
    state = decode_state(small_run().subnets[0].checkpoints[-1][1])
    topology = state.metadata.network_topology
    state.metadata.network_topology = replace(topology, node_public_keys=((A, (b"\x01" * 44, b"\x02" * 44)),))
    assert shuffled_state(encode_state(state), random.Random(1)) == state


def test_xnet_payload_presented_shuffled():
    run = prepare_run(small_run(subnets=3, batches=5))
    batches = run.subnet("subnet-0").batches
    orders = {tuple(s for s, _ in present_xnet_payload(b, random.Random(k)).xnet_payload)
              for b in batches for k in range(4)}
    assert len(orders) > 1  # the state machine really sees other orders …
    live = _live(run, "subnet-0")
    for step in run.replay("subnet-0", parse_perturbation("shuffle:5")):
        assert not step.height or live[step.height] == (step.full_hash, step.certified_root)  # … and does not care


def test_isolated_replay_under_another_hash_seed_matches(recorded):
    blob = encode_run_log(recorded_run())
    inline = list(replay_replica(recorded, 4, A, "shuffle:3"))
    isolated = list(run_isolated(blob, "rows", 12345, [(4, A, "shuffle:3+hashseed:12345")]))
    assert [r[2:5] for r in isolated] == [r[2:5] for r in inline]


def test_nondeterministic_canister_differs_under_another_hash_seed():
    config = WorkloadConfig(subnets=1, canisters=3, batches=4, messages=4, seed=2, nondeterministic=True)
    blob = generate_isolated(config, 0)
    log = decode_run_log(blob)
    height = NONDETERMINISTIC_FIRST
    rows = {seed: list(run_isolated(blob, "states", seed, [(0, "subnet-0", f"hashseed:{seed}", height)]))[0]
            for seed in (1, 2)}
    trees = {seed: build_state_trees(decode_state(row[4])) for seed, row in rows.items()}
    diff = diff_tries(trees[1].full, trees[2].full)
    set_order = config.canisters  # the SetOrder canister follows the example apps
    assert f"/canister_state/{set_order}/stable/order" in [d.text for d in diff.paths]
    live = {h: f for h, f, _ in log.subnets[0].hashes}
    plain = list(run_isolated(blob, "rows", 0, [(0, "subnet-0", "none")]))
    assert all(live[r[2]] == r[3] for r in plain if r[2])
