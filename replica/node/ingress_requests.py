"""Requests as the node's HTTP API takes them in: IC envelopes authenticated into the
replica's values, and query answers out (pure; the server is ``replica.node.http_api``).

* ``canister_of``: a route's effective canister id, a principal in the textual form; the
  management canister ``aaaaa-aa`` is the replica's ``MANAGEMENT_CANISTER_ID``.
* ``authenticated_call``: a call or query envelope authenticated at the node's clock
  (``replica.client.envelope.decode_signed_ingress``) for the route's canister: a call to the
  management canister may name any effective canister id, as the IC allows.
* ``authenticated_read_state``: who reads which paths.
* ``encode_query_answer``: the IC's query response, signed by the node.
"""

from __future__ import annotations

from replica.client.answers import QueryAnswer
from replica.client.envelope import canister_id_of, decode_signed_ingress, receiver_of
from replica.client.refusals import (
    BadIngressSignature, ExpiredIngress, IngressExpiryTooFar, IngressTooLarge, InvalidCanisterId, MalformedIngress,
    MalformedRequest, ReceiverMismatch, UnknownCanister,
)
from replica.ic import cbor
from replica.ic.envelope import authenticate, decode_envelope
from replica.ic.errors import CborTooLarge, EnvelopeRefused, IcFormatError, PrincipalError
from replica.ic.principal import Principal, principal_from_text
from replica.ic.query_response import (
    QueryOutcome, QueryRejected, QueryReplied, QueryResponse, query_outcome_fields, query_response_to_value,
    sign_query_response,
)
from replica.ic.requests import ReadStateContent
from state_manager.messages import MANAGEMENT_CANISTER_ID, Ingress, RejectCode

from .backend import NodeBackend

__all__ = ["canister_of", "authenticated_call", "authenticated_read_state", "encode_query_answer"]


def canister_of(text: str) -> int:
    """The canister a route names (``InvalidCanisterId`` unless a canister's textual id)."""
    try:
        return receiver_of(Principal(principal_from_text(text)))
    except (PrincipalError, UnknownCanister) as exc:
        raise InvalidCanisterId(f"the URL's canister id {text[:70]!r}: {exc}") from exc


def _check_window(expiry: int, backend: NodeBackend, what: str) -> None:
    now, ttl = backend.clock(), backend.limits.max_ingress_ttl_ns
    if expiry < now:
        raise ExpiredIngress(f"{what} expired at {expiry} ns, now {now} ns")
    if expiry > now + ttl:
        raise IngressExpiryTooFar(f"{what} expiry {expiry} ns is more than {ttl} ns after {now} ns")


def authenticated_call(body: bytes, canister: int, request_type: str, backend: NodeBackend, *,
                       check_window: bool) -> Ingress:
    """The ``Ingress`` of a ``request_type`` envelope to the route's ``canister`` (module docstring)."""
    ingress = decode_signed_ingress(body, backend.limits.max_ingress_bytes, now_ns=backend.clock(),
                                    request_type=request_type)
    if ingress.receiver != canister and ingress.receiver != MANAGEMENT_CANISTER_ID:
        raise ReceiverMismatch(f"the envelope is for canister {canister_id_of(ingress.receiver)}, the URL names "
                               f"{canister_id_of(canister)}")
    if check_window:
        _check_window(ingress.expiry_time, backend, request_type)
    return ingress


def authenticated_read_state(body: bytes, backend: NodeBackend, canister: int | None = None,
                             ) -> tuple[bytes, tuple[tuple[bytes, ...], ...]]:
    """The reader (the sender's principal) and the paths of a read_state envelope; the
    route's ``canister`` is the target a delegation chain restricted to targets must name."""
    target = None if canister is None else canister_id_of(canister).raw
    try:
        authenticated = authenticate(decode_envelope(body, max_bytes=backend.limits.max_ingress_bytes),
                                     now_ns=backend.clock(), target=target)
    except CborTooLarge as exc:
        raise IngressTooLarge(str(exc)) from exc
    except EnvelopeRefused as exc:   # the sender is not who the envelope says
        if exc.reason in ("malformed_envelope", "malformed_content"):
            raise MalformedRequest(f"{exc.reason}: {exc}") from exc
        raise BadIngressSignature(f"{exc.reason}: {exc}") from exc
    except IcFormatError as exc:
        raise MalformedRequest(f"{exc.reason}: {exc}") from exc
    content = authenticated.content
    if not isinstance(content, ReadStateContent):
        raise MalformedRequest(f"a {content.request_type} request sent to a read_state route")
    if not content.paths:
        raise MalformedRequest("a read_state asks for no path")
    if not all(content.paths):
        raise MalformedRequest("a read_state path has no label")
    _check_window(content.ingress_expiry, backend, "read_state")
    return authenticated.sender.raw, content.paths


def encode_query_answer(answer: QueryAnswer, request_id: bytes, backend: NodeBackend) -> bytes:
    """The IC's query response (``replica.ic.query_response``): the reply or reject, signed by
    the node's Ed25519 key at the node's clock (a backend without a node signs nothing). Sent
    without CBOR's self-describe tag, which the interface allows: icp-py-core reads the
    signatures of a tagged answer as missing under cbor2 6."""
    if answer.reply is not None:
        outcome: QueryOutcome = QueryReplied(answer.reply)
    else:
        outcome = QueryRejected(int(RejectCode[answer.reject_code or "SYS_FATAL"]), answer.reject_message or "", None)
    if backend.node_signer is None:
        return cbor.encode({**query_outcome_fields(outcome), "signatures": []}, self_describe=False)
    signature = sign_query_response(outcome, request_id, backend.clock(), backend.node_signer)
    return cbor.encode(query_response_to_value(QueryResponse(outcome, (signature,))), self_describe=False)
