"""Recording a simulation as a run log: ``record_run(simulation, directory)``.

The simulation records, per subnet, its genesis state, every batch and the hashes it
committed (``replica.testnet.simulation``). A run log adds checkpoints every
``checkpoint_interval`` heights: given live ones (``checkpoints``, as the workload
generator captures them) or derived here by replaying the subnet's own batches once, each
height checked against the live hashes — so a recording that does not replay to its own
hashes is refused (``RecordError``) instead of being audited.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from message_routing.batch import encode_batch
from replica.testnet.simulation import Simulation

from replica.audit.errors import RecordError
from replica.audit.replay import ReplayContext, verified_checkpoints
from replica.audit.run_log import RunLog, SubnetLog, limits_preset_name, write_run_log

__all__ = ["run_log_from_simulation", "record_run", "DEFAULT_CHECKPOINT_INTERVAL"]

DEFAULT_CHECKPOINT_INTERVAL = 10


def _registry_names(simulation: Simulation) -> tuple[tuple[str, ...], tuple[type, ...]]:
    registry = getattr(simulation.execution_environment, "registry", None)
    if registry is None or not hasattr(registry, "names"):
        raise RecordError("the simulation's execution environment has no canister registry to record")
    names = registry.names()
    return names, tuple(registry.class_of(name) for name in names)


def run_log_from_simulation(
    simulation: Simulation,
    *,
    checkpoint_interval: int = DEFAULT_CHECKPOINT_INTERVAL,
    checkpoints: Mapping[str, Mapping[int, bytes]] | None = None,
) -> RunLog:
    """The run log of everything ``simulation`` recorded so far."""
    if checkpoint_interval < 1:
        raise RecordError("the checkpoint interval is at least 1")
    if not simulation.record_batches:
        raise RecordError("the simulation was made with record_batches=False")
    names, classes = _registry_names(simulation)
    context = ReplayContext(classes, simulation.limits, (simulation.topology,))
    logs = []
    for subnet_id in sorted(simulation.subnets):
        sim_subnet = simulation.subnets[subnet_id]
        if sim_subnet.genesis is None:
            raise RecordError(f"subnet {subnet_id} has not executed a batch yet: nothing is recorded")
        if len(sim_subnet.batches) != len(sim_subnet.hashes):
            raise RecordError(f"subnet {subnet_id}: {len(sim_subnet.batches)} batches but "
                              f"{len(sim_subnet.hashes)} hashes recorded")
        if checkpoints is not None:
            given = checkpoints.get(subnet_id, {})
            subnet_checkpoints = tuple(sorted((h, data) for h, data in given.items() if h % checkpoint_interval == 0))
        else:
            subnet_checkpoints = verified_checkpoints(subnet_id, sim_subnet.genesis, sim_subnet.batches,
                                                      sim_subnet.hashes, context, checkpoint_interval)
        logs.append(SubnetLog(
            subnet_id, sim_subnet.genesis, tuple(encode_batch(b) for b in sim_subnet.batches),
            tuple(tuple(h) for h in sim_subnet.hashes), subnet_checkpoints))
    return RunLog(tuple(logs), names, limits_preset_name(simulation.limits), simulation.limits,
                  checkpoint_interval, (simulation.topology,))


def record_run(simulation: Simulation, directory: Path | str, **options) -> RunLog:
    """Write the simulation's recording to ``directory`` as a run log; return the log."""
    log = run_log_from_simulation(simulation, **options)
    write_run_log(log, directory)
    return log
