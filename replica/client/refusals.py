"""Every refusal of the ingress HTTP API, each a class with its stable ``reason`` and its HTTP
``status``, defined here once, on the class: the node answers with that status, the message as
plain text and the reason in the ``X-Replica-Refusal`` header (``replica.node.http_api``), as
the IC answers a refusal; the agent reads the reason back (``refusal_class``).

``IngressRefused`` — a submission the replica refuses, one subclass per reason:

=====================  ==========================  ======  ==================================
error                  ``reason``                  status  refused because
=====================  ==========================  ======  ==================================
MalformedIngress       ``malformed``               400     the envelope does not decode
IngressTooLarge        ``too_large``               413     envelope or message above the limit
BadIngressSignature    ``bad_signature``           400     the signature does not verify
ExpiredIngress         ``expired``                 400     ``expiry < now``
IngressExpiryTooFar    ``expiry_too_far``          400     ``expiry > now + max_ingress_ttl``
DuplicateIngress       ``duplicate``               409     the message id is pooled or inducted
UnknownCanister        ``unknown_canister``        404     no such canister (ours or anyone's)
CanisterNotOnSubnet    ``canister_not_on_subnet``  421     the routing table says another subnet
IngressPoolFull        ``pool_full``               503     the node's ingress pool is full
ReceiverMismatch       ``receiver_mismatch``       400     the URL names another canister
WrongRequestType       ``wrong_request_type``      400     e.g. a query envelope sent as a call
=====================  ==========================  ======  ==================================

``UnsupportedEnvelopeVersion`` is a ``MalformedIngress`` (same reason): an envelope of the
replica's former format (version 1, msgpack). The envelope checks raise here (an envelope for
a principal that is no canister of the replica is ``UnknownCanister`` already); the rest are
verdicts (``Admission``) of the node's ingress pool and receiver check, turned into their error
by ``refusal_for``. A refused message enters
no pool, no block and no ingress history. ``refusal_class`` maps a ``reason`` back to its class
(the agent raises the node's refusal from an HTTP answer).

``ApiError`` — a request the API refuses for another reason (the agent sees these as
``RequestRefused`` with the reason and status):

=====================  ==========================  ======  ==================================
error                  ``reason``                  status  refused because
=====================  ==========================  ======  ==================================
InvalidCanisterId      ``invalid_canister_id``     400     the URL's id is not a canister principal
MalformedRequest       ``malformed_request``       400     a body that is not the route's
PathNotAllowed         ``path_not_allowed``        400     a read_state path not allowed
RequestStatusForbidden ``request_status_forbidden`` 403    the status of another sender's request
InvalidSubnetId        ``invalid_subnet_id``       400     the URL's subnet id is no subnet's
RouteNotFound          ``not_found``               404     no such route
MethodNotAllowed       ``method_not_allowed``      405     e.g. GET on ``call``
BodyTimeout            ``body_timeout``            408     the body did not arrive in time
RequestTooLarge        ``too_large``               413     a body above the route's bound
NotCertifiedYet        ``not_certified_yet``       503     no height is certified yet
DelegationUnavailable  ``no_delegation_yet``       503     the root subnet's delegation is not fetched yet
NodeUnavailable        ``unavailable``             503     no node of the subnet is online
ApiError               ``internal_error``          500     a bug (logged); fuzzing checks it
                                                           never happens
=====================  ==========================  ======  ==================================
"""

from __future__ import annotations

from typing import ClassVar

from consensus_stub.ingress_pool import Admission
from state_manager.messages import Ingress

from replica.errors import ReplicaError
from replica.ic.textual_ids import canister_text

