"""From a live subnet's recording to the audit's run log (``replica.audit.run_log``).

Every ``Subnet`` records its genesis state, the batch of every height and the hashes its
nodes committed (``SubnetRecording``). ``run_log_from_recordings`` turns the recordings of
a testnet into a ``RunLog`` with checkpoints every ``checkpoint_interval`` heights, derived
by replaying each subnet's batches once — and refuses (``RecordError``) a recording that
does not replay to its own live hashes. ``replica audit`` then audits it on Spark.

A subnet process keeps its recording in a file (canonical msgpack)::

    ["replica-subnet-recording", 1, subnet_id, genesis, [batch bytes, ...], [[height, full hash, certified root], ...]]
"""

from __future__ import annotations

from typing import Any, Sequence

from message_routing.batch import decode_batch
from message_routing.limits import Limits
from state_manager.codec import CodecError, check_bytes, check_str, check_tuple, check_u64
from state_manager.encoding import EncodingError, decode, encode
from state_manager.routing_table import NetworkTopology

from replica.audit.errors import RecordError
from replica.audit.replay import ReplayContext, verified_checkpoints
from replica.audit.run_log import RunLog, SubnetLog, limits_preset_name
from replica.execution import module_name_of
from replica.testnet.subnet import SubnetRecording

__all__ = ["DEFAULT_CHECKPOINT_INTERVAL", "encode_recording", "decode_recording", "run_log_from_recordings"]

DEFAULT_CHECKPOINT_INTERVAL = 10
_TAG = "replica-subnet-recording"
_VERSION = 1


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


def run_log_from_recordings(
    recordings: Sequence[SubnetRecording],
    classes: Sequence[type],
    limits: Limits,
    topologies: Sequence[NetworkTopology],
    *,
    checkpoint_interval: int = DEFAULT_CHECKPOINT_INTERVAL,
) -> RunLog:
    """The run log of a testnet's subnets (module docstring)."""
    if checkpoint_interval < 1:
        raise RecordError("the checkpoint interval is at least 1")
    classes = sorted(classes, key=module_name_of)
    context = ReplayContext(tuple(classes), limits, tuple(topologies))
    logs = []
    for recording in sorted(recordings, key=lambda r: r.subnet_id):
        if not recording.batches:
            raise RecordError(f"subnet {recording.subnet_id} has not executed a batch yet: nothing is recorded")
        logs.append(SubnetLog(recording.subnet_id, recording.genesis, tuple(recording.batches),
                              tuple(tuple(h) for h in recording.hashes),
                              verified_checkpoints(recording.subnet_id, recording.genesis,
                                                   [decode_batch(b) for b in recording.batches],
                                                   recording.hashes, context, checkpoint_interval)))
    names = tuple(module_name_of(cls) for cls in classes)
    return RunLog(tuple(logs), names, limits_preset_name(limits), limits, checkpoint_interval, tuple(topologies))
