"""Bounded-wait calls in message routing, rule by rule, on hand-built states (issue 17):
time-outs, late and duplicate responses at induction, no reservations, shedding."""

from __future__ import annotations

import copy

import pytest

from message_routing.limits import DEFAULT
from message_routing.shedding import (
    REQUEST_SHED, RESPONSE_SHED, bounded_wait_message_memory_usage, enforce_bounded_wait_message_limit,
)
from message_routing.stream_handler import process_stream_slice
from message_routing.timeouts import DEADLINE_EXPIRED, REQUEST_TIMED_OUT, time_out_callbacks, time_out_messages
from state_manager.deadlines import MAX_CALL_TIMEOUT_S, DeadlineError, compute_call_deadline, is_expired
from state_manager.messages import Reject, RejectCode, Reply, Request, Response
from state_manager.streams import Stream, StreamHeader, StreamSlice
from tests.builders import A, B, state

S = 10**9
NOW = 1_000 * S
DEADLINE = 999             # expired at NOW: deadline < ⌊now / 1 s⌋
LATER = 1_010              # not yet


def bw_request(sender, receiver, callback=0, deadline=LATER, payload=b""):
    return Request(sender, receiver, "m", payload, callback, deadline)


def bw_reply(originator, respondent, callback=0, deadline=LATER, data=b"ok"):
    return Response(originator, respondent, callback, Reply(data), deadline)


def at(now=NOW, canisters=(1, 2)):
    s = state(A, canisters=canisters)
    s.metadata.batch_time = now
    return s


def slice_of(messages, begin=0, signals_end=0):
    messages = tuple(messages)
    return StreamSlice(StreamHeader(begin, begin + len(messages), signals_end), begin, messages)


# -- the deadline formulas ---------------------------------------------------------------------

