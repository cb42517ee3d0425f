"""XNet routing: output queues into streams, with limits and synthetic rejects."""

from __future__ import annotations

import copy

from message_routing.limits import DEFAULT, MINIMAL
from message_routing.stream_builder import build_streams
from state_manager.messages import RejectCode
from state_manager.streams import Stream
from tests.builders import A, B, C, reject, reply, request, state


def queued(s, *requests, limits=DEFAULT):
    for req in requests:
        s.canisters[req.sender].queues.push_output_request(req, limits.queue_capacity)


def test_messages_go_to_the_stream_of_the_receivers_subnet_in_queue_order():
    s = state(A, canisters=[1, 2])
    r = [request(1, 100, 0), request(1, 100, 1), request(1, 200, 2), request(2, 1, 0)]
    queued(s, *r)
    expected = copy.deepcopy(s)
    build_streams(s, DEFAULT)
    for req in r:
        expected.canisters[req.sender].queues.pop_output(req.receiver)
    expected.streams[A] = Stream(messages=[r[3]])
    expected.streams[B] = Stream(messages=[r[0], r[1]])
    expected.streams[C] = Stream(messages=[r[2]])
    assert s == expected


def test_responses_are_routed_too():
    s = state(A, canisters=[1])
    s.canisters[1].queues.push_input_request(request(100, 1, 5), DEFAULT.queue_capacity)
    s.canisters[1].queues.pop_input(100)
    s.canisters[1].queues.push_output_response(reply(100, 1, 5))
    build_streams(s, DEFAULT)
    assert s.streams[B] == Stream(messages=[reply(100, 1, 5)])
    assert not s.canisters[1].queues.output_queues


def test_stream_limits_hold_messages_back_in_order():
    s = state(A, canisters=[1])
    r = [request(1, 100, i) for i in range(MINIMAL.queue_capacity)]
    queued(s, *r, limits=MINIMAL)
    build_streams(s, MINIMAL)
    assert list(s.streams[B].messages) == r[: MINIMAL.max_stream_messages]
    assert list(s.canisters[1].queues.output_queues[100].elements) == r[MINIMAL.max_stream_messages:]


def test_byte_limit_holds_back_but_an_empty_stream_takes_one_big_message():
    s = state(A, canisters=[1])
    big = request(1, 100, 0, payload=bytes(150))
    queued(s, big, request(1, 100, 1, payload=bytes(150)))
    limits = MINIMAL.with_(max_stream_bytes=100)
    build_streams(s, limits)
    assert list(s.streams[B].messages) == [big]
    assert len(s.canisters[1].queues.output_queues[100]) == 1


def test_unknown_destination_gets_destination_invalid_reject():
    s = state(A, canisters=[1])
    req = request(1, 5000, 9)
    queued(s, req)
    expected = copy.deepcopy(s)
    build_streams(s, DEFAULT)
    expected.canisters[1].queues.pop_output(5000)
    expected.canisters[1].queues.push_input_response(
        reject(1, 5000, 9, RejectCode.DESTINATION_INVALID, "Canister 5000 not found in the routing table"))
    expected.metadata.counters["synthetic_rejects"] = 1
    assert s == expected


def test_oversized_request_gets_canister_error_reject():
    s = state(A, canisters=[1])
    req = request(1, 100, 3, payload=bytes(DEFAULT.max_inter_canister_payload_bytes))
    queued(s, req)
    build_streams(s, DEFAULT)
    response = s.canisters[1].queues.input_queues[100].elements[0]
    assert response.response_payload.code is RejectCode.CANISTER_ERROR
    assert B not in s.streams


def test_rotation_lets_later_canisters_go_first_on_later_batches():
    s = state(A, canisters=[1, 2])
    queued(s, *[request(1, 100, i) for i in range(3)], *[request(2, 100, i) for i in range(3)], limits=MINIMAL)
    s.metadata.batch_number = 1  # start at the second canister
    build_streams(s, MINIMAL)
    assert [m.sender for m in s.streams[B].messages] == [2, 2, 2]
