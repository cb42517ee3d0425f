"""The replica plan: deterministic, covering, faults placed, partitions balanced."""

from __future__ import annotations

from collections import Counter

import pytest

from replica.audit.errors import PerturbationError
from replica.audit.perturbation import Fault
from replica.audit.replicas import assign_partitions, hash_seed_pool, plan_replicas, replica_cost

HEIGHTS = {"a": 40, "b": 40, "c": 39}
CHECKPOINTS = {"a": (10, 20, 30, 40), "b": (10, 20, 30, 40), "c": (10, 20, 30)}


def test_plan_is_deterministic_and_covers_every_subnet_from_genesis():
    plan = plan_replicas(HEIGHTS, CHECKPOINTS, 300, seed=4)
    assert plan == plan_replicas(HEIGHTS, CHECKPOINTS, 300, seed=4)
    assert plan != plan_replicas(HEIGHTS, CHECKPOINTS, 300, seed=5)
    assert [s.subnet for s in plan[:6]] == ["a", "b", "c", "a", "b", "c"]
    assert all(s.perturbation.text() == "none" for s in plan[:3])
    kinds = Counter(k for s in plan for k in s.perturbation.kinds())
    assert {"none", "shuffle", "hashseed", "restart", "checkpoint"} <= set(kinds)
    for s in plan:
        assert s.start < HEIGHTS[s.subnet] and (s.start == 0 or s.start in CHECKPOINTS[s.subnet])
        assert s.perturbation.hash_seed is None or s.perturbation.hash_seed in hash_seed_pool(0)


def test_hash_seed_pool_skips_the_workers_seed():
    assert 0 not in hash_seed_pool(0) and 3 not in hash_seed_pool(3) and len(hash_seed_pool(3)) == 8


def test_from_genesis():
    assert all(s.start == 0 for s in plan_replicas(HEIGHTS, CHECKPOINTS, 100, seed=1, from_genesis=True))


def test_faults_are_placed_and_start_before_them():
    plan = plan_replicas(HEIGHTS, CHECKPOINTS, 100, seed=1, faults={7: Fault("drop", 12, 1)})
    faulted = [s for s in plan if s.perturbation.fault is not None]
    assert [s.replica for s in faulted] == [7] and faulted[0].start < 12


@pytest.mark.parametrize("faults, replicas", [({100: Fault("drop", 2)}, 100), ({1: Fault("drop", 41)}, 100), ({}, 2)])
def test_bad_plans(faults, replicas):
    with pytest.raises(PerturbationError):
        plan_replicas(HEIGHTS, CHECKPOINTS, replicas, seed=1, faults=faults)


def test_partitions_are_balanced_and_keep_seeds_together():
    plan = plan_replicas(HEIGHTS, CHECKPOINTS, 1000, seed=2)
    assignment = assign_partitions(plan, HEIGHTS, 8)
    load = Counter()
    for s in plan:
        load[assignment[s.replica]] += replica_cost(s, HEIGHTS[s.subnet])
    assert set(load) == set(range(8))
    assert max(load.values()) < 1.1 * min(load.values())
    seeds_per_partition = Counter()
    for p in range(8):
        seeds_per_partition[p] = len({s.perturbation.hash_seed for s in plan
                                      if assignment[s.replica] == p and s.perturbation.hash_seed is not None})
    assert sum(seeds_per_partition.values()) <= 8 + 7  # each seed spans at most two neighbouring partitions
