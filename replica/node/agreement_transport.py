"""Agreement messages between the nodes of one subnet over gRPC with mutual TLS (shell).

Service ``agreement.Agreement``, two unary methods on raw bytes (a generic handler, no
generated code):

* ``Deliver(message bytes) -> b""``, a one-way push — the protocol resends what matters, so
  a lost or refused push needs no answer;
* ``FetchCheckpoint(request) -> offer bytes`` (state sync, ``state_sync``): the request is
  empty or the msgpack-encoded request version, the answer an encoded ``CheckpointOffer``
  of up to ``MAX_OFFER_BYTES`` (the message limits of this service are raised to that).

Status codes of this service (the codes every call shares — certificates, bugs — are
``xnet.grpc.guard``'s, which both gRPC services run each call through):

    a body that ``decode_message`` refuses     → INVALID_ARGUMENT
    a fetch request of an unknown version       → INVALID_ARGUMENT
    no checkpoint to serve                      → NOT_FOUND
    a fetch while another is being served       → RESOURCE_EXHAUSTED (try again or elsewhere)

Both sides trust exactly the subnet's node certificates from the registry, as XNet does:
the server requires a client certificate among them (TLS roots plus a fingerprint check per
call, ``guard.listed_client``, which also names the sending node), and the client trusts
only the one certificate listed for the peer it dials. Decoding happens here, once: the protocol core only ever sees
typed messages.
"""

from __future__ import annotations

import logging
import threading
from concurrent import futures
from dataclasses import dataclass
from typing import Callable, Mapping, Optional

import grpc

from consensus_stub.agreement.messages import MAX_MESSAGE_BYTES, MalformedMessage, Message, decode_message
from xnet.grpc.guard import Refusal, guarded, listed_client, refusing
from xnet.grpc.tls import TlsIdentity, pem_fingerprint, tls_target_name

from ..errors import ReplicaError
from .state_sync import MAX_OFFER_BYTES, MalformedFetchRequest, check_fetch_request, encode_fetch_request

__all__ = [
    "SERVICE_NAME", "DELIVER_METHOD", "FETCH_CHECKPOINT_METHOD", "PeerAddress", "AgreementServer", "AgreementClient",
    "CheckpointFetchError", "NoCheckpoint",
]

SERVICE_NAME = "agreement.Agreement"
DELIVER_METHOD = f"/{SERVICE_NAME}/Deliver"
FETCH_CHECKPOINT_METHOD = f"/{SERVICE_NAME}/FetchCheckpoint"
# What one push may carry: a catch-up of several blocks.
_MAX_BODY_BYTES = 64 * 1024 * 1024

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PeerAddress:
    """Where a peer listens and the certificate it must show."""

    node_id: str
    address: str
    certificate_pem: bytes


class CheckpointFetchError(ReplicaError, RuntimeError):
    """A ``fetch_checkpoint`` without an answer; ``code`` is the gRPC status (``None`` when
    no call was made: no address for the peer, client closed)."""

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None) -> None:
        super().__init__(message)
        self.code = code


class NoCheckpoint(CheckpointFetchError):
    """The peer has no checkpoint to offer (``NOT_FOUND``)."""


def _status(exc: grpc.RpcError) -> str:
    """``CODE: details`` of a failed call (an ``RpcError`` that is not a call has neither)."""
    code = exc.code() if callable(getattr(exc, "code", None)) else None
    details = exc.details() if callable(getattr(exc, "details", None)) else str(exc)
    return f"{code.name if code is not None else 'UNKNOWN'}: {details}"


