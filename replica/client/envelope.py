"""User ingress: signed envelopes in, authenticated ``Ingress`` values out.

Envelope (canonical msgpack): ``[1, content, sender_pubkey, signature]`` with
``content = [receiver, method_name, arg_bytes, nonce, ingress_expiry]``.
``message_id = SHA-256(domain_sep("ic-request") ‖ encode(content) ‖ sender_pubkey)`` and
the signature is Ed25519 over ``message_id``. The sender's id is self-authenticating:
``source = SHA-256(pubkey)[:29] ‖ 0x02``.

Decoding raises the envelope-level refusals of ``replica.client.refusals``
(``MalformedIngress``, ``IngressTooLarge``, ``BadIngressSignature``).
"""

from __future__ import annotations

import hashlib

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from replica.execution.codec import encode_value
from state_manager.encoding import EncodingError, decode, encode
from state_manager.messages import Ingress

from .identity import UserKey, source_of
from .refusals import BadIngressSignature, IngressTooLarge, MalformedIngress

__all__ = ["ENVELOPE_VERSION", "compute_message_id", "sign_ingress", "decode_signed_ingress"]

ENVELOPE_VERSION = 1
_DOMAIN = b"\x0aic-request"


def compute_message_id(content: tuple, public_key: bytes) -> bytes:
    """``SHA-256(domain_sep("ic-request") ‖ encode(content) ‖ pubkey)``."""
    return hashlib.sha256(_DOMAIN + encode(content) + public_key).digest()


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
