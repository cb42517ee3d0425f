"""Refusals of the ingress HTTP API that are not ingress refusals: one class per ``reason``.

Each carries its HTTP ``status`` and stable ``reason`` (the JSON answer's ``reason``);
``replica.node.http_api`` turns them, and the ``IngressRefused`` subclasses, into answers.
"""

from __future__ import annotations

from typing import ClassVar

from replica.errors import ReplicaError

__all__ = [
    "ApiError", "InvalidCanisterId", "MalformedRequest", "PathNotAllowed", "RequestTooLarge", "BodyTimeout",
    "NotCertifiedYet", "NodeUnavailable",
]


class ApiError(ReplicaError):
    """A request the API refuses; ``status`` and ``reason`` go into the answer."""

    status: ClassVar[int] = 500
    reason: ClassVar[str] = "internal_error"


class InvalidCanisterId(ApiError):
    status, reason = 400, "invalid_canister_id"


class MalformedRequest(ApiError):
    status, reason = 400, "malformed_request"


class PathNotAllowed(ApiError):
    status, reason = 400, "path_not_allowed"


class RequestTooLarge(ApiError):
    status, reason = 413, "too_large"


class BodyTimeout(ApiError):
    status, reason = 408, "body_timeout"


class NotCertifiedYet(ApiError):
    status, reason = 503, "not_certified_yet"


class NodeUnavailable(ApiError):
    status, reason = 503, "unavailable"
