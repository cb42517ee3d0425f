"""The XNet endpoint: serves certified stream slices to peer replicas over mutual TLS.

Service ``xnet.XNet`` with two unary methods on raw bytes (generic handlers, no generated
code): ``GetStreamSlice`` and ``ListStreams``; bodies are defined in ``messages``. The
request decoder raises ``BadRequest``; the slice provider is pure and raises the state
manager's slice-encoding errors or ``ServeError``s. Each maps to a status code, here (the
codes every call shares — certificates, bugs — are ``guard``'s):

    BadRequest, InvalidSliceRequest → INVALID_ARGUMENT    NoStream   → NOT_FOUND
    IndexOutOfRange → OUT_OF_RANGE                        Overloaded → RESOURCE_EXHAUSTED

Clients must present a certificate listed by the registry, checked twice: the TLS layer
trusts exactly the listed (self-signed) certificates, re-read for every new connection, and
each call re-checks the peer certificate's fingerprint (``guard.listed_client``).
"""

from __future__ import annotations

import logging
import threading
from concurrent import futures
from typing import Callable, Iterable, Mapping, Protocol

import grpc

from state_manager.certified_slice import IndexOutOfRange, InvalidSliceRequest, NoStream
from xnet.errors import BadRequest, Overloaded
from xnet.grpc.guard import Refusal, guarded, listed_client, refusing
from xnet.grpc.messages import (
    MAX_REQUEST_BYTES, RESPONSE_ENVELOPE_BYTES, SERVICE_NAME, RequestLimits,
    decode_get_stream_slice_request, decode_list_streams_request, encode_get_stream_slice_response,
    encode_list_streams_response,
)
from xnet.grpc.tls import TlsIdentity, pem_fingerprint

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES", "SliceProvider", "XNetServer",
]

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024 + RESPONSE_ENVELOPE_BYTES

_log = logging.getLogger(__name__)

_STATUS_OF: dict[type[Exception], grpc.StatusCode] = {
    BadRequest: grpc.StatusCode.INVALID_ARGUMENT,
    InvalidSliceRequest: grpc.StatusCode.INVALID_ARGUMENT,
    NoStream: grpc.StatusCode.NOT_FOUND,
    IndexOutOfRange: grpc.StatusCode.OUT_OF_RANGE,
    Overloaded: grpc.StatusCode.RESOURCE_EXHAUSTED,
}


class SliceProvider(Protocol):
    """Answers slice requests from the latest certified state (raises the errors of ``_STATUS_OF``)."""

    def get_stream_slice(
        self, subnet: str, witness_begin: int, msg_begin: int, msg_limit: int, byte_limit: int
    ) -> bytes: ...

    def list_streams(self) -> list[str]: ...


AllowedCertificates = Callable[[], Iterable[bytes]] | Iterable[bytes]


class _TrustList:
    """The allowed client certificates, re-read from the source on every use.

    Fingerprints are cached per distinct list, so a registry that returns the same
    certificates costs one tuple comparison per call. A caller is named by its fingerprint.
    """

    def __init__(self, source: AllowedCertificates) -> None:
        if isinstance(source, (bytes, str)):
            raise TypeError("allowed certificates: expected PEMs (an iterable or a callable), not one PEM")
        if callable(source):
            self._read = lambda: tuple(source())
        else:
            frozen = tuple(source)
            self._read = lambda: frozen
        self._lock = threading.Lock()
        self._cached: tuple[tuple[bytes, ...], Mapping[str, str]] | None = None

    def current(self) -> tuple[tuple[bytes, ...], Mapping[str, str]]:
        """The PEMs and ``{fingerprint: fingerprint}`` of each."""
        pems = self._read()
        with self._lock:
            if self._cached is None or self._cached[0] != pems:
                self._cached = (pems, {f: f for f in (pem_fingerprint(pem) for pem in pems)})
            return self._cached


