"""Induction of stream slices, rule by rule, on hand-built states (whole-state comparisons)."""

from __future__ import annotations

import copy

from message_routing.limits import DEFAULT, MINIMAL
from message_routing.stream_handler import induct_loopback_stream, process_stream_slice
from state_manager.canister_state import CanisterStatus
from state_manager.messages import RejectCode
from state_manager.streams import RejectReason, RejectSignal, Stream, StreamHeader, StreamSlice
from tests.builders import A, B, C, reject, reply, request, state


def slice_of(messages, begin=0, signals_end=0, reject_signals=(), header_begin=None):
    messages = tuple(messages)
    header = StreamHeader(begin if header_begin is None else header_begin, begin + len(messages), signals_end, tuple(reject_signals))
    return StreamSlice(header, begin, messages)


def test_requests_are_inducted_with_accept_signals_and_reserved_response_slots():
    s = state(A, canisters=[1, 2])
    expected = copy.deepcopy(s)
    r1, r2 = request(100, 1, callback=7), request(100, 2, callback=8)

    process_stream_slice(s, B, slice_of([r1, r2]), DEFAULT)

    for canister, req in ((1, r1), (2, r2)):
        queues = expected.canisters[canister].queues
        queues.push_input_request(req, DEFAULT.queue_capacity)
    expected.streams[B] = Stream(begin=0, signals_end=2)
    expected.metadata.counters["xnet_messages_inducted"] = 2
    assert s == expected
    assert s.canisters[1].queues.output_queues[100].reserved_slots == 1


def test_signals_garbage_collect_messages_and_rejected_requests_become_synthetic_rejects():
    s = state(A, canisters=[1])
    sent = [request(1, 100, callback=i) for i in range(3)]
    for req in sent:
        s.canisters[1].queues.push_output_request(req, DEFAULT.queue_capacity)
        s.canisters[1].queues.pop_output(100)
    s.streams[B] = Stream(begin=5, messages=sent)
    expected = copy.deepcopy(s)

    # B accepted index 5, rejected 6 (queue full); 7 is not yet acknowledged.
    process_stream_slice(s, B, slice_of([], signals_end=7, reject_signals=[RejectSignal(6, RejectReason.QUEUE_FULL)]), DEFAULT)

    expected.streams[B] = Stream(begin=7, messages=sent[2:])
    expected.canisters[1].queues.push_input_response(
        reject(1, 100, 1, RejectCode.SYS_TRANSIENT, "Canister 100 input queue is full"))
    expected.metadata.counters["synthetic_rejects"] = 1
    assert s == expected


def test_reject_codes_follow_the_reason_mapping():
    for reason, code in [
        (RejectReason.CANISTER_NOT_FOUND, RejectCode.DESTINATION_INVALID),
        (RejectReason.CANISTER_STOPPED, RejectCode.CANISTER_ERROR),
        (RejectReason.CANISTER_MIGRATING, RejectCode.SYS_TRANSIENT),
        (RejectReason.UNKNOWN, RejectCode.SYS_FATAL),
    ]:
        s = state(A, canisters=[1])
        s.canisters[1].queues.push_output_request(request(1, 100), DEFAULT.queue_capacity)
        s.streams[B] = Stream(messages=[s.canisters[1].queues.pop_output(100)])
        process_stream_slice(s, B, slice_of([], signals_end=1, reject_signals=[RejectSignal(0, reason)]), DEFAULT)
        response = s.canisters[1].queues.input_queues[100].elements[0]
        assert response.response_payload.code is code


def test_peer_begin_garbage_collects_our_reject_signals():
    s = state(A)
    s.streams[B] = Stream(signals_end=6, reject_signals=[RejectSignal(3, RejectReason.QUEUE_FULL), RejectSignal(5, RejectReason.QUEUE_FULL)])
    expected = copy.deepcopy(s)
    process_stream_slice(s, B, slice_of([], begin=6, header_begin=4), DEFAULT)
    expected.streams[B] = Stream(signals_end=6, reject_signals=[RejectSignal(5, RejectReason.QUEUE_FULL)])
    assert s == expected


