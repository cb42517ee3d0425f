"""Ingress statuses through execution, messages that cannot run, and read-only queries."""

from __future__ import annotations

import copy

from replica.ic.textual_ids import canister_text
from replica.execution import CanisterRegistry, ExecutionEnvironment, install_canister, run_query
from replica.sdk import Canister, encode_value, update
from state_manager.encoding import decode
from state_manager.ingress_history import IngressState, IngressStatus
from state_manager.messages import Ingress, Reject, RejectCode, Reply

from .apps import Probe
from .harness import EXPIRY, REMOTE, USER, answer, deliver_request, message_id, new_state, run, status, submit, take_output

ENV = ExecutionEnvironment([Probe])


def probe_state():
    s = new_state()
    install_canister(s, 1, Probe)
    return s


def test_ingress_goes_received_processing_replied_keeping_expiry():
    s = probe_state()
    mid = submit(s, 1, "relay", {"target": REMOTE})
    assert status(s, mid) == IngressStatus(IngressState.RECEIVED, 1, USER, 10**9, EXPIRY)
    run(ENV, s)
    assert status(s, mid) == IngressStatus(IngressState.PROCESSING, 1, USER, 10**9, EXPIRY)
    (request,) = take_output(s, 1, REMOTE)
    answer(s, request, 5)
    s.metadata.batch_time = 2 * 10**9
    run(ENV, s)
    st = status(s, mid)
    assert (st.state, st.time, st.expiry_time, decode(st.reply)) == (IngressState.REPLIED, 2 * 10**9, EXPIRY, ("relayed", 5, ("ctx", None)))


def test_messages_that_cannot_run_are_rejected_without_a_call_context():
    s = probe_state()
    missing = submit(s, 1, "missing", n=1)
    to_query = submit(s, 1, "peek", "x", n=2)
    to_callback = submit(s, 1, "relay_reply", n=3)
    bad_arg = Ingress(USER, 1, "echo", b"\x92\x01", message_id(4), EXPIRY)  # truncated msgpack
    s.canisters[1].queues.ingress_queue.push(bad_arg)
    run(ENV, s)
    for mid, text in ((missing, "has no update method 'missing'"), (to_query, "'peek' is a query method"),
                      (to_callback, "has no update method 'relay_reply'"), (bad_arg.message_id, "invalid argument")):
        st = status(s, mid)
        assert st.state is IngressState.REJECTED and st.reject_code is RejectCode.CANISTER_ERROR, mid
        assert text in st.reject_message
    assert s.canisters[1].next_call_context_id == 0


def test_requests_that_cannot_run_get_a_reject_response():
    s = probe_state()
    deliver_request(s, REMOTE, 1, "missing", callback=8)
    run(ENV, s)
    (response,) = take_output(s, 1, REMOTE)
    assert response.originator_reply_callback == 8
    assert response.response_payload == Reject(RejectCode.CANISTER_ERROR, f"Canister {canister_text(1)} has no update method 'missing'")


def test_unavailable_code_rejects_and_counts_a_critical_error():
    s = probe_state()
    mid = submit(s, 1, "echo", 1)
    run(ExecutionEnvironment([]), s)
    st = status(s, mid)
    assert st.reject_code is RejectCode.CANISTER_ERROR and "is not available" in st.reject_message
    assert s.metadata.counters["critical_errors"] == 1


def test_module_hash_mismatch_makes_the_code_unavailable():
    class Versioned(Canister):
        VERSION = 1

        @update
        def m(self):
            return 1

    s = new_state()
    install_canister(s, 1, Versioned)
    s.canisters[1].module_hash = b"\x00" * 32  # installed from another release
    mid = submit(s, 1, "m")
    run(ExecutionEnvironment(CanisterRegistry([Versioned])), s)
    assert "is not available" in status(s, mid).reject_message


def test_queries_are_read_only_and_leave_the_state_untouched():
    s = probe_state()
    s.canisters[1].stable["x"] = "original"
    before = copy.deepcopy(s)
    assert ENV.run_query(s, 1, "sneaky_write") == Reply(encode_value("written by a query"))
    assert ENV.run_query(s, 1, "peek", "x") == Reply(encode_value("original"))
    assert s == before


def test_queries_cannot_call_and_see_their_caller():
    s = probe_state()
    refused = ENV.run_query(s, 1, "query_call")
    assert decode(refused.data) == "refused: a query cannot make calls"
    assert decode(ENV.run_query(s, 1, "who", caller=b"me").data) == (1, b"me", 10**9)


def test_query_errors():
    s = probe_state()
    assert ENV.run_query(s, 5, "peek").code is RejectCode.DESTINATION_INVALID
    assert "no query method 'echo'" in ENV.run_query(s, 1, "echo", 1).message
    assert run_query(CanisterRegistry([]), s, 1, "peek", "x").code is RejectCode.CANISTER_ERROR
    assert "invalid query argument" in ENV.run_query(s, 1, "peek", 1.5).message


def test_canisters_may_call_query_methods_read_only():
    s = probe_state()
    deliver_request(s, REMOTE, 1, "sneaky_write", callback=1)
    run(ENV, s)
    (response,) = take_output(s, 1, REMOTE)
    assert decode(response.response_payload.data) == "written by a query"
    assert "x" not in s.canisters[1].stable and s.canisters[1].certified_data == b""
