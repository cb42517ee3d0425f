"""Outgoing calls: buffering, queue back-pressure (CallError), payload limits, callbacks."""

from __future__ import annotations

import copy
from dataclasses import replace

from message_routing.limits import DEFAULT, MINIMAL
from replica.ic.textual_ids import canister_text
from replica.execution import ExecutionEnvironment, install_canister
from state_manager.canister_state import Callback
from state_manager.ingress_history import IngressState
from state_manager.messages import Reply, RejectCode, Response

from .apps import Probe
from .harness import REMOTE, answer, new_state, reply_value, run, status, submit, take_output

ENV = ExecutionEnvironment([Probe])


def probe_state():
    s = new_state()
    install_canister(s, 1, Probe)
    return s


def test_calls_register_callbacks_and_reserve_response_slots_in_call_order():
    s = probe_state()
    submit(s, 1, "fan_out", {"target": REMOTE, "count": 3, "cb": "count_replies"})
    run(ENV, s)
    canister = s.canisters[1]
    assert [cb for cb in canister.callbacks.values()] == [
        Callback(i, 0, REMOTE, "count_replies", "relay_reject", i) for i in range(3)]
    assert [r.sender_reply_callback for r in canister.queues.output_queues[REMOTE].elements] == [0, 1, 2]
    assert canister.queues.input_queues[REMOTE].reserved_slots == 3
    assert canister.call_contexts[0].outstanding_callbacks == 3


def test_call_error_when_the_output_queue_is_full_counting_buffered_calls():
    s = probe_state()
    mid = submit(s, 1, "fan_out", {"target": REMOTE, "count": 10, "cb": "count_replies", "reply": True}, limits=MINIMAL)
    run(ENV, s, MINIMAL)
    canister = s.canisters[1]
    assert reply_value(s, mid) == MINIMAL.queue_capacity  # the canister caught CallError and replied
    assert "full" in canister.stable["call_error"]
    assert len(canister.queues.output_queues[REMOTE]) == MINIMAL.queue_capacity
    assert len(canister.callbacks) == MINIMAL.queue_capacity


def test_call_error_when_the_input_queue_has_no_room_for_responses():
    s = probe_state()
    submit(s, 1, "fan_out", {"target": REMOTE, "count": MINIMAL.queue_capacity, "cb": "count_replies"}, limits=MINIMAL)
    run(ENV, s, MINIMAL)
    take_output(s, 1, REMOTE)  # routed away: the output queue is empty, the reservations stay
    mid = submit(s, 1, "fan_out", {"target": REMOTE, "count": 1, "cb": "count_replies", "reply": True}, n=1, limits=MINIMAL)
    run(ENV, s, MINIMAL)
    assert reply_value(s, mid) == 0
    assert s.canisters[1].queues.input_queues[REMOTE].reserved_slots == MINIMAL.queue_capacity


def test_uncaught_call_error_for_an_oversized_payload_traps():
    s = probe_state()
    mid = submit(s, 1, "call_uncaught", {"target": REMOTE, "payload": b"x" * 300}, limits=DEFAULT)
    run(ENV, s, MINIMAL)
    st = status(s, mid)
    assert st.reject_code is RejectCode.CANISTER_ERROR
    assert st.reject_message.startswith(f"Canister {canister_text(1)} trapped: CallError: request of")
    assert not s.canisters[1].queues.output_queues and not s.canisters[1].callbacks


def test_callbacks_must_be_named_callback_methods_and_contexts_stable_values():
    s = probe_state()
    closure = submit(s, 1, "call_with_closure", REMOTE)
    bad_context = submit(s, 1, "call_with_bad_context", REMOTE, n=1)
    bad_name = submit(s, 1, "fan_out", {"target": REMOTE, "count": 1, "cb": "echo"}, n=2)
    run(ENV, s)
    assert "@callback methods" in status(s, closure).reject_message
    assert "call context" in status(s, bad_context).reject_message
    assert "'echo' is not a @callback method" in status(s, bad_name).reject_message
    assert not s.canisters[1].callbacks


def test_response_without_callback_is_dropped_and_counted():
    s = probe_state()
    expected = copy.deepcopy(s)
    s.canisters[1].queues.push_input_response(Response(1, REMOTE, 999, Reply(b"\xc0")))
    run(ENV, s)
    expected.metadata.counters["dropped_responses_without_callback"] = 1
    expected.canisters[1].queues.input_schedule = REMOTE
    assert s == expected


def test_response_from_another_canister_than_the_callee_is_dropped():
    s = probe_state()
    mid = submit(s, 1, "relay", {"target": REMOTE})
    run(ENV, s)
    (request,) = take_output(s, 1, REMOTE)
    s.canisters[1].queues.push_input_response(Response(1, REMOTE + 1, request.sender_reply_callback, Reply(b"\xc0")))
    run(ENV, s)
    assert s.metadata.counters["dropped_responses_without_callback"] == 1
    assert status(s, mid).state is IngressState.PROCESSING and len(s.canisters[1].callbacks) == 1
    answer(s, request, "real")
    run(ENV, s)
    assert reply_value(s, mid)[1] == "real"


def test_calls_to_self_use_the_loopback_queues():
    s = probe_state()
    submit(s, 1, "relay", {"target": 1, "payload": "me"})
    run(ENV, s)
    (request,) = s.canisters[1].queues.output_queues[1].elements
    assert request.receiver == 1 and s.canisters[1].queues.input_queues[1].reserved_slots == 1


def test_undecodable_reply_or_unknown_callback_name_traps_the_callback():
    s = probe_state()
    garbled = submit(s, 1, "relay", {"target": REMOTE}, n=1)
    renamed = submit(s, 1, "relay", {"target": REMOTE}, n=2)
    run(ENV, s)
    first, second = take_output(s, 1, REMOTE)
    callbacks = s.canisters[1].callbacks
    callbacks[1] = replace(callbacks[1], on_reply="gone")  # e.g. state written by other code
    s.canisters[1].queues.push_input_response(Response(1, REMOTE, 0, Reply(b"\x92\x01")))  # truncated msgpack
    answer(s, second, "fine")
    run(ENV, s)
    assert f"undecodable reply from canister {canister_text(100)}" in status(s, garbled).reject_message
    assert status(s, renamed).reject_message == f"Canister {canister_text(1)} trapped: no @callback method 'gone'"
    assert not s.canisters[1].call_contexts and not s.canisters[1].callbacks
