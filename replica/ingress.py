"""User ingress: signed envelopes in, authenticated ``Ingress`` values out.

Envelope (canonical msgpack): ``[1, content, sender_pubkey, signature]`` with
``content = [receiver, method_name, arg_bytes, nonce, ingress_expiry]``.
``message_id = SHA-256(domain_sep("ic-request") ‖ encode(content) ‖ sender_pubkey)`` and
the signature is Ed25519 over ``message_id``. The sender's id is self-authenticating:
``source = SHA-256(pubkey)[:29] ‖ 0x02``.

Every submission the replica refuses raises one ``IngressRefused`` subclass, whose
``reason`` is a stable machine-readable code (what the HTTP ingress API returns):

=====================  ==========================  ===========================================
error                  ``reason``                  refused because
=====================  ==========================  ===========================================
MalformedIngress       ``malformed``               the envelope does not decode (this module)
IngressTooLarge        ``too_large``               envelope or message above the size limit
BadIngressSignature    ``bad_signature``           the signature does not verify (this module)
ExpiredIngress         ``expired``                 ``expiry < now``
IngressExpiryTooFar    ``expiry_too_far``          ``expiry > now + max_ingress_ttl``
DuplicateIngress       ``duplicate``               the message id is pooled or inducted already
UnknownCanister        ``unknown_canister``        no such canister (in our range or in none)
CanisterNotOnSubnet    ``canister_not_on_subnet``  the routing table puts it on another subnet
IngressPoolFull        ``pool_full``               the node's ingress pool is at its bound
=====================  ==========================  ===========================================

The envelope checks raise here; the rest are verdicts (``Admission``) of the node's ingress
pool and receiver check, turned into their error by ``refusal_for``. A refused message enters
no pool, no block and no ingress history.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import ClassVar

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from consensus_stub.ingress_pool import Admission
from state_manager.encoding import EncodingError, decode, encode

from .execution.codec import encode_value
from state_manager.messages import Ingress

__all__ = [
    "IngressRefused", "MalformedIngress", "IngressTooLarge", "BadIngressSignature",
    "ExpiredIngress", "IngressExpiryTooFar", "DuplicateIngress", "UnknownCanister", "CanisterNotOnSubnet",
    "IngressPoolFull", "refusal_for", "UserKey", "compute_message_id", "source_of", "sign_ingress",
    "decode_signed_ingress", "ENVELOPE_VERSION",
]

ENVELOPE_VERSION = 1
_DOMAIN = b"\x0aic-request"


class IngressRefused(ValueError):
    """A submission the replica refuses; nothing about it enters the replica. ``reason`` is
    the stable machine-readable code of the refusal (module docstring)."""

    reason: ClassVar[str] = "refused"


class MalformedIngress(IngressRefused):
    reason = "malformed"


class IngressTooLarge(IngressRefused):
    reason = "too_large"


class BadIngressSignature(IngressRefused):
    reason = "bad_signature"


class ExpiredIngress(IngressRefused):
    reason = "expired"


class IngressExpiryTooFar(IngressRefused):
    reason = "expiry_too_far"


class DuplicateIngress(IngressRefused):
    reason = "duplicate"


class UnknownCanister(IngressRefused):
    reason = "unknown_canister"


class CanisterNotOnSubnet(IngressRefused):
    reason = "canister_not_on_subnet"


class IngressPoolFull(IngressRefused):
    reason = "pool_full"


_REFUSAL_BY_REASON: dict[str, type[IngressRefused]] = {
    cls.reason: cls for cls in (
        MalformedIngress, IngressTooLarge, BadIngressSignature, ExpiredIngress, IngressExpiryTooFar,
        DuplicateIngress, UnknownCanister, CanisterNotOnSubnet, IngressPoolFull)
}


def refusal_for(verdict: Admission, ingress: Ingress, now: int) -> IngressRefused | None:
    """The typed error of a refusing ``verdict`` on ``ingress`` at ``now`` (``None`` for
    ``ADDED``): the class whose ``reason`` is the verdict's, with the verdict's description."""
    if verdict is Admission.ADDED:
        return None
    return _REFUSAL_BY_REASON[verdict.reason](
        f"{verdict.description} (message {ingress.message_id.hex()} "
        f"to canister {ingress.receiver}, expiry {ingress.expiry_time} ns, now {now} ns)")


def source_of(public_key: bytes) -> bytes:
    """``source = SHA-256(pubkey)[:29] ‖ 0x02`` (a self-authenticating user id)."""
    return hashlib.sha256(public_key).digest()[:29] + b"\x02"


def compute_message_id(content: tuple, public_key: bytes) -> bytes:
    """``SHA-256(domain_sep("ic-request") ‖ encode(content) ‖ pubkey)``."""
    return hashlib.sha256(_DOMAIN + encode(content) + public_key).digest()


@dataclass(frozen=True)
class UserKey:
    """A user's Ed25519 key (shell side; tests and examples derive it from a seed)."""

    private_key: Ed25519PrivateKey

    @classmethod
    def from_seed(cls, seed: bytes) -> "UserKey":
        return cls(Ed25519PrivateKey.from_private_bytes(hashlib.sha256(seed).digest()))

    @property
    def public_key(self) -> bytes:
        return self.private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)

    @property
    def source(self) -> bytes:
        return source_of(self.public_key)


