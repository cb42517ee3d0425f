"""Which simulated replicas an audit runs, and how they are spread over Spark partitions.

``plan_replicas`` is pure and deterministic (seeded). Replica ``r`` belongs to subnet
``subnets[r mod S]``; with ``i = r div S`` its index within the subnet:

* ``i = 0``: ``none`` — replays every batch from genesis with no perturbation (one clean
  baseline per subnet, so every height of every subnet is covered);
* ``i ≥ 1``: class ``(i - 1) mod 4`` of ``plain``, ``shuffle`` (seeded), ``hashseed`` (one
  of ``HASH_SEED_POOL`` seeds, never the workers' own), ``restart`` (serialize + reload at
  a random height) — each starting from a random recorded checkpoint height or genesis
  (``checkpoint@k``, like a replica that restarts from its checkpoint or state-syncs),
  unless ``from_genesis`` makes every replica start at genesis.

A replica that starts at ``k`` reports heights ``k..n`` and executes batches ``k+1..n``;
it has no opinion about heights below ``k``. Faults are added to the replicas they name
(moved to start at genesis if their start would skip the fault's height).

``plan_live_replicas`` is the plan of a live audit (``live``), made before the run's last
height is known: the same classes, but a replica that does not start at genesis starts at one
of the first ``LIVE_STARTS`` checkpoint heights (like a node restarting early from its
checkpoint) and a ``restart`` replica restarts within ``2 × interval`` heights after its
start; ``hashseed`` draws from ``LIVE_HASH_SEEDS`` seeds (each seed is a process kept for the
whole audit). ``in_run`` keeps the replicas whose start height a run reached: an offline
audit with ``AuditOptions(plan="live")`` replays exactly the replicas a live audit did.
``checkpoint_writers`` names the one replica per subnet whose states become a live audit's
checkpoints: the plan has several unperturbed replicas per subnet, but a checkpoint file must
have one writer.

``assign_partitions`` groups replicas into contiguous, cost-balanced partitions, hash-seed
replicas of one seed together (one subprocess per seed and partition).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from .errors import PerturbationError
from .perturbation import Fault, Perturbation

__all__ = ["ReplicaSpec", "plan_replicas", "plan_live_replicas", "in_run", "checkpoint_writers", "LIVE_STARTS",
           "LIVE_HASH_SEEDS", "assign_partitions", "replica_cost", "HASH_SEED_POOL_SIZE",
           "hash_seed_pool", "CLASSES"]

CLASSES = ("plain", "shuffle", "hashseed", "restart")
HASH_SEED_POOL_SIZE = 8
#: A checkpoint load costs about this many batch executions per 10 heights of state.
_LOAD_COST_PER_HEIGHT = 0.1


@dataclass(frozen=True, slots=True)
class ReplicaSpec:
    replica: int
    subnet: str
    perturbation: Perturbation

    @property
    def start(self) -> int:
        return self.perturbation.start

    def expected_rows(self, subnet_height: int) -> int:
        """Heights ``start..subnet_height``."""
        return subnet_height - self.start + 1


def hash_seed_pool(worker_hash_seed: int | None) -> tuple[int, ...]:
    """``HASH_SEED_POOL_SIZE`` seeds from 1 up, skipping the seed workers run with."""
    pool = []
    seed = 1
    while len(pool) < HASH_SEED_POOL_SIZE:
        if seed != worker_hash_seed:
            pool.append(seed)
        seed += 1
    return tuple(pool)


def _planned(i: int, rng: random.Random, height: int, starts: Sequence[int], seeds: Sequence[int],
             from_genesis: bool) -> Perturbation:
    if i == 0:
        return Perturbation()
    cls = CLASSES[(i - 1) % len(CLASSES)]
    start = 0 if from_genesis else rng.choice(starts)
    if cls == "shuffle":
        return Perturbation(start=start, shuffle_seed=rng.randrange(2**32))
    if cls == "hashseed":
        return Perturbation(start=start, hash_seed=rng.choice(seeds))
    if cls == "restart" and height - start >= 2:
        return Perturbation(start=start, restart_at=rng.randint(start + 1, height - 1))
    return Perturbation(start=start)


def plan_replicas(
    subnet_heights: Mapping[str, int],
    checkpoint_heights: Mapping[str, Sequence[int]],
    replicas: int,
    seed: int,
    *,
    faults: Mapping[int, Fault] | None = None,
    worker_hash_seed: int | None = 0,
    from_genesis: bool = False,
) -> tuple[ReplicaSpec, ...]:
    """The replicas of an audit (module docstring)."""
    subnets = sorted(subnet_heights)
    if replicas < len(subnets):
        raise PerturbationError(f"{replicas} replicas cannot cover {len(subnets)} subnets (one baseline each)")
    faults = dict(faults or {})
    for replica, fault in faults.items():
        if not 0 <= replica < replicas:
            raise PerturbationError(f"fault for replica {replica}, but replicas are 0..{replicas - 1}")
        subnet = subnets[replica % len(subnets)]
        if fault.height > subnet_heights[subnet]:
            raise PerturbationError(f"fault at height {fault.height}, but subnet {subnet} has {subnet_heights[subnet]} batches")
    seeds = hash_seed_pool(worker_hash_seed)
    specs = []
    for replica in range(replicas):
        subnet = subnets[replica % len(subnets)]
        height = subnet_heights[subnet]
        starts = [0] + [h for h in checkpoint_heights.get(subnet, ()) if h < height]
        rng = random.Random(f"audit-plan/{seed}/{replica}")
        perturbation = _planned(replica // len(subnets), rng, height, starts, seeds, from_genesis)
        fault = faults.get(replica)
        if fault is not None:
            start = perturbation.start if perturbation.start < fault.height else 0
            restart = perturbation.restart_at if perturbation.restart_at is not None and perturbation.restart_at > start else None
            perturbation = replace(perturbation, start=start, restart_at=restart, fault=fault)
        specs.append(ReplicaSpec(replica, subnet, perturbation))
    return tuple(specs)


#: A live replica that does not start at genesis starts at one of this many checkpoint heights.
LIVE_STARTS = 4
#: Hash seeds of a live audit (fewer than offline: each is a process that lives as long as the audit).
LIVE_HASH_SEEDS = 2


def plan_live_replicas(subnets: Sequence[str], replicas: int, seed: int, interval: int, *,
                       faults: Mapping[int, Fault] | None = None,
                       worker_hash_seed: int | None = 0) -> tuple[ReplicaSpec, ...]:
    """The replicas of a live audit (module docstring): replica ``r`` of subnet
    ``subnets[r mod S]``, class by ``r div S`` as in ``plan_replicas``."""
    subnets = sorted(subnets)
    if replicas < len(subnets):
        raise PerturbationError(f"{replicas} replicas cannot cover {len(subnets)} subnets (one baseline each)")
    if interval < 1:
        raise PerturbationError("the checkpoint interval is at least 1")
    faults = dict(faults or {})
    seeds = hash_seed_pool(worker_hash_seed)[:LIVE_HASH_SEEDS]
    starts = [k * interval for k in range(LIVE_STARTS + 1)]
    specs = []
    for replica in range(replicas):
        subnet = subnets[replica % len(subnets)]
        i = replica // len(subnets)
        rng = random.Random(f"audit-live-plan/{seed}/{replica}")
        perturbation = Perturbation()
        if i:
            cls = CLASSES[(i - 1) % len(CLASSES)]
            start = rng.choice(starts)
            if cls == "shuffle":
                perturbation = Perturbation(start=start, shuffle_seed=rng.randrange(2**32))
            elif cls == "hashseed":
                perturbation = Perturbation(start=start, hash_seed=rng.choice(seeds))
            elif cls == "restart":
                perturbation = Perturbation(start=start, restart_at=start + rng.randint(1, 2 * interval))
            else:
                perturbation = Perturbation(start=start)
        fault = faults.get(replica)
        if fault is not None:
            if not 0 <= replica < replicas:
                raise PerturbationError(f"fault for replica {replica}, but replicas are 0..{replicas - 1}")
            start = perturbation.start if perturbation.start < fault.height else 0
            restart = perturbation.restart_at if perturbation.restart_at is not None and perturbation.restart_at > start else None
            perturbation = replace(perturbation, start=start, restart_at=restart, fault=fault)
        specs.append(ReplicaSpec(replica, subnet, perturbation))
    for replica in faults:
        if not 0 <= replica < replicas:
            raise PerturbationError(f"fault for replica {replica}, but replicas are 0..{replicas - 1}")
    return tuple(specs)


def checkpoint_writers(specs: Sequence[ReplicaSpec]) -> dict[str, int]:
    """``subnet → replica``: the lowest-numbered unperturbed replica of each subnet (its
    baseline, or the next plain one from genesis if a fault was put on the baseline). Only it
    writes the subnet's checkpoints: the other unperturbed replicas compute the same states, but
    run in other hosts, and two processes replacing one file through one temporary name race
    (one's rename finds the temporary file gone, and its replica fails)."""
    writers: dict[str, int] = {}
    for spec in sorted(specs, key=lambda s: s.replica):
        if spec.perturbation == Perturbation() and spec.subnet not in writers:
            writers[spec.subnet] = spec.replica
    return writers


def in_run(specs: Sequence[ReplicaSpec], heights: Mapping[str, int],
           checkpoint_heights: Mapping[str, Sequence[int]]) -> tuple[ReplicaSpec, ...]:
    """The replicas whose start the run reached: genesis, or a checkpoint it has."""
    return tuple(s for s in specs if s.start == 0 or (s.start <= heights.get(s.subnet, 0)
                                                        and s.start in checkpoint_heights.get(s.subnet, ())))


def replica_cost(spec: ReplicaSpec, subnet_height: int) -> float:
    """Estimated work in batch executions: the batches replayed plus the start state's load."""
    return (subnet_height - spec.start) + _LOAD_COST_PER_HEIGHT * spec.start + 1


def assign_partitions(specs: Sequence[ReplicaSpec], subnet_heights: Mapping[str, int],
                      partitions: int) -> dict[int, int]:
    """``replica → partition``: specs ordered by (hash seed, subnet, replica), cut into
    ``partitions`` contiguous runs of about equal estimated cost."""
    if partitions < 1:
        raise PerturbationError("at least one partition")
    ordered = sorted(specs, key=lambda s: (s.perturbation.hash_seed is not None, s.perturbation.hash_seed or 0,
                                           s.subnet, s.replica))
    total = sum(replica_cost(s, subnet_heights[s.subnet]) for s in ordered)
    share = total / partitions
    assignment: dict[int, int] = {}
    done = 0.0
    for spec in ordered:
        cost = replica_cost(spec, subnet_heights[spec.subnet])
        assignment[spec.replica] = min(partitions - 1, int((done + cost / 2) / share)) if share else 0
        done += cost
    return assignment
