"""Local measurement of certified stream slices (not a test; numbers vary by machine).

1. Encode, then decode and verify, a 1,000-message slice (100-byte payloads) of a stream
   holding 10,000 messages in a certified tree; target <= 30 ms for both on one core.
2. Witness size of that slice.
3. Threshold share combination (``threshold_bls.combine_shares``) for n = 4 and n = 13.
4. One bare BLS verification, and decode time / that verification.

Prints a short summary; the last line is one JSON object with the numbers.
"""

from __future__ import annotations

import json
import statistics
import time

from state_manager import certification as cm
from state_manager import certified_slice as cs
from state_manager import encoding
from state_manager import threshold_bls as bls
from state_manager.codec import encode_header_leaf, encode_message_leaf
from state_manager.hash_tree import Empty
from state_manager.labeled_trie import LabeledTrie, build_from_sorted
from state_manager.messages import Request
from state_manager.streams import StreamHeader

OWN = "subnet-b"
REMOTE = "subnet-a"
STREAM_MESSAGES = 10_000
SLICE_MESSAGES = 1_000
PAYLOAD_BYTES = 100
MSG_BEGIN = 4_000
REPEATS = 15
TARGET_MS = 30.0


def samples_ms(action, repeats: int = REPEATS) -> list[float]:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        samples.append((time.perf_counter() - started) * 1e3)
    return samples


def median_ms(action, repeats: int = REPEATS) -> float:
    return statistics.median(samples_ms(action, repeats))


def stream(begin: int, count: int) -> LabeledTrie:
    messages = build_from_sorted(
        (cs.message_label(i), encode_message_leaf(Request(1_000 + i % 7, 2_000, "deposit", bytes([i % 251]) * PAYLOAD_BYTES, i)))
        for i in range(begin, begin + count)
    )
    header = StreamHeader(begin=begin, end=begin + count, signals_end=17)
    return build_from_sorted([(b"header", encode_header_leaf(header)), (b"messages", messages)])


def certified_tree() -> LabeledTrie:
    streams = build_from_sorted([
        (OWN.encode(), stream(0, STREAM_MESSAGES)),
        (b"subnet-c", stream(50, 200)),
        (b"subnet-d", stream(0, 10)),
    ])
    return build_from_sorted([
        (b"canister", build_from_sorted((i.to_bytes(8, "big"), build_from_sorted([(b"certified_data", b"x" * 32)]))
                                        for i in range(100))),
        (b"metadata", build_from_sorted([(b"height", (42).to_bytes(8, "big"))])),
        (b"request_status", Empty()),
        (b"streams", streams),
        (b"subnet", build_from_sorted([(REMOTE.encode(), build_from_sorted([(b"public_key", b"k" * 48)]))])),
        (b"time", (1_700_000_000).to_bytes(8, "big")),
    ])


def certify(tree: LabeledTrie, deal: bls.ThresholdKeyDeal) -> cm.Certification:
    root = tree.digest()
    shares = [cm.sign_certification_share(42, root, i, deal.secret_share(i)) for i in range(1, deal.t + 1)]
    key_shares = {i: deal.public_key_share(i) for i in range(1, deal.n + 1)}
    return cm.aggregate_certification(shares, deal.t, deal.public_key, key_shares)


def combine_ms(n: int) -> float:
    t = bls.threshold_for(n)
    deal = bls.deal_threshold_key(n, t, bytes([n]) * 32)
    message = cm.certification_message(42, b"\x07" * 32)
    shares = {i: bls.sign_share(deal.secret_share(i), message) for i in range(1, t + 1)}
    signature = bls.combine_shares(shares, t)
    if not bls.verify_signature(deal.public_key, message, signature):
        raise RuntimeError(f"combined signature for n={n} does not verify")
    return median_ms(lambda: bls.combine_shares(shares, t), repeats=7)


def main() -> None:
    deal = bls.deal_threshold_key(4, bls.threshold_for(4), b"\x42" * 32)
    tree = certified_tree()
    cert = certify(tree, deal)

    def public_key_for(subnet: str, version: int):
        return deal.public_key if (subnet, version) == (REMOTE, 3) else None

    def encode() -> bytes:
        return cs.encode_certified_stream_slice(tree, cert, OWN, MSG_BEGIN, MSG_BEGIN, SLICE_MESSAGES, 1 << 30)

    data = encode()
    decoded = cs.decode_certified_stream_slice(OWN, REMOTE, public_key_for, 3, data)
    if len(decoded.stream_slice.messages) != SLICE_MESSAGES:
        raise RuntimeError("the benchmark slice does not hold the expected messages")
    _, payload_bytes, witness_bytes, _ = encoding.decode(data)

    encode_samples = samples_ms(encode)
    decode_samples = samples_ms(lambda: cs.decode_certified_stream_slice(OWN, REMOTE, public_key_for, 3, data))
    encode_ms, decode_ms = statistics.median(encode_samples), statistics.median(decode_samples)
    # The best run is the least disturbed by other processes on a shared machine.
    best_ms = min(encode_samples) + min(decode_samples)
    decode_valid_ms = median_ms(lambda: cs.decode_valid_certified_stream_slice(data))

    public_key = bls.parse_g1(deal.public_key)
    signature = bls.parse_g2(cert.signature)
    signed = cm.certification_message(cert.height, cert.root)
    verify_ms = median_ms(lambda: bls.verify_points(public_key, signed, signature))
    combine_n4 = combine_ms(4)
    combine_n13 = combine_ms(13)

    total = encode_ms + decode_ms
    print(f"slice of {SLICE_MESSAGES} messages x {PAYLOAD_BYTES} B from a stream of {STREAM_MESSAGES}: "
          f"{len(data)} bytes (payload {len(payload_bytes)}, witness {len(witness_bytes)})")
    print(f"medians: encode {encode_ms:.2f} ms + decode/verify {decode_ms:.2f} ms = {total:.2f} ms "
          f"(target <= {TARGET_MS:.0f} ms: {'met' if total <= TARGET_MS else 'MISSED'}); "
          f"decode without verification {decode_valid_ms:.2f} ms; best runs {best_ms:.2f} ms")
    print(f"bare BLS verify {verify_ms:.2f} ms; decode/verify = {decode_ms / verify_ms:.1f} x one verify")
    print(f"combine_shares: n=4 (t={bls.threshold_for(4)}) {combine_n4:.2f} ms, "
          f"n=13 (t={bls.threshold_for(13)}) {combine_n13:.2f} ms")
    print(json.dumps({
        "encode_ms": round(encode_ms, 3),
        "decode_ms": round(decode_ms, 3),
        "encode_decode_ms": round(total, 3),
        "encode_decode_best_ms": round(best_ms, 3),
        "decode_valid_ms": round(decode_valid_ms, 3),
        "slice_bytes": len(data),
        "payload_bytes": len(payload_bytes),
        "witness_bytes": len(witness_bytes),
        "bls_verify_ms": round(verify_ms, 3),
        "decode_to_bls_ratio": round(decode_ms / verify_ms, 2),
        "combine_ms_n4": round(combine_n4, 3),
        "combine_ms_n13": round(combine_n13, 3),
        "target_ms": TARGET_MS,
    }, sort_keys=True))


if __name__ == "__main__":
    main()
