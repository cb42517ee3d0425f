"""Query answers as the IC sends them: signed by the answering node, in CBOR both ways.

The interface specification, *Request: Query call*: the body of a query's answer is ::

    query-response = tagged<{ status: "replied", reply: { arg: blob }, signatures: [+ node-signature] }
                          // { status: "rejected", reject_code: nat, reject_message: text,
                               ? error_code: text, signatures: [+ node-signature] }>
    node-signature = { timestamp: nat, signature: blob, identity: principal }

and an answer ``R`` to the query ``Q`` is correctly signed when (*Query call response signatures*)::

    ∀ {timestamp: T, signature: Sig, identity: NodeId} ∈ R.signatures.
      lookup(["subnet", SubnetId, "node", NodeId, "public_key"], Cert) = Found PK ∧
      verify_signature PK Sig ("\\x0Bic-response" · hash_of_map({
          status: "replied", reply: R.reply, timestamp: T, request_id: hash_of_map(Q)}))
      (rejected: {status: "rejected", reject_code, reject_message, error_code, timestamp, request_id})

``PK`` is the node's DER Ed25519 key. An absent ``error_code`` is absent from the signed map too
(hash_of_map hashes the fields present), as @dfinity/agent hashes it. Here a node signs with its
Ed25519 identity (``sign_query_response``); a verifier holding the subnet's node keys (from a
certificate, or from the registry) checks every signature (``verify_query_response``), and
also that each ``identity`` is the self-authenticating principal of the key it is checked
under, which holds on the IC (a node's id is that principal of its signing key).

``decode_query_response`` is strict: the exact fields of one of the two shapes, nats below
``2**64``, a reject code of at least 1, at most ``MAX_NODE_SIGNATURES`` signatures of 64 bytes
by principals; any other value is ``MalformedQueryResponse``, an empty list
``QueryResponseUnsigned``. Pure: the timestamp comes from the caller's clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Union

from . import cbor
from .errors import (
    MalformedQueryResponse, PrincipalError, QueryResponseUnsigned, QuerySignatureInvalid, QuerySignerMismatch,
    QuerySignerUnknown, SigningKeyError, UnsupportedKeyScheme,
)
from .identities import Identity
from .principal import Principal, node_principal
from .public_keys import KeyScheme, parse_der_public_key
from .request_id import REQUEST_ID_BYTES, hash_of_map
from .signatures import ED25519_SIGNATURE_BYTES, RESPONSE_DOMAIN, verify_signature

__all__ = [
    "MAX_NODE_SIGNATURES", "QueryReplied", "QueryRejected", "QueryOutcome", "NodeSignature", "QueryResponse",
    "query_outcome_fields", "signed_map", "response_hash", "sign_query_response", "verify_node_signature", "verify_query_response",
    "query_response_to_value", "query_response_from_value", "encode_query_response", "decode_query_response",
]

#: More than any subnet has nodes; the IC sends the answering node's signature only.
MAX_NODE_SIGNATURES = 64
_U64 = 1 << 64
_REPLIED_FIELDS = frozenset({"status", "reply", "signatures"})
_REJECTED_FIELDS = frozenset({"status", "reject_code", "reject_message", "signatures"})
_SIGNATURE_FIELDS = frozenset({"timestamp", "signature", "identity"})


@dataclass(frozen=True, slots=True)
class QueryReplied:
    """``status: "replied"``: the method's reply."""

    arg: bytes


@dataclass(frozen=True, slots=True)
class QueryRejected:
    """``status: "rejected"``: the interface's reject code (``state_manager.messages.RejectCode``
    values), its message, and the optional error code (``"IC0406"`` and the like)."""

    reject_code: int
    reject_message: str
    error_code: str | None = None


QueryOutcome = Union[QueryReplied, QueryRejected]


@dataclass(frozen=True, slots=True)
class NodeSignature:
    """One ``node-signature``: who signed (the node's principal), when (ns), and the signature."""

    timestamp: int
    signature: bytes
    identity: Principal


@dataclass(frozen=True, slots=True)
class QueryResponse:
    """A whole query answer: its outcome and the node signatures over it."""

    outcome: QueryOutcome
    signatures: tuple[NodeSignature, ...]


def _nat(value: object, what: str) -> int:
    if type(value) is not int or not 0 <= value < _U64:
        raise MalformedQueryResponse(f"{what} is a nat below 2**64, not {value!r}")
    return value


