"""The reply rules, one per test: return value, explicit answers, traps, deferred answers."""

from __future__ import annotations

import copy

import pytest

from message_routing.limits import DEFAULT, MINIMAL
from replica.ic.textual_ids import canister_text
from replica.execution import ExecutionEnvironment, install_canister
from state_manager.canister_state import CanisterOrigin, IngressOrigin
from replica.sdk import encode_value as encode
from state_manager.encoding import decode
from state_manager.ingress_history import IngressState
from state_manager.messages import RejectCode, Reply, Request, Response
from state_manager.state_tree import build_state_trees

from .apps import Probe
from .harness import REMOTE, USER, answer, deliver_request, new_state, reply_value, run, status, submit, take_output

ENV = ExecutionEnvironment([Probe])


def probe_state(limits=DEFAULT):
    s = new_state()
    install_canister(s, 1, Probe)
    return s


def test_return_value_is_the_reply_when_no_calls_were_made():
    s = probe_state()
    mid = submit(s, 1, "echo", {"b": 2, "a": (1, "x")})
    run(ENV, s)
    assert status(s, mid).state is IngressState.REPLIED
    assert reply_value(s, mid) == {"a": (1, "x"), "b": 2}
    assert not s.canisters[1].call_contexts


def test_method_without_parameter_ignores_the_argument():
    s = probe_state()
    mid = submit(s, 1, "no_arg", "whatever")
    run(ENV, s)
    assert reply_value(s, mid) == "no arg"


def test_explicit_reply_wins_over_the_return_value():
    s = probe_state()
    mid = submit(s, 1, "explicit_reply", 7)
    run(ENV, s)
    assert reply_value(s, mid) == ("explicit", 7)


def test_explicit_reject_is_a_canister_reject_and_keeps_state_changes():
    s = probe_state()
    mid = submit(s, 1, "explicit_reject", "x")
    run(ENV, s)
    st = status(s, mid)
    assert (st.state, st.reject_code, st.reject_message) == (IngressState.REJECTED, RejectCode.CANISTER_REJECT, "no thanks: x")
    assert s.canisters[1].stable["rejected_but_kept"] is True


def test_answering_twice_traps_and_rolls_back():
    s = probe_state()
    mid = submit(s, 1, "answer_twice")
    run(ENV, s)
    st = status(s, mid)
    assert st.state is IngressState.REJECTED and st.reject_code is RejectCode.CANISTER_ERROR
    assert "already answered" in st.reject_message
    assert "x" not in s.canisters[1].stable


def test_trap_rolls_back_stable_state_drops_calls_and_rejects_the_caller():
    s = probe_state()
    s.canisters[1].stable["x"] = "before"
    s.canisters[1].certified_data = b"old"
    before = copy.deepcopy(s)
    mid = submit(s, 1, "write_then_trap", "after")
    expected_after_induction = copy.deepcopy(s)
    run(ENV, s)

    canister = s.canisters[1]
    assert canister.stable == before.canisters[1].stable
    assert canister.certified_data == b"old"
    assert not canister.queues.output_queues and not canister.callbacks and not canister.call_contexts
    st = status(s, mid)
    assert st.state is IngressState.REJECTED and st.reject_code is RejectCode.CANISTER_ERROR
    assert st.reject_message == f"Canister {canister_text(1)} trapped: ValueError: boom"
    assert st.expiry_time == expected_after_induction.ingress_history.get(mid).expiry_time


def test_trap_message_of_an_explicit_trap_and_truncation():
    s = probe_state()
    mid = submit(s, 1, "raise_trap")
    run(ENV, s)
    assert status(s, mid).reject_message == f"Canister {canister_text(1)} trapped: explicit trap"
    s2 = probe_state()
    deliver_request(s2, REMOTE, 1, "echo", None)
    s2.canisters[1].queues.input_queues[REMOTE].elements[0] = Request(REMOTE, 1, "nope" * 200, b"", 0)
    run(ENV, s2)
    (response,) = take_output(s2, 1, REMOTE)
    assert len(response.response_payload.message.encode()) <= 255


def test_unencodable_return_value_is_a_trap():
    s = probe_state()
    mid = submit(s, 1, "unencodable")
    run(ENV, s)
    st = status(s, mid)
    assert st.reject_code is RejectCode.CANISTER_ERROR and "cannot be encoded" in st.reject_message
    assert "x" not in s.canisters[1].stable


