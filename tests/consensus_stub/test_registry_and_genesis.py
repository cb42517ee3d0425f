"""Registry records, lookups, the genesis builder, and the strict registry / secrets encodings."""

from __future__ import annotations

import dataclasses
import datetime

import pytest

from consensus_stub import genesis as g
from consensus_stub import registry as r
from state_manager import bls
from state_manager.certification import aggregate_certification, sign_certification_share, verify_certification
from state_manager.encoding import decode, encode

NOT_BEFORE = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
SEED = b"registry-test-seed-of-32-bytes!!"
SPECS = [g.SubnetSpec("beta", 4, ((1000, 1999),)), g.SubnetSpec("alpha", 1, ((0, 999), (5000, 5099)))]
#: The DER prefix of an Ed25519 key, then y = 2: no x satisfies the curve equation for it.
NOT_A_POINT = bytes.fromhex("302a300506032b6570032100") + (2).to_bytes(32, "little")


@pytest.fixture(scope="module")
def dealt():
    return g.genesis_registry(SPECS, SEED, not_before=NOT_BEFORE, addresses={"alpha-node-1": "127.0.0.1:4100"})


def test_genesis_lays_out_subnets_nodes_and_routes(dealt):
    registry, secrets = dealt
    record = registry.latest()
    assert registry.versions() == (1,)
    assert record.subnet_ids() == ("alpha", "beta")
    beta = record.subnet("beta")
    assert beta.node_ids == tuple(f"beta-node-{i}" for i in range(1, 5))
    assert (beta.size, beta.threshold) == (4, 3)
    assert record.subnet("alpha").threshold == 1
    assert [n.node_id for n in registry.nodes_of("beta", 1)] == list(beta.node_ids)
    assert registry.node("alpha-node-1", 1).xnet_address == "127.0.0.1:4100"
    assert registry.node("beta-node-3", 1).xnet_address == g.UNBOUND_ADDRESS
    topology = registry.topology(1)
    assert topology.registry_version == 1
    assert topology.routing_table.lookup(1500) == "beta"
    assert topology.routing_table.lookup(5050) == "alpha"
    assert topology.public_key("beta") == beta.public_key == registry.public_key_for("beta", 1)
    assert registry.public_key_for("gamma", 1) is None
    assert registry.public_key_for("beta", 2) is None
    assert len(registry.allowed_certificates(1)) == 5
    assert set(secrets) == {n.node_id for n in record.nodes}
    assert "secret_share" not in repr(secrets["beta-node-1"])


def test_dealt_shares_certify_under_the_registry_key(dealt):
    registry, secrets = dealt
    beta = registry.subnet("beta", 1)
    root = bytes(range(32))
    shares = [sign_certification_share(7, root, secrets[n].node_index, secrets[n].secret_share)
              for n in beta.node_ids[1:]]
    cert = aggregate_certification(shares, beta.threshold, beta.public_key, beta.key_shares_by_index())
    verify_certification(cert, registry.public_key_for("beta", 1))


def test_threshold_keys_are_deterministic_in_the_seed():
    one, _ = g.genesis_registry(SPECS, SEED, not_before=NOT_BEFORE)
    two, _ = g.genesis_registry(SPECS, SEED, not_before=NOT_BEFORE)
    other, _ = g.genesis_registry(SPECS, b"another-seed-also-32-bytes-long!", not_before=NOT_BEFORE)
    assert one.public_key_for("beta", 1) == two.public_key_for("beta", 1) != other.public_key_for("beta", 1)


def test_registry_round_trip_and_strict_decoding(dealt):
    registry, _ = dealt
    data = r.encode_registry(registry)
    assert r.decode_registry(data) == registry
    assert r.encode_registry(r.decode_registry(data)) == data
    for bad in (data + b"\x00", data[:-1], encode(("replica-registry", 2, ())), encode(("other", 2, ())), b""):
        with pytest.raises(r.MalformedRegistry):
            r.decode_registry(bad)
    value = list(decode(data))
    assert value[1] == r.REGISTRY_ENCODING_VERSION == 3
    with pytest.raises(r.UnsupportedRegistryVersion, match="unknown"):
        r.decode_registry(encode((value[0], 4, value[2])))
    # version 1 held G1 keys of the project's own BLS variant: refused, naming it
    with pytest.raises(r.UnsupportedRegistryVersion, match="version 1 holds keys of the project's own BLS variant"):
        r.decode_registry(encode((value[0], 1, value[2])))
    # version 2 had no node signing keys: refused, naming them (its records, without the key)
    without_keys = tuple((v, subnets, tuple(n[:4] for n in nodes), topology) for v, subnets, nodes, topology in value[2])
    with pytest.raises(r.UnsupportedRegistryVersion, match="version 2 lists no node signing keys"):
        r.decode_registry(encode((value[0], 2, without_keys)))
    # a tampered subnet key is caught (not a G2 point, or no longer matching the topology)
    record = list(value[2][0])
    subnet = list(record[1][0])
    assert len(subnet[3]) == 96
    subnet[3] = b"\x00" * 96
    record[1] = (tuple(subnet),) + tuple(record[1][1:])
    value[2] = (tuple(record),)
    with pytest.raises(r.MalformedRegistry):
        r.decode_registry(encode(tuple(value)))