class XNetServer:
    """gRPC server for ``xnet.XNet``; ``start()`` binds and returns the port, ``stop()`` ends it.

    Concurrency is bounded twice: gRPC refuses calls beyond ``max_concurrent_requests`` in
    flight (running or queued), and slice requests may occupy at most ``max_workers - 1``
    worker threads, so one worker always stays free to refuse excess slice requests at once
    (RESOURCE_EXHAUSTED, the caller tries another replica) instead of queueing them behind
    slow ones, and to answer ``ListStreams``.
    """

    def __init__(
        self,
        slice_provider: SliceProvider,
        identity: TlsIdentity,
        allowed_client_cert_pems: AllowedCertificates,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_workers: int = 4,
        max_concurrent_requests: int = 16,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        request_limits: RequestLimits = RequestLimits(),
    ) -> None:
        if type(max_workers) is not int or max_workers < 2:
            raise ValueError("max_workers must be at least 2 (one stays free to refuse excess)")
        if type(max_concurrent_requests) is not int or max_concurrent_requests < 1:
            raise ValueError("max_concurrent_requests must be positive")
        if type(max_message_bytes) is not int or max_message_bytes < 1:
            raise ValueError("max_message_bytes must be positive")
        self._provider = slice_provider
        self._identity = identity
        self._trust = _TrustList(allowed_client_cert_pems)
        self._host, self._port = host, port
        self._max_workers = max_workers
        self._max_concurrent_requests = max_concurrent_requests
        self._max_message_bytes = max_message_bytes
        self._limits = request_limits
        self._slice_slots = threading.BoundedSemaphore(max_workers - 1)
        self._tls_roots: tuple[bytes, ...] | None = None
        self._server: grpc.Server | None = None
        self._executor: futures.ThreadPoolExecutor | None = None
        self.bound_port: int | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> int:
        """Bind ``host:port`` with mutual TLS, start serving, and return the bound port."""
        if self._server is not None:
            raise RuntimeError("server already started")
        self._executor = futures.ThreadPoolExecutor(self._max_workers, thread_name_prefix="xnet-server")
        server = grpc.server(
            self._executor,
            handlers=[self._handlers()],
            options=[
                ("grpc.max_send_message_length", self._max_message_bytes),
                # Requests are tiny; a big one is refused before it is buffered.
                ("grpc.max_receive_message_length", 4 * MAX_REQUEST_BYTES),
                ("grpc.so_reuseport", 0),
            ],
            maximum_concurrent_rpcs=self._max_concurrent_requests,
        )
        initial = self._certificate_configuration(self._trust.current()[0])
        credentials = grpc.dynamic_ssl_server_credentials(
            initial, self._fetch_certificate_configuration, require_client_authentication=True
        )
        try:
            port = server.add_secure_port(f"{self._host}:{self._port}", credentials)
        except RuntimeError as exc:
            port = 0
            _log.error("cannot bind %s:%s: %s", self._host, self._port, exc)
        if port == 0:
            self._executor.shutdown(wait=False)
            self._executor = None
            raise OSError(f"cannot bind {self._host}:{self._port}")
        server.start()
        self._server, self.bound_port = server, port
        return port

    def stop(self, grace: float | None = None) -> None:
        """Stop serving; calls still running after ``grace`` seconds are cancelled."""
        server, executor = self._server, self._executor
        self._server = self._executor = None
        if server is not None:
            server.stop(grace).wait()
        if executor is not None:
            # Do not wait: a provider stuck in a call must not hang shutdown.
            executor.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> "XNetServer":
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- TLS -------------------------------------------------------------------------------

    def _certificate_configuration(self, pems: tuple[bytes, ...]):
        own = self._identity.certificate_pem()
        # An empty trust bundle is not accepted by gRPC; trusting only our own certificate
        # instead lets nobody else connect, and calls are re-checked against the list anyway.
        roots = b"".join(pems) if pems else own
        self._tls_roots = pems
        return grpc.ssl_server_certificate_configuration(
            [(self._identity.private_key_pem(), own)], root_certificates=roots
        )

    def _fetch_certificate_configuration(self):
        """Called by gRPC before each handshake: a new configuration if the list changed."""
        try:
            pems = self._trust.current()[0]
            if pems == self._tls_roots:
                return None
            return self._certificate_configuration(pems)
        except Exception:  # noqa: BLE001 - runs on a gRPC thread; keep the last good config
            _log.exception("cannot refresh the allowed client certificates")
            return None

    def _authorize(self, context: grpc.ServicerContext) -> str:
        """The caller's fingerprint, if the registry lists its certificate now."""
        return listed_client(context, self._trust.current()[1])

    # -- handlers --------------------------------------------------------------------------

    def _handlers(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(SERVICE_NAME, {
            "GetStreamSlice": grpc.unary_unary_rpc_method_handler(
                guarded(self._get_stream_slice, self._authorize, "XNet GetStreamSlice")),
            "ListStreams": grpc.unary_unary_rpc_method_handler(
                guarded(self._list_streams, self._authorize, "XNet ListStreams")),
        })

    def _get_stream_slice(self, body: bytes, caller: str) -> bytes:
        with refusing(_STATUS_OF):
            request = decode_get_stream_slice_request(body, self._limits)
        if not self._slice_slots.acquire(blocking=False):
            raise Refusal(grpc.StatusCode.RESOURCE_EXHAUSTED, "too many concurrent slice requests")
        try:
            with refusing(_STATUS_OF):
                slice_bytes = self._provider.get_stream_slice(
                    request.subnet, request.witness_begin, request.msg_begin, request.msg_limit,
                    request.byte_limit)
        finally:
            self._slice_slots.release()
        if not isinstance(slice_bytes, bytes):
            raise TypeError(f"slice provider returned {type(slice_bytes).__name__}, not bytes")
        response = encode_get_stream_slice_response(slice_bytes)
        if len(response) > self._max_message_bytes:
            raise ValueError(f"{len(response)} byte response exceeds max_message_bytes")
        return response

    def _list_streams(self, body: bytes, caller: str) -> bytes:
        with refusing(_STATUS_OF):
            decode_list_streams_request(body)
            streams = self._provider.list_streams()
        return encode_list_streams_response(streams)