__all__ = [
    "IngressRefused", "MalformedIngress", "IngressTooLarge", "BadIngressSignature", "ExpiredIngress",
    "IngressExpiryTooFar", "DuplicateIngress", "UnknownCanister", "CanisterNotOnSubnet", "IngressPoolFull",
    "ReceiverMismatch", "WrongRequestType", "UnsupportedEnvelopeVersion", "refusal_for", "refusal_class",
    "ApiError", "InvalidCanisterId", "MalformedRequest", "PathNotAllowed", "RequestStatusForbidden", "InvalidSubnetId",
    "DelegationUnavailable", "RouteNotFound", "MethodNotAllowed",
    "BodyTimeout", "RequestTooLarge", "NotCertifiedYet", "NodeUnavailable",
]


class IngressRefused(ReplicaError, ValueError):
    """A submission the replica refuses; nothing about it enters the replica. ``reason`` is
    the stable machine-readable code of the refusal, ``status`` its HTTP status (module
    docstring)."""

    reason: ClassVar[str] = "refused"
    status: ClassVar[int] = 400


class MalformedIngress(IngressRefused):
    reason, status = "malformed", 400


class UnsupportedEnvelopeVersion(MalformedIngress):
    """An envelope of a format the replica no longer reads (``replica.client.envelope``)."""


class IngressTooLarge(IngressRefused):
    reason, status = "too_large", 413


class BadIngressSignature(IngressRefused):
    reason, status = "bad_signature", 400


class ExpiredIngress(IngressRefused):
    reason, status = "expired", 400


class IngressExpiryTooFar(IngressRefused):
    reason, status = "expiry_too_far", 400


class DuplicateIngress(IngressRefused):
    reason, status = "duplicate", 409


class UnknownCanister(IngressRefused):
    reason, status = "unknown_canister", 404


class CanisterNotOnSubnet(IngressRefused):
    reason, status = "canister_not_on_subnet", 421


class IngressPoolFull(IngressRefused):
    reason, status = "pool_full", 503


class ReceiverMismatch(IngressRefused):
    reason, status = "receiver_mismatch", 400


class WrongRequestType(IngressRefused):
    """An envelope whose ``request_type`` is not the route's: a query is never run as a call."""

    reason, status = "wrong_request_type", 400


_REFUSAL_BY_REASON: dict[str, type[IngressRefused]] = {
    cls.reason: cls for cls in (
        MalformedIngress, IngressTooLarge, BadIngressSignature, ExpiredIngress, IngressExpiryTooFar,
        DuplicateIngress, UnknownCanister, CanisterNotOnSubnet, IngressPoolFull, ReceiverMismatch, WrongRequestType)
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
        f"to canister {canister_text(ingress.receiver)}, expiry {ingress.expiry_time} ns, now {now} ns)")


# -- refusals of a request for another reason --------------------------------------------------

class ApiError(ReplicaError):
    """A request the API refuses; ``status`` and ``reason`` go into the answer (module
    docstring). The base itself is the answer to a bug: 500 ``internal_error``."""

    reason: ClassVar[str] = "internal_error"
    status: ClassVar[int] = 500


class InvalidCanisterId(ApiError):
    reason, status = "invalid_canister_id", 400


class MalformedRequest(ApiError):
    reason, status = "malformed_request", 400


class PathNotAllowed(ApiError):
    reason, status = "path_not_allowed", 400


class RequestStatusForbidden(ApiError):
    reason, status = "request_status_forbidden", 403


class InvalidSubnetId(ApiError):
    reason, status = "invalid_subnet_id", 400


class RouteNotFound(ApiError):
    reason, status = "not_found", 404


class MethodNotAllowed(ApiError):
    reason, status = "method_not_allowed", 405


class BodyTimeout(ApiError):
    reason, status = "body_timeout", 408


class RequestTooLarge(ApiError):
    reason, status = "too_large", 413


class NotCertifiedYet(ApiError):
    reason, status = "not_certified_yet", 503


class DelegationUnavailable(ApiError):
    reason, status = "no_delegation_yet", 503


class NodeUnavailable(ApiError):
    reason, status = "unavailable", 503
