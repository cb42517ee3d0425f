"""User requests in the IC's envelope format: signing them, and decoding them to ``Ingress``.

A call or query is the interface specification's request envelope (*Authentication*), CBOR
behind the self-describe tag::

    {content: {request_type: "call" | "query", canister_id, method_name, arg, sender,
               ingress_expiry, nonce?},
     sender_pubkey?, sender_sig?, sender_delegation?}

``replica.ic`` reads and checks it (``requests``, ``envelope``, ``delegations``); this module
maps it to the replica's ``Ingress``:

* ``message_id`` is the request id, ``hash_of_map(content)`` (*Request ids*), which the
  sender signs as ``"\\x0Aic-request" · request_id``;
* ``source`` is the sender's principal (``SHA-224(DER public key) · 0x02``, or ``0x04`` for the
  anonymous sender, who carries no key or signature);
* ``receiver`` is the canister's number: canister ``n`` is the principal ``n (8 bytes,
  big-endian) · 0x01 0x01``, and the management canister (``MANAGEMENT_CANISTER_ID``
  inside the replica) the empty principal ``aaaaa-aa``;
* ``method_payload`` is ``arg`` (the replica's value encoding of the argument,
  ``replica.execution.codec``), ``expiry_time`` is ``ingress_expiry``.

``ENVELOPE_VERSION`` counts the replica's envelope formats: version 1 was its own msgpack array
``[1, content, sender_pubkey, signature]``, refused now (``UnsupportedEnvelopeVersion``); version
2 is the IC's envelope, which carries no version of its own.

``decode_signed_ingress`` checks, in this order, each refusal typed (``replica.client.refusals``):
bytes within ``max_bytes`` before any parsing (``IngressTooLarge``); not a version-1 envelope;
strict CBOR and the envelope's and content's shapes (``MalformedIngress``); the request type
the route serves (``WrongRequestType``: a query envelope is never executed as a call); a
canister of this replica (``UnknownCanister``) and a method name of 1-128 characters; then the
credentials (``BadIngressSignature``): sender and key, the delegation chain — whose expiry is
checked against ``now_ns``, an argument, so the verdict is a function of its inputs — and the
signature. It reads no clock: whoever calls it says what time it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from replica.execution.codec import encode_value
from replica.ic.envelope import authenticate, decode_envelope, encode_envelope, sign_envelope
from replica.ic.errors import (
    AnonymousWithCredentials, CborTooLarge, DelegationRefused, IcFormatError, MalformedContent, MalformedSignature,
    MissingCredentials, NotACanisterPrincipal, PublicKeyError, SenderKeyMismatch, SenderSignatureInvalid,
)
from replica.ic.identities import Identity
from replica.ic.principal import Principal, canister_number, canister_principal
from replica.ic.request_id import request_id
from replica.ic.requests import CallContent, parse_content
from state_manager.messages import MANAGEMENT_CANISTER_ID, Ingress

from .refusals import (
    BadIngressSignature, IngressRefused, IngressTooLarge, MalformedIngress, UnknownCanister,
    UnsupportedEnvelopeVersion, WrongRequestType,
)

__all__ = [
    "ENVELOPE_VERSION", "CALL", "QUERY", "MAX_METHOD_NAME_CHARS", "SignedRequest", "canister_id_of", "receiver_of",
    "request_content", "sign_request", "sign_ingress", "decode_signed_ingress",
]

ENVELOPE_VERSION = 2
CALL, QUERY = "call", "query"
MAX_METHOD_NAME_CHARS = 128
_NONCE_BYTES = 8
_U64_LIMIT = 1 << 64
#: A version-1 envelope: a msgpack array of four (0x94) beginning with the version 1. As CBOR
#: these bytes begin an array of twenty, never an envelope (a map).
_VERSION_1_PREFIX = b"\x94\x01"
#: The refusals of ``replica.ic`` that say the credentials do not authenticate the sender.
_CREDENTIAL_REFUSALS = (SenderKeyMismatch, AnonymousWithCredentials, MissingCredentials, SenderSignatureInvalid,
                        DelegationRefused, MalformedSignature, PublicKeyError)


@dataclass(frozen=True, slots=True)
class SignedRequest:
    """An envelope's CBOR bytes and its request id (the call's message id)."""

    envelope: bytes
    message_id: bytes


def canister_id_of(receiver: int) -> Principal:
    """The principal of canister ``receiver`` on the wire (the management canister: ``aaaaa-aa``)."""
    if receiver == MANAGEMENT_CANISTER_ID:
        return Principal.management_canister()
    return canister_principal(receiver)


def receiver_of(canister_id: Principal) -> int:
    """The canister number a request's ``canister_id`` names; ``UnknownCanister`` for a
    principal that is no canister of this replica (the management canister has one id only,
    the empty principal)."""
    if canister_id.raw == b"":
        return MANAGEMENT_CANISTER_ID
    try:
        number = canister_number(canister_id)
    except NotACanisterPrincipal as exc:
        raise UnknownCanister(f"{canister_id} is not a canister id of this replica: {exc}") from exc
    if number == MANAGEMENT_CANISTER_ID:
        raise UnknownCanister(f"{canister_id} is no canister: the management canister is aaaaa-aa")
    return number


def _nonce(nonce: bytes | int | None) -> Optional[bytes]:
    """A u64 nonce travels as its 8 big-endian bytes (the interface's nonce is a blob)."""
    if nonce is None or type(nonce) is bytes:
        return nonce
    if type(nonce) is not int or not 0 <= nonce < _U64_LIMIT:
        raise MalformedContent(f"a nonce is a blob or a u64, not {nonce!r}")
    return nonce.to_bytes(_NONCE_BYTES, "big")


def request_content(sender: Principal, canister: int | Principal, method_name: str, arg: bytes, *,
                    expiry: int, nonce: bytes | int | None = None, request_type: str = CALL) -> dict:
    """The content map of a call or query (``nonce`` omitted when ``None``); ``canister`` is a
    canister number of this replica or any principal."""
    canister_id = canister if isinstance(canister, Principal) else canister_id_of(canister)
    content = {"request_type": request_type, "sender": sender.raw, "ingress_expiry": expiry,
               "canister_id": canister_id.raw, "method_name": method_name, "arg": arg}
    nonce_bytes = _nonce(nonce)
    if nonce_bytes is not None:
        content["nonce"] = nonce_bytes
    return content


def sign_request(identity: Identity | None, canister: int | Principal, method_name: str, arg: bytes, *,
                 expiry: int, nonce: bytes | int | None = None, request_type: str = CALL) -> SignedRequest:
    """The envelope ``identity`` (``None``: the anonymous sender) signs to call or query
    ``method_name`` with the argument bytes ``arg``, and its request id."""
    sender = Principal.anonymous() if identity is None else identity.principal
    content = request_content(sender, canister, method_name, arg, expiry=expiry, nonce=nonce,
                              request_type=request_type)
    return SignedRequest(encode_envelope(sign_envelope(content, identity)), request_id(content))


def sign_ingress(identity: Identity | None, receiver: int, method_name: str, arg: object, nonce: bytes | int | None,
                 expiry: int, *, request_type: str = CALL) -> bytes:
    """The envelope bytes a user submits to call ``method_name(arg)`` on canister ``receiver``
    (``arg`` a value, encoded as canisters read it)."""
    return sign_request(identity, receiver, method_name, encode_value(arg), expiry=expiry, nonce=nonce,
                        request_type=request_type).envelope


def _refusal(exc: IcFormatError) -> IngressRefused:
    """The ingress refusal answering a refusal of ``replica.ic`` (its reason kept in the message)."""
    if isinstance(exc, CborTooLarge):
        return IngressTooLarge(str(exc))
    if isinstance(exc, _CREDENTIAL_REFUSALS):
        return BadIngressSignature(f"{exc.reason}: {exc}")
    return MalformedIngress(f"{exc.reason}: {exc}")


def decode_signed_ingress(envelope: bytes, max_bytes: int, *, now_ns: int, request_type: str = CALL) -> Ingress:
    """The authenticated ``Ingress`` of an envelope of ``request_type`` after every check of the
    module docstring, or the ``IngressRefused`` subclass of the first that fails. ``now_ns``
    is the time delegations must not have expired at."""
    if not isinstance(envelope, (bytes, bytearray)):
        raise MalformedIngress(f"envelope must be bytes, not {type(envelope).__name__}")
    if len(envelope) > max_bytes:
        raise IngressTooLarge(f"envelope of {len(envelope)} bytes exceeds {max_bytes}")
    data = bytes(envelope)
    if data.startswith(_VERSION_1_PREFIX):
        raise UnsupportedEnvelopeVersion(
            "a version-1 envelope (the replica's former msgpack format): requests are IC envelopes "
            f"(CBOR, envelope version {ENVELOPE_VERSION}) now")
    try:
        decoded = decode_envelope(data, max_bytes=max_bytes)
        content = parse_content(decoded.content)
    except IcFormatError as exc:
        raise _refusal(exc) from exc
    if content.request_type != request_type or not isinstance(content, CallContent):
        raise WrongRequestType(f"a {content.request_type} request where a {request_type} is expected")
    receiver = receiver_of(content.canister_id)
    if not 0 < len(content.method_name) <= MAX_METHOD_NAME_CHARS:
        raise MalformedIngress(f"a method name has 1-{MAX_METHOD_NAME_CHARS} characters")
    try:
        authenticated = authenticate(decoded, now_ns=now_ns)
    except IcFormatError as exc:
        raise _refusal(exc) from exc
    return Ingress(authenticated.sender.raw, receiver, content.method_name, content.arg, authenticated.request_id,
                   content.ingress_expiry)
