"""Injected faults change exactly the message they name."""

from __future__ import annotations

import pytest

from message_routing.batch import Batch
from replica.audit.errors import FaultError
from replica.audit.faults import apply_fault, batch_messages, destination_of, flip_message
from replica.audit.perturbation import Fault
from state_manager.messages import Reject, RejectCode, Reply
from state_manager.streams import StreamHeader, StreamSlice
from tests.builders import ingress, reply, request


def _batch() -> Batch:
    slice_b = StreamSlice(StreamHeader(0, 3, 0), 0, (request(100, 1, payload=b"\x01"), reply(2, 101, data=b"ok"),
                                                   request(102, 3, payload=b"")))
    slice_c = StreamSlice(StreamHeader(4, 5, 0), 4, (request(200, 1, payload=b"zz"),))
    return Batch(7, 10**9, 1, ingress=(ingress(1, 1, payload=b"\x05"), ingress(2, 2, payload=b"\x06")),
                 xnet_payload=(("subnet-b", slice_b), ("subnet-c", slice_c)))


def test_messages_are_numbered_ingress_first():
    refs = batch_messages(_batch())
    assert [(r.index, r.container, r.position) for r in refs] == [
        (0, "ingress", 0), (1, "ingress", 1), (2, "subnet-b", 0), (3, "subnet-b", 1), (4, "subnet-b", 2),
        (5, "subnet-c", 0)]
    assert [destination_of(r.message) for r in refs] == [1, 2, 1, 2, 3, 1]


def test_flip_changes_one_bit_of_one_message():
    batch = _batch()
    flipped = apply_fault(batch, Fault("flip", 7, 1))
    assert flipped.ingress[1].method_payload == b"\x07" and flipped.ingress[0] == batch.ingress[0]
    assert flipped.xnet_payload == batch.xnet_payload
    assert apply_fault(batch, Fault("flip", 7, 3)).xnet_payload[0][1].messages[1].response_payload == Reply(b"oj")
    empty = apply_fault(batch, Fault("flip", 7, 4)).xnet_payload[0][1].messages[2]
    assert empty.method_payload == b"" and empty.method_name == "l"  # "m" with its low bit flipped
    assert flip_message(reply(1, 2)).response_payload != reply(1, 2).response_payload


def test_flip_reject_text():
    from state_manager.messages import Response
    response = Response(1, 2, 0, Reject(RejectCode.CANISTER_ERROR, "no"))
    assert flip_message(response).response_payload.message == "nn"


def test_drop_and_swap():
    batch = _batch()
    dropped = apply_fault(batch, Fault("drop", 7, 2))
    assert dropped.xnet_payload[0][1].messages == batch.xnet_payload[0][1].messages[1:]
    assert dropped.xnet_payload[0][1].header == batch.xnet_payload[0][1].header
    swapped = apply_fault(batch, Fault("swap", 7, 0))
    assert swapped.ingress == (batch.ingress[1], batch.ingress[0])
    swapped = apply_fault(batch, Fault("swap", 7, 4, 2))
    original = batch.xnet_payload[0][1].messages
    assert swapped.xnet_payload[0][1].messages == (original[2], original[1], original[0])


@pytest.mark.parametrize("fault, message", [
    (Fault("flip", 7, 6), "only 6 messages"),
    (Fault("swap", 7, 1), "different parts"),
    (Fault("drop", 8, 0), "applied to batch 7"),
])
def test_bad_faults(fault, message):
    with pytest.raises(FaultError, match=message):
        apply_fault(_batch(), fault)