def test_call_deadline_is_whole_seconds_capped_at_the_maximum_timeout():
    assert compute_call_deadline(NOW + S // 2, 10) == 1_010
    assert compute_call_deadline(NOW, 10**6) == 1_000 + MAX_CALL_TIMEOUT_S
    for bad in (0, -1, True, 1.5, "3"):
        with pytest.raises(DeadlineError):
            compute_call_deadline(NOW, bad)


def test_expiry_rule():
    assert is_expired(999, NOW) and not is_expired(1_000, NOW) and not is_expired(1_000, NOW + S - 1)
    assert is_expired(1_000, NOW + S)
    assert not is_expired(0, 10**30)  # guaranteed-response messages never expire


# -- reservations ------------------------------------------------------------------------------

def test_bounded_wait_requests_take_no_response_slot_reservation():
    s = at()
    queues = s.canisters[1].queues
    queues.push_output_request(bw_request(1, 100), DEFAULT.queue_capacity)
    assert 100 not in queues.input_queues  # no reserved slot for the response
    process_stream_slice(s, B, slice_of([bw_request(100, 2)]), DEFAULT)
    assert s.canisters[2].queues.output_queues.get(100) is None
    queues.push_input_response(bw_reply(1, 100))          # takes no slot either
    assert queues.input_queues[100].reserved_slots == 0


def test_a_bounded_wait_response_never_takes_a_guaranteed_calls_slot():
    s = at()
    queues = s.canisters[1].queues
    queues.push_output_request(Request(1, 100, "m", b"", 0), DEFAULT.queue_capacity)
    queues.push_input_response(bw_reply(1, 100, callback=5))
    assert queues.input_queues[100].reserved_slots == 1


# -- time-outs ---------------------------------------------------------------------------------

def test_expired_outbound_request_gets_a_local_sys_transient_reject():
    s = at()
    queues = s.canisters[1].queues
    expired, fresh = bw_request(1, 100, callback=3, deadline=DEADLINE), bw_request(1, 100, callback=4)
    queues.push_output_request(expired, DEFAULT.queue_capacity)
    queues.push_output_request(fresh, DEFAULT.queue_capacity)
    time_out_messages(s)
    assert list(queues.output_queues[100].elements) == [fresh]
    assert list(queues.input_queues[100].elements) == [
        Response(1, 100, 3, Reject(RejectCode.SYS_TRANSIENT, REQUEST_TIMED_OUT), DEADLINE)]
    assert s.metadata.counters["bounded_wait_requests_timed_out"] == 1


def test_expired_inbound_request_is_dropped_before_execution_and_guaranteed_ones_stay():
    s = at()
    queues = s.canisters[2].queues
    guaranteed = Request(100, 2, "m", b"", 1)
    queues.push_input_request(bw_request(100, 2, deadline=DEADLINE), DEFAULT.queue_capacity)
    queues.push_input_request(guaranteed, DEFAULT.queue_capacity)
    time_out_messages(s)
    assert list(queues.input_queues[100].elements) == [guaranteed]
    assert s.metadata.counters["bounded_wait_messages_expired"] == 1


def test_expired_callback_gets_sys_unknown_once_unless_a_response_waits():
    s = at()
    c = s.canisters[1]
    c.new_call_context(None, "m")
    waiting = c.register_callback(0, 100, "r", "j", None, DEADLINE)
    unanswered = c.register_callback(0, 100, "r", "j", None, DEADLINE)
    guaranteed = c.register_callback(0, 100, "r", "j", None)
    c.queues.push_input_response(bw_reply(1, 100, callback=waiting.callback_id, deadline=DEADLINE))
    time_out_callbacks(s)
    time_out_callbacks(s)  # idempotent: the SYS_UNKNOWN now waits for it
    assert list(c.queues.input_queues[100].elements)[1:] == [
        Response(1, 100, unanswered.callback_id, Reject(RejectCode.SYS_UNKNOWN, DEADLINE_EXPIRED), DEADLINE)]
    assert guaranteed.callback_id in c.callbacks
    assert s.metadata.counters["bounded_wait_callbacks_expired"] == 1


# -- induction of responses --------------------------------------------------------------------

def test_late_and_duplicate_responses_are_dropped_at_induction_with_accept_signals():
    s = at(canisters=(1,))
    c = s.canisters[1]
    c.new_call_context(None, "m")
    callback = c.register_callback(0, 100, "r", "j", None, LATER)
    first = bw_reply(1, 100, callback=callback.callback_id)
    duplicate = bw_reply(1, 100, callback=callback.callback_id, data=b"again")
    unknown = bw_reply(1, 100, callback=99)
    process_stream_slice(s, B, slice_of([first, duplicate, unknown]), DEFAULT)
    assert list(c.queues.input_queues[100].elements) == [first]
    assert s.streams[B] == Stream(signals_end=3)  # every one accepted
    assert s.metadata.counters["bounded_wait_late_responses_dropped"] == 2
    assert s.metadata.counters["dropped_responses_without_callback"] == 0


def test_a_response_with_another_deadline_than_its_callback_is_not_its_response():
    s = at(canisters=(1,))
    c = s.canisters[1]
    c.new_call_context(None, "m")
    callback = c.register_callback(0, 100, "r", "j", None, LATER)
    process_stream_slice(s, B, slice_of([bw_reply(1, 100, callback=callback.callback_id, deadline=LATER + 1)]), DEFAULT)
    assert 100 not in c.queues.input_queues


def test_expired_bounded_wait_request_in_a_slice_is_dropped_with_an_accept_signal():
    s = at()
    process_stream_slice(s, B, slice_of([bw_request(100, 2, deadline=DEADLINE)]), DEFAULT)
    assert not s.canisters[2].queues.input_queues
    assert s.streams[B] == Stream(signals_end=1)


def test_guaranteed_responses_are_inducted_as_before():
    s = at(canisters=(1,))
    before = copy.deepcopy(s)
    r = Response(1, 100, 0, Reply(b"ok"))
    process_stream_slice(s, B, slice_of([r]), DEFAULT)
    before.canisters[1].queues.push_input_response(r)
    before.streams[B] = Stream(signals_end=1)
    before.metadata.counters["xnet_messages_inducted"] = 1
    assert s == before


# -- shedding ----------------------------------------------------------------------------------

def test_shedding_takes_the_largest_first_and_every_call_still_gets_one_answer():
    s = at()
    c1, c2 = s.canisters[1].queues, s.canisters[2].queues
    big_out = bw_request(1, 100, callback=1, payload=b"x" * 300)
    big_reply = bw_reply(2, 100, callback=2, data=b"y" * 200)
    big_in = bw_request(100, 1, callback=3, payload=b"z" * 100)
    small = bw_request(1, 101, callback=4, payload=b"s")
    guaranteed = Request(1, 100, "m", b"g" * 1000, 9)
    c1.push_output_request(big_out, 10)
    c1.push_output_request(small, 10)
    c1.push_output_request(guaranteed, 10)
    c2.push_input_response(big_reply)
    c1.push_input_request(big_in, 10)
    usage = bounded_wait_message_memory_usage(s)
    assert usage == sum(m.count_bytes() for m in (big_out, big_reply, big_in, small))
    limits = DEFAULT.with_(bounded_wait_message_memory_capacity=usage - 350)

    shed = enforce_bounded_wait_message_limit(s, limits)

    # big_out (365 bytes) alone frees enough; its answer, a reject waiting in an input queue, does not count.
    assert shed == 1
    assert list(c1.output_queues[100].elements) == [guaranteed]
    assert Response(1, 100, 1, Reject(RejectCode.SYS_TRANSIENT, REQUEST_SHED), LATER) in c1.input_queues[100].elements
    assert big_in in c1.input_queues[100].elements and small in c1.output_queues[101].elements
    assert bounded_wait_message_memory_usage(s) <= limits.bounded_wait_message_memory_capacity
    assert s.metadata.counters["bounded_wait_messages_shed"] == 1

    # Tighter: then the reply (264 bytes) becomes SYS_UNKNOWN in place, then the inbound request.
    shed = enforce_bounded_wait_message_limit(s, limits.with_(bounded_wait_message_memory_capacity=100))
    assert shed == 2
    assert list(c2.input_queues[100].elements) == [
        Response(2, 100, 2, Reject(RejectCode.SYS_UNKNOWN, RESPONSE_SHED), LATER)]
    assert big_in not in c1.input_queues[100].elements and small in c1.output_queues[101].elements
    assert bounded_wait_message_memory_usage(s) == small.count_bytes()


def test_shedding_ends_when_only_answers_remain():
    """Rejects waiting in input queues neither count nor get shed."""
    s = at()
    answer = Response(1, 100, 1, Reject(RejectCode.SYS_UNKNOWN, DEADLINE_EXPIRED), LATER)
    s.canisters[1].queues.push_input_response(answer)
    assert enforce_bounded_wait_message_limit(s, DEFAULT.with_(bounded_wait_message_memory_capacity=0)) == 0
    assert list(s.canisters[1].queues.input_queues[100].elements) == [answer]


def test_shedding_an_inbound_request_drops_it_and_forgets_the_empty_queue():
    s = at()
    s.canisters[2].queues.push_input_request(bw_request(100, 2, payload=b"p" * 50), 10)
    enforce_bounded_wait_message_limit(s, DEFAULT.with_(bounded_wait_message_memory_capacity=0))
    assert not s.canisters[2].queues.input_queues
