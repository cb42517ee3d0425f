"""Calls canisters make to the management canister: ``raw_rand``.

A canister calls the management canister (``MANAGEMENT_CANISTER_ID``) like any canister:
``self.call(MANAGEMENT_CANISTER_ID, "raw_rand", None, on_reply=..., on_reject=...)``. Such a
request never enters a stream: at the end of the round's execution,
``answer_management_requests`` takes it from the caller's output queue, answers it, and puts
the response in the caller's input queue (into the slot the call reserved), so its callback
runs in a later round, like any response.

``raw_rand()`` answers 32 bytes from the round's random tape, as on the IC: the n-th
``raw_rand`` answered in a round (n = 0, 1, ...; canisters in id order, each one's requests
in the order it made them) gets ``SHA-256(domain_sep("ic-raw-rand") ‖ randomness ‖ n as 8
bytes big-endian)``, where ``randomness`` is the batch's (``consensus_stub.block``: a hash of
the finalized block, so every replica and every replay has the same). Two calls never get
the same bytes, and no canister learns a round's bytes before its request is committed.

Other methods are refused with a ``CANISTER_ERROR`` reject (users call them by ingress).
"""

from __future__ import annotations

import hashlib
from typing import Iterable

from state_manager.canister_state import CanisterState
from state_manager.messages import (
    MANAGEMENT_CANISTER_ID, Reject, RejectCode, Reply, Request, Response, truncate_reject_message,
)

from .codec import EncodingError, decode_payload, encode_value

__all__ = ["RAW_RAND_DOMAIN", "raw_rand_bytes", "answer_management_requests"]

#: ``domain_sep("ic-raw-rand")``: the length of the name, then the name.
RAW_RAND_DOMAIN = b"\x0bic-raw-rand"


def raw_rand_bytes(randomness: bytes, counter: int) -> bytes:
    """The ``counter``-th ``raw_rand`` answer of the round whose random tape is ``randomness``."""
    return hashlib.sha256(RAW_RAND_DOMAIN + randomness + counter.to_bytes(8, "big")).digest()


class _RoundTape:
    """The round's randomness and how many ``raw_rand`` answers it has given."""

    __slots__ = ("randomness", "used")

    def __init__(self, randomness: bytes) -> None:
        self.randomness = randomness
        self.used = 0

    def next_bytes(self) -> bytes:
        value = raw_rand_bytes(self.randomness, self.used)
        self.used += 1
        return value


def _answer(request: Request, tape: _RoundTape) -> Reply | Reject:
    method = request.method_name
    if method != "raw_rand":
        return Reject(RejectCode.CANISTER_ERROR, truncate_reject_message(
            f"the management canister answers canisters only raw_rand, not {method!r}"))
    try:
        no_argument = decode_payload(request.method_payload) is None
    except EncodingError:
        no_argument = False
    if not no_argument:
        return Reject(RejectCode.CANISTER_ERROR, "raw_rand takes no argument")
    return Reply(encode_value(tape.next_bytes()))


def answer_management_requests(canisters: Iterable[CanisterState], randomness: bytes) -> int:
    """Answer the requests to the management canister waiting in the output queues of
    ``canisters`` (given in id order), with this round's ``randomness``; how many."""
    tape = _RoundTape(randomness)
    answered = 0
    for canister in canisters:
        queues = canister.queues
        while MANAGEMENT_CANISTER_ID in queues.output_queues:
            request = queues.pop_output(MANAGEMENT_CANISTER_ID)
            if type(request) is not Request:
                continue  # the management canister is never called back: nothing to answer
            queues.push_input_response(Response(
                canister.canister_id, MANAGEMENT_CANISTER_ID, request.sender_reply_callback,
                _answer(request, tape), request.deadline))
            answered += 1
    return answered
