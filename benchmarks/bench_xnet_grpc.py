"""Local measurement of XNet round-trip latency over loopback mutual TLS (not a test).

One server on 127.0.0.1 serves a fixed slice; one client asks for it 200 times in a row
(after a warm-up call that pays for the TLS handshake). Prints p50/p99 per response size; the last line is one JSON object (with ``floor_us``).
"""

from __future__ import annotations

import datetime
import json
import statistics
import time

from consensus_stub.node_keys import generate_node_identity
from floor import in_floor_units, measure_floor_us
from xnet.grpc.client import PeerEndpoint, XNetClient
from xnet.grpc.messages import GetStreamSliceRequest
from xnet.grpc.server import XNetServer

CALLS = 200


class FixedSlice:
    def __init__(self, size: int) -> None:
        self.payload = bytes(range(256)) * (size // 256) + b"\x00" * (size % 256)

    def get_stream_slice(self, subnet, witness_begin, msg_begin, msg_limit, byte_limit):
        return self.payload

    def list_streams(self):
        return ["bench"]


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(size: int) -> tuple[float, float, float]:
    not_before = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)
    server_id, client_id = (generate_node_identity(n, not_before) for n in ("bench-server", "bench-client"))
    server = XNetServer(FixedSlice(size), server_id, [client_id.certificate_pem()])
    port = server.start()
    try:
        peer = PeerEndpoint("bench-server", f"127.0.0.1:{port}", server_id.certificate_pem())
        request = GetStreamSliceRequest("bench", 0, 0, 1000, 4 * 1024 * 1024)
        with XNetClient(client_id, timeout_s=10) as client:
            client.get_stream_slice(peer, request)  # warm-up: connect + handshake
            samples = []
            for _ in range(CALLS):
                started = time.perf_counter()
                data = client.get_stream_slice(peer, request)
                samples.append(time.perf_counter() - started)
                if len(data) != size:
                    raise RuntimeError("short response")
    finally:
        server.stop(None)
    return percentile(samples, 0.5), percentile(samples, 0.99), statistics.fmean(samples)


def main() -> None:
    floor_us = measure_floor_us()
    result: dict[str, float] = {"floor_us": floor_us}
    for size in (1024, 1024 * 1024):
        p50, p99, mean = measure(size)
        print(f"{size:>8} B response, {CALLS} calls: p50 {p50 * 1e3:.2f} ms  p99 {p99 * 1e3:.2f} ms  "
              f"mean {mean * 1e3:.2f} ms  (p99 {in_floor_units(p99 * 1e6, floor_us):,.0f} floor units)")
        result.update({f"p50_ms_{size}": round(p50 * 1e3, 3), f"p99_ms_{size}": round(p99 * 1e3, 3),
                       f"p99_floor_units_{size}": in_floor_units(p99 * 1e6, floor_us)})
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