def test_message_from_a_subnet_that_does_not_host_its_sender_is_dropped_and_counted():
    s = state(A, canisters=[1])
    expected = copy.deepcopy(s)
    process_stream_slice(s, C, slice_of([request(150, 1)]), DEFAULT)  # 150 lives on B, not C
    expected.streams[C] = Stream(signals_end=1)
    expected.metadata.counters["dropped_invalid_sender"] = 1
    assert s == expected


def test_sender_on_a_migration_trace_is_authentic():
    from state_manager.routing_table import CanisterIdRange
    s = state(A, canisters=[1], migrations=[(CanisterIdRange(150, 150), (C, B))])
    process_stream_slice(s, C, slice_of([request(150, 1)]), DEFAULT)
    assert s.metadata.counters["dropped_invalid_sender"] == 0
    assert len(s.canisters[1].queues.input_queues[150]) == 1


def test_destination_checks_produce_reject_signals():
    s = state(A, canisters=[1, 2, 3, 4])
    s.canisters[2].status = CanisterStatus.STOPPED
    s.canisters[3].status = CanisterStatus.STOPPING
    for i in range(MINIMAL.queue_capacity):  # canister 4's queue from 100 is full
        s.canisters[4].queues.push_input_request(request(100, 4, callback=100 + i), MINIMAL.queue_capacity)
        s.canisters[4].queues.pop_input(100)  # keep only the reservations: still full
    expected = copy.deepcopy(s)
    messages = [request(100, 50), request(100, 150), request(100, 2), request(100, 3), request(100, 4), request(100, 1)]
    process_stream_slice(s, B, slice_of(messages), MINIMAL)

    expected.streams[B] = Stream(signals_end=6, reject_signals=[
        RejectSignal(0, RejectReason.CANISTER_NOT_FOUND),
        RejectSignal(1, RejectReason.CANISTER_MIGRATING),
        RejectSignal(2, RejectReason.CANISTER_STOPPED),
        RejectSignal(3, RejectReason.CANISTER_STOPPING),
        RejectSignal(4, RejectReason.QUEUE_FULL),
    ])
    expected.canisters[1].queues.push_input_request(messages[5], MINIMAL.queue_capacity)
    expected.metadata.counters["xnet_messages_inducted"] = 1
    expected.metadata.counters["reject_signals_sent"] = 5
    assert s == expected


def test_responses_are_accepted_even_when_the_queue_is_otherwise_full():
    s = state(A, canisters=[1])
    queues = s.canisters[1].queues
    for i in range(MINIMAL.queue_capacity):
        queues.push_output_request(request(1, 100, callback=i), MINIMAL.queue_capacity)
    assert not queues.can_push_input_request(100, MINIMAL.queue_capacity)
    process_stream_slice(s, B, slice_of([reply(1, 100, callback=0)]), MINIMAL)
    assert s.streams[B] == Stream(signals_end=1)
    assert list(queues.input_queues[100].elements) == [reply(1, 100, callback=0)]
    assert queues.input_queues[100].reserved_slots == MINIMAL.queue_capacity - 1


def test_a_rejected_response_is_rerouted_not_dropped():
    # Our canister 1 answered canister 150, which has since moved from B to C.
    s = state(A, canisters=[1], ranges={A: (0, 99), B: (100, 149), C: (150, 299)})
    response = reply(150, 1, callback=3)
    s.streams[B] = Stream(messages=[response])
    process_stream_slice(s, B, slice_of([], signals_end=1, reject_signals=[RejectSignal(0, RejectReason.CANISTER_MIGRATING)]), DEFAULT)
    assert s.streams[B] == Stream(begin=1)
    assert s.streams[C] == Stream(messages=[response])


def test_a_slice_with_a_gap_is_not_inducted():
    s = state(A, canisters=[1])
    expected = copy.deepcopy(s)
    process_stream_slice(s, B, slice_of([request(100, 1)], begin=3), DEFAULT)
    expected.streams[B] = Stream()
    expected.metadata.counters["critical_errors"] = 1
    assert s == expected


def test_signals_for_messages_never_sent_are_ignored_and_counted():
    s = state(A, canisters=[1])
    s.streams[B] = Stream(begin=0, messages=[request(1, 100)])
    expected = copy.deepcopy(s)
    process_stream_slice(s, B, slice_of([], signals_end=5), DEFAULT)
    expected.metadata.counters["critical_errors"] = 1
    assert s == expected


