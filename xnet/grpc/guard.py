"""The guard every call to a node's gRPC services passes (shell): who is calling, and which
status code answers a failure. Both services use it — ``xnet.XNet`` (``server``) and the
agreement service (``replica.node.agreement_transport``).

Both run mutual TLS: the TLS layer admits only certificates the registry lists, and each
call checks the client certificate's fingerprint again against the current list
(``listed_client``) — so a node removed from the registry loses access even on a connection
it opened before — which also names the caller.

The status codes, the same for every method of both services:

    no client certificate                          → UNAUTHENTICATED
    a client certificate that cannot be read       → PERMISSION_DENIED
    a client certificate the list does not hold    → PERMISSION_DENIED
    a ``Refusal(code, details)`` raised by a handler, or an error that ``refusing`` maps
                                                   → that code with those details (each
                                                     service lists its own refusals)
    anything else (a bug)                          → INTERNAL, "internal error": logged with
                                                     its traceback, never sent to the peer
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TypeVar

import grpc

from xnet.errors import TlsConfigError, XNetError
from xnet.grpc.tls import pem_fingerprint

__all__ = ["Refusal", "refusing", "listed_client", "guarded"]

_log = logging.getLogger(__name__)
Caller = TypeVar("Caller")


class Refusal(XNetError):
    """A status to answer a call with: raised inside a handler, sent by ``guarded``."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details

    def __reduce__(self):
        return type(self), (self.code, self.details)


@contextmanager
def refusing(status_of: Mapping[type[Exception], grpc.StatusCode]) -> Iterator[None]:
    """Inside the block, an error of a type in ``status_of`` becomes a ``Refusal`` with its
    code (the first type that matches) and its message."""
    try:
        yield
    except tuple(status_of) as exc:
        code = next(code for error, code in status_of.items() if isinstance(exc, error))
        raise Refusal(code, str(exc)) from None


def listed_client(context: grpc.ServicerContext, listed: Mapping[str, Caller]) -> Caller:
    """What ``listed`` holds for the fingerprint of the certificate the client showed
    (``Refusal`` UNAUTHENTICATED without one, PERMISSION_DENIED if unreadable or not listed)."""
    pems = context.auth_context().get("x509_pem_cert")
    if not pems:
        raise Refusal(grpc.StatusCode.UNAUTHENTICATED, "no client certificate")
    try:
        fingerprint = pem_fingerprint(pems[0])
    except TlsConfigError:
        raise Refusal(grpc.StatusCode.PERMISSION_DENIED, "unreadable client certificate") from None
    try:
        return listed[fingerprint]
    except KeyError:
        raise Refusal(grpc.StatusCode.PERMISSION_DENIED, "client certificate is not listed") from None


def guarded(handler: Callable[[bytes, Caller], bytes], authorize: Callable[[grpc.ServicerContext], Caller],
            what: str) -> Callable[[bytes, grpc.ServicerContext], bytes]:
    """A unary gRPC handler: ``handler(body, authorize(context))``, every failure answered
    with its status code (module docstring); ``what`` names the call in the log."""

    def run(body: bytes, context: grpc.ServicerContext) -> bytes:
        try:
            return handler(body, authorize(context))
        except Refusal as refusal:
            code, details = refusal.code, refusal.details
        except Exception:  # noqa: BLE001 - logged; a bug must not leak details to peers
            _log.exception("%s failed", what)
            code, details = grpc.StatusCode.INTERNAL, "internal error"
        context.abort(code, details)
        return b""   # not reached: abort raises

    return run
