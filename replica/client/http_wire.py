"""The ingress HTTP API's wire formats, shared by the node's server and the agent (pure).

Routes (``<id>`` is a canister id in decimal, ``0 ..= 2**64 - 1``, no sign, no leading zeros)::

    POST /api/v2/canister/<id>/call        body: the IC's CBOR envelope of a ``call`` (``replica.client.envelope``)
    POST /api/v2/canister/<id>/query       body: the IC's CBOR envelope of a ``query``
    POST /api/v2/canister/<id>/read_state  body: msgpack {"paths": [[label, ...], ...]}
    POST /api/v2/canister/<id>/dry_run     body: the IC's CBOR envelope of a ``query`` naming an update method
    GET  /api/v2/status

The other bodies are canonical msgpack (``state_manager.encoding``)::

    call accepted (202, JSON)  {"message_id": hex, "status": "accepted"}
    query answer               {"height": h, "reply": bytes, "status": "replied"}
                             | {"height": h, "reject_code": name, "reject_message": text, "status": "rejected"}
    read_state answer          {"certificate": {"certification": encode_certification(c),
                                                "tree": encode_tree(witness)}}
    dry_run answer             {"calls": [[receiver, method, payload, deadline], ...], "changed_paths": [text, ...],
                                "height": h, "instructions": n, "limit_exceeded": bool, "more_paths": n,
                                "reject_code": name | nil, "reject_message": text | nil, "reply": bytes | nil,
                                "status": "replied" | "rejected" | "waiting"}
    refusal (4xx/5xx, JSON)    {"message": text, "reason": code}

Decoders raise ``WireError`` (the node answers it with 400 ``malformed_request``; the agent
treats it as a node that answered nonsense).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from state_manager.certification import Certification, CertificationError, decode_certification, encode_certification
from state_manager.encoding import EncodingError, decode, encode, is_u64
from state_manager.hash_tree import HashTree
from state_manager.tree_encoding import TreeDecodeError, decode_tree, encode_tree

from replica.errors import ReplicaError
from replica.execution.dry_run import DryRunResult, OutgoingCall

__all__ = [
    "API_PREFIX", "STATUS_PATH", "MAX_PATHS", "MAX_PATH_LABELS", "MAX_LABEL_BYTES", "MAX_READ_STATE_BYTES",
    "MAX_CERTIFICATE_BYTES", "MAX_TREE_DEPTH", "WireError", "QueryAnswer", "Certificate",
    "canister_url", "parse_canister_id",
    "encode_read_state_request", "decode_read_state_request", "encode_query_answer", "decode_query_answer",
    "encode_dry_run_answer", "decode_dry_run_answer",
    "encode_certificate", "decode_certificate",
]

API_PREFIX = "/api/v2"
STATUS_PATH = f"{API_PREFIX}/status"

#: Bounds of a read_state request: paths, labels per path, bytes per label, body bytes.
MAX_PATHS = 64
MAX_PATH_LABELS = 8
MAX_LABEL_BYTES = 128
MAX_READ_STATE_BYTES = MAX_PATHS * MAX_PATH_LABELS * (MAX_LABEL_BYTES + 2) + 64
#: Bounds of a certificate an agent accepts: bytes (a reply is at most the ingress limit,
#: 2 MiB by default, plus the witness) and nesting of the hash tree.
MAX_CERTIFICATE_BYTES = 16 * 1024 * 1024
MAX_TREE_DEPTH = 4096

_CANISTER_ID = re.compile(r"0|[1-9][0-9]{0,19}")


class WireError(ReplicaError, ValueError):
    """Bytes that are not the wire format they claim to be."""


def canister_url(canister_id: int, endpoint: str) -> str:
    """``/api/v2/canister/<id>/<endpoint>`` for ``endpoint`` in ``call | query | read_state | dry_run``."""
    return f"{API_PREFIX}/canister/{canister_id}/{endpoint}"


def parse_canister_id(text: str) -> int:
    """The canister id in a URL: decimal digits, no leading zeros, below ``2**64``."""
    if not (isinstance(text, str) and _CANISTER_ID.fullmatch(text)) or int(text) >= 2**64:
        raise WireError(f"canister id must be a decimal u64, not {text[:40]!r}")
    return int(text)


def _decode(body: bytes, max_bytes: int, what: str) -> Any:
    try:
        return decode(body, max_bytes=max_bytes)
    except EncodingError as exc:
        raise WireError(f"{what} is not canonical msgpack: {exc}") from exc


def _record(value: Any, keys: set[str], what: str) -> dict:
    if not isinstance(value, dict) or set(value) != keys:
        raise WireError(f"{what} must be a map with exactly the keys {sorted(keys)}")
    return value


# -- dry_run --------------------------------------------------------------------------------------

_DRY_RUN_KEYS = {"height", "status", "reply", "reject_code", "reject_message", "instructions", "limit_exceeded",
                 "calls", "changed_paths", "more_paths"}


def encode_dry_run_answer(result: DryRunResult) -> bytes:
    """A dry run's answer (``replica.execution.dry_run.DryRunResult``) as a canonical map."""
    answer = {"height": result.height, "status": result.status, "reply": result.reply,
              "reject_code": result.reject_code, "reject_message": result.reject_message,
              "instructions": result.instructions, "limit_exceeded": result.limit_exceeded,
              "calls": [[c.receiver, c.method, c.payload, c.deadline] for c in result.calls],
              "changed_paths": list(result.changed_paths), "more_paths": result.more_paths}
    return encode(dict(sorted(answer.items())))   # canonical: keys in order


