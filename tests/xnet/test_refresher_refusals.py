"""SlicePoolRefresher: bytes the caller refuses send it to the next replica; an honest
"no stream yet" answer is not held against a replica."""

from __future__ import annotations

import random

from xnet.errors import PeerRejected
from xnet.grpc.client import PeerEndpoint
from xnet.grpc.messages import GetStreamSliceRequest
from xnet.grpc.refresher import SlicePoolRefresher
from xnet.peer_selection import PeerSelector

WANT = GetStreamSliceRequest("own", 0, 0, 10, 1000)
LIAR = PeerEndpoint("liar", "127.0.0.1:1", b"")
HONEST = PeerEndpoint("honest", "127.0.0.1:2", b"")


class Fetcher:
    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def get_stream_slice(self, peer, request):
        self.calls.append(peer.node_id)
        answer = self.answers[peer.node_id]
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_refused_bytes_penalise_the_replica_and_the_next_one_is_asked():
    fetcher = Fetcher({"liar": b"forged", "honest": b"good"})
    accepted = []
    selector = PeerSelector()

    def deliver(subnet, data):
        if data == b"forged":
            return False
        accepted.append(data)
        return True

    refresher = SlicePoolRefresher(fetcher, selector, {"X": [LIAR, HONEST]}, lambda s: WANT, deliver,
                                   rng=random.Random(1))
    try:
        for _ in range(10):
            refresher.refresh_once()
    finally:
        refresher.stop()
    assert accepted == [b"good"] * 10
    refused = refresher.error_counts_by_kind().get(("liar", "RejectedSlice"), 0)
    assert refused >= 1 and fetcher.calls.count("liar") == refused
    assert selector.consecutive_failures("liar") == refused
    assert refresher.delivered_counts() == {"X": 10}


def test_not_found_is_not_a_failure():
    fetcher = Fetcher({"honest": PeerRejected("NOT_FOUND", "no stream to own")})
    selector = PeerSelector()
    refresher = SlicePoolRefresher(fetcher, selector, {"X": [HONEST]}, lambda s: WANT, lambda s, d: True,
                                   rng=random.Random(1))
    try:
        for _ in range(3):
            refresher.refresh_once()
    finally:
        refresher.stop()
    assert refresher.error_counts_by_kind() == {("honest", "PeerRejected"): 3}
    assert selector.consecutive_failures("honest") == 0