def test_inconsistent_records_are_refused(dealt):
    registry, _ = dealt
    record = registry.latest()
    beta = record.subnet("beta")
    cases = [
        dataclasses.replace(record, version=0),
        dataclasses.replace(record, subnets=(record.subnet("alpha"), dataclasses.replace(beta, threshold=5))),
        dataclasses.replace(record, subnets=(record.subnet("alpha"), dataclasses.replace(beta, public_key_shares=beta.public_key_shares[:3]))),
        dataclasses.replace(record, nodes=record.nodes[1:]),
        dataclasses.replace(record, nodes=(dataclasses.replace(record.nodes[0], subnet_id="beta"),) + record.nodes[1:]),
        dataclasses.replace(record, nodes=(dataclasses.replace(record.nodes[0], xnet_address="nowhere"),) + record.nodes[1:]),
        # signing keys: not DER Ed25519, not a curve point, raw bytes, or two nodes with one key
        dataclasses.replace(record, nodes=(dataclasses.replace(record.nodes[0], signing_key=b"\x00" * 44),) + record.nodes[1:]),
        dataclasses.replace(record, nodes=(dataclasses.replace(record.nodes[0], signing_key=NOT_A_POINT),) + record.nodes[1:]),
        dataclasses.replace(record, nodes=(dataclasses.replace(record.nodes[0], signing_key=record.nodes[0].signing_key[12:]),) + record.nodes[1:]),
        dataclasses.replace(record, nodes=(dataclasses.replace(record.nodes[0], signing_key=record.nodes[1].signing_key),) + record.nodes[1:]),
        dataclasses.replace(record, subnets=tuple(reversed(record.subnets))),
    ]
    for bad in cases:
        with pytest.raises(r.InconsistentRegistry):
            r.check_record(bad)
    with pytest.raises(r.InconsistentRegistry):
        registry.with_record(record)  # versions must increase


def test_versions_and_addresses(dealt):
    registry, _ = dealt
    newer = registry.with_record(dataclasses.replace(registry.latest(), version=3))
    assert newer.versions() == (1, 3) and newer.latest_version == 3
    assert newer.has_version(1) and not newer.has_version(2)
    with pytest.raises(r.UnknownRegistryVersion):
        newer.record(2)
    moved = newer.with_node_addresses({"beta-node-2": "127.0.0.1:5555"})
    assert moved.node("beta-node-2", 1).xnet_address == moved.node("beta-node-2", 3).xnet_address == "127.0.0.1:5555"
    with pytest.raises(r.InconsistentRegistry):
        newer.with_node_addresses({"nobody": "127.0.0.1:1"})


def test_node_secrets_round_trip(dealt):
    _, secrets = dealt
    original = secrets["beta-node-2"]
    data = g.encode_node_secrets(original)
    back = g.decode_node_secrets(data)
    assert (back.node_id, back.subnet_id, back.node_index, back.secret_share) == (
        original.node_id, original.subnet_id, original.node_index, original.secret_share)
    assert back.identity.certificate_pem() == original.identity.certificate_pem()
    assert back.signing_key == original.signing_key and "signing_key" not in repr(back)
    for bad in (data[:-1], data + b"\x00", b"\x90"):
        with pytest.raises(g.GenesisError):
            g.decode_node_secrets(bad)
    value = decode(data)
    # version 1 had no signing key: refused with its own type, naming the version
    with pytest.raises(g.UnsupportedNodeSecretsVersion, match="version 1"):
        g.decode_node_secrets(encode((value[0], 1) + value[2:8]))
    for short in (value[-1][:31], value[-1] + b"\x00"):
        with pytest.raises(g.GenesisError, match="signing key"):
            g.decode_node_secrets(encode(value[:8] + (short,)))


def test_genesis_refuses_bad_specs():
    with pytest.raises(g.GenesisError):
        g.genesis_registry([], SEED, not_before=NOT_BEFORE)
    with pytest.raises(g.GenesisError):
        g.genesis_registry(SPECS, b"short", not_before=NOT_BEFORE)
    with pytest.raises(g.GenesisError):
        g.genesis_registry([g.SubnetSpec("a", 0, ())], SEED, not_before=NOT_BEFORE)
    with pytest.raises(g.GenesisError):  # overlapping canister ranges
        g.genesis_registry([g.SubnetSpec("a", 1, ((0, 10),)), g.SubnetSpec("b", 1, ((5, 20),))], SEED,
                           not_before=NOT_BEFORE)
    with pytest.raises(g.GenesisError):
        g.genesis_registry(SPECS, SEED, not_before=NOT_BEFORE, addresses={"ghost": "127.0.0.1:1"})
    assert bls.threshold_for(4) == 3


def test_the_topology_carries_every_subnets_node_keys_which_the_encoding_keeps_once(dealt):
    """A batch's topology lists each subnet's node signing keys in node-index order (the
    certified tree serves them to agents); the registry's bytes keep them in the node records
    only, so the stored topology has none and a registry written before reads the same."""
    registry, _ = dealt
    record = registry.latest()
    topology = record.topology()
    for subnet in record.subnets:
        assert topology.node_keys(subnet.subnet_id) == tuple(n.signing_key for n in record.nodes_of(subnet.subnet_id))
    stored = decode(r.encode_registry(registry))[2][-1][3]
    assert len(stored) == 4   # version, routing table, migrations, subnet keys