class AgreementServer:
    """Receives peers' pushes; ``handle(sender node id, message)`` runs on a gRPC thread.

    ``serve_checkpoint()`` answers ``FetchCheckpoint``: an encoded ``CheckpointOffer`` of the
    latest checkpoint, or ``None`` (NOT_FOUND). It runs on a gRPC thread too, concurrently
    with ``handle``, at most ``max_concurrent_fetches`` at a time (capped at ``max_workers -
    1`` so that ``Deliver`` always has a worker; more get RESOURCE_EXHAUSTED). It should
    answer from what is on disk or cached, not wait for the agreement runner's lock."""

    def __init__(
        self,
        identity: TlsIdentity,
        peer_certificates: Mapping[str, bytes],
        handle: Callable[[str, Message], None],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_workers: int = 4,
        serve_checkpoint: Callable[[], Optional[bytes]] = lambda: None,
        max_concurrent_fetches: int = 1,
    ) -> None:
        if not peer_certificates:
            raise ValueError("an agreement server needs the certificates of its subnet's nodes")
        self._identity = identity
        self._roots = b"".join(peer_certificates.values())
        self._node_of = {pem_fingerprint(pem): node_id for node_id, pem in peer_certificates.items()}
        self._handle = handle
        self._serve_checkpoint = serve_checkpoint
        if max_concurrent_fetches < 1:
            raise ValueError("max_concurrent_fetches must be at least 1")
        # fetches leave Deliver a worker (unless there is only one)
        self._fetch_slots = threading.BoundedSemaphore(min(max_concurrent_fetches, max(1, max_workers - 1)))
        self._host, self._port, self._max_workers = host, port, max_workers
        self._server: Optional[grpc.Server] = None
        self.bound_port: Optional[int] = None

    def start(self) -> int:
        """Bind with mutual TLS and serve; return the port."""
        if self._server is not None:
            raise RuntimeError("server already started")
        server = grpc.server(
            futures.ThreadPoolExecutor(self._max_workers, thread_name_prefix="agreement-server"),
            handlers=[grpc.method_handlers_generic_handler(SERVICE_NAME, {
                "Deliver": grpc.unary_unary_rpc_method_handler(
                    guarded(self._deliver, self._sender, "agreement Deliver")),
                "FetchCheckpoint": grpc.unary_unary_rpc_method_handler(
                    guarded(self._fetch_checkpoint, self._sender, "agreement FetchCheckpoint"))})],
            options=[("grpc.max_receive_message_length", _MAX_BODY_BYTES),
                     ("grpc.max_send_message_length", MAX_OFFER_BYTES), ("grpc.so_reuseport", 0)],
        )
        credentials = grpc.ssl_server_credentials(
            [(self._identity.private_key_pem(), self._identity.certificate_pem())],
            root_certificates=self._roots, require_client_auth=True)
        try:
            port = server.add_secure_port(f"{self._host}:{self._port}", credentials)
        except RuntimeError as exc:   # grpc's "failed to bind": the port is taken
            raise OSError(f"cannot bind {self._host}:{self._port}: {exc}") from exc
        if port == 0:
            raise OSError(f"cannot bind {self._host}:{self._port}")
        server.start()
        self._server, self.bound_port = server, port
        return port

    def stop(self, grace: Optional[float] = None) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.stop(grace).wait()

    def _sender(self, context: grpc.ServicerContext) -> str:
        """The node whose listed certificate the caller showed."""
        return listed_client(context, self._node_of)

    def _deliver(self, body: bytes, sender: str) -> bytes:
        if len(body) > MAX_MESSAGE_BYTES:
            raise Refusal(grpc.StatusCode.INVALID_ARGUMENT, "message too large")
        with refusing({MalformedMessage: grpc.StatusCode.INVALID_ARGUMENT}):
            message = decode_message(body)
        self._handle(sender, message)
        return b""

    def _fetch_checkpoint(self, body: bytes, sender: str) -> bytes:
        with refusing({MalformedFetchRequest: grpc.StatusCode.INVALID_ARGUMENT}):
            check_fetch_request(body)
        if not self._fetch_slots.acquire(blocking=False):
            raise Refusal(grpc.StatusCode.RESOURCE_EXHAUSTED, "another checkpoint fetch is being served")
        try:
            offer = self._serve_checkpoint()
        finally:
            self._fetch_slots.release()
        if offer is None:
            raise Refusal(grpc.StatusCode.NOT_FOUND, "no checkpoint to offer")
        if len(offer) > MAX_OFFER_BYTES:
            _log.error("checkpoint offer of %d bytes for %s exceeds %d", len(offer), sender, MAX_OFFER_BYTES)
            raise Refusal(grpc.StatusCode.INTERNAL, "internal error")
        return offer


