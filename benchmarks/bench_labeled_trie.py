"""Local measurement of LabeledTrie update costs (not a test; numbers vary by machine).

1. Insert/replace 1,000 labels into tries of 10^4 and 10^6 random children, recomputing
   the root after every update; the 10^6 case should cost at most ~2x the 10^4 case.
2. Stream garbage collection: drop the 100 smallest of 10,000 8-byte big-endian labels,
   append 100 new ones, and count the hashes the new root needed (``pending_hashes``).
"""

from __future__ import annotations

import hashlib
import time

from state_manager.labeled_trie import LabeledTrie, build_from_sorted, pending_hashes


def pseudo_label(i: int) -> bytes:
    return hashlib.sha256(b"label" + i.to_bytes(8, "big")).digest()[:12]


def update_cost(size: int, updates: int = 1000, repeats: int = 5) -> tuple[float, float, float, int]:
    """(build+digest seconds, best seconds for ``updates`` updates with a root after each,
    best seconds for ``updates`` updates then one root, digests that one root needed)."""
    labels = sorted(pseudo_label(i) for i in range(size))
    started = time.perf_counter()
    base = build_from_sorted((label, b"v" * 16) for label in labels)
    base.digest()
    build = time.perf_counter() - started
    per_update = batch = float("inf")
    hashed = 0
    for repeat in range(repeats):
        # Half replace existing labels, half insert new ones; fresh labels every repeat.
        changes = [
            (labels[(i * 7919 + repeat) % size] if i % 2 else pseudo_label(size + repeat * updates + i), b"w" * 16)
            for i in range(updates)
        ]
        trie = base
        started = time.perf_counter()
        for label, value in changes:
            trie = trie.insert(label, value)
            trie.digest()
        per_update = min(per_update, time.perf_counter() - started)
        trie = base
        started = time.perf_counter()
        for label, value in changes:
            trie = trie.insert(label, value + b"x")
        elapsed = time.perf_counter() - started
        hashed = pending_hashes(trie)
        started = time.perf_counter()
        trie.digest()
        batch = min(batch, elapsed + time.perf_counter() - started)
    return build, per_update, batch, hashed


def main() -> None:
    small = update_cost(10_000)
    large = update_cost(1_000_000)
    for name, (build, per_update, batch, hashed) in (("10^4", small), ("10^6", large)):
        print(
            f"{name} children: build+digest {build:.2f} s; 1,000 updates with root after each "
            f"{per_update * 1000:.1f} ms; 1,000 updates then one root {batch * 1000:.1f} ms "
            f"({hashed} hashes)"
        )
    print(f"ratio 10^6 / 10^4 (root after each update): {large[1] / small[1]:.2f}")
    print(f"ratio 10^6 / 10^4 (one root per batch):    {large[2] / small[2]:.2f}")

    trie = build_from_sorted((i.to_bytes(8, "big"), b"m" * 32) for i in range(10_000))
    trie.digest()
    for i in range(100):
        trie = trie.remove(i.to_bytes(8, "big"))
    for i in range(10_000, 10_100):
        trie = trie.insert(i.to_bytes(8, "big"), b"m" * 32)
    fresh = pending_hashes(trie)
    started = time.perf_counter()
    trie.digest()
    elapsed = time.perf_counter() - started
    print(
        f"stream GC (10,000 entries, -100 front, +100 back): {fresh} hashes (new nodes and leaf values) "
        f"for {2 * len(trie) - 1} nodes, {elapsed * 1000:.2f} ms"
    )


if __name__ == "__main__":
    main()
