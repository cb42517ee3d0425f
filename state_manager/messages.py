"""Messages that travel between canisters and from users: frozen values.

Identifiers: a canister id is an unsigned 64-bit integer (labelled in the full state tree as 8
big-endian bytes, in the certified tree as its IC principal); a subnet id is a short text name
(labelled under ``/streams`` as its UTF-8 bytes; the certified tree's ``/subnet`` names a subnet
by the principal of its key, ``state_manager.state_tree``). The largest id,
``MANAGEMENT_CANISTER_ID``, is reserved for the management canister.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Union

__all__ = [
    "CanisterId", "SubnetId", "RejectCode", "Reply", "Reject", "Request", "Response",
    "RequestOrResponse", "Ingress", "MAX_REJECT_MESSAGE_BYTES", "truncate_reject_message",
    "MESSAGE_OVERHEAD_BYTES", "MANAGEMENT_CANISTER_ID",
]

CanisterId = int
SubnetId = str

#: The management canister (the IC's ``aaaaa-aa``): ``2**64 - 1``, the one canister id no
#: canister ever has. It is not looked up in routing tables: every subnet accepts ingress for
#: it and the subnet a user sends it to executes it (``ReplicatedState.management_queue``).
#: The top id was chosen over 0 because testnet ranges start at 0 and never reach it.
MANAGEMENT_CANISTER_ID = 2**64 - 1

#: Reject messages are capped so a synthetic reject can never outgrow its reserved slot.
MAX_REJECT_MESSAGE_BYTES = 255

#: Deterministic per-message bookkeeping estimate added to payload sizes (ids, indices, tags).
MESSAGE_OVERHEAD_BYTES = 64


class RejectCode(enum.IntEnum):
    """The interface specification's reject codes."""

    SYS_FATAL = 1
    SYS_TRANSIENT = 2
    DESTINATION_INVALID = 3
    CANISTER_REJECT = 4
    CANISTER_ERROR = 5
    #: A bounded-wait call whose outcome the caller cannot know: the deadline expired or the
    #: response was shed. The call may or may not have executed.
    SYS_UNKNOWN = 6


def truncate_reject_message(message: str) -> str:
    """Cut ``message`` to at most ``MAX_REJECT_MESSAGE_BYTES`` UTF-8 bytes on a character boundary."""
    raw = message.encode("utf-8")
    if len(raw) <= MAX_REJECT_MESSAGE_BYTES:
        return message
    return raw[:MAX_REJECT_MESSAGE_BYTES].decode("utf-8", errors="ignore")


@dataclass(frozen=True, slots=True)
class Reply:
    data: bytes


@dataclass(frozen=True, slots=True)
class Reject:
    code: RejectCode
    message: str


@dataclass(frozen=True, slots=True)
class Request:
    """``sender`` calls ``method_name`` on ``receiver``; the reply resumes ``sender_reply_callback``.

    ``deadline`` (whole seconds since the epoch) makes it a bounded-wait call; 0 (the
    default) is a guaranteed-response call (see ``state_manager.deadlines``)."""

    sender: CanisterId
    receiver: CanisterId
    method_name: str
    method_payload: bytes
    sender_reply_callback: int
    deadline: int = 0

    def count_bytes(self) -> int:
        """Deterministic size estimate used for stream and payload limits."""
        return MESSAGE_OVERHEAD_BYTES + len(self.method_payload) + len(self.method_name)


@dataclass(frozen=True, slots=True)
class Response:
    """The answer to a request: travels from ``respondent`` back to ``originator``, with the
    request's ``deadline`` (0 for a guaranteed-response call)."""

    originator: CanisterId
    respondent: CanisterId
    originator_reply_callback: int
    response_payload: Union[Reply, Reject]
    deadline: int = 0

    def count_bytes(self) -> int:
        payload = self.response_payload
        if type(payload) is Reply:
            return MESSAGE_OVERHEAD_BYTES + len(payload.data)
        return MESSAGE_OVERHEAD_BYTES + len(payload.message.encode("utf-8"))


RequestOrResponse = Union[Request, Response]


@dataclass(frozen=True, slots=True)
class Ingress:
    """A user's authenticated update call, as carried in a batch (signature already checked)."""

    source: bytes
    receiver: CanisterId
    method_name: str
    method_payload: bytes
    message_id: bytes
    expiry_time: int

    def count_bytes(self) -> int:
        return MESSAGE_OVERHEAD_BYTES + len(self.method_payload) + len(self.method_name) + len(self.source)