def _optional(value: Any, kind: type) -> bool:
    return value is None or isinstance(value, kind)


def decode_dry_run_answer(body: bytes, max_bytes: int) -> DryRunResult:
    """Strict inverse of ``encode_dry_run_answer`` (``WireError`` for anything else)."""
    v = _record(_decode(body, max_bytes, "dry run answer"), _DRY_RUN_KEYS, "dry run answer")
    calls = v["calls"]
    if not (is_u64(v["height"]) and v["status"] in ("replied", "rejected", "waiting") and _optional(v["reply"], bytes)
            and _optional(v["reject_code"], str) and _optional(v["reject_message"], str)
            and is_u64(v["instructions"]) and type(v["limit_exceeded"]) is bool and is_u64(v["more_paths"])
            and isinstance(calls, (list, tuple)) and isinstance(v["changed_paths"], (list, tuple))
            and all(isinstance(p, str) for p in v["changed_paths"])
            and all(isinstance(c, (list, tuple)) and len(c) == 4 and is_u64(c[0]) and isinstance(c[1], str)
                    and isinstance(c[2], bytes) and is_u64(c[3]) for c in calls)):
        raise WireError("dry run answer: a field of the wrong type")
    return DryRunResult(v["height"], v["status"], v["reply"], v["reject_code"], v["reject_message"],
                        v["instructions"], v["limit_exceeded"], tuple(OutgoingCall(*c) for c in calls),
                        tuple(v["changed_paths"]), v["more_paths"])


# -- read_state ---------------------------------------------------------------------------------

def encode_read_state_request(paths: list[list[bytes]] | tuple) -> bytes:
    return encode({"paths": [list(path) for path in paths]})


def decode_read_state_request(body: bytes) -> tuple[tuple[bytes, ...], ...]:
    """``{"paths": [[label, ...], ...]}`` with ``1 ..= MAX_PATHS`` paths of ``1 ..= MAX_PATH_LABELS``
    byte labels of at most ``MAX_LABEL_BYTES`` each."""
    request = _record(_decode(body, MAX_READ_STATE_BYTES, "read_state request"), {"paths"}, "read_state request")
    paths = request["paths"]
    if not isinstance(paths, tuple) or not 1 <= len(paths) <= MAX_PATHS:
        raise WireError(f"paths must be an array of 1 to {MAX_PATHS} paths")
    for path in paths:
        if not isinstance(path, tuple) or not 1 <= len(path) <= MAX_PATH_LABELS:
            raise WireError(f"a path must be an array of 1 to {MAX_PATH_LABELS} labels")
        for label in path:
            if not isinstance(label, bytes) or len(label) > MAX_LABEL_BYTES:
                raise WireError(f"a label must be bytes of at most {MAX_LABEL_BYTES}")
    return paths


@dataclass(frozen=True, slots=True)
class Certificate:
    """A read_state answer before verification: a (pruned) hash tree and a certification."""

    tree: HashTree
    certification: Certification


def encode_certificate(tree: HashTree, certification: Certification) -> bytes:
    return encode({"certificate": {"certification": encode_certification(certification), "tree": encode_tree(tree)}})


def decode_certificate(body: bytes) -> Certificate:
    """The tree (``decode_tree``, bounded by ``MAX_CERTIFICATE_BYTES`` and ``MAX_TREE_DEPTH``)
    and the certification (``decode_certification``) of a read_state answer."""
    outer = _record(_decode(body, MAX_CERTIFICATE_BYTES, "read_state answer"), {"certificate"}, "read_state answer")
    inner = _record(outer["certificate"], {"certification", "tree"}, "certificate")
    if not isinstance(inner["tree"], bytes) or not isinstance(inner["certification"], bytes):
        raise WireError("certificate fields must be bytes")
    try:
        tree = decode_tree(inner["tree"], max_bytes=MAX_CERTIFICATE_BYTES, max_depth=MAX_TREE_DEPTH)
    except TreeDecodeError as exc:
        raise WireError(f"certificate tree: {exc}") from exc
    try:
        certification = decode_certification(inner["certification"])
    except CertificationError as exc:
        raise WireError(f"certification: {exc}") from exc
    return Certificate(tree, certification)


# -- query ----------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class QueryAnswer:
    """A query's answer at ``height``: ``reply`` bytes, or a reject code name and message."""

    height: int
    reply: bytes | None = None
    reject_code: str | None = None
    reject_message: str | None = None

    @property
    def replied(self) -> bool:
        return self.reply is not None


def encode_query_answer(answer: QueryAnswer) -> bytes:
    if answer.reply is not None:
        return encode({"height": answer.height, "reply": answer.reply, "status": "replied"})
    return encode({"height": answer.height, "reject_code": answer.reject_code or "",
                   "reject_message": answer.reject_message or "", "status": "rejected"})


def decode_query_answer(body: bytes, max_bytes: int) -> QueryAnswer:
    value = _decode(body, max_bytes, "query answer")
    status = value.get("status") if isinstance(value, dict) else None
    if status == "replied":
        value = _record(value, {"height", "reply", "status"}, "query reply")
        if isinstance(value["reply"], bytes) and is_u64(value["height"]):
            return QueryAnswer(value["height"], reply=value["reply"])
    elif status == "rejected":
        value = _record(value, {"height", "reject_code", "reject_message", "status"}, "query reject")
        if is_u64(value["height"]) and isinstance(value["reject_code"], str) \
                and isinstance(value["reject_message"], str):
            return QueryAnswer(value["height"], reject_code=value["reject_code"],
                               reject_message=value["reject_message"])
    raise WireError("query answer must be a replied or rejected record")
