"""Node signing keys: genesis gives every node an Ed25519 key, the registry lists its DER form,
and the node's IC id is the self-authenticating principal of that DER key."""

from __future__ import annotations

import datetime
import hashlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from consensus_stub import genesis as g
from consensus_stub import node_signing_key as nsk
from replica.ic.principal import Principal, node_principal
from replica.ic.public_keys import KeyScheme, parse_der_public_key

NOT_BEFORE = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
SEED = b"node-signing-key-test-seed-32by!"
SPECS = [g.SubnetSpec("alpha", 4, ((0, 999),)), g.SubnetSpec("beta", 1, ((1000, 1999),))]


@pytest.fixture(scope="module")
def dealt():
    return g.genesis_registry(SPECS, SEED, not_before=NOT_BEFORE)


def test_genesis_gives_every_node_a_signing_key_the_registry_lists(dealt):
    registry, secrets = dealt
    nodes = registry.latest().nodes
    assert len(nodes) == 5 and set(secrets) == {n.node_id for n in nodes}
    for node in nodes:
        key = secrets[node.node_id].signing_key
        assert len(key) == 32
        assert node.signing_key == secrets[node.node_id].signing_public_key
        # the DER form is the one the IC's wire format reads: an Ed25519 key of 32 raw bytes
        parsed = parse_der_public_key(node.signing_key)
        assert parsed.scheme is KeyScheme.ED25519
        assert parsed.raw == Ed25519PrivateKey.from_private_bytes(key).public_key().public_bytes(
            Encoding.Raw, PublicFormat.Raw)
    assert len({n.signing_key for n in nodes}) == len(nodes)


def test_a_nodes_ic_id_is_the_self_authenticating_principal_of_its_der_key(dealt):
    registry, _ = dealt
    for node in registry.latest().nodes:
        assert node.node_principal == hashlib.sha224(node.signing_key).digest() + b"\x02"
        assert Principal(node.node_principal) == node_principal(node.signing_key)
        assert len(node.node_principal) == 29


def test_signing_keys_are_deterministic_in_the_seed_and_distinct_per_node(dealt):
    registry, _ = dealt
    again, _ = g.genesis_registry(SPECS, SEED, not_before=NOT_BEFORE)
    other, _ = g.genesis_registry(SPECS, b"another-seed-also-32-bytes-long!", not_before=NOT_BEFORE)
    keys = [n.signing_key for n in registry.latest().nodes]
    assert keys == [n.signing_key for n in again.latest().nodes]
    assert not set(keys) & {n.signing_key for n in other.latest().nodes}
    # a seed's length is hashed first: moving bytes between the seed and the node id changes the key
    assert nsk.derive_signing_key(b"ab", "c") != nsk.derive_signing_key(b"a", "bc")


def test_the_node_signs_with_the_key_the_registry_lists(dealt):
    registry, secrets = dealt
    node = registry.node("alpha-node-3", 1)
    signature = Ed25519PrivateKey.from_private_bytes(secrets["alpha-node-3"].signing_key).sign(b"payload")
    Ed25519PublicKey.from_public_bytes(node.signing_key[12:]).verify(signature, b"payload")


@pytest.mark.parametrize("value, ok", [
    (nsk.der_public_key(bytes(32)), True),
    (nsk.ED25519_DER_PREFIX + (2).to_bytes(32, "little"), False),           # y = 2: no x on the curve
    (nsk.ED25519_DER_PREFIX + (2**255 - 19).to_bytes(32, "little"), False),  # y = p: not reduced
    (nsk.ED25519_DER_PREFIX + (1 | 1 << 255).to_bytes(32, "little"), False),  # x = 0 with the sign bit set
    (nsk.ED25519_DER_PREFIX + (1).to_bytes(32, "little"), True),            # the neutral point (x = 0, y = 1)
    (nsk.der_public_key(bytes(32))[12:], False),                            # raw, not DER
    (b"\x00" * 44, False),
    ("302a", False),
])
def test_der_key_check(value, ok):
    assert nsk.is_der_public_key(value) is ok
