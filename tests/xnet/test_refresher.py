"""SlicePoolRefresher: falls back to the next replica, counts errors, survives bugs, stops."""

from __future__ import annotations

import random
import threading

import pytest

from xnet.errors import Overloaded, PeerTimeout, PeerUnavailable
from xnet.grpc.client import PeerEndpoint, XNetClient
from xnet.grpc.messages import GetStreamSliceRequest
from xnet.grpc.refresher import SlicePoolRefresher
from xnet.grpc.server import XNetServer
from xnet.peer_selection import PeerSelector

WANT = GetStreamSliceRequest("own", 0, 0, 10, 1000)
GOOD = PeerEndpoint("good", "127.0.0.1:1", b"")
BAD = PeerEndpoint("bad", "127.0.0.1:2", b"")
SLOW = PeerEndpoint("slow", "127.0.0.1:3", b"")


class FakeFetcher:
    def __init__(self):
        self.calls = []

    def get_stream_slice(self, peer, request):
        self.calls.append(peer.node_id)
        if peer.node_id == "bad":
            raise PeerUnavailable("down")
        if peer.node_id == "slow":
            raise PeerTimeout("slow")
        return f"{peer.node_id}:{request.msg_begin}".encode()


def make(fetcher, peers, wanted=lambda subnet: WANT, deliveries=None, **kw):
    deliveries = [] if deliveries is None else deliveries
    refresher = SlicePoolRefresher(
        fetcher, PeerSelector(), peers, wanted, lambda subnet, data: deliveries.append((subnet, data)),
        rng=random.Random(5), **kw)
    return refresher, deliveries


def test_falls_back_to_the_next_replica_and_counts_errors():
    fetcher = FakeFetcher()
    refresher, deliveries = make(fetcher, {"X": [BAD, GOOD, SLOW]})
    try:
        for _ in range(20):
            refresher.refresh_once()
    finally:
        refresher.stop()
    assert deliveries == [("X", b"good:0")] * 20
    assert set(refresher.error_counts()) <= {"bad", "slow"} and sum(refresher.error_counts().values()) >= 1
    kinds = refresher.error_counts_by_kind()
    assert all(kind == {"bad": "PeerUnavailable", "slow": "PeerTimeout"}[peer] for peer, kind in kinds)
    assert fetcher.calls.count("good") == 20
    assert refresher.delivered_counts() == {"X": 20} and refresher.passes == 20


def test_nothing_wanted_means_no_fetch_and_max_attempts_is_respected():
    fetcher = FakeFetcher()
    refresher, deliveries = make(fetcher, {"X": [GOOD], "Y": [BAD, SLOW]},
                                 wanted=lambda s: None if s == "X" else WANT, max_attempts=1)
    try:
        refresher.refresh_once()
    finally:
        refresher.stop()
    assert deliveries == [] and len(fetcher.calls) == 1 and fetcher.calls[0] in {"bad", "slow"}


def test_callback_bugs_are_counted_and_the_thread_keeps_running():
    fetcher = FakeFetcher()
    twice = threading.Event()
    passes = []

    def wanted(subnet):
        passes.append(subnet)
        if len(passes) >= 4:
            twice.set()
        if subnet == "X":
            raise RuntimeError("bug in wanted")
        return WANT

    def deliver(subnet, data):
        raise RuntimeError("bug in deliver")

    refresher = SlicePoolRefresher(fetcher, PeerSelector(), {"X": [GOOD], "Y": [GOOD]}, wanted, deliver,
                                   interval_s=0.01, rng=random.Random(1))
    refresher.start()
    try:
        assert twice.wait(5)
    finally:
        refresher.stop(timeout=5)
    counts = refresher.callback_error_counts()
    assert counts["wanted"] >= 2 and counts["deliver"] >= 2
    assert refresher.error_counts() == {}


class Provider:
    def __init__(self, fail: bool):
        self.fail = fail

    def get_stream_slice(self, subnet, witness_begin, msg_begin, msg_limit, byte_limit):
        if self.fail:
            raise Overloaded("busy")
        return b"certified-slice-for-" + subnet.encode()

    def list_streams(self):
        return ["own"]


@pytest.fixture
def two_servers(identities):
    allowed = [identities["client"].certificate_pem()]
    servers, peers = [], []
    try:
        for name, fail in (("server", True), ("server2", False)):
            srv = XNetServer(Provider(fail), identities[name], allowed)
            servers.append(srv)
            peers.append(PeerEndpoint(name, f"127.0.0.1:{srv.start()}", identities[name].certificate_pem()))
        yield peers
    finally:
        for srv in servers:
            srv.stop(None)


def test_background_refresh_over_grpc_with_one_failing_peer(two_servers, identities):
    delivered = threading.Event()
    deliveries = []

    def deliver(subnet, data):
        deliveries.append((subnet, data))
        if len(deliveries) >= 5:
            delivered.set()

    with XNetClient(identities["client"], timeout_s=2) as client:
        selector = PeerSelector()
        for _ in range(10):
            selector.record_success("server", 0.0)  # the failing peer looks best: it is tried first
        refresher = SlicePoolRefresher(client, selector, lambda: {"A": two_servers}, lambda s: WANT, deliver,
                                       interval_s=0.02, rng=random.Random(2))
        refresher.start()
        assert refresher.running
        try:
            assert delivered.wait(10)
        finally:
            refresher.stop(timeout=5)
        assert not refresher.running
    assert set(deliveries) == {("A", b"certified-slice-for-own")}
    assert refresher.error_counts()["server"] >= 1 and set(refresher.error_counts()) == {"server"}
    assert set(refresher.error_counts_by_kind()) <= {("server", "PeerRejected")}