def test_loopback_stream_is_inducted_and_emptied_with_synthetic_rejects_in_place():
    s = state(A, canisters=[1, 2])
    q1 = s.canisters[1].queues
    ok, missing = request(1, 2, callback=0), request(1, 42, callback=1)
    for req in (ok, missing):
        q1.push_output_request(req, DEFAULT.queue_capacity)
        q1.pop_output(req.receiver)
    s.streams[A] = Stream(begin=10, messages=[ok, missing], signals_end=10)
    expected = copy.deepcopy(s)

    induct_loopback_stream(s, DEFAULT)

    expected.streams[A] = Stream(begin=12, signals_end=12)
    expected.canisters[2].queues.push_input_request(ok, DEFAULT.queue_capacity)
    expected.canisters[1].queues.push_input_response(
        reject(1, 42, 1, RejectCode.DESTINATION_INVALID, "Canister 42 not found"))
    expected.metadata.counters["xnet_messages_inducted"] = 1
    expected.metadata.counters["synthetic_rejects"] = 1
    assert s == expected


def test_a_request_rejected_as_migrating_is_rerouted_to_where_the_receiver_lives_now():
    # Our canister 1 called 150, which B hosted; 150 has moved to C (our routing table says so).
    s = state(A, canisters=[1], ranges={A: (0, 99), B: (100, 149), C: (150, 299)})
    call = request(1, 150, callback=4)
    s.canisters[1].queues.push_output_request(call, DEFAULT.queue_capacity)
    s.streams[B] = Stream(messages=[s.canisters[1].queues.pop_output(150)])
    expected = copy.deepcopy(s)
    process_stream_slice(s, B, slice_of([], signals_end=1, reject_signals=[RejectSignal(0, RejectReason.CANISTER_MIGRATING)]), DEFAULT)
    expected.streams[B] = Stream(begin=1)
    expected.streams[C] = Stream(messages=[call])   # no synthetic reject: the call goes on to C
    assert s == expected


def test_a_request_rejected_as_migrating_by_the_subnet_we_still_route_to_gets_a_synthetic_reject():
    # Our routing table is not newer than B's: we cannot know where 150 went, so the caller hears.
    s = state(A, canisters=[1])
    s.canisters[1].queues.push_output_request(request(1, 150, callback=4), DEFAULT.queue_capacity)
    s.streams[B] = Stream(messages=[s.canisters[1].queues.pop_output(150)])
    process_stream_slice(s, B, slice_of([], signals_end=1, reject_signals=[RejectSignal(0, RejectReason.CANISTER_MIGRATING)]), DEFAULT)
    assert s.streams[B] == Stream(begin=1) and C not in s.streams
    assert s.canisters[1].queues.input_queues[150].elements[0] == reject(
        1, 150, 4, RejectCode.SYS_TRANSIENT, "Canister 150 is migrating")


def test_a_request_for_a_stopped_copy_that_moved_away_is_rejected_as_migrating():
    # Canister 50 moved from A to C; A still holds its stopped copy until it is deleted.
    s = state(A, canisters=[1, 50], ranges={A: (0, 49), C: (50, 50), B: (100, 199)})
    s.canisters[50].status = CanisterStatus.STOPPED
    process_stream_slice(s, B, slice_of([request(100, 50), request(100, 1)]), DEFAULT)
    assert s.streams[B] == Stream(signals_end=2, reject_signals=[RejectSignal(0, RejectReason.CANISTER_MIGRATING)])
    assert 100 not in s.canisters[50].queues.input_queues


def test_a_loopback_request_for_a_canister_that_moved_away_follows_it():
    s = state(A, canisters=[1, 50], ranges={A: (0, 49), C: (50, 50), B: (100, 199)})
    call = request(1, 50, callback=2)
    s.stream_to(A).push(call)
    induct_loopback_stream(s, DEFAULT)
    assert s.streams[C] == Stream(messages=[call])
    assert 1 not in s.canisters[50].queues.input_queues and s.metadata.counters["synthetic_rejects"] == 0
