"""XNet transfer between two processes on loopback (not a test; numbers vary by machine).

An endpoint process serves certified slices of a stream of ``STREAM_MESSAGES`` messages
(100-byte payloads) from a certified state tree, through the real ``XNetServer`` and
``CertifiedSliceProvider``, over mutual TLS on 127.0.0.1. This process is the client:

1. in-process rate: decode + verify (``decode_certified_stream_slice``, BLS included) +
   validate (``validate_slice`` against the expected indices) of one fetched slice, repeated;
2. transfer rate: walk the whole stream slice by slice — fetch (a background thread keeps
   up to ``PREFETCH`` requests ahead, as the slice pool refresher does), decode + verify,
   validate, advance the expected index — and count verified messages per second;
3. fetch latency of 1 MiB slices (server encode + transfer), sequential requests at
   varying offsets: p50 and p99.

Targets: >= 50,000 verified messages/s; p99 <= 50 ms for 1 MiB slices; transfer rate >=
0.7 of the in-process rate. Progress goes to stderr; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import multiprocessing
import os
import queue
import random
import statistics
import sys
import threading
import time

from consensus_stub.node_keys import generate_node_identity, load_node_identity
from message_routing.limits import DEFAULT
from replica.progress import Progress
from state_manager import certification as cm
from state_manager import bls
from state_manager.certified_slice import decode_certified_stream_slice, height_leaf, message_label
from state_manager.codec import encode_header_leaf, encode_message_leaf
from state_manager.hash_tree import Empty
from state_manager.labeled_trie import build_from_sorted
from state_manager.messages import Request
from state_manager.state_tree import StateTrees
from state_manager.streams import ExpectedIndices, StreamHeader
from xnet.grpc.client import PeerEndpoint, XNetClient
from xnet.grpc.messages import GetStreamSliceRequest
from xnet.grpc.server import XNetServer
from xnet.payload_validator import validate_slice
from xnet.slice_provider import CertifiedSliceProvider
from floor import in_floor_units, measure_floor_us

ENDPOINT_SUBNET = "subnet-endpoint"
CLIENT_SUBNET = "subnet-client"
STREAM_MESSAGES = 100_000
PAYLOAD_BYTES = 100
SIGNALS_END = 17
HEIGHT = 42
REGISTRY_VERSION = 3
DEAL_SEED = b"xnet-transfer-benchmark-deal-seed"
ONE_MIB = 1024 * 1024
TARGETS = {"verified_msgs_per_s": 50_000, "p99_ms": 50.0, "transfer_to_inprocess_ratio": 0.7}


# -- the endpoint process -------------------------------------------------------------------

def _certified_state(messages: int) -> tuple[StateTrees, cm.Certification]:
    """A certified tree whose ``/streams/<client>`` holds ``messages`` requests."""
    leaves = build_from_sorted(
        (message_label(i), encode_message_leaf(Request(i % 1000, 5_000 + i % 7, "deposit",
                                                       bytes([i % 251]) * PAYLOAD_BYTES, i)))
        for i in range(messages)
    )
    stream = build_from_sorted([
        (b"header", encode_header_leaf(StreamHeader(0, messages, SIGNALS_END))),
        (b"messages", leaves),
    ])
    tree = build_from_sorted([
        (b"metadata", build_from_sorted([(b"height", height_leaf(HEIGHT))])),
        (b"request_status", Empty()),
        (b"streams", build_from_sorted([(CLIENT_SUBNET.encode(), stream)])),
        (b"time", (1_700_000_000).to_bytes(8, "big")),
    ])
    deal = bls.deal_threshold_keys(4, 3, DEAL_SEED)
    root = tree.digest()
    shares = [cm.sign_certification_share(HEIGHT, root, i, deal.secret_share(i)) for i in (1, 2, 3)]
    certification = cm.aggregate_certification(
        shares, 3, deal.public_key, {i: deal.public_key_share(i) for i in range(1, 5)})
    return StateTrees(HEIGHT, tree, tree), certification


def endpoint_main(identity_pems: tuple[bytes, bytes], client_cert: bytes, messages: int, conn) -> None:
    """Build the certified state, serve it on an ephemeral loopback port until told to stop."""
    identity = load_node_identity(*identity_pems)
    snapshot = _certified_state(messages)
    # The certified state lives as long as the process: keep the cyclic collector from
    # walking its hundreds of thousands of objects in the middle of a request.
    gc.freeze()
    provider = CertifiedSliceProvider(ENDPOINT_SUBNET, lambda: snapshot)
    server = XNetServer(provider, identity, [client_cert], max_workers=4, max_concurrent_requests=16)
    port = server.start()
    try:
        conn.send(port)
        conn.recv()  # any message: stop
    finally:
        server.stop(0)


# -- the client -----------------------------------------------------------------------------

def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Verifier:
    """decode + verify + validate, exactly what a node does with a fetched slice."""

    def __init__(self) -> None:
        self.public_key = bls.deal_threshold_keys(4, 3, DEAL_SEED).public_key

    def key_for(self, subnet: str, version: int) -> bytes | None:
        return self.public_key if (subnet, version) == (ENDPOINT_SUBNET, REGISTRY_VERSION) else None

    def verify(self, data: bytes, expected_index: int) -> int:
        """The number of verified messages in ``data``; raises if anything is wrong."""
        decoded = decode_certified_stream_slice(CLIENT_SUBNET, ENDPOINT_SUBNET, self.key_for, REGISTRY_VERSION,
                                                data, max_bytes=16 * ONE_MIB)
        validate_slice(decoded.stream_slice, len(data), ExpectedIndices(expected_index, 0), SIGNALS_END, LIMITS)
        return len(decoded.stream_slice.messages)


LIMITS = DEFAULT.with_(max_slice_bytes=16 * ONE_MIB)


def in_process_rate(verifier: Verifier, data: bytes, begin: int, repeats: int) -> float:
    """Messages per second over ``repeats`` back-to-back verifications of ``data`` (after one
    warm-up): a sustained rate, like the transfer rate it is compared with."""
    verifier.verify(data, begin)
    started = time.perf_counter()
    count = sum(verifier.verify(data, begin) for _ in range(repeats))
    return count / (time.perf_counter() - started)


def transfer_rate(client: XNetClient, peer: PeerEndpoint, verifier: Verifier, slice_messages: int,
                  messages: int, prefetch: int, status: Progress) -> tuple[float, int]:
    """Walk the stream: a fetcher thread keeps ``prefetch`` slices ahead; this thread
    decodes, verifies and validates them in order."""
    requests = [GetStreamSliceRequest(CLIENT_SUBNET, b, b, min(slice_messages, messages - b), 4 * ONE_MIB)
                for b in range(0, messages, slice_messages)]
    fetched: queue.Queue = queue.Queue(maxsize=prefetch)

    def fetcher() -> None:
        for request in requests:
            try:
                fetched.put((request.msg_begin, client.get_stream_slice(peer, request)))
            except Exception as exc:  # noqa: BLE001 - handed to the verifying thread
                fetched.put((request.msg_begin, exc))
                return

    started = time.perf_counter()
    thread = threading.Thread(target=fetcher, name="bench-fetcher", daemon=True)
    thread.start()
    verified = 0
    expected = 0
    for _ in requests:
        begin, data = fetched.get()
        if isinstance(data, Exception):
            raise data
        if begin != expected:
            raise RuntimeError(f"slice begins at {begin}, expected {expected}")
        count = verifier.verify(data, expected)
        verified += count
        expected += count
        status.update(f"{verified / (time.perf_counter() - started):,.0f} verified msg/s", done=verified)
    elapsed = time.perf_counter() - started
    thread.join()
    if verified != messages:
        raise RuntimeError(f"verified {verified} of {messages} messages")
    return verified / elapsed, len(requests)


def fetch_latencies(client: XNetClient, peer: PeerEndpoint, messages: int, calls: int,
                    status: Progress) -> tuple[list[float], int, int]:
    """Sequential fetches of ~1 MiB slices at random offsets (no two alike, so no caching helps)."""
    probe = client.get_stream_slice(peer, GetStreamSliceRequest(CLIENT_SUBNET, 0, 0, 1_000, 4 * ONE_MIB))
    per_message = len(probe) / 1_000
    count = max(1, int(ONE_MIB / per_message))
    rng = random.Random(7)
    samples = []
    size = 0
    for call in range(calls):
        begin = rng.randrange(0, messages - count)
        request = GetStreamSliceRequest(CLIENT_SUBNET, begin, begin, count, 4 * ONE_MIB)
        started = time.perf_counter()
        data = client.get_stream_slice(peer, request)
        samples.append(time.perf_counter() - started)
        size = len(data)
        status.update(f"p50 so far {statistics.median(samples) * 1e3:.1f} ms", done=call + 1)
    return samples, size, count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=STREAM_MESSAGES)
    parser.add_argument("--slice-messages", type=int, default=4_000)
    parser.add_argument("--prefetch", type=int, default=2)
    parser.add_argument("--latency-calls", type=int, default=100)
    parser.add_argument("--inprocess-repeats", type=int, default=20)
    args = parser.parse_args(argv)

    not_before = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    endpoint_id = generate_node_identity("bench-endpoint", not_before)
    client_id = generate_node_identity("bench-client", not_before)
    context = multiprocessing.get_context("spawn")
    parent_conn, child_conn = context.Pipe()
    setup = Progress(f"xnet-transfer: endpoint process certifying a stream of {args.messages:,} messages")
    process = context.Process(
        target=endpoint_main, name="xnet-endpoint",
        args=((endpoint_id.certificate_pem(), endpoint_id.private_key_pem()), client_id.certificate_pem(),
              args.messages, child_conn),
    )
    process.start()
    try:
        if not parent_conn.poll(300):
            raise RuntimeError("the endpoint process did not start")
        port = parent_conn.recv()
        setup.finish(f"(serving on 127.0.0.1:{port})")
        peer = PeerEndpoint("bench-endpoint", f"127.0.0.1:{port}", endpoint_id.certificate_pem())
        verifier = Verifier()
        with XNetClient(client_id, timeout_s=30, max_response_bytes=16 * ONE_MIB) as client:
            sample_request = GetStreamSliceRequest(CLIENT_SUBNET, 0, 0, args.slice_messages, 4 * ONE_MIB)
            sample = client.get_stream_slice(peer, sample_request)  # also pays for the TLS handshake
            inprocess = in_process_rate(verifier, sample, 0, repeats=args.inprocess_repeats)
            print(f"in-process decode+verify+validate: {inprocess:,.0f} msg/s "
                  f"({args.slice_messages} messages, {len(sample):,} bytes per slice)", file=sys.stderr)

            status = Progress("transfer", total=args.messages)
            rate, slices = transfer_rate(client, peer, verifier, args.slice_messages, args.messages,
                                         args.prefetch, status)
            status.finish(f"{rate:,.0f} verified msg/s over {slices} slices")

            status = Progress("fetch latency of 1 MiB slices", total=args.latency_calls)
            samples, size, count = fetch_latencies(client, peer, args.messages, args.latency_calls, status)
            p50, p99 = _percentile(samples, 0.5) * 1e3, _percentile(samples, 0.99) * 1e3
            status.finish(f"p50 {p50:.1f} ms, p99 {p99:.1f} ms ({count} messages, {size:,} bytes per slice)")
    finally:
        parent_conn.send("stop")
        process.join(30)
        if process.is_alive():
            process.terminate()
            process.join(5)

    floor_us = measure_floor_us()
    result = {
        "verified_msgs_per_s": round(rate),
        "inprocess_msgs_per_s": round(inprocess),
        "transfer_to_inprocess_ratio": round(rate / inprocess, 3),
        "p50_ms": round(p50, 2),
        "p99_ms": round(p99, 2),
        "latency_slice_bytes": size,
        "latency_slice_messages": count,
        "slice_messages": args.slice_messages,
        "stream_messages": args.messages,
        "payload_bytes": PAYLOAD_BYTES,
        # Other work on the machine shows up in the tail latency: record how busy it was.
        "load_average_1m": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
        "floor_us": floor_us,
        "verified_floor_units_per_msg": in_floor_units(1e6 / rate, floor_us),
        "p99_floor_units": in_floor_units(p99 * 1e3, floor_us),
    }
    met = {
        "verified_msgs_per_s": result["verified_msgs_per_s"] >= TARGETS["verified_msgs_per_s"],
        "p99_ms": result["p99_ms"] <= TARGETS["p99_ms"],
        "transfer_to_inprocess_ratio": result["transfer_to_inprocess_ratio"] >= TARGETS["transfer_to_inprocess_ratio"],
    }
    result["targets_met"] = all(met.values())
    print(f"verified {rate:,.0f} msg/s (target >= {TARGETS['verified_msgs_per_s']:,}), "
          f"ratio to in-process {rate / inprocess:.2f} (target >= {TARGETS['transfer_to_inprocess_ratio']}), "
          f"1 MiB fetch p50 {p50:.1f} ms / p99 {p99:.1f} ms (target p99 <= {TARGETS['p99_ms']:.0f} ms)")
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