def _check_outcome(outcome: object) -> QueryOutcome:
    if isinstance(outcome, QueryReplied):
        if type(outcome.arg) is not bytes:
            raise MalformedQueryResponse("a reply's arg is a blob")
    elif isinstance(outcome, QueryRejected):
        if _nat(outcome.reject_code, "reject_code") < 1:
            raise MalformedQueryResponse("reject codes start at 1")
        if type(outcome.reject_message) is not str:
            raise MalformedQueryResponse("reject_message is text")
        if outcome.error_code is not None and type(outcome.error_code) is not str:
            raise MalformedQueryResponse("error_code is text")
    else:
        raise MalformedQueryResponse(f"a query outcome is QueryReplied or QueryRejected, not {type(outcome).__name__}")
    return outcome


def query_outcome_fields(outcome: QueryOutcome) -> dict[str, Any]:
    if isinstance(outcome, QueryReplied):
        return {"status": "replied", "reply": {"arg": outcome.arg}}
    fields: dict[str, Any] = {"status": "rejected", "reject_code": outcome.reject_code,
                              "reject_message": outcome.reject_message}
    if outcome.error_code is not None:
        fields["error_code"] = outcome.error_code
    return fields


def signed_map(outcome: QueryOutcome, timestamp: int, request_id: bytes) -> dict[str, Any]:
    """The map a node signs (module docstring): the outcome's fields, ``timestamp`` and ``request_id``."""
    _check_outcome(outcome)
    if type(request_id) is not bytes or len(request_id) != REQUEST_ID_BYTES:
        raise MalformedQueryResponse(f"a request id is {REQUEST_ID_BYTES} bytes")
    return {**query_outcome_fields(outcome), "timestamp": _nat(timestamp, "timestamp"), "request_id": request_id}


def response_hash(outcome: QueryOutcome, timestamp: int, request_id: bytes) -> bytes:
    """``hash_of_map(signed_map(outcome, timestamp, request_id))``; the node signs
    ``"\\x0Bic-response" · response_hash``."""
    return hash_of_map(signed_map(outcome, timestamp, request_id))


def _ed25519_principal(der_key: bytes) -> Principal:
    """The node id of ``der_key``; ``UnsupportedKeyScheme`` unless it is an Ed25519 key (a
    node's signing key is one)."""
    if parse_der_public_key(der_key).scheme is not KeyScheme.ED25519:
        raise UnsupportedKeyScheme("node signing keys are Ed25519 keys")
    return node_principal(der_key)


def sign_query_response(outcome: QueryOutcome, request_id: bytes, timestamp: int, signer: Identity) -> NodeSignature:
    """The ``node-signature`` of ``signer`` (the node's Ed25519 identity) over the answer
    ``outcome`` to the query ``request_id`` at ``timestamp`` (ns since the epoch, the node's clock)."""
    try:
        identity = _ed25519_principal(signer.der_public_key)
    except UnsupportedKeyScheme as exc:
        raise SigningKeyError(f"a node signs query answers with its Ed25519 key: {exc}") from exc
    payload = RESPONSE_DOMAIN + response_hash(outcome, timestamp, request_id)
    return NodeSignature(timestamp, signer.sign(payload), identity)


def verify_node_signature(outcome: QueryOutcome, request_id: bytes, signature: NodeSignature,
                          node_public_key: bytes) -> None:
    """Raise unless ``signature`` is ``node_public_key``'s (DER Ed25519) over ``outcome`` to the
    query ``request_id``: ``QuerySignerMismatch`` when its identity is not the key's principal,
    ``QuerySignatureInvalid`` when it does not verify (``MalformedSignature``,
    ``MalformedPublicKey``, ``UnsupportedKeyScheme`` for bytes that cannot be one)."""
    if _ed25519_principal(node_public_key) != signature.identity:
        raise QuerySignerMismatch(f"{signature.identity} is not the node id of the key it is checked under")
    payload = RESPONSE_DOMAIN + response_hash(outcome, signature.timestamp, request_id)
    if not verify_signature(node_public_key, signature.signature, payload):
        raise QuerySignatureInvalid(f"the signature of node {signature.identity} does not sign this answer")


