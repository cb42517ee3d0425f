"""The valid set rule: each failure is typed, recorded once, and changes nothing else."""

from __future__ import annotations

import copy

import pytest

from message_routing.limits import MINIMAL
from message_routing.valid_set_rule import IngressInductionFailure, induct_ingress
from state_manager.canister_state import CanisterStatus
from state_manager.ingress_history import IngressState, IngressStatus
from state_manager.messages import RejectCode
from tests.builders import A, ingress, state

NOW = 1_000 * 10**9


def fresh_state():
    s = state(A, canisters=[1, 2])
    s.metadata.batch_time = NOW
    s.canisters[2].status = CanisterStatus.STOPPED
    return s


def test_valid_ingress_is_queued_and_marked_received():
    s = fresh_state()
    expected = copy.deepcopy(s)
    msg = ingress(1, n=1, expiry=NOW + 10**9)
    assert induct_ingress(s, msg, MINIMAL) is None
    expected.canisters[1].queues.ingress_queue.push(msg)
    expected.ingress_history.set(msg.message_id, IngressStatus(IngressState.RECEIVED, 1, b"user", NOW, NOW + 10**9))
    expected.metadata.counters["ingress_inducted"] = 1
    assert s == expected


@pytest.mark.parametrize("make, failure, code", [
    (lambda: ingress(1, n=2, expiry=NOW - 1), IngressInductionFailure.EXPIRED, RejectCode.SYS_TRANSIENT),
    (lambda: ingress(1, n=3, expiry=NOW + MINIMAL.max_ingress_ttl_ns + 1), IngressInductionFailure.EXPIRY_TOO_FAR, RejectCode.SYS_FATAL),
    (lambda: ingress(1, n=4, expiry=NOW + 1, payload=bytes(MINIMAL.max_ingress_bytes)), IngressInductionFailure.PAYLOAD_TOO_LARGE, RejectCode.CANISTER_ERROR),
    (lambda: ingress(77, n=5, expiry=NOW + 1), IngressInductionFailure.CANISTER_NOT_FOUND, RejectCode.DESTINATION_INVALID),
    (lambda: ingress(2, n=6, expiry=NOW + 1), IngressInductionFailure.CANISTER_NOT_RUNNING, RejectCode.CANISTER_ERROR),
])
def test_invalid_ingress_gets_a_typed_failed_status_and_nothing_else(make, failure, code):
    s = fresh_state()
    msg = make()
    expected = copy.deepcopy(s)
    assert induct_ingress(s, msg, MINIMAL) is failure
    status = s.ingress_history.get(msg.message_id)
    assert status.state is IngressState.REJECTED and status.reject_code is code
    assert failure.description in status.reject_message
    expected.ingress_history.set(msg.message_id, status)
    expected.metadata.counters["ingress_rejected"] = 1
    assert s == expected


def test_full_ingress_queue_fails_with_queue_full():
    s = fresh_state()
    for n in range(MINIMAL.queue_capacity):
        assert induct_ingress(s, ingress(1, n=100 + n, expiry=NOW + 1), MINIMAL) is None
    before = copy.deepcopy(s)
    msg = ingress(1, n=999, expiry=NOW + 1)
    assert induct_ingress(s, msg, MINIMAL) is IngressInductionFailure.QUEUE_FULL
    assert s.canisters == before.canisters


def test_duplicate_id_leaves_the_existing_status_untouched():
    s = fresh_state()
    msg = ingress(1, n=1, expiry=NOW + 10**9)
    induct_ingress(s, msg, MINIMAL)
    before = copy.deepcopy(s)
    assert induct_ingress(s, msg, MINIMAL) is IngressInductionFailure.DUPLICATE
    before.metadata.counters["ingress_rejected"] = 1
    assert s == before
