"""Client side of ``xnet.XNet``: fetch certified stream slices from peer replicas.

Every peer gets its own channel that trusts exactly that peer's registry certificate and
presents ours. gRPC failures and bad bodies become ``FetchError`` subclasses here, at the one
boundary, so callers (the slice pool refresher) never handle ``grpc`` exceptions:

    DEADLINE_EXCEEDED → PeerTimeout     UNAVAILABLE, CANCELLED, failed handshake → PeerUnavailable
    response over the cap → ResponseTooLarge    bad body → MalformedResponse
    any other status → PeerRejected(code name, details)
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Callable

import grpc

from xnet.errors import (
    FetchError, MalformedResponse, PeerRejected, PeerTimeout, PeerUnavailable, ResponseTooLarge,
)
from xnet.grpc.messages import (
    GET_STREAM_SLICE_METHOD, LIST_STREAMS_METHOD, MAX_REQUEST_BYTES, RESPONSE_ENVELOPE_BYTES,
    GetStreamSliceRequest,
    decode_get_stream_slice_response, decode_list_streams_response,
    encode_get_stream_slice_request, encode_list_streams_request,
)
from xnet.grpc.tls import TlsIdentity, tls_target_name

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "PeerEndpoint", "XNetClient"]

DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024 * 1024
_MAX_LIST_RESPONSE_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class PeerEndpoint:
    """A peer replica as the registry lists it: node id, ``host:port``, certificate PEM."""

    node_id: str
    address: str
    certificate_pem: bytes


@dataclass(frozen=True, slots=True)
class _Channel:
    peer: PeerEndpoint
    channel: grpc.Channel
    get_stream_slice: Callable
    list_streams: Callable


def _fetch_error(exc: grpc.RpcError, peer: PeerEndpoint) -> FetchError:
    """The typed error for a failed call (``exc`` is also a ``grpc.Call``)."""
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    details = (exc.details() if hasattr(exc, "details") else None) or ""
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return PeerTimeout(f"{peer.node_id}: {details}")
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
        return PeerUnavailable(f"{peer.node_id}: {details}")
    # gRPC reports its own receive cap as RESOURCE_EXHAUSTED too; only the wording tells it
    # apart from a peer that is overloaded.
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in details:
        return ResponseTooLarge(f"{peer.node_id}: {details}")
    return PeerRejected(code.name, details)


class XNetClient:
    """Calls peers' XNet endpoints with mutual TLS; thread-safe; ``close()`` ends all channels."""

    def __init__(
        self,
        identity: TlsIdentity,
        *,
        timeout_s: float = 5.0,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        if not isinstance(timeout_s, (int, float)) or not math.isfinite(timeout_s) or timeout_s <= 0:
            raise ValueError("timeout_s must be a positive number of seconds")
        if type(max_response_bytes) is not int or max_response_bytes < 1:
            raise ValueError("max_response_bytes must be positive")
        self._identity = identity
        self._timeout_s = float(timeout_s)
        self._max_response_bytes = max_response_bytes
        self._channels: dict[str, _Channel] = {}
        self._lock = threading.Lock()
        self._closed = False

    def get_stream_slice(self, peer: PeerEndpoint, request: GetStreamSliceRequest) -> bytes:
        """The certified slice bytes ``peer`` serves for ``request`` (not yet verified)."""
        body = encode_get_stream_slice_request(request)
        response = self._call(peer, self._channel(peer).get_stream_slice, body)
        return decode_get_stream_slice_response(response, self._max_response_bytes)

    def list_streams(self, peer: PeerEndpoint) -> list[str]:
        """The subnets ``peer`` has streams to."""
        response = self._call(peer, self._channel(peer).list_streams, encode_list_streams_request())
        return decode_list_streams_response(response, min(self._max_response_bytes, _MAX_LIST_RESPONSE_BYTES))

    def close(self) -> None:
        """Close every channel; later calls raise ``PeerUnavailable``."""
        with self._lock:
            channels, self._channels, self._closed = list(self._channels.values()), {}, True
        for entry in channels:
            entry.channel.close()

    def __enter__(self) -> "XNetClient":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _call(self, peer: PeerEndpoint, method: Callable, body: bytes) -> bytes:
        try:
            response = method(body, timeout=self._timeout_s)
        except grpc.RpcError as exc:
            raise _fetch_error(exc, peer) from None
        except ValueError as exc:  # e.g. the channel was closed under us
            raise PeerUnavailable(f"{peer.node_id}: {exc}") from None
        if not isinstance(response, bytes):
            raise MalformedResponse(f"expected bytes, got {type(response).__name__}")
        return response

    def _channel(self, peer: PeerEndpoint) -> _Channel:
        """The cached channel to ``peer``; replaced when the registry entry changes."""
        if not isinstance(peer, PeerEndpoint):
            raise TypeError(f"expected a PeerEndpoint, got {type(peer).__name__}")
        stale = None
        with self._lock:
            if self._closed:
                raise PeerUnavailable("client is closed")
            entry = self._channels.get(peer.node_id)
            if entry is None or entry.peer != peer:
                stale = entry
                entry = self._channels[peer.node_id] = self._open(peer)
        if stale is not None:
            stale.channel.close()
        return entry

    def _open(self, peer: PeerEndpoint) -> _Channel:
        credentials = grpc.ssl_channel_credentials(
            root_certificates=peer.certificate_pem,  # trust this one certificate, nothing else
            private_key=self._identity.private_key_pem(),
            certificate_chain=self._identity.certificate_pem(),
        )
        channel = grpc.secure_channel(peer.address, credentials, options=[
            ("grpc.ssl_target_name_override", tls_target_name(peer.certificate_pem)),
            ("grpc.max_receive_message_length", self._max_response_bytes + RESPONSE_ENVELOPE_BYTES),
            ("grpc.max_send_message_length", 4 * MAX_REQUEST_BYTES),
            # Own connections per channel: never share a connection made with other credentials.
            ("grpc.use_local_subchannel_pool", 1),
            # A restarted peer should be reachable again within seconds, not minutes.
            ("grpc.initial_reconnect_backoff_ms", 200),
            ("grpc.max_reconnect_backoff_ms", 5000),
        ])
        return _Channel(
            peer,
            channel,
            channel.unary_unary(GET_STREAM_SLICE_METHOD),
            channel.unary_unary(LIST_STREAMS_METHOD),
        )
