"""The answers of unreplicated requests as the agent and the node share them (pure).

``QueryAnswer`` is a query's answer and the certified height it ran at (the node's side of the
IC's query response, ``replica.ic.query_response``). A dry run (the replica's own route,
``POST /api/v2/canister/<id>/dry_run``, whose body is a signed call envelope) is answered with
a CBOR map, as every other answer of the interface::

    {height, status: "replied" | "rejected" | "waiting", instructions, limit_exceeded: 0 | 1,
     calls: [[receiver, method, payload, deadline], ...], changed_paths: [text, ...], more_paths,
     reply?: blob, reject_code?: text, reject_message?: text}

(the interface's CBOR has no booleans or nulls: a flag is 0 or 1, an absent value is left out).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from replica.execution.dry_run import DryRunResult, OutgoingCall
from replica.ic import cbor
from replica.ic.errors import AnswerMalformed, CborRefused
from replica.ic.query_response import QueryOutcome, QueryReplied
from state_manager.messages import RejectCode

__all__ = ["QueryAnswer", "query_answer_of", "decode_query_answer", "encode_dry_run_answer", "decode_dry_run_answer"]

_U64 = 1 << 64
_REQUIRED = {"height", "status", "instructions", "limit_exceeded", "calls", "changed_paths", "more_paths"}
_OPTIONAL = {"reply": bytes, "reject_code": str, "reject_message": str}


@dataclass(frozen=True, slots=True)
class QueryAnswer:
    """A query's answer: ``reply`` bytes, or a reject code name and message; ``height`` is the
    certified height it ran at where the node's side knows it (the IC's answer does not carry it)."""

    height: int | None
    reply: bytes | None = None
    reject_code: str | None = None
    reject_message: str | None = None

    @property
    def replied(self) -> bool:
        return self.reply is not None


def decode_query_answer(body: bytes, max_bytes: int) -> QueryAnswer:
    """A query response (the interface specification, *Request: Query call*): ``{status:
    "replied", reply: {arg}}`` or ``{status: "rejected", reject_code, reject_message,
    error_code?}``, with the node's ``signatures``."""
    try:
        v = cbor.decode(body, max_bytes=max_bytes, max_depth=6)
    except CborRefused as exc:
        raise AnswerMalformed(f"a query answer is not CBOR: {exc}") from exc
    if type(v) is not dict:
        raise AnswerMalformed("a query answer is a map")
    height = None
    if v.get("status") == "replied":
        reply = v.get("reply")
        if type(reply) is not dict or type(reply.get("arg")) is not bytes:
            raise AnswerMalformed("a replied query answer is {status, reply: {arg: blob}}")
        return QueryAnswer(height, reply=reply["arg"])
    if v.get("status") == "rejected":
        code, message = v.get("reject_code"), v.get("reject_message")
        if not _u64(code) or type(message) is not str:
            raise AnswerMalformed("a rejected query answer is {status, reject_code: nat, reject_message: text}")
        return QueryAnswer(height, reject_code=_reject_name(code), reject_message=message)
    raise AnswerMalformed(f"unknown query answer status {v.get('status')!r}")


def query_answer_of(outcome: QueryOutcome) -> QueryAnswer:
    """The ``QueryAnswer`` of a (verified) IC query response's outcome."""
    if isinstance(outcome, QueryReplied):
        return QueryAnswer(None, reply=outcome.arg)
    return QueryAnswer(None, reject_code=_reject_name(outcome.reject_code), reject_message=outcome.reject_message)


def _reject_name(code: int) -> str:
    try:
        return RejectCode(code).name
    except ValueError:
        return f"UNKNOWN_{code}"


def encode_dry_run_answer(result: DryRunResult) -> bytes:
    answer: dict[str, Any] = {
        "height": result.height, "status": result.status, "instructions": result.instructions,
        "limit_exceeded": int(result.limit_exceeded),
        "calls": [[c.receiver, c.method, c.payload, c.deadline] for c in result.calls],
        "changed_paths": list(result.changed_paths), "more_paths": result.more_paths}
    for field in _OPTIONAL:
        if getattr(result, field) is not None:
            answer[field] = getattr(result, field)
    return cbor.encode(answer)


def _u64(value: object) -> bool:
    return type(value) is int and 0 <= value < _U64


def decode_dry_run_answer(body: bytes, max_bytes: int) -> DryRunResult:
    """Strict inverse of ``encode_dry_run_answer`` (``AnswerMalformed`` for anything else)."""
    try:
        v = cbor.decode(body, max_bytes=max_bytes, max_depth=4)
    except CborRefused as exc:
        raise AnswerMalformed(f"a dry run answer is not CBOR: {exc}") from exc
    if type(v) is not dict or not _REQUIRED <= v.keys() <= _REQUIRED | _OPTIONAL.keys():
        raise AnswerMalformed("a dry run answer has other fields")
    calls, paths = v["calls"], v["changed_paths"]
    if not (_u64(v["height"]) and v["status"] in ("replied", "rejected", "waiting") and _u64(v["instructions"])
            and v["limit_exceeded"] in (0, 1) and _u64(v["more_paths"])
            and all(type(v[f]) is kind for f, kind in _OPTIONAL.items() if f in v)
            and type(paths) is list and all(type(p) is str for p in paths)
            and type(calls) is list
            and all(type(c) is list and len(c) == 4 and _u64(c[0]) and type(c[1]) is str and type(c[2]) is bytes
                    and _u64(c[3]) for c in calls)):
        raise AnswerMalformed("a dry run answer: a field of the wrong type")
    return DryRunResult(v["height"], v["status"], v.get("reply"), v.get("reject_code"), v.get("reject_message"),
                        v["instructions"], bool(v["limit_exceeded"]), tuple(OutgoingCall(*c) for c in calls),
                        tuple(paths), v["more_paths"])
