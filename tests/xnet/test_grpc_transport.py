"""XNet server and client over mutual TLS on 127.0.0.1: answers, status mapping, limits,
timeouts, and who may talk to whom."""

from __future__ import annotations

import threading
import time

import pytest

from state_manager.certified_slice import IndexOutOfRange, InvalidSliceRequest, NoStream
from xnet.errors import BadRequest, Overloaded, PeerRejected, PeerTimeout, PeerUnavailable, ResponseTooLarge
from xnet.grpc.client import PeerEndpoint, XNetClient
from xnet.grpc.messages import GetStreamSliceRequest, RequestLimits
from xnet.grpc.server import XNetServer

ONE_MIB = 1024 * 1024


class FakeProvider:
    """Behaviour chosen by the requested subnet name."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()

    def get_stream_slice(self, subnet, witness_begin, msg_begin, msg_limit, byte_limit):
        if subnet == "missing":
            raise NoStream("no stream to missing")
        if subnet == "range":
            raise IndexOutOfRange("msg_begin 7 beyond stream end 3")
        if subnet == "bad":
            raise BadRequest("witness too long")
        if subnet == "invalid":
            raise InvalidSliceRequest("msg_limit must be positive")
        if subnet == "busy":
            raise Overloaded("try later")
        if subnet == "boom":
            raise RuntimeError("secret internal detail")
        if subnet == "big":
            return b"x" * ONE_MIB
        if subnet == "hang":
            self.entered.set()
            self.release.wait(10)
            return b"late"
        return f"slice:{subnet}:{witness_begin}:{msg_begin}:{msg_limit}:{byte_limit}".encode()

    def list_streams(self):
        return ["c", "a", "b"]


def request(subnet: str, **kw) -> GetStreamSliceRequest:
    fields = dict(witness_begin=1, msg_begin=2, msg_limit=3, byte_limit=4000)
    fields.update(kw)
    return GetStreamSliceRequest(subnet, **fields)


@pytest.fixture
def provider():
    p = FakeProvider()
    try:
        yield p
    finally:
        p.release.set()  # never leave a server thread parked in the provider


@pytest.fixture
def allowed(identities):
    return [identities["client"].certificate_pem()]


@pytest.fixture
def server(provider, identities, allowed):
    srv = XNetServer(provider, identities["server"], lambda: list(allowed),
                     request_limits=RequestLimits(max_msg_limit=100, max_byte_limit=2 * ONE_MIB))
    port = srv.start()
    try:
        yield srv, PeerEndpoint("server", f"127.0.0.1:{port}", identities["server"].certificate_pem())
    finally:
        provider.release.set()
        srv.stop(None)


@pytest.fixture
def client(identities):
    c = XNetClient(identities["client"], timeout_s=5.0)
    try:
        yield c
    finally:
        c.close()


def test_success_and_list_streams(server, client):
    _, peer = server
    assert client.get_stream_slice(peer, request("ok")) == b"slice:ok:1:2:3:4000"
    assert client.list_streams(peer) == ["a", "b", "c"]


@pytest.mark.parametrize("subnet, code", [
    ("missing", "NOT_FOUND"),
    ("range", "OUT_OF_RANGE"),
    ("bad", "INVALID_ARGUMENT"),
    ("invalid", "INVALID_ARGUMENT"),
    ("busy", "RESOURCE_EXHAUSTED"),
    ("boom", "INTERNAL"),
])
def test_provider_errors_map_to_status_codes(server, client, subnet, code):
    _, peer = server
    with pytest.raises(PeerRejected) as info:
        client.get_stream_slice(peer, request(subnet))
    assert info.value.code == code
    if code == "INTERNAL":
        assert "secret" not in info.value.details


def test_request_beyond_server_limits_is_invalid_argument(server, client):
    _, peer = server
    with pytest.raises(PeerRejected) as info:
        client.get_stream_slice(peer, request("ok", msg_limit=101))
    assert info.value.code == "INVALID_ARGUMENT"


def test_saturated_server_refuses_with_resource_exhausted(provider, identities, allowed, client):
    srv = XNetServer(provider, identities["server"], allowed, max_workers=2, max_concurrent_requests=4)
    port = srv.start()
    try:
        peer = PeerEndpoint("server", f"127.0.0.1:{port}", identities["server"].certificate_pem())
        results = []
        worker = threading.Thread(target=lambda: results.append(client.get_stream_slice(peer, request("hang"))))
        worker.start()
        assert provider.entered.wait(5)
        started = time.monotonic()
        with pytest.raises(PeerRejected) as info:
            client.get_stream_slice(peer, request("ok"))
        assert info.value.code == "RESOURCE_EXHAUSTED"
        assert time.monotonic() - started < 2  # refused at once, not queued
        assert client.list_streams(peer) == ["a", "b", "c"]  # the spare worker still answers
        provider.release.set()
        worker.join(5)
        assert results == [b"late"]
        assert client.get_stream_slice(peer, request("ok")).startswith(b"slice:ok")  # slot freed
    finally:
        provider.release.set()
        srv.stop(None)


def test_oversized_response_is_refused_by_the_client(server, identities):
    _, peer = server
    with XNetClient(identities["client"], max_response_bytes=64 * 1024) as small:
        with pytest.raises(ResponseTooLarge):
            small.get_stream_slice(peer, request("big"))
    with XNetClient(identities["client"], max_response_bytes=ONE_MIB) as exact:
        assert len(exact.get_stream_slice(peer, request("big"))) == ONE_MIB


def test_hanging_provider_times_out(server, provider, identities):
    _, peer = server
    with XNetClient(identities["client"], timeout_s=0.5) as impatient:
        started = time.monotonic()
        with pytest.raises(PeerTimeout):
            impatient.get_stream_slice(peer, request("hang"))
        assert time.monotonic() - started < 1.5


def test_unlisted_client_is_refused(server, identities):
    _, peer = server
    with XNetClient(identities["stranger"], timeout_s=2) as stranger:
        with pytest.raises(PeerUnavailable):
            stranger.get_stream_slice(peer, request("ok"))


def test_registry_changes_apply_without_restart(server, identities, allowed, client):
    _, peer = server
    assert client.get_stream_slice(peer, request("ok"))
    allowed.append(identities["stranger"].certificate_pem())
    with XNetClient(identities["stranger"], timeout_s=2) as newcomer:
        assert newcomer.get_stream_slice(peer, request("ok"))
    # Removed from the registry: refused even on the connection it already has.
    allowed.remove(identities["client"].certificate_pem())
    with pytest.raises(PeerRejected) as info:
        client.get_stream_slice(peer, request("ok"))
    assert info.value.code == "PERMISSION_DENIED"


def test_server_with_unexpected_certificate_is_refused(server, client, identities):
    _, peer = server
    impostor = PeerEndpoint("server2", peer.address, identities["server2"].certificate_pem())
    with pytest.raises(PeerUnavailable):
        client.get_stream_slice(impostor, request("ok"))


def test_closed_client_and_dead_peer_are_unavailable(server, identities):
    srv, peer = server
    c = XNetClient(identities["client"], timeout_s=2)
    assert c.get_stream_slice(peer, request("ok"))
    c.close()
    with pytest.raises(PeerUnavailable):
        c.get_stream_slice(peer, request("ok"))
    srv.stop(None)
    with XNetClient(identities["client"], timeout_s=2) as fresh:
        with pytest.raises(PeerUnavailable):
            fresh.get_stream_slice(peer, request("ok"))
