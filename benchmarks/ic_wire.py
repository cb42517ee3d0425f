"""The IC wire format's unit costs (replica.ic): what one request or certificate costs to check.

1. ``request_id_us``: the request id of the interface specification's example call content.
2. ``envelope_verify_us`` (Ed25519) and ``envelope_verify_secp256k1_us``: decode a signed call
   envelope's CBOR body, check its content, hash its id and verify its signature.
3. ``delegated_envelope_verify_us``: the same with a one-link delegation chain (Ed25519 user,
   secp256k1 session key), as an Internet-Identity-style session sends it.
4. ``certificate_verify_ms``: a delegated certificate (a read_state answer of a subnet with the
   root subnet's delegation), as an agent verifies it: decode, delegation from the agent's
   cache of verified delegations, canister ranges, one pairing check.
   ``certificate_verify_cold_ms``: the same with an empty cache (two pairing checks).
5. ``share_sign_us``: one node's signature share of a state root (hash to G1, one scalar
   multiplication); ``combine_ms``: combining t = 9 of n = 13 shares (Lagrange at zero).
6. ``floor_us`` (``floor.py``), and each cost in floor units.

Run: ``python benchmarks/ic_wire.py``; the last line is one JSON object.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from replica.ic import bls  # noqa: E402
from replica.ic.canister_ranges import encode_canister_ranges  # noqa: E402
from replica.ic.certificate import (  # noqa: E402
    Certificate, encode_certificate, make_delegation, state_root_message, verify_certificate,
)
from replica.ic.delegations import sign_delegation  # noqa: E402
from replica.ic.envelope import authenticate, decode_envelope, encode_envelope, sign_envelope  # noqa: E402
from replica.ic.identities import Ed25519Identity, Secp256k1Identity  # noqa: E402
from replica.ic.principal import canister_principal, subnet_principal  # noqa: E402
from replica.ic.request_id import request_id, uleb128  # noqa: E402
from state_manager.hash_tree import HashTree, empty, fork, labeled, leaf, reconstruct  # noqa: E402
from floor import in_floor_units, measure_floor_us  # noqa: E402

NOW = 1_700_000_000_000_000_000
BODY_LIMIT = 1 << 21
SPEC_CONTENT = {
    "request_type": "call", "sender": b"\x04", "ingress_expiry": 1685570400000000000,
    "canister_id": bytes.fromhex("00000000000004D2"), "method_name": "hello", "arg": b"DIDL\x00\xfd*",
}


def median_us(action, per_batch: int, batches: int = 15) -> float:
    """Median over ``batches`` of the mean cost of ``action`` in microseconds."""
    action()
    samples = []
    for _ in range(batches):
        started = time.perf_counter()
        for _ in range(per_batch):
            action()
        samples.append((time.perf_counter() - started) / per_batch * 1e6)
    return round(statistics.median(samples), 2)


def tree_of(children: dict) -> HashTree:
    nodes = [labeled(label, tree_of(value) if isinstance(value, dict) else leaf(value))
             for label, value in sorted(children.items())]
    while len(nodes) > 1:
        nodes = [fork(*nodes[i:i + 2]) if i + 1 < len(nodes) else nodes[i] for i in range(0, len(nodes), 2)]
    return nodes[0] if nodes else empty()


def signed_body(identity, **chain) -> bytes:
    sender = chain.pop("user", identity)
    content = {"request_type": "call", "sender": sender.principal.raw, "ingress_expiry": NOW,
               "canister_id": canister_principal(150).raw, "method_name": "transfer", "arg": b"DIDL" + bytes(60),
               "nonce": bytes(8)}
    return encode_envelope(sign_envelope(content, identity, sender_pubkey=sender.der_public_key, **chain))


def check(body: bytes) -> None:
    authenticate(decode_envelope(body, max_bytes=BODY_LIMIT), now_ns=NOW)


def delegated_certificate(root, subnet_keys) -> bytes:
    subnet = subnet_principal(bls.public_key_to_der(subnet_keys.public_key))
    ranges = encode_canister_ranges(((canister_principal(100), canister_principal(199)),))
    delegation_tree = tree_of({b"subnet": {subnet.raw: {b"public_key": bls.public_key_to_der(subnet_keys.public_key),
                                                         b"canister_ranges": ranges}},
                               b"time": uleb128(NOW)})
    root_certificate = Certificate(delegation_tree, bls.sign(root, state_root_message(reconstruct(delegation_tree))))
    answer = tree_of({b"request_status": {bytes(32): {b"reply": b"DIDL\x00\x01\x71\x02ok", b"status": b"replied"}},
                      b"time": uleb128(NOW)})
    message = state_root_message(reconstruct(answer))
    shares = {i: bls.sign_share(subnet_keys.secret_shares[i - 1], message) for i in range(1, subnet_keys.t + 1)}
    return encode_certificate(Certificate(answer, bls.combine_shares(shares, subnet_keys.t),
                                          make_delegation(subnet, root_certificate)))


def main() -> None:
    results: dict[str, float] = {}
    results["request_id_us"] = median_us(lambda: request_id(SPEC_CONTENT), 2000)

    ed, k1 = Ed25519Identity.from_seed(b"user"), Secp256k1Identity.from_seed(b"user")
    ed_body, k1_body = signed_body(ed), signed_body(k1)
    session = Secp256k1Identity.from_seed(b"session")
    chain = [sign_delegation(ed, session.der_public_key, NOW + 10**12)]
    delegated_body = signed_body(session, user=ed, delegations=chain)
    results["envelope_verify_us"] = median_us(lambda: check(ed_body), 300)
    results["envelope_verify_secp256k1_us"] = median_us(lambda: check(k1_body), 300)
    results["delegated_envelope_verify_us"] = median_us(lambda: check(delegated_body), 200)

    root_secret = (0x1234567).to_bytes(32, "big")
    root_key = bls.public_key_of(root_secret)
    subnet_keys = bls.deal_threshold_keys(13, 9, b"\x05" * 32)
    certificate = delegated_certificate(root_secret, subnet_keys)
    canister = canister_principal(150)
    cache: dict = {}
    verify_certificate(certificate, root_key=root_key, canister_id=canister, delegation_cache=cache)
    results["certificate_verify_ms"] = round(median_us(
        lambda: verify_certificate(certificate, root_key=root_key, canister_id=canister, delegation_cache=cache),
        30) / 1000, 3)
    results["certificate_verify_cold_ms"] = round(median_us(
        lambda: verify_certificate(certificate, root_key=root_key, canister_id=canister), 20) / 1000, 3)

    message = state_root_message(bytes(range(32)))
    results["share_sign_us"] = median_us(lambda: bls.sign_share(subnet_keys.secret_shares[0], message), 100)
    shares = {i: bls.sign_share(subnet_keys.secret_shares[i - 1], message) for i in range(1, 14)}
    results["combine_ms"] = round(median_us(lambda: bls.combine_shares(shares, 9), 20) / 1000, 3)
    results["share_verify_ms"] = round(median_us(
        lambda: bls.verify_share(subnet_keys.public_key_shares[0], message, shares[1]), 30) / 1000, 3)

    floor_us = measure_floor_us()
    for name, value in results.items():
        cost_us = value * 1000 if name.endswith("_ms") else value
        print(f"{name:32s} {value:>10} {'ms' if name.endswith('_ms') else 'us'}"
              f"   {in_floor_units(cost_us, floor_us):>9} floor units")
    print(f"floor {floor_us} us")
    units = {f"{name.rsplit('_', 1)[0]}_floor_units": in_floor_units(value * 1000 if name.endswith("_ms") else value,
                                                                     floor_us)
             for name, value in results.items()}
    print(json.dumps({"floor_us": floor_us, **results, **units}))


if __name__ == "__main__":
    main()