def verify_query_response(response: QueryResponse, request_id: bytes, node_keys: Mapping[Principal, bytes]) -> None:
    """Raise unless every signature of ``response`` is valid (``verify_node_signature``) under
    the key ``node_keys`` holds for its node (the subnet's nodes and their DER keys):
    ``QueryResponseUnsigned`` for none, ``QuerySignerUnknown`` for a node not in ``node_keys``."""
    if not response.signatures:
        raise QueryResponseUnsigned("a query answer carries at least one node signature")
    for signature in response.signatures:
        key = node_keys.get(signature.identity)
        if key is None:
            raise QuerySignerUnknown(f"{signature.identity} is not a node of the answering subnet")
        verify_node_signature(response.outcome, request_id, signature, key)


# -- the answer's CBOR body ---------------------------------------------------------------------


def query_response_to_value(response: QueryResponse) -> dict[str, Any]:
    """The CBOR value of ``response`` (module docstring's ``query-response``, untagged)."""
    _check_outcome(response.outcome)
    if not response.signatures:   # what we send we would accept
        raise QueryResponseUnsigned("a query answer carries at least one node signature")
    signatures = [{"timestamp": _nat(s.timestamp, "timestamp"), "signature": s.signature, "identity": s.identity.raw}
                  for s in response.signatures]
    return {**query_outcome_fields(response.outcome), "signatures": signatures}


def _signature_from_value(value: object) -> NodeSignature:
    if type(value) is not dict or value.keys() != _SIGNATURE_FIELDS:
        raise MalformedQueryResponse("a node signature is {timestamp, signature, identity}")
    signature, identity = value["signature"], value["identity"]
    if type(signature) is not bytes or len(signature) != ED25519_SIGNATURE_BYTES:
        raise MalformedQueryResponse(f"a node signature is {ED25519_SIGNATURE_BYTES} bytes (Ed25519)")
    if type(identity) is not bytes:
        raise MalformedQueryResponse("a node signature's identity is a principal (a blob)")
    try:
        principal = Principal(identity)
    except PrincipalError as exc:
        raise MalformedQueryResponse(f"identity: {exc}") from exc
    return NodeSignature(_nat(value["timestamp"], "timestamp"), signature, principal)


def _outcome_from_value(value: dict) -> QueryOutcome:
    status = value.get("status")
    if status == "replied":
        reply = value.get("reply")
        if value.keys() != _REPLIED_FIELDS or type(reply) is not dict or reply.keys() != {"arg"}:
            raise MalformedQueryResponse('a reply is {status: "replied", reply: {arg}, signatures}')
        return _check_outcome(QueryReplied(reply["arg"]))
    if status == "rejected":
        if not _REJECTED_FIELDS <= value.keys() <= _REJECTED_FIELDS | {"error_code"}:
            raise MalformedQueryResponse(
                'a reject is {status: "rejected", reject_code, reject_message, error_code?, signatures}')
        return _check_outcome(QueryRejected(value["reject_code"], value["reject_message"], value.get("error_code")))
    raise MalformedQueryResponse(f'status is "replied" or "rejected", not {status!r}')


def query_response_from_value(value: object) -> QueryResponse:
    """The answer a decoded CBOR value is (the module docstring's refusals)."""
    if type(value) is not dict:
        raise MalformedQueryResponse("a query answer is a map")
    outcome = _outcome_from_value(value)
    signatures = value["signatures"]
    if type(signatures) is not list:
        raise MalformedQueryResponse("signatures is an array")
    if not signatures:
        raise QueryResponseUnsigned("a query answer carries at least one node signature")
    if len(signatures) > MAX_NODE_SIGNATURES:
        raise MalformedQueryResponse(f"{len(signatures)} node signatures; at most {MAX_NODE_SIGNATURES}")
    return QueryResponse(outcome, tuple(_signature_from_value(s) for s in signatures))


def encode_query_response(response: QueryResponse) -> bytes:
    """The body of a query's answer: ``response`` in CBOR behind the self-describe tag."""
    return cbor.encode(query_response_to_value(response))


def decode_query_response(body: bytes, *, max_bytes: int) -> QueryResponse:
    """A query answer from its body: strict CBOR within ``max_bytes`` and nesting at most 4
    (answer, signatures, signature, and a bignum's tag, which cbor2 counts, so that a timestamp
    too large is refused as such), then its shape."""
    return query_response_from_value(cbor.decode(body, max_bytes=max_bytes, max_depth=4))
