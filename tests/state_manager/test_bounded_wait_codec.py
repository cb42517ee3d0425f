"""Encodings with deadlines (issue 17): one encoding per value, old versions still decode."""

from __future__ import annotations

import pytest

from message_routing.batch import Batch, decode_batch, encode_batch
from state_manager.canister_state import CallContext, Callback, CanisterOrigin
from state_manager.codec import (
    CodecError, call_context_from_value, call_context_to_value, callback_from_value, callback_to_value,
    decode_message_leaf, encode_message_leaf, message_from_value,
)
from state_manager.encoding import decode, encode
from state_manager.messages import Reject, RejectCode, Reply, Request, Response
from state_manager.state_codec import decode_state, encode_state, state_to_value
from state_manager.streams import StreamHeader, StreamSlice
from tests.builders import A, B, state

REQUEST = Request(1, 100, "m", b"p", 3)
BOUNDED = Request(1, 100, "m", b"p", 3, 1_700_000_030)
UNKNOWN = Response(1, 100, 3, Reject(RejectCode.SYS_UNKNOWN, "call deadline has expired"), 1_700_000_030)


@pytest.mark.parametrize("message", [REQUEST, BOUNDED, UNKNOWN, Response(1, 100, 3, Reply(b"x"), 7)])
def test_message_leaves_round_trip_at_the_version_of_their_deadline(message):
    data = encode_message_leaf(message)
    assert decode(data)[0] == (2 if message.deadline else 1)
    assert decode_message_leaf(data) == message


def test_a_leaf_whose_version_does_not_match_its_deadline_is_refused():
    version, value = decode(encode_message_leaf(BOUNDED))
    with pytest.raises(CodecError, match="does not match"):
        decode_message_leaf(encode((1, value)))
    version, value = decode(encode_message_leaf(REQUEST))
    with pytest.raises(CodecError, match="does not match"):
        decode_message_leaf(encode((2, value)))
    with pytest.raises(CodecError, match="unknown encoding version"):
        decode_message_leaf(encode((3, value)))


def test_a_zero_deadline_is_written_by_leaving_it_out():
    with pytest.raises(CodecError, match="zero deadline"):
        message_from_value((0, 1, 100, "m", b"p", 3, 0))
    with pytest.raises(CodecError, match="zero deadline"):
        callback_from_value((0, 0, 100, "r", "j", None, 0))
    with pytest.raises(CodecError, match="zero deadline"):
        call_context_from_value((0, (1, 100, 3, 0), "m", False, 0))


def test_callbacks_and_call_origins_carry_their_deadlines():
    callback = Callback(0, 0, 100, "r", "j", None, 42)
    context = CallContext(0, CanisterOrigin(100, 3, 42), "m")
    assert callback_from_value(callback_to_value(callback)) == callback
    assert call_context_from_value(call_context_to_value(context)) == context
    assert len(callback_to_value(Callback(0, 0, 100, "r", "j"))) == 6  # the version-1 form


def test_state_with_deadlines_is_version_3_and_without_them_version_2():
    s = state(A, canisters=[1])
    assert state_to_value(s)[0] == 2
    s.canisters[1].queues.push_output_request(BOUNDED, 10)
    value = state_to_value(s)
    assert value[0] == 3 and decode_state(encode_state(s)) == s
    with pytest.raises(CodecError, match="does not match"):
        decode_state(encode((2,) + value[1:]))
    plain = state(A, canisters=[1])
    with pytest.raises(CodecError, match="does not match"):
        decode_state(encode((3,) + state_to_value(plain)[1:]))


def test_batch_with_deadlines_is_version_2_and_without_them_version_1():
    def batch(messages):
        return Batch(1, 10, 1, xnet_payload=((B, StreamSlice(StreamHeader(0, len(messages), 0), 0, messages)),))
    assert decode(encode_batch(batch((REQUEST,))))[0] == 1
    data = encode_batch(batch((REQUEST, UNKNOWN)))
    assert decode(data)[0] == 2 and decode_batch(data) == batch((REQUEST, UNKNOWN))
    with pytest.raises(CodecError, match="does not match"):
        decode_batch(encode((1,) + decode(data)[1:]))