def sign_ingress(key: UserKey, receiver: int, method_name: str, arg: object, nonce: int, expiry: int) -> bytes:
    """The envelope bytes a user submits to call ``method_name(arg)`` on ``receiver``."""
    content = (receiver, method_name, encode_value(arg), nonce, expiry)
    message_id = compute_message_id(content, key.public_key)
    return encode([ENVELOPE_VERSION, list(content), key.public_key, key.private_key.sign(message_id)])


def decode_signed_ingress(envelope: bytes, max_bytes: int) -> Ingress:
    """Check an envelope completely (size, canonical form, field types, signature) and return
    the authenticated ``Ingress``; raise ``MalformedIngress``, ``IngressTooLarge`` or
    ``BadIngressSignature`` otherwise."""
    if not isinstance(envelope, (bytes, bytearray)):
        raise MalformedIngress(f"envelope must be bytes, not {type(envelope).__name__}")
    if len(envelope) > max_bytes:
        raise IngressTooLarge(f"envelope of {len(envelope)} bytes exceeds {max_bytes}")
    try:
        value = decode(bytes(envelope), max_bytes=max_bytes)
    except EncodingError as exc:
        raise MalformedIngress(f"not canonical msgpack: {exc}") from exc
    if not (isinstance(value, tuple) and len(value) == 4):
        raise MalformedIngress("envelope must be [version, content, sender_pubkey, signature]")
    version, content, public_key, signature = value
    if type(version) is not int or version != ENVELOPE_VERSION:  # ``true`` is not 1
        raise MalformedIngress(f"unknown envelope version {version!r}")
    if not (isinstance(content, tuple) and len(content) == 5):
        raise MalformedIngress("content must be [receiver, method, arg, nonce, expiry]")
    receiver, method_name, arg, nonce, expiry = content
    if not (type(receiver) is int and 0 <= receiver < 2**64):
        raise MalformedIngress("receiver must be a canister id (u64)")
    if not (isinstance(method_name, str) and 0 < len(method_name) <= 128):
        raise MalformedIngress("method name must be 1-128 characters")
    if not isinstance(arg, bytes):
        raise MalformedIngress("arg must be bytes")
    if not (type(nonce) is int and 0 <= nonce < 2**64 and type(expiry) is int and 0 <= expiry < 2**64):
        raise MalformedIngress("nonce and expiry must be u64")
    if not (isinstance(public_key, bytes) and len(public_key) == 32):
        raise MalformedIngress("sender public key must be 32 bytes (Ed25519)")
    if not (isinstance(signature, bytes) and len(signature) == 64):
        raise MalformedIngress("signature must be 64 bytes")
    message_id = compute_message_id(content, public_key)
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message_id)
    except (InvalidSignature, ValueError) as exc:
        raise BadIngressSignature("signature does not verify under the sender's key") from exc
    return Ingress(source_of(public_key), receiver, method_name, arg, message_id, expiry)
