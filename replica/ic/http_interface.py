"""The IC's HTTP interface: its routes and the CBOR bodies of its answers (pure).

The interface specification, *HTTPS Interface*. A node serves::

    POST /api/v2/canister/<effective canister id>/call         202, empty: accepted
    POST /api/v3/canister/<effective canister id>/call         200 {status: "replied", certificate} | 202
    POST /api/v4/canister/<effective canister id>/call         as v3 (the delegation's ranges in the tree layout)
    POST /api/v{2,3}/canister/<effective canister id>/query    200 query response (``replica.ic.query_response``)
    POST /api/v{2,3}/canister/<effective canister id>/read_state  200 {certificate}
    POST /api/v{2,3}/subnet/<subnet id>/read_state             200 {certificate}
    GET  /api/v2/status                                        200 {root_key, impl_version, replica_health_status, ...}

Ids in routes are principals in the textual form. Every request body is a CBOR envelope
(``replica.ic.envelope``); every answer body above is CBOR with the self-describe tag. A request
refused before it reaches consensus is answered with a 4xx or 5xx status and a plain-text
message, as the IC answers it; the reason's code travels in the ``REFUSAL_HEADER`` header so a
client can tell refusals apart without parsing prose.

The decoders are the client's: strict, bounded, each refusal an ``AnswerMalformed``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import cbor
from .errors import AnswerMalformed, CborRefused

__all__ = [
    "STATUS_PATH", "REFUSAL_HEADER", "CALL_VERSIONS", "QUERY_VERSIONS", "READ_STATE_VERSIONS",
    "canister_path", "subnet_read_state_path", "CallAnswer", "encode_read_state_answer", "decode_read_state_answer",
    "encode_call_answer", "decode_call_answer", "encode_status", "decode_status",
]

STATUS_PATH = "/api/v2/status"
#: The header that names a refusal's reason code (``replica.client.refusals``).
REFUSAL_HEADER = "X-Replica-Refusal"
CALL_VERSIONS = (2, 3, 4)
QUERY_VERSIONS = (2, 3)
READ_STATE_VERSIONS = (2, 3)
_MAX_STATUS_BYTES = 1 << 16


def canister_path(version: int, canister_text: str, endpoint: str) -> str:
    """``/api/v<version>/canister/<id>/<endpoint>``."""
    return f"/api/v{version}/canister/{canister_text}/{endpoint}"


def subnet_read_state_path(version: int, subnet_text: str) -> str:
    return f"/api/v{version}/subnet/{subnet_text}/read_state"


def _map(body: bytes, max_bytes: int, what: str) -> dict[str, Any]:
    try:
        value = cbor.decode(body, max_bytes=max_bytes, max_depth=8)
    except CborRefused as exc:
        raise AnswerMalformed(f"{what} is not CBOR: {exc}") from exc
    if type(value) is not dict:
        raise AnswerMalformed(f"{what} is a map")
    return value


def encode_read_state_answer(certificate: bytes) -> bytes:
    """``{certificate: blob}``: the answer of every read_state."""
    return cbor.encode({"certificate": certificate})


def decode_read_state_answer(body: bytes, max_bytes: int) -> bytes:
    """The certificate's bytes of a read_state answer."""
    value = _map(body, max_bytes, "a read_state answer")
    if value.keys() != {"certificate"} or type(value["certificate"]) is not bytes:
        raise AnswerMalformed("a read_state answer is {certificate: blob}")
    return value["certificate"]


@dataclass(frozen=True, slots=True)
class CallAnswer:
    """A synchronous call's 200 answer: the certificate of its status, or the node's rejection
    of it before it was executed (``status == "non_replicated_rejection"``)."""

    status: str
    certificate: bytes | None = None
    reject_code: int | None = None
    reject_message: str | None = None
    error_code: str | None = None


def encode_call_answer(answer: CallAnswer) -> bytes:
    if answer.status == "replied":
        return cbor.encode({"status": "replied", "certificate": answer.certificate})
    return cbor.encode({"status": answer.status, "reject_code": answer.reject_code,
                        "reject_message": answer.reject_message, "error_code": answer.error_code})


def decode_call_answer(body: bytes, max_bytes: int) -> CallAnswer:
    """A v3/v4 call's 200 answer: ``{status: "replied", certificate}`` or
    ``{status: "non_replicated_rejection", reject_code, reject_message, error_code?}``."""
    value = _map(body, max_bytes, "a call answer")
    status = value.get("status")
    if status == "replied":
        if value.keys() != {"status", "certificate"} or type(value["certificate"]) is not bytes:
            raise AnswerMalformed("a replied call answer is {status, certificate: blob}")
        return CallAnswer("replied", certificate=value["certificate"])
    if status == "non_replicated_rejection":
        code, message, error = value.get("reject_code"), value.get("reject_message"), value.get("error_code")
        if (type(code) is not int or type(message) is not str or (error is not None and type(error) is not str)
                or not value.keys() <= {"status", "reject_code", "reject_message", "error_code"}):
            raise AnswerMalformed("a rejection is {status, reject_code: nat, reject_message: text, error_code?: text}")
        return CallAnswer(status, reject_code=code, reject_message=message, error_code=error)
    raise AnswerMalformed(f"unknown call answer status {status!r}")


def encode_status(fields: Mapping[str, Any]) -> bytes:
    """``GET /api/v2/status``: the IC's fields (``root_key``: the root subnet's DER key,
    ``impl_version``, ``replica_health_status``) and the node's own (heights, ids)."""
    return cbor.encode(dict(fields))


def decode_status(body: bytes) -> dict[str, Any]:
    value = _map(body, _MAX_STATUS_BYTES, "a status answer")
    if type(value.get("root_key")) is not bytes:
        raise AnswerMalformed("a status answer states root_key, a blob")
    return value
