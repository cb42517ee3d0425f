"""A dry run: one update call executed on a copy of a state, never committed (pure).

``dry_run(environment, state, full_tree, canister, method, payload, caller, limits)`` copies
``state`` (encoded and decoded again, so nothing of the copy is shared with the original),
executes the call on the copy as a user's update message (``execute_ingress``: update
semantics, the update instruction limit, the state's own time), and reports what it did:

* the answer: ``replied`` (the reply bytes), ``rejected`` (code and message), or ``waiting``
  (the method made calls and answers only once their responses come back, which a dry run
  does not wait for);
* the instructions it used and whether it hit the instruction limit (``MessageUsage``);
* the calls it would make (requests it put into its output queues);
* the paths of the full state tree it would change: ``full_tree`` (the original state's) and
  the copy's, built from scratch, diffed (``state_manager.tree_diff``). These include the
  call's own ingress status, as a real call's would.

The message id is derived from the call and the state's height, so the same call on the same
state reports the same paths in every process (docs/architecture.md, *Forks and dry runs*).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from message_routing.limits import Limits
from replica.ic.textual_ids import canister_text
from state_manager.ingress_history import IngressState
from state_manager.labeled_trie import LabeledTrie
from state_manager.messages import Ingress, MANAGEMENT_CANISTER_ID, Request
from state_manager.replicated_state import ReplicatedState
from state_manager.state_codec import decode_state, encode_state
from state_manager.state_tree import build_state_trees
from state_manager.tree_diff import diff_tries

from .message_execution import MessageUsage, execute_ingress

__all__ = ["OutgoingCall", "DryRunResult", "dry_run", "MAX_CHANGED_PATHS"]

#: Changed paths a dry run lists (the rest are counted).
MAX_CHANGED_PATHS = 256
_ID_DOMAIN = b"\x0freplica-dry-run"


@dataclass(frozen=True)
class OutgoingCall:
    receiver: int
    method: str
    payload: bytes
    #: Bounded-wait deadline in seconds (0: a guaranteed-response call).
    deadline: int


@dataclass(frozen=True)
class DryRunResult:
    height: int
    status: str                   # "replied", "rejected" or "waiting"
    reply: bytes | None
    reject_code: str | None
    reject_message: str | None
    instructions: int
    limit_exceeded: bool
    calls: tuple[OutgoingCall, ...]
    changed_paths: tuple[str, ...]
    more_paths: int


def _message_id(height: int, canister_id: int, method: str, payload: bytes, caller: bytes) -> bytes:
    parts = (height.to_bytes(8, "big"), canister_id.to_bytes(8, "big"), method.encode(), payload, caller)
    return hashlib.sha256(_ID_DOMAIN + b"".join(len(p).to_bytes(4, "big") + p for p in parts)).digest()


def _queued_requests(state: ReplicatedState, canister_id: int) -> dict[int, int]:
    """``{receiver: next output index}`` of the canister's output queues."""
    canister = state.canisters.get(canister_id)
    if canister is None:
        return {}
    return {remote: queue.next_index for remote, queue in canister.queues.output_queues.items()}


def dry_run(environment, state: ReplicatedState, full_tree: LabeledTrie, canister_id: int, method: str,
            payload: bytes, caller: bytes, limits: Limits) -> DryRunResult:
    """Execute the call on a copy of ``state`` (module docstring); ``state`` is not changed."""
    height = state.metadata.batch_number
    copy = decode_state(encode_state(state))
    canister = copy.canisters.get(canister_id)
    if canister_id == MANAGEMENT_CANISTER_ID or canister is None:
        what = ("the management canister" if canister_id == MANAGEMENT_CANISTER_ID
                else f"no canister {canister_text(canister_id)}")
        return DryRunResult(height, "rejected", None, "DESTINATION_INVALID",
                            f"a dry run executes a canister's update method; {what} is on this subnet",
                            0, False, (), (), 0)
    before = _queued_requests(copy, canister_id)
    message_id = _message_id(height, canister_id, method, payload, caller)
    ingress = Ingress(caller, canister_id, method, payload, message_id,
                      state.metadata.batch_time + limits.max_ingress_ttl_ns)
    usage = MessageUsage("update")
    execute_ingress(copy, canister, environment.resolve(canister), ingress, limits, usage)
    calls = []
    for remote, queue in canister.queues.output_queues.items():
        first = before.get(remote, queue.begin)
        for position, message in enumerate(queue.elements):
            if queue.begin + position >= first and type(message) is Request and message.sender == canister_id:
                calls.append(OutgoingCall(message.receiver, message.method_name, message.method_payload,
                                          message.deadline))
    status = copy.ingress_history.get(message_id)
    if status is not None and status.state is IngressState.REPLIED:
        answer: tuple = ("replied", status.reply, None, None)
    elif status is not None and status.state is IngressState.REJECTED:
        code = status.reject_code.name if status.reject_code is not None else ""
        answer = ("rejected", None, code, status.reject_message or "")
    else:
        answer = ("waiting", None, None, None)
    diff = diff_tries(full_tree, build_state_trees(copy).full, MAX_CHANGED_PATHS)
    return DryRunResult(height, *answer, usage.instructions, usage.limit_exceeded, tuple(calls),
                        tuple(d.text for d in diff.paths), diff.more)