@pytest.mark.parametrize("method, words", [
    ("huge_int_reply", "reply value cannot be encoded"),
    ("huge_int_stable", "64-bit"),
    ("huge_int_call_context", "64-bit"),
])
def test_an_integer_beyond_64_bits_traps_the_message_and_the_round_goes_on(method, words):
    # msgpack has no encoding for it: it must not reach the state tree or the wire.
    s = probe_state()
    mid = submit(s, 1, method)
    later = submit(s, 1, "echo", "next", n=1)
    run(ENV, s)
    st = status(s, mid)
    assert st.state is IngressState.REJECTED and st.reject_code is RejectCode.CANISTER_ERROR
    assert words in st.reject_message
    assert "x" not in s.canisters[1].stable and not s.canisters[1].callbacks
    assert reply_value(s, later) == "next"
    build_state_trees(s).full.digest()  # the state still hashes


def test_request_gets_its_response_in_the_reserved_output_slot():
    s = probe_state()
    deliver_request(s, REMOTE, 1, "echo", "hi", callback=42)
    assert s.canisters[1].queues.output_queues[REMOTE].reserved_slots == 1
    run(ENV, s)
    queue = s.canisters[1].queues.output_queues[REMOTE]
    assert queue.reserved_slots == 0
    assert list(queue.elements) == [Response(REMOTE, 1, 42, Reply(encode("hi")))]


def test_reply_over_the_size_limit_becomes_a_canister_error_reject():
    s = probe_state()
    deliver_request(s, REMOTE, 1, "big_reply", MINIMAL.max_inter_canister_payload_bytes, callback=3, limits=MINIMAL)
    run(ENV, s, MINIMAL)
    (response,) = take_output(s, 1, REMOTE)
    assert response.response_payload.code is RejectCode.CANISTER_ERROR
    assert "over the limit" in response.response_payload.message
    deliver_request(s, REMOTE, 1, "big_reply", 10, callback=4, limits=MINIMAL)
    run(ENV, s, MINIMAL)
    (response,) = take_output(s, 1, REMOTE)
    assert decode(response.response_payload.data) == b"x" * 10


def test_deferred_reply_comes_from_the_callback():
    s = probe_state()
    mid = submit(s, 1, "relay", {"target": REMOTE, "payload": "p"})
    run(ENV, s)
    canister = s.canisters[1]
    assert status(s, mid).state is IngressState.PROCESSING
    (context,) = canister.call_contexts.values()
    assert context.origin == IngressOrigin(mid, USER) and context.outstanding_callbacks == 1 and not context.responded
    (request,) = take_output(s, 1, REMOTE)
    assert request == Request(1, REMOTE, "m", encode("p"), 0)
    assert canister.queues.input_queues[REMOTE].reserved_slots == 1

    answer(s, request, "pong")
    run(ENV, s)
    assert reply_value(s, mid) == ("relayed", "pong", ("ctx", "p"))
    assert s.canisters[1].stable["relayed"] == "pong"
    assert not canister.call_contexts and not canister.callbacks
    assert REMOTE not in canister.queues.input_queues  # the reserved slot was used and the queue dropped


def test_reject_resumes_on_reject_with_code_and_message():
    s = probe_state()
    mid = submit(s, 1, "relay", {"target": REMOTE})
    run(ENV, s)
    (request,) = take_output(s, 1, REMOTE)
    answer(s, request, reject="nope", code=RejectCode.SYS_TRANSIENT)
    run(ENV, s)
    st = status(s, mid)
    assert st.reject_code is RejectCode.CANISTER_REJECT and st.reject_message == "relay rejected (2): nope"
    assert s.canisters[1].stable["relay_rejected"] == (2, "nope")


def test_callback_that_does_not_reply_leads_to_did_not_reply():
    s = probe_state()
    mid = submit(s, 1, "fan_out", {"target": REMOTE, "count": 2, "cb": "forget"})
    run(ENV, s)
    requests = take_output(s, 1, REMOTE)
    assert len(requests) == 2 and s.canisters[1].call_contexts[0].outstanding_callbacks == 2
    answer(s, requests[0], "a")
    run(ENV, s)
    assert status(s, mid).state is IngressState.PROCESSING  # one callback still outstanding
    answer(s, requests[1], "b")
    run(ENV, s)
    st = status(s, mid)
    assert (st.state, st.reject_code, st.reject_message) == (
        IngressState.REJECTED, RejectCode.CANISTER_ERROR, f"Canister {canister_text(1)} did not reply to the call")
    assert s.canisters[1].stable["forgot/0"] == "a" and s.canisters[1].stable["forgot/1"] == "b"
    assert not s.canisters[1].call_contexts