class AgreementClient:
    """Pushes messages to peers without waiting for them; thread-safe; ``close()`` ends all channels.

    ``peers()`` is asked on every send, so a peer that restarts on a new port is found again
    (and its channel replaced) once the address book says so; a peer without an address yet
    is skipped. Failures are counted in ``failures`` and otherwise ignored.
    """

    def __init__(self, identity: TlsIdentity, peers: Callable[[], Mapping[str, PeerAddress]], *,
                 timeout_s: float = 2.0) -> None:
        self._identity = identity
        self._peers = peers
        self._timeout_s = timeout_s
        self._channels: dict[str, tuple[PeerAddress, grpc.Channel, Callable]] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.failures = 0

    def send(self, node_id: str, data: bytes) -> None:
        entry = self._channel(node_id)
        if entry is None:
            return
        future = entry(data, timeout=self._timeout_s)   # a unary future: returns at once
        future.add_done_callback(self._done)

    def send_wait(self, node_id: str, data: bytes, timeout_s: float) -> bool:
        """Push and wait until the peer handled it: whether it did (a failed call is counted
        and logged, not raised; must not be called under a runner's lock — the peer may be
        sending to us at the same time)."""
        entry = self._channel(node_id)
        if entry is None:
            return False
        future = entry(data, timeout=timeout_s)
        try:
            future.result()
            return True
        except grpc.RpcError as exc:   # down, too slow, or refused it: not delivered
            _log.info("push to %s not delivered: %s", node_id, _status(exc))
        except grpc.FutureCancelledError:   # the channel closed under it (a peer's new address)
            _log.info("push to %s not delivered: cancelled", node_id)
        with self._lock:
            self.failures += 1
        return False

    def _done(self, future: grpc.Future) -> None:
        # a done future: cancelled, or exception() answers at once (never raises)
        if future.cancelled() or future.exception() is not None:
            with self._lock:
                self.failures += 1

    def fetch_checkpoint(self, peer_node_id: str, timeout_s: float) -> bytes:
        """Ask ``peer_node_id`` for its latest checkpoint: the encoded ``CheckpointOffer``
        (unverified: ``state_sync.decode_offer`` and ``verify_offer`` it), or
        ``CheckpointFetchError`` (``NoCheckpoint`` if the peer has none).

        Blocks for up to ``timeout_s`` (an offer may be hundreds of MB): never call it under
        the ``AgreementRunner``'s lock or from a gRPC server thread. It uses a channel of its
        own, opened and closed per call, whose message limit is ``MAX_OFFER_BYTES``."""
        peer = self._peers().get(peer_node_id)
        if peer is None:
            raise CheckpointFetchError(f"no address for {peer_node_id!r}")
        with self._lock:
            if self._closed:
                raise CheckpointFetchError("the client is closed")
        channel = self._secure_channel(peer, [("grpc.max_receive_message_length", MAX_OFFER_BYTES)])
        try:
            return channel.unary_unary(FETCH_CHECKPOINT_METHOD)(encode_fetch_request(), timeout=timeout_s)
        except grpc.RpcError as exc:
            code = exc.code() if callable(getattr(exc, "code", None)) else None
            details = exc.details() if callable(getattr(exc, "details", None)) else str(exc)
            error = NoCheckpoint if code == grpc.StatusCode.NOT_FOUND else CheckpointFetchError
            raise error(f"fetching a checkpoint from {peer_node_id}: {code}: {details}", code) from None
        finally:
            channel.close()

    def close(self) -> None:
        with self._lock:
            channels, self._channels, self._closed = list(self._channels.values()), {}, True
        for _, channel, _ in channels:
            channel.close()

    def _channel(self, node_id: str) -> Optional[Callable]:
        peer = self._peers().get(node_id)
        if peer is None:
            return None
        stale = None
        with self._lock:
            if self._closed:
                return None
            entry = self._channels.get(node_id)
            if entry is None or entry[0] != peer:
                stale = entry
                entry = self._channels[node_id] = self._open(peer)
        if stale is not None:
            stale[1].close()
        return entry[2]

    def _open(self, peer: PeerAddress) -> tuple[PeerAddress, grpc.Channel, Callable]:
        channel = self._secure_channel(peer, [("grpc.max_send_message_length", _MAX_BODY_BYTES)])
        return peer, channel, channel.unary_unary(DELIVER_METHOD).future

    def _secure_channel(self, peer: PeerAddress, options: list[tuple[str, int]]) -> grpc.Channel:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=peer.certificate_pem,   # this one certificate, nothing else
            private_key=self._identity.private_key_pem(),
            certificate_chain=self._identity.certificate_pem(),
        )
        return grpc.secure_channel(peer.address, credentials, options=[
            ("grpc.ssl_target_name_override", tls_target_name(peer.certificate_pem)),
            *options,
            ("grpc.use_local_subchannel_pool", 1),
            ("grpc.initial_reconnect_backoff_ms", 200),
            ("grpc.max_reconnect_backoff_ms", 2000),
        ])
