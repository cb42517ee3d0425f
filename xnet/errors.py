"""XNet transfer errors: one hierarchy for serving, requesting and fetching slices (pure).

Under ``XNetError``: ``ServeError`` is what answering a peer raises besides the state
manager's own slice-encoding errors (``NoStream``, ``IndexOutOfRange``,
``InvalidSliceRequest``); the gRPC server maps each of them to a status code. ``FetchError``
is what a client call raises to its caller; the gRPC client maps status codes and bad bodies
to it, so callers never see ``grpc`` exceptions. ``TlsConfigError`` is local
misconfiguration. ``InvalidXNetPayload`` covers payload-level validation rules;
``RegistryVersionUnavailable`` signals a registry that has not caught up (transient);
``CorruptPastPayload``, ``InvalidBuildRequest`` and ``InvalidPoolRequest`` are local faults.
Two families live beside the rules they name, also under ``XNetError``: ``InvalidSlice``
(``slice_validation``, one subclass per rule) and ``FetchedSliceRejected`` (``fetched_slice``).
"""

from __future__ import annotations

__all__ = [
    "XNetError",
    "ServeError", "BadRequest", "Overloaded",
    "FetchError", "PeerUnavailable", "PeerTimeout", "PeerRejected", "ResponseTooLarge",
    "MalformedResponse", "TlsConfigError",
    "RegistryVersionUnavailable", "InvalidXNetPayload", "MalformedXNetPayload", "UnsortedXNetPayload",
    "OwnSubnetInPayload", "XNetPayloadTooLarge", "CorruptPastPayload", "InvalidBuildRequest",
    "InvalidPoolRequest",
]


class XNetError(Exception):
    """Root of every XNet transfer error."""


class ServeError(XNetError):
    """Why a request for a stream slice cannot be answered."""


class BadRequest(ServeError):
    """The request body is malformed or asks for more than the server allows."""


class Overloaded(ServeError):
    """Too many requests at once; the caller should back off or ask another replica."""


class FetchError(XNetError):
    """A call to a peer replica failed; the caller may retry with another replica."""


class PeerUnavailable(FetchError):
    """No connection: the peer is down, unreachable, or failed the mutual TLS handshake."""


class PeerTimeout(FetchError):
    """The peer did not answer within the deadline."""


class PeerRejected(FetchError):
    """The peer answered with an error status (its name, e.g. ``"NOT_FOUND"``, in ``code``)."""

    def __init__(self, code: str, details: str) -> None:
        super().__init__(f"{code}: {details}")
        self.code = code
        self.details = details


class ResponseTooLarge(FetchError):
    """The response exceeds the caller's size cap; it was not read."""


class MalformedResponse(FetchError):
    """The response body is not a canonical, well-formed answer of the expected version."""


class TlsConfigError(XNetError):
    """A certificate or key that cannot be used for a node-to-node channel."""


class RegistryVersionUnavailable(XNetError):
    """The registry version a payload is validated at is not known locally yet.

    A ``public_key_for(subnet, version)`` lookup raises it (instead of answering ``None``,
    which means the subnet has no key at that version); validation is then *transient*:
    retried once the registry has caught up.
    """


class InvalidXNetPayload(XNetError):
    """A payload-level rule broken (permanent); per-slice errors keep their own types."""


class MalformedXNetPayload(InvalidXNetPayload):
    """Not a tuple of ``(subnet id: str, certified slice: bytes)`` pairs."""


class UnsortedXNetPayload(InvalidXNetPayload):
    """Subnet ids not strictly increasing: unsorted, or a subnet given twice."""


class OwnSubnetInPayload(InvalidXNetPayload):
    """A slice from our own subnet (loopback messages are never in a payload)."""


class XNetPayloadTooLarge(InvalidXNetPayload):
    """The slices together exceed the block payload byte budget."""


class CorruptPastPayload(XNetError):
    """An agreed past payload does not decode: the local block chain is damaged."""


class InvalidBuildRequest(XNetError):
    """``get_xnet_payload`` arguments of the wrong type or range."""


class InvalidPoolRequest(XNetError):
    """Slice pool arguments of the wrong type or range."""
