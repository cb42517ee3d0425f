"""From what a testnet or a simulation recorded to the audit's run log (``replica.audit.run_log``).

Every ``Subnet`` records its genesis state, the batch of every height and the hashes its
nodes committed (``SubnetRecording``); a ``Simulation`` records the same per subnet.
``run_log_from_recordings`` and ``run_log_from_simulation`` turn them into a ``RunLog`` with
checkpoints every ``checkpoint_interval`` heights: given live ones (``checkpoints``, as the
workload generator captures them) or derived by replaying each subnet's own batches once,
every height checked against the live hashes — so a recording that does not replay to its
own hashes is refused (``RecordError``) instead of being audited. ``record_run`` also
writes the run log of a simulation to a directory. Every run log records the build that
recorded it (``replica.audit.build.current_build``: the process assembling the log, which runs
from the same environment as the testnet's nodes), so an audit can tell whether its replicas
replay the code the live run ran.

A subnet process keeps its recording in a file (canonical msgpack)::

    ["replica-subnet-recording", 1, subnet_id, genesis, [batch bytes, ...], [[height, full hash, certified root], ...]]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from message_routing.batch import Batch, decode_batch, encode_batch
from message_routing.limits import Limits
from replica.audit.build import BuildInfo, current_build
from replica.audit.errors import RecordError
from replica.audit.replay import ReplayContext, verified_checkpoints
from replica.audit.run_log import RunLog, SubnetLog, limits_preset_name, write_run_log
from replica.execution import module_name_of
from replica.node.node_store import ExecutedLog
from replica.node.process_config import NodeFiles, NodeProcessConfig
from state_manager.codec import CodecError, check_bytes, check_str, check_tuple, check_u64
from state_manager.encoding import EncodingError, decode, encode
from state_manager.routing_table import NetworkTopology

__all__ = [
    "SubnetRecording", "DEFAULT_CHECKPOINT_INTERVAL", "encode_recording", "decode_recording", "run_log_from_recordings",
    "run_log_from_simulation", "record_run", "read_node_recording",
]

DEFAULT_CHECKPOINT_INTERVAL = 10
_TAG = "replica-subnet-recording"
_VERSION = 1


@dataclass
class SubnetRecording:
    """What a determinism audit replays: genesis, every batch, and the hashes committed."""

    subnet_id: str
    genesis: bytes
    batches: list[bytes] = field(default_factory=list)
    hashes: list[tuple[int, bytes, bytes]] = field(default_factory=list)   # (height, full hash, certified root)


def encode_recording(recording: SubnetRecording) -> bytes:
    return encode((_TAG, _VERSION, recording.subnet_id, recording.genesis, tuple(recording.batches),
                   tuple(tuple(h) for h in recording.hashes)))


def decode_recording(data: bytes) -> SubnetRecording:
    """Strict inverse of ``encode_recording``; ``RecordError`` for anything else."""
    try:
        value: Any = decode(data)
        tag, version, subnet, genesis, batches, hashes = check_tuple(value, "recording", 6)
        if tag != _TAG or type(version) is not int or version != _VERSION:
            raise CodecError("not a version-1 subnet recording")
        recording = SubnetRecording(
            check_str(subnet, "subnet"), check_bytes(genesis, "genesis"),
            [check_bytes(b, "batch") for b in check_tuple(batches, "batches")],
            [(check_u64(h, "height"), check_bytes(f, "full hash", 32), check_bytes(r, "certified root", 32))
             for h, f, r in (check_tuple(e, "hashes entry", 3) for e in check_tuple(hashes, "hashes"))],
        )
    except (EncodingError, CodecError) as exc:
        raise RecordError(f"subnet recording: {exc}") from exc
    if len(recording.batches) != len(recording.hashes):
        raise RecordError(f"subnet recording of {recording.subnet_id}: {len(recording.batches)} batches, "
                          f"{len(recording.hashes)} hashes")
    return recording


def _subnet_log(subnet_id: str, genesis: bytes | None, batches: Sequence[Batch], encoded: Sequence[bytes],
                hashes: Sequence[Sequence], context: ReplayContext, interval: int,
                live_checkpoints: Mapping[int, bytes] | None) -> SubnetLog:
    """One subnet's part of the run log (module docstring)."""
    if genesis is None or not batches:
        raise RecordError(f"subnet {subnet_id} has not executed a batch yet: nothing is recorded")
    if len(batches) != len(hashes):
        raise RecordError(f"subnet {subnet_id}: {len(batches)} batches but {len(hashes)} hashes recorded")
    if live_checkpoints is not None:
        checkpoints = tuple(sorted((h, data) for h, data in live_checkpoints.items() if h % interval == 0))
    else:
        checkpoints = verified_checkpoints(subnet_id, genesis, batches, hashes, context, interval)
    return SubnetLog(subnet_id, genesis, tuple(encoded), tuple(tuple(h) for h in hashes), checkpoints)


