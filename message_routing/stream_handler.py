"""Induction of stream slices (the spec's stream handler).

For each slice from subnet X, in subnet order (the loopback stream first):

1. ``garbage_collect_messages``: X's ``signals_end = k`` acknowledges our messages to X below
   ``k``; they leave our stream. A rejected request becomes a synthetic reject response for
   its sender — unless X rejected it because its receiver migrated and the routing table now
   names another subnet, which it is rerouted to; a rejected response is rerouted.
2. ``garbage_collect_signals``: X's ``begin = j`` says X dropped its messages below ``j``, so
   our reject signals for them are no longer needed.
3. ``induct_message`` for each message of the slice, in index order, each producing exactly
   one signal on our stream to X (accept, or reject with a reason).
"""

from __future__ import annotations

from state_manager.canister_state import CanisterStatus
from state_manager.deadlines import is_expired
from state_manager.messages import Reject, RejectCode, Request, Response, SubnetId, truncate_reject_message
from state_manager.replicated_state import ReplicatedState
from state_manager.streams import RejectReason, Stream, StreamSlice, reject_code_for

from .limits import Limits
from .timeouts import is_response_expected

__all__ = [
    "induct_loopback_stream", "process_stream_slice", "induct_message", "garbage_collect_messages",
    "garbage_collect_signals", "generate_reject_response", "reject_rejected_message", "reroute_request",
    "route_response",
]

_REJECT_MESSAGES = {
    RejectReason.CANISTER_MIGRATING: "Canister {0} is migrating",
    RejectReason.CANISTER_NOT_FOUND: "Canister {0} not found",
    RejectReason.CANISTER_STOPPED: "Canister {0} is stopped",
    RejectReason.CANISTER_STOPPING: "Canister {0} is stopping",
    RejectReason.QUEUE_FULL: "Canister {0} input queue is full",
    RejectReason.OUT_OF_MEMORY: "Canister {0} is out of memory",
    RejectReason.UNKNOWN: "Message to canister {0} was rejected",
}


def generate_reject_response(request: Request, code: RejectCode, message: str) -> Response:
    """``Response{originator: sender, respondent: receiver, callback, Reject(code, msg), deadline}``
    — the synthetic reject of a request that cannot be delivered (``msg`` truncated to its
    limit; the request's deadline kept, so a bounded-wait call's reject is bounded-wait too)."""
    return Response(
        originator=request.sender,
        respondent=request.receiver,
        originator_reply_callback=request.sender_reply_callback,
        response_payload=Reject(code, truncate_reject_message(message)),
        deadline=request.deadline,
    )


def reject_rejected_message(state: ReplicatedState, message: Request | Response, reason: RejectReason,
                            rejected_by: SubnetId) -> None:
    """A message the subnet ``rejected_by`` rejected with ``reason``: a request is rerouted if
    it was rejected as migrating and the routing table now maps its receiver elsewhere
    (``reroute_request``), else answered with a synthetic reject (``reject_code_for(reason)``);
    a response is rerouted — never dropped."""
    if type(message) is Request:
        if reason is RejectReason.CANISTER_MIGRATING and reroute_request(state, message, rejected_by):
            return
        state.metadata.count("synthetic_rejects")
        route_response(state, generate_reject_response(
            message, reject_code_for(reason), _REJECT_MESSAGES[reason].format(message.receiver)))
    else:
        route_response(state, message)


def reroute_request(state: ReplicatedState, request: Request, rejected_by: SubnetId) -> bool:
    """``route(receiver) ∉ {⊥, rejected_by}`` ⇒ push the request onto the stream to
    ``route(receiver)`` (the loopback stream if that is us) and return True: the receiver
    moved, and the subnet that rejected it is no longer where it lives. Otherwise False (our
    routing table is not newer than the rejecting subnet's: the sender gets a reject)."""
    destination = state.routing_table.lookup(request.receiver)
    if destination is None or destination == rejected_by:
        return False
    state.stream_to(destination).push(request)
    return True


def route_response(state: ReplicatedState, response: Response) -> None:
    """Deliver a (synthetic or rerouted) response to its originator, wherever it lives now.

    A local originator gets it in its input queue (its reserved slot); a remote one through
    our stream to its subnet. Responses are never silently lost: an unroutable one is counted.
    A bounded-wait response its callback no longer waits for (``is_response_expected``) is
    late and dropped, counted.
    """
    own = state.own_subnet_id
    canister = state.canisters.get(response.originator)
    if canister is not None:
        if not is_response_expected(canister, response):
            state.metadata.count("bounded_wait_late_responses_dropped")
            return
        canister.queues.push_input_response(response)
        return
    destination = state.routing_table.lookup(response.originator)
    if destination is None or destination == own:
        state.metadata.count("dropped_responses_unroutable")
        return
    state.stream_to(destination).push(response)


