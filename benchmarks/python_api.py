"""Benchmark: the app developer's Python API (``replica.testing.Testnet``, deterministic mode).

1. ``testnet_start_ms``: constructing a 2-subnet × 1-node ``Testnet`` (median of warm starts:
   the genesis dealing is cached per process, as the fixtures use it); ``testnet_first_start_ms``
   is the cold one (it deals the keys).
2. ``ticks_per_s``: idle rounds of that testnet (example canisters installed, no traffic).
3. ``update_calls_per_s``: sequential update calls to the counter on subnet-0, each awaited
   (``update_call``) until answered and its certificate verified.
   ``polled_update_calls_per_s``: the same with ``submit_call`` then ``tick`` + ``ingress_status``
   in a loop, as a PocketIC user would poll (each poll verifies a certificate).
4. ``xnet_calls_per_s``: sequential cross-subnet calls: the ping-pong player on subnet-1 pings
   the one on subnet-0 once and replies when the pong is back.

Why the call targets are out of reach, as arithmetic (measured in the same run): every
answer a client reads needs a certified height, and certifying one costs a share signature
plus three pairing checks (the share, the aggregate, and the node accepting it); the client
checks one more. A cross-subnet call needs the caller's subnet certified (so the callee can
pull the request), the callee's (so the caller can pull the response), and the caller's
again for the client, and each pulled slice is verified by the puller and by the validator.
``*_ceiling_per_s`` is the rate if nothing but that BLS work were done.

    python benchmarks/python_api.py [--ticks 1000] [--calls 200] [--xnet-calls 100]

Last line: one JSON object (with ``floor_us``; costs also in floor units; ``per_cpu_s``: the
same rates per second of this process's CPU time, which other load on the machine does not skew).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from floor import in_floor_units, measure_floor_us

from examples.counter import Counter
from examples.ping_pong import PingPong
from replica.testing import Testnet
from state_manager import bls
from state_manager.certification import Certification, sign_certification_share, verify_certification

TARGETS = {"ticks_per_s": 500, "update_calls_per_s": 200, "xnet_calls_per_s": 100, "testnet_start_ms": 300}


def _start_ms() -> tuple[float, float]:
    started = time.perf_counter()
    Testnet(subnets=2, nodes=1, seed="bench").close()
    first = (time.perf_counter() - started) * 1e3
    warm = []
    for _ in range(20):
        started = time.perf_counter()
        Testnet(subnets=2, nodes=1, seed="bench").close()
        warm.append((time.perf_counter() - started) * 1e3)
    return first, statistics.median(warm)


#: CPU-time rates of every ``_rate`` measurement, by name: on a shared machine the wall-clock
#: rate also counts other programs' time, the CPU-time rate only ours.
CPU_RATES: dict[str, float] = {}


def _rate(name: str, count: int, action) -> float:
    started, started_cpu = time.perf_counter(), time.process_time()
    for i in range(count):
        action(i)
    CPU_RATES[name] = round(count / max(1e-9, time.process_time() - started_cpu), 1)
    return count / (time.perf_counter() - started)


def _bls_costs_us() -> tuple[float, float]:
    """(sign one share, verify one certification) in microseconds: medians of 30."""
    deal = bls.deal_threshold_keys(1, 1, b"python-api-benchmark-seed-32-bytes")
    share = deal.secret_share(1)
    root = bytes(range(32))
    signs, verifies = [], []
    for height in range(1, 31):
        started = time.perf_counter()
        signed = sign_certification_share(height, root, 1, share)
        signs.append(time.perf_counter() - started)
        certification = Certification(height, root, signed.signature_share)
        started = time.perf_counter()
        verify_certification(certification, deal.public_key)
        verifies.append(time.perf_counter() - started)
    return statistics.median(signs) * 1e6, statistics.median(verifies) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ticks", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--xnet-calls", type=int, default=100)
    args = parser.parse_args()

    floor_us = measure_floor_us()
    first_ms, start_ms = _start_ms()
    with Testnet(subnets=2, nodes=1, seed="bench") as net:
        counter = net.install(Counter, subnet="subnet-0")
        pinger = net.install(PingPong, subnet="subnet-1")
        target = net.install(PingPong, subnet="subnet-0")
        net.tick(10)
        ticks_per_s = _rate("ticks_per_s", args.ticks, lambda _: net.tick())
        height = net.ingress_status(net.submit_call(counter, "increment", 1)).certificate.height
        update_calls_per_s = _rate("update_calls_per_s", args.calls, lambda _: net.update_call(counter, "increment", 1))

        def polled(_: int) -> None:
            message_id = net.submit_call(counter, "increment", 1)
            while True:
                net.tick()
                if net.ingress_status(message_id).status == "replied":
                    return

        polled_per_s = _rate("polled_update_calls_per_s", max(1, args.calls // 2), polled)
        xnet_calls_per_s = _rate("xnet_calls_per_s", args.xnet_calls, lambda _: net.update_call(pinger, "ping", {"target": target,
                                                                                          "rounds": 1}))
        final_height = net.ingress_status(net.submit_call(counter, "increment", 1)).certificate.height
        assert net.query_call(target, "stats")["pongs_sent"] == args.xnet_calls
    sign_us, verify_us = _bls_costs_us()
    certification_us = sign_us + 3 * verify_us
    update_floor_us = certification_us + verify_us
    xnet_floor_us = 3 * certification_us + 2 * 2 * verify_us + verify_us
    result = {
        "ticks_per_s": round(ticks_per_s, 1),
        "update_calls_per_s": round(update_calls_per_s, 1),
        "polled_update_calls_per_s": round(polled_per_s, 1),
        "xnet_calls_per_s": round(xnet_calls_per_s, 1),
        "testnet_start_ms": round(start_ms, 2),
        "testnet_first_start_ms": round(first_ms, 2),
        "heights_during_calls": final_height - height,
        "tick_floor_units": in_floor_units(1e6 / ticks_per_s, floor_us),
        "update_call_floor_units": in_floor_units(1e6 / update_calls_per_s, floor_us),
        "xnet_call_floor_units": in_floor_units(1e6 / xnet_calls_per_s, floor_us),
        "testnet_start_floor_units": in_floor_units(start_ms * 1e3, floor_us),
        "bls_sign_share_us": round(sign_us, 1),
        "bls_verify_us": round(verify_us, 1),
        "update_call_ceiling_per_s": round(1e6 / update_floor_us, 1),
        "xnet_call_ceiling_per_s": round(1e6 / xnet_floor_us, 1),
        "per_cpu_s": CPU_RATES,
        "targets": TARGETS,
        "floor_us": floor_us,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
