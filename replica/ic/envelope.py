"""Request envelopes: ``{content, sender_pubkey?, sender_sig?, sender_delegation?}``.

The body of every call, query and read_state request (the interface specification,
*Authentication*). ``sign_envelope`` makes one; ``decode_envelope`` reads one from CBOR with
its shape checked; ``authenticate`` decides who sent it, in this order, each refusal typed:

1. the content's fields (``replica.ic.requests``; ``MalformedContent``);
2. the anonymous sender (``0x04``) carries no key, signature or delegation
   (``AnonymousWithCredentials``) and needs none;
3. any other sender carries ``sender_pubkey`` and ``sender_sig`` (``MissingCredentials``), and
   is the self-authenticating principal of ``sender_pubkey`` (``SenderKeyMismatch``);
4. the delegation chain passes authority from ``sender_pubkey`` to a last key
   (``replica.ic.delegations``: count, repeated keys, expiry against ``now``, targets, signatures);
5. ``sender_sig`` signs ``"\\x0Aic-request" · request_id`` under that last key
   (``SenderSignatureInvalid``).

The request id is the representation-independent hash of the content map as it arrived, so a
signature covers exactly what was sent. Whether ``ingress_expiry`` is acceptable is the
receiver's policy (it knows its clock and its limits), not a property of the envelope.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import cbor
from .delegations import SignedDelegation, delegations_from_value, verify_delegation_chain
from .errors import (
    AnonymousWithCredentials, MalformedEnvelope, MalformedSignature, MissingCredentials, SenderKeyMismatch,
    SenderSignatureInvalid,
)
from .identities import Identity
from .principal import ANONYMOUS_BYTES, Principal, self_authenticating
from .request_id import request_id
from .requests import CallContent, RequestContent, parse_content
from .signatures import REQUEST_DOMAIN, verify_signature

__all__ = [
    "Envelope", "Authenticated", "sign_envelope", "envelope_from_value", "decode_envelope", "encode_envelope",
    "authenticate",
]

_FIELDS = {"content", "sender_pubkey", "sender_sig", "sender_delegation"}


@dataclass(frozen=True, slots=True)
class Envelope:
    """An envelope as sent: ``content`` is the raw content map (its id is hashed from it)."""

    content: dict[str, Any]
    sender_pubkey: bytes | None = None
    sender_sig: bytes | None = None
    sender_delegation: tuple[SignedDelegation, ...] | None = None

    def to_value(self) -> dict[str, Any]:
        value: dict[str, Any] = {"content": self.content}
        if self.sender_pubkey is not None:
            value["sender_pubkey"] = self.sender_pubkey
        if self.sender_sig is not None:
            value["sender_sig"] = self.sender_sig
        if self.sender_delegation is not None:
            value["sender_delegation"] = [signed.to_value() for signed in self.sender_delegation]
        return value


@dataclass(frozen=True, slots=True)
class Authenticated:
    """An envelope that passed every check: who sent which request, and its id."""

    sender: Principal
    request_id: bytes
    content: RequestContent


def sign_envelope(content: Mapping[str, Any], identity: Identity | None, *,
                  sender_pubkey: bytes | None = None,
                  delegations: Sequence[SignedDelegation] | None = None) -> Envelope:
    """An envelope for ``content``, signed by ``identity`` (``None``: the anonymous sender).
    With ``delegations``, ``sender_pubkey`` is the key at the chain's start (the sender's) and
    ``identity`` holds the key the chain ends with; the content's ``sender`` must be the
    sender's principal either way (``authenticate`` checks it)."""
    content = dict(content)
    if identity is None:
        return Envelope(content)
    signature = identity.sign(REQUEST_DOMAIN + request_id(content))
    chain = None if delegations is None else tuple(delegations)
    return Envelope(content, sender_pubkey or identity.der_public_key, signature, chain)


def envelope_from_value(value: object) -> Envelope:
    """An envelope from its decoded CBOR value, its shape checked (``MalformedEnvelope``,
    ``TooManyDelegations``)."""
    if type(value) is not dict or "content" not in value or not value.keys() <= _FIELDS:
        raise MalformedEnvelope("an envelope is {content, sender_pubkey?, sender_sig?, sender_delegation?}")
    content, pubkey, sig = value["content"], value.get("sender_pubkey"), value.get("sender_sig")
    if type(content) is not dict:
        raise MalformedEnvelope("an envelope's content is a map")
    if (pubkey is not None and type(pubkey) is not bytes) or (sig is not None and type(sig) is not bytes):
        raise MalformedEnvelope("sender_pubkey and sender_sig are blobs")
    chain = None if "sender_delegation" not in value else delegations_from_value(value["sender_delegation"])
    return Envelope(content, pubkey, sig, chain)


def decode_envelope(body: bytes, *, max_bytes: int, max_depth: int = 16) -> Envelope:
    """An envelope from a request body: strict CBOR within ``max_bytes`` and ``max_depth``
    (an envelope nests 5 deep at most: envelope, delegations, delegation, map, targets), then its shape."""
    return envelope_from_value(cbor.decode(body, max_bytes=max_bytes, max_depth=max_depth))


def encode_envelope(envelope: Envelope) -> bytes:
    """The CBOR request body of ``envelope`` (with the self-describe tag)."""
    return cbor.encode(envelope.to_value())


def authenticate(envelope: Envelope, *, now_ns: int, target: bytes | None = None) -> Authenticated:
    """Who sent ``envelope``, after the checks of the module docstring. ``target`` is the
    canister delegations' ``targets`` must name; by default a call's or query's ``canister_id``
    (a read_state has none, so delegations restricted to targets do not apply to it)."""
    content = parse_content(envelope.content)
    rid = request_id(envelope.content)
    if content.sender.raw == ANONYMOUS_BYTES:
        if envelope.sender_pubkey is not None or envelope.sender_sig is not None or envelope.sender_delegation:
            raise AnonymousWithCredentials("the anonymous sender carries no key, signature or delegation")
        return Authenticated(content.sender, rid, content)
    if envelope.sender_pubkey is None or envelope.sender_sig is None:
        raise MissingCredentials(f"sender {content.sender} needs sender_pubkey and sender_sig")
    if self_authenticating(envelope.sender_pubkey) != content.sender:
        raise SenderKeyMismatch(f"sender {content.sender} is not the principal of sender_pubkey")
    if target is None and isinstance(content, CallContent):
        target = content.canister_id.raw
    signing_key = verify_delegation_chain(envelope.sender_pubkey, envelope.sender_delegation or (),
                                          now_ns=now_ns, target=target)
    try:
        valid = verify_signature(signing_key, envelope.sender_sig, REQUEST_DOMAIN + rid)
    except MalformedSignature as exc:
        raise SenderSignatureInvalid(f"sender_sig: {exc}") from exc
    if not valid:
        raise SenderSignatureInvalid("sender_sig does not sign the request id under the sender's key")
    return Authenticated(content.sender, rid, content)