def _check_interval(checkpoint_interval: int) -> None:
    if checkpoint_interval < 1:
        raise RecordError("the checkpoint interval is at least 1")


def run_log_from_recordings(
    recordings: Sequence[SubnetRecording],
    classes: Sequence[type],
    limits: Limits,
    topologies: Sequence[NetworkTopology],
    *,
    checkpoint_interval: int = DEFAULT_CHECKPOINT_INTERVAL,
    build: BuildInfo | None = None,
) -> RunLog:
    """The run log of a testnet's subnets (module docstring); ``build`` defaults to this process's."""
    _check_interval(checkpoint_interval)
    classes = sorted(classes, key=module_name_of)
    context = ReplayContext(tuple(classes), limits, tuple(topologies))
    logs = tuple(
        _subnet_log(r.subnet_id, r.genesis, [decode_batch(b) for b in r.batches], r.batches, r.hashes, context,
                    checkpoint_interval, None)
        for r in sorted(recordings, key=lambda r: r.subnet_id))
    names = tuple(module_name_of(cls) for cls in classes)
    return RunLog(logs, names, limits_preset_name(limits), limits, checkpoint_interval, tuple(topologies),
                  build or current_build())


def run_log_from_simulation(
    simulation: Any,
    *,
    checkpoint_interval: int = DEFAULT_CHECKPOINT_INTERVAL,
    checkpoints: Mapping[str, Mapping[int, bytes]] | None = None,
    build: BuildInfo | None = None,
) -> RunLog:
    """The run log of everything ``simulation`` recorded so far (``build``: as above)."""
    _check_interval(checkpoint_interval)
    if not simulation.record_batches:
        raise RecordError("the simulation was made with record_batches=False")
    registry = getattr(simulation.execution_environment, "registry", None)
    if registry is None or not hasattr(registry, "names"):
        raise RecordError("the simulation's execution environment has no canister registry to record")
    names = registry.names()
    context = ReplayContext(tuple(registry.class_of(name) for name in names), simulation.limits,
                            (simulation.topology,))
    logs = tuple(
        _subnet_log(subnet_id, sub.genesis, sub.batches, [encode_batch(b) for b in sub.batches], sub.hashes,
                    context, checkpoint_interval, None if checkpoints is None else checkpoints.get(subnet_id, {}))
        for subnet_id, sub in sorted(simulation.subnets.items()))
    return RunLog(logs, names, limits_preset_name(simulation.limits), simulation.limits,
                  checkpoint_interval, (simulation.topology,), build or current_build())


def record_run(simulation: Any, directory: Path | str, **options) -> RunLog:
    """Write the simulation's recording to ``directory`` as a run log; return the log."""
    log = run_log_from_simulation(simulation, **options)
    write_run_log(log, directory)
    return log


def read_node_recording(files: NodeFiles) -> SubnetRecording | None:
    """A node process's recording from genesis — its executed log (``replica.node.node_store``)
    and the subnet's genesis — or ``None`` when that log does not start at height 1 (the node
    synced state from a peer) or does not exist."""
    if not files.executed_log.exists():
        return None
    config = NodeProcessConfig.from_file(files.config)
    genesis = (Path(config.testnet_dir) / "genesis" / f"{config.subnet_id}.bin").read_bytes()
    log = ExecutedLog(files.executed_log)
    try:
        if log.first_height not in (None, 1):
            return None
        return SubnetRecording(config.subnet_id, genesis, [e[1] for e in log.entries],
                               [(e[0], e[2], e[3]) for e in log.entries])
    finally:
        log.close()