def test_early_reply_then_callbacks_still_run_but_cannot_answer_again():
    s = probe_state()
    deliver_request(s, REMOTE, 1, "relay_and_reply", REMOTE, callback=9)
    run(ENV, s)
    (request, response) = take_output(s, 1, REMOTE)  # calls are queued before the answer
    assert response == Response(REMOTE, 1, 9, Reply(encode("early")))
    assert s.canisters[1].call_contexts[0].responded
    answer(s, request, "late")
    run(ENV, s)
    # relay_reply tried to answer an answered call: a trap, rolled back, no second response.
    assert take_output(s, 1, REMOTE) == []
    assert "relayed" not in s.canisters[1].stable
    assert not s.canisters[1].call_contexts and not s.canisters[1].callbacks


def test_trap_in_a_callback_rolls_back_and_rejects_the_open_call():
    s = probe_state()
    mid = submit(s, 1, "fan_out", {"target": REMOTE, "count": 1, "cb": "trap_in_callback"})
    run(ENV, s)
    (request,) = take_output(s, 1, REMOTE)
    made_before = s.canisters[1].stable["made"]
    answer(s, request, "x")
    run(ENV, s)
    canister = s.canisters[1]
    st = status(s, mid)
    assert st.state is IngressState.REJECTED and st.reject_message == f"Canister {canister_text(1)} trapped: callback failed"
    assert "callback_wrote" not in canister.stable and canister.stable["made"] == made_before
    assert take_output(s, 1, REMOTE) == []  # the callback's call was dropped
    assert not canister.call_contexts and not canister.callbacks


def test_trap_in_a_callback_with_other_callbacks_outstanding_answers_once():
    s = probe_state()
    deliver_request(s, REMOTE, 1, "fan_out", {"target": REMOTE, "count": 2, "cb": "trap_in_callback"}, callback=5)
    run(ENV, s)
    first, second = take_output(s, 1, REMOTE)
    answer(s, first, "x")
    run(ENV, s)
    (response,) = take_output(s, 1, REMOTE)
    assert response.originator_reply_callback == 5 and response.response_payload.code is RejectCode.CANISTER_ERROR
    assert s.canisters[1].call_contexts[0].responded and s.canisters[1].call_contexts[0].outstanding_callbacks == 1
    answer(s, second, "y")
    run(ENV, s)
    assert take_output(s, 1, REMOTE) == []  # answered already: no second response
    assert not s.canisters[1].call_contexts


def test_chained_calls_keep_one_call_context_open():
    s = probe_state()
    mid = submit(s, 1, "start_chain", 2)
    for _ in range(3):
        run(ENV, s)
        (request,) = take_output(s, 1, REMOTE)
        assert len(s.canisters[1].call_contexts) == 1
        answer(s, request, request.sender_reply_callback)
    run(ENV, s)
    assert reply_value(s, mid) == ("chain done", 2)
    assert s.canisters[1].next_callback_id == 3 and not s.canisters[1].call_contexts


def test_canister_caller_and_call_context_origin():
    s = probe_state()
    deliver_request(s, REMOTE, 1, "whoami", callback=11)
    run(ENV, s)
    (response,) = take_output(s, 1, REMOTE)
    assert decode(response.response_payload.data) == (1, REMOTE, s.metadata.batch_time)
    mid = submit(s, 1, "whoami")
    run(ENV, s)
    assert reply_value(s, mid) == (1, USER, s.metadata.batch_time)


def test_call_context_records_origin_for_requests():
    s = probe_state()
    deliver_request(s, REMOTE, 1, "relay", {"target": REMOTE}, callback=77)
    run(ENV, s)
    (context,) = s.canisters[1].call_contexts.values()
    assert context.origin == CanisterOrigin(REMOTE, 77) and context.method_name == "relay"


def test_certified_data_is_set_only_by_completed_messages():
    s = probe_state()
    submit(s, 1, "set_certified", b"\x01" * 32)
    run(ENV, s)
    assert s.canisters[1].certified_data == b"\x01" * 32
    mid = submit(s, 1, "set_certified", b"\x01" * 33, n=1)
    run(ENV, s)
    assert status(s, mid).reject_code is RejectCode.CANISTER_ERROR
    assert s.canisters[1].certified_data == b"\x01" * 32
