"""The drill-down: which replicas to replay for a divergence cluster, and the diff of their states.

For a cluster (replicas that first diverged at the same height with the same hash), one
minority replica (its lowest id) and one majority replica (``analysis.majority_witnesses``)
are replayed to the first divergent height; ``diff_states`` rebuilds both states' trees from
scratch, checks them against the hashes the replays committed (a mismatch means the
incremental hashing, not the state, diverged) and diffs the full-state trees.
Everything here is pure; replaying is the job's business.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from message_routing.batch import Batch
from state_manager.codec import CodecError
from state_manager.messages import Ingress, Request, Response
from state_manager.state_codec import decode_state
from state_manager.state_tree import build_state_trees

from .faults import batch_messages
from .tree_diff import diff_tries

__all__ = ["DrillRequest", "drill_requests", "diff_states", "describe_messages", "MAX_MESSAGES"]

#: Messages of a batch listed in a drill-down (the rest are counted).
MAX_MESSAGES = 50


@dataclass(frozen=True)
class DrillRequest:
    request: int
    subnet: str
    perturbation: str
    height: int

    def as_tuple(self) -> tuple:
        return (self.request, self.subnet, self.perturbation, self.height)


def drill_requests(pairs: Sequence[tuple[tuple[str, str, int], tuple[str, str, int]]]) -> tuple[tuple[DrillRequest, ...], list[tuple[int, int]]]:
    """Requests for ``[(minority, majority), ...]`` given as ``(subnet, perturbation, height)``,
    identical replays asked once; returns the requests and per pair ``(minority id, majority id)``."""
    index: dict[tuple[str, str, int], int] = {}
    requests: list[DrillRequest] = []
    ids = []
    for pair in pairs:
        pair_ids = []
        for key in pair:
            if key not in index:
                index[key] = len(requests)
                requests.append(DrillRequest(len(requests), *key))
            pair_ids.append(index[key])
        ids.append((pair_ids[0], pair_ids[1]))
    return tuple(requests), ids


def _trees(row: tuple) -> tuple[Any, list[str]]:
    """Trees of a state row, with notes on anything that did not check out."""
    _, height, full, certified, state_bytes, error = row
    if error is not None or state_bytes is None:
        return None, [f"replay failed at height {height}: {error}"]
    try:
        trees = build_state_trees(decode_state(bytes(state_bytes)))
    except CodecError as exc:
        return None, [f"the replayed state does not decode: {exc}"]
    notes = []
    if trees.full_hash != bytes(full) or trees.certified_root != bytes(certified):
        notes.append(f"at height {height} the incrementally committed hash differs from the hash of the same "
                     "state built from scratch")
    return trees, notes


def diff_states(minority: tuple, majority: tuple, expected: tuple[bytes | None, bytes | None] | None = None,
                limit: int = 64) -> dict[str, Any]:
    """Compare two replayed states (``executor`` state rows): differing paths and notes.

    ``expected`` is the minority's hash the audit saw; a re-run that does not reproduce it is noted."""
    left, notes = _trees(minority)
    right, more_notes = _trees(majority)
    notes += more_notes
    if expected is not None and minority[2] is not None and expected[0] is not None:
        if (bytes(minority[2]), bytes(minority[3])) != (bytes(expected[0]), bytes(expected[1])):
            notes.append("the minority replay did not reproduce the hash seen in the audit")
    if left is None or right is None:
        return {"paths": [], "more_paths": 0, "notes": notes}
    diff = diff_tries(left.full, right.full, limit)
    if diff.equal:
        notes.append("the two states are equal: the divergence is in hashing, not in the state")
    return {
        "paths": [{"path": d.text, "minority": d.left, "majority": d.right} for d in diff.paths],
        "more_paths": diff.more,
        "notes": notes,
    }


def describe_messages(batch: Batch, limit: int = MAX_MESSAGES) -> dict[str, Any]:
    """The messages a batch gave its replicas to execute, by fault index (``faults``): where
    each came from, what it is, who sends and receives it, the method and payload size."""
    listed = []
    refs = batch_messages(batch)
    for ref in refs[:limit]:
        m = ref.message
        entry: dict[str, Any] = {"index": ref.index, "from": ref.container, "kind": type(m).__name__.lower()}
        if type(m) is Ingress:
            entry.update(sender=m.source.hex(), receiver=m.receiver, method=m.method_name,
                         payload_bytes=len(m.method_payload))
        elif type(m) is Request:
            entry.update(sender=m.sender, receiver=m.receiver, method=m.method_name,
                         payload_bytes=len(m.method_payload))
        elif type(m) is Response:
            entry.update(sender=m.respondent, receiver=m.originator,
                         method=type(m.response_payload).__name__.lower())
        listed.append(entry)
    return {"height": batch.batch_number, "registry_version": batch.registry_version, "time": batch.time,
            "count": len(refs), "listed": listed}
