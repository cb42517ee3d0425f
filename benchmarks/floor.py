"""The machine's floor: what one unit of the replica's most common work costs here and now.

Machines (and one machine under other load) differ in speed by up to 3x, so every benchmark
measures this floor in the same run, prints it as ``floor_us`` in its last JSON line and
reports per-message costs also in floor units (cost / ``floor_us``), which travel between
machines far better than microseconds.

``floor_us`` is the median, over a few hundred timed batches, of the cost of one SHA-256 of
100 bytes plus one ``msgpack`` pack and unpack of a 6-field message (the shape of a stream
message: ids, method, payload, refund).

Run alone: ``python benchmarks/floor.py``; the last line is ``{"floor_us": ...}``.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import time

import msgpack

__all__ = ["measure_floor_us", "in_floor_units"]

_DATA = bytes(range(100))
_MESSAGE = [7, 1_000_042, 2_000_017, "transfer", b"\x01" * 64, 1_000_000]


def _one_unit() -> None:
    hashlib.sha256(_DATA).digest()
    msgpack.unpackb(msgpack.packb(_MESSAGE, use_bin_type=True), raw=False)


def measure_floor_us(batches: int = 300, per_batch: int = 200) -> float:
    """Median cost in microseconds of one floor unit (module docstring)."""
    for _ in range(per_batch):   # warm caches and the allocator
        _one_unit()
    samples = []
    for _ in range(batches):
        started = time.perf_counter()
        for _ in range(per_batch):
            _one_unit()
        samples.append((time.perf_counter() - started) / per_batch * 1e6)
    return round(statistics.median(samples), 4)


def in_floor_units(cost_us: float, floor_us: float) -> float:
    """``cost_us`` expressed in floor units (how many floor operations it costs)."""
    return round(cost_us / floor_us, 2)


if __name__ == "__main__":
    print(json.dumps({"floor_us": measure_floor_us()}))
