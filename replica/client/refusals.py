"""Why the replica refuses a submission: one ``IngressRefused`` subclass per reason.

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
ReceiverMismatch       ``receiver_mismatch``       the HTTP API's URL names another canister
=====================  ==========================  ===========================================

The envelope checks raise here; the rest are verdicts (``Admission``) of the node's ingress
pool and receiver check, turned into their error by ``refusal_for``. A refused message enters
no pool, no block and no ingress history. ``refusal_class`` maps a ``reason`` back to its class
(the agent raises the node's refusal from an HTTP answer).
"""

from __future__ import annotations

from typing import ClassVar

from consensus_stub.ingress_pool import Admission
from state_manager.messages import Ingress

from replica.errors import ReplicaError

__all__ = [
    "IngressRefused", "MalformedIngress", "IngressTooLarge", "BadIngressSignature", "ExpiredIngress",
    "IngressExpiryTooFar", "DuplicateIngress", "UnknownCanister", "CanisterNotOnSubnet", "IngressPoolFull",
    "ReceiverMismatch", "refusal_for", "refusal_class",
]


class IngressRefused(ReplicaError, ValueError):
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


class ReceiverMismatch(IngressRefused):
    reason = "receiver_mismatch"


_REFUSAL_BY_REASON: dict[str, type[IngressRefused]] = {
    cls.reason: cls for cls in (
        MalformedIngress, IngressTooLarge, BadIngressSignature, ExpiredIngress, IngressExpiryTooFar,
        DuplicateIngress, UnknownCanister, CanisterNotOnSubnet, IngressPoolFull, ReceiverMismatch)
}


def refusal_class(reason: str) -> type[IngressRefused] | None:
    """The ``IngressRefused`` subclass whose ``reason`` is ``reason`` (``None`` if none is)."""
    return _REFUSAL_BY_REASON.get(reason)


def refusal_for(verdict: Admission, ingress: Ingress, now: int) -> IngressRefused | None:
    """The typed error of a refusing ``verdict`` on ``ingress`` at ``now`` (``None`` for
    ``ADDED``): the class whose ``reason`` is the verdict's, with the verdict's description."""
    if verdict is Admission.ADDED:
        return None
    return _REFUSAL_BY_REASON[verdict.reason](
        f"{verdict.description} (message {ingress.message_id.hex()} "
        f"to canister {ingress.receiver}, expiry {ingress.expiry_time} ns, now {now} ns)")