def garbage_collect_messages(state: ReplicatedState, remote: SubnetId, stream_slice: StreamSlice) -> None:
    """Drop our messages to ``remote`` below its ``signals_end``; act on its reject signals."""
    stream = state.streams.get(remote)
    header = stream_slice.header
    if stream is None:
        if header.signals_end != 0:
            state.metadata.count("critical_errors")
        return
    if not stream.begin <= header.signals_end <= stream.end:
        # Validation rules this out; never act on a signal for a message we did not send.
        state.metadata.count("critical_errors")
        return
    rejected = {s.index: s.reason for s in header.reject_signals if stream.begin <= s.index < header.signals_end}
    for index, message in stream.discard_messages_before(header.signals_end):
        reason = rejected.get(index)
        if reason is not None:
            reject_rejected_message(state, message, reason, remote)


def garbage_collect_signals(state: ReplicatedState, remote: SubnetId, stream_slice: StreamSlice) -> None:
    """Drop our reject signals for ``remote``'s messages below its stream's ``begin``."""
    stream = state.streams.get(remote)
    if stream is not None:
        stream.discard_signals_before(stream_slice.header.begin)


def induct_message(
    state: ReplicatedState, remote: SubnetId, message: Request | Response, limits: Limits
) -> RejectReason | None:
    """Induct one message received from ``remote``; return the reject reason, if any.

    Authenticity: the sender must be hosted by ``remote`` (or ``remote`` be on its migration
    trace); otherwise the message is dropped and counted (the signal is still an accept, so
    the stream advances). Responses are always accepted by an existing originator, except a
    late or duplicate bounded-wait one (``timeouts.is_response_expected``), which is dropped
    with an accept signal. A bounded-wait request whose deadline has passed is dropped the
    same way (its caller gets ``SYS_UNKNOWN`` from its own callback's expiry), and one that
    is not needs room in the receiver's input queue only (no reservation).
    """
    metadata = state.metadata
    topology = metadata.network_topology
    routing_table = topology.routing_table
    is_request = type(message) is Request
    sender = message.sender if is_request else message.respondent
    if routing_table.lookup(sender) != remote and remote not in topology.canister_migrations.trace(sender):
        metadata.count("dropped_invalid_sender")
        return None
    receiver = message.receiver if is_request else message.originator
    canister = state.canisters.get(receiver)
    if is_request and canister is not None and routing_table.lookup(receiver) != metadata.own_subnet_id:
        # A canister that moved away leaves a stopped copy until it is deleted; a request
        # for it belongs to the subnet the routing table names now.
        return RejectReason.CANISTER_MIGRATING
    if canister is None:
        if routing_table.lookup(receiver) == metadata.own_subnet_id:
            if is_request:
                return RejectReason.CANISTER_NOT_FOUND
            metadata.count("dropped_responses_without_callback")
            return None
        return RejectReason.CANISTER_MIGRATING
    queues = canister.queues
    if not is_request:
        if not is_response_expected(canister, message):
            metadata.count("bounded_wait_late_responses_dropped")
            return None
        queues.push_input_response(message)
        metadata.counters["xnet_messages_inducted"] += 1
        return None
    status = canister.status
    if status is not CanisterStatus.RUNNING:
        return RejectReason.CANISTER_STOPPED if status is CanisterStatus.STOPPED else RejectReason.CANISTER_STOPPING
    if message.deadline:
        if is_expired(message.deadline, metadata.batch_time):
            metadata.count("bounded_wait_messages_expired")
            return None
        if not queues.can_push_bounded_wait_request(queues.input_queues, sender, limits.queue_capacity):
            return RejectReason.QUEUE_FULL
    elif not queues.can_push_input_request(sender, limits.queue_capacity):
        return RejectReason.QUEUE_FULL
    queues.push_input_request(message, limits.queue_capacity)
    metadata.counters["xnet_messages_inducted"] += 1
    return None


def _induct_messages(state: ReplicatedState, remote: SubnetId, stream: Stream, stream_slice: StreamSlice, limits: Limits) -> None:
    index = stream_slice.messages_begin
    messages = stream_slice.messages
    if messages and index != stream.signals_end:
        # A gap or an overlap: validation rules it out; inducting would break exactly-once.
        state.metadata.count("critical_errors")
        return
    for message in messages:
        reason = induct_message(state, remote, message, limits)
        if reason is None:
            stream.signals_end += 1
        else:
            stream.push_reject_signal(reason)
            state.metadata.counters["reject_signals_sent"] += 1


def process_stream_slice(state: ReplicatedState, remote: SubnetId, stream_slice: StreamSlice, limits: Limits) -> None:
    """GC our messages and signals per the slice's header, then induct its messages."""
    garbage_collect_messages(state, remote, stream_slice)
    garbage_collect_signals(state, remote, stream_slice)
    if stream_slice.messages:
        _induct_messages(state, remote, state.stream_to(remote), stream_slice, limits)


def induct_loopback_stream(state: ReplicatedState, limits: Limits) -> None:
    """Induct every message of our stream to ourselves, then garbage-collect it at once.

    The loopback stream is never certified or served; its signals are applied in place, so a
    rejected request becomes a synthetic reject right away and a rejected response is rerouted.
    """
    own = state.own_subnet_id
    stream = state.streams.get(own)
    if stream is None or not stream.messages:
        return
    for index, message in stream.discard_messages_before(stream.end):
        reason = induct_message(state, own, message, limits)
        if reason is not None:
            reject_rejected_message(state, message, reason, own)
    stream.signals_end = stream.end
