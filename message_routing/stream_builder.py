"""XNet routing (the spec's stream builder): output queues → per-subnet streams.

Canisters are visited in id order starting at a position that rotates with the batch number
(so no canister is always first when streams are near their limits); each canister's output
queues in receiver order. Per-pair order holds because a queue is only ever drained from its
front, and a message that does not fit its stream holds back the rest of its queue.
"""

from __future__ import annotations

from state_manager.messages import RejectCode, Request
from state_manager.replicated_state import ReplicatedState

from .limits import Limits
from .stream_handler import generate_reject_response, route_response

__all__ = ["build_streams"]


def build_streams(state: ReplicatedState, limits: Limits) -> ReplicatedState:
    """Move messages from output queues into streams, within the stream limits.

    * receiver in no subnet's range: a request gets a ``DESTINATION_INVALID`` reject, a
      response is dropped and counted;
    * request payload over ``max_inter_canister_payload_bytes``: ``CANISTER_ERROR`` reject;
    * stream to the receiver's subnet at its message or byte limit: the message and the rest
      of its queue wait for a later round.
    """
    canister_ids = [cid for cid, canister in state.canisters.items() if canister.queues.output_queues]
    if not canister_ids:
        return state
    lookup = state.routing_table.lookup
    max_messages = limits.max_stream_messages
    max_bytes = limits.max_stream_bytes
    max_payload = limits.max_inter_canister_payload_bytes
    streams = state.streams
    start = state.metadata.batch_number % len(canister_ids)
    for canister_id in canister_ids[start:] + canister_ids[:start]:
        queues = state.canisters[canister_id].queues
        for remote in list(queues.output_queues.keys()):
            queue = queues.output_queues[remote]
            destination = lookup(remote)
            elements = queue.elements
            while elements:
                message = elements[0]
                if destination is None:
                    queues.pop_output(remote)
                    if type(message) is Request:
                        state.metadata.count("synthetic_rejects")
                        route_response(state, generate_reject_response(
                            message, RejectCode.DESTINATION_INVALID, f"Canister {remote} not found in the routing table"))
                    else:
                        state.metadata.count("dropped_responses_unroutable")
                    continue
                size = message.count_bytes()
                if type(message) is Request and size > max_payload:
                    queues.pop_output(remote)
                    state.metadata.count("synthetic_rejects")
                    route_response(state, generate_reject_response(
                        message, RejectCode.CANISTER_ERROR,
                        f"Request of {size} bytes exceeds the limit of {max_payload} bytes"))
                    continue
                stream = streams.get(destination)
                if stream is None:
                    stream = state.stream_to(destination)
                if stream.messages and (len(stream.messages) >= max_messages or stream.byte_size + size > max_bytes):
                    break  # an empty stream takes any one message, so a big one cannot stall
                queues.pop_output(remote)
                stream.messages.append(message)
                stream.byte_size += size
    return state
