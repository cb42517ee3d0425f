"""The subnet-wide byte budget of bounded-wait messages, and shedding when it is exceeded.

Bounded-wait messages take no response-slot reservation (``state_manager.queues``); instead
the bytes of all of them in canister queues share one budget,
``Limits.bounded_wait_message_memory_capacity``. Rejects waiting in input queues do not count:
each is the one answer of an outstanding callback (capped at ``MAX_REJECT_MESSAGE_BYTES``),
like the IC's compact references to expired or shed responses, so they are bounded by the
callbacks, and the answers shedding creates never refill the budget it frees. When
``bounded_wait_message_memory_usage(state) > capacity``, ``enforce_bounded_wait_message_limit``
sheds the largest first (ties: lowest canister id, output before input, lowest remote id,
lowest position — so every replica sheds the same ones) until the usage fits:

* a request in an output queue: its caller gets ``SYS_TRANSIENT "request shed"`` at once;
* a request in an input queue: dropped; its caller's callback expires (``SYS_UNKNOWN``);
* a response in an output queue: dropped; the caller's callback expires (``SYS_UNKNOWN``);
* a reply in an input queue: replaced in place by ``SYS_UNKNOWN "response shed"``, so the
  callback still gets exactly one response.

Rejects waiting in input queues (the answers this creates among them) are never shed, so
every call still resolves exactly once, and shedding always ends. Streams are never shed
from: their messages are certified and numbered.
Guaranteed-response messages neither count nor get shed.
"""

from __future__ import annotations

from state_manager.messages import Reject, RejectCode, Request, RequestOrResponse, Response
from state_manager.replicated_state import ReplicatedState

from .limits import Limits
from .timeouts import timed_out_response

__all__ = ["REQUEST_SHED", "RESPONSE_SHED", "is_budgeted", "bounded_wait_message_memory_usage", "enforce_bounded_wait_message_limit"]

REQUEST_SHED = "request shed: the subnet's bounded-wait message memory is full"
RESPONSE_SHED = "response shed: the subnet's bounded-wait message memory is full"

# Candidate: (-bytes, canister id, 0 = output / 1 = input, remote, position).
_Candidate = tuple[int, int, int, int, int]


def is_budgeted(message: RequestOrResponse, inbound: bool) -> bool:
    """``m.deadline ≠ 0 ∧ ¬(inbound ∧ m is a reject)``: the messages the budget counts and
    shedding may take (module docstring)."""
    if not message.deadline:
        return False
    return not (inbound and type(message) is Response and type(message.response_payload) is Reject)


def bounded_wait_message_memory_usage(state: ReplicatedState) -> int:
    """``Σ count_bytes(m)`` over the messages ``m`` in canister queues with ``is_budgeted(m)``."""
    total = 0
    for canister in state.canisters.values():
        queues = canister.queues
        for inbound, queue_map in ((False, queues.output_queues), (True, queues.input_queues)):
            for queue in queue_map.unordered_values():  # a sum: order does not matter
                for message in queue.elements:
                    # is_budgeted, inlined: this runs over every queued message twice a round
                    if message.deadline and is_budgeted(message, inbound):
                        total += message.count_bytes()
    return total


def _candidates(state: ReplicatedState) -> list[_Candidate]:
    out = []
    for canister_id, canister in state.canisters.items():
        queues = canister.queues
        for side, queue_map in ((0, queues.output_queues), (1, queues.input_queues)):
            for remote, queue in queue_map.items():
                for position, message in enumerate(queue.elements):
                    if is_budgeted(message, side == 1):
                        out.append((-message.count_bytes(), canister_id, side, remote, position))
    out.sort()
    return out


def enforce_bounded_wait_message_limit(state: ReplicatedState, limits: Limits) -> int:
    """Shed as the module docstring says until the usage fits the capacity (or nothing is
    left to shed); return how many messages were shed."""
    capacity = limits.bounded_wait_message_memory_capacity
    usage = bounded_wait_message_memory_usage(state)
    if usage <= capacity:
        return 0
    shed: dict[tuple[int, int, int], list[int]] = {}
    answers: list[tuple[int, Response]] = []   # local rejects for shed outbound requests
    replaced: list[tuple[int, int, int, Response]] = []
    for negative_size, canister_id, side, remote, position in _candidates(state):
        if usage <= capacity:
            break
        queues = state.canisters[canister_id].queues
        message = (queues.output_queues if side == 0 else queues.input_queues)[remote].elements[position]
        usage += negative_size
        state.metadata.count("bounded_wait_messages_shed")
        state.metadata.count("bounded_wait_bytes_shed", -negative_size)
        if side == 1 and type(message) is Response:  # a reply (rejects are no candidates)
            unknown = Response(message.originator, message.respondent, message.originator_reply_callback,
                               Reject(RejectCode.SYS_UNKNOWN, RESPONSE_SHED), message.deadline)
            replaced.append((canister_id, remote, position, unknown))
            continue
        shed.setdefault((canister_id, side, remote), []).append(position)
        if side == 0 and type(message) is Request:
            answers.append((canister_id, timed_out_response(message, RejectCode.SYS_TRANSIENT, REQUEST_SHED)))
    # Apply after choosing, so positions stay valid while choosing.
    for canister_id, remote, position, unknown in replaced:
        queues = state.canisters[canister_id].queues
        queues.dirty = True
        queues.input_queues[remote].replace_at(position, unknown)
    for (canister_id, side, remote), positions in sorted(shed.items()):
        queues = state.canisters[canister_id].queues
        queue_map = queues.output_queues if side == 0 else queues.input_queues
        queues.dirty = True
        queue_map[remote].remove_where(sorted(positions))
        queues.drop_idle_queue(queue_map, remote)
    for canister_id, answer in answers:
        state.canisters[canister_id].queues.push_input_response(answer)
    return sum(len(p) for p in shed.values()) + len(replaced)
