"""Request ids: icp-py-core's and @dfinity/agent's ids of the same content maps equal ours
(``replica.ic.request_id``) — the specification's example, calls, queries and read_states,
with and without nonces, and edge values of every type the maps hold."""

from __future__ import annotations

import random

from icp_agent.agent import to_request_id

from replica.ic.principal import canister_principal
from replica.ic.request_id import hash_of_map, request_id
from tests.ic_clients.values import to_json_value

SPEC_EXAMPLE = {
    "request_type": "call", "sender": b"\x04", "ingress_expiry": 1685570400000000000,
    "canister_id": bytes.fromhex("00000000000004D2"), "method_name": "hello", "arg": b"DIDL\x00\xfd*",
}
SPEC_EXAMPLE_ID = "1d1091364d6bb8a6c16b203ee75467d59ead468f523eb058880ae8ec80e2b101"
SENDER = bytes.fromhex("79e962f37090cdcc6f86eb0fbf97d0289983595fea630061fb2ad8f902")
CANISTER = canister_principal(150).raw


def contents():
    """The maps both clients hash: each request type, with and without a nonce, and edges."""
    call = {"request_type": "call", "sender": SENDER, "ingress_expiry": 1_700_000_000_000_000_000,
            "canister_id": CANISTER, "method_name": "echo", "arg": b"hello"}
    query = dict(call, request_type="query")
    read_state = {"request_type": "read_state", "sender": SENDER, "ingress_expiry": 1_700_000_000_000_000_000,
                  "paths": [[b"time"], [b"request_status", bytes(32)], [b"canister", CANISTER, b"module_hash"],
                            [b"subnet"], []]}
    maps = [SPEC_EXAMPLE, call, query, read_state]
    maps += [dict(m, nonce=bytes.fromhex("5c9b0b1e7c4a9d22a4b6e0f1d2c3b4a5")) for m in (call, query, read_state)]
    maps += [
        dict(call, arg=b"", method_name="", ingress_expiry=0),
        dict(call, ingress_expiry=2**64 - 1, method_name="grüße ✓ 𝄞", arg=bytes(range(256)) * 8),
        dict(read_state, paths=[]),
        {"request_type": "call", "sender": b"\x04", "ingress_expiry": 127, "canister_id": b"",
         "method_name": "raw_rand", "arg": b"DIDL\x00\x00", "nonce": b""},
        # A delegation map (its hash is what a delegation's signature covers).
        {"pubkey": bytes.fromhex("302a300506032b6570032100") + bytes(32), "expiration": 1611365875951000000,
         "targets": [CANISTER, canister_principal(7).raw]},
    ]
    rng = random.Random(20250101)   # more maps, the same in every run
    for _ in range(40):
        maps.append({
            "request_type": rng.choice(["call", "query"]), "sender": rng.randbytes(rng.randrange(30)),
            "ingress_expiry": rng.choice([0, 1, 127, 128, 2**32, 2**63, 2**64 - 1, rng.getrandbits(64)]),
            "canister_id": rng.randbytes(10), "method_name": "".join(rng.choice("abc_é😀") for _ in range(rng.randrange(9))),
            "arg": rng.randbytes(rng.randrange(300)), "nonce": rng.randbytes(rng.randrange(33)),
        })
    return maps


def test_the_specifications_example_in_every_client(js):
    assert request_id(SPEC_EXAMPLE).hex() == SPEC_EXAMPLE_ID
    assert to_request_id(SPEC_EXAMPLE).hex() == SPEC_EXAMPLE_ID
    assert js("request_ids.mjs", {"contents": [to_json_value(SPEC_EXAMPLE)]})["request_ids"] == [SPEC_EXAMPLE_ID]


def test_agent_js_ids_equal_ours(js):
    maps = contents()
    got = js("request_ids.mjs", {"contents": [to_json_value(m) for m in maps]})
    assert got["request_ids"] == [request_id(m).hex() for m in maps]
    assert got["hash_of_map"] == [hash_of_map(m).hex() for m in maps]


def test_icp_py_core_ids_equal_ours():
    for content in contents():
        assert to_request_id(content) == request_id(content), content
