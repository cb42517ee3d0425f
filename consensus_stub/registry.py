"""The versioned registry: subnets, nodes, keys, routing table and migrations per version.

A ``RegistryRecord`` is everything the network agrees on at one registry version:

* per subnet: its node ids (node index ``i`` is ``node_ids[i - 1]``), the signing threshold
  ``t``, the subnet's threshold public key and every node's public key share;
* per node: its subnet, its XNet endpoint address (``"127.0.0.1:port"``), its TLS
  certificate (PEM), which peers trust for mutual TLS, and its Ed25519 node signing key (DER),
  whose self-authenticating principal is the node's IC id and which signs its query answers;
* the routing table and the canister migrations, from which ``topology()`` builds the
  ``NetworkTopology`` a batch at this version is processed under.

A ``Registry`` is the sequence of records with strictly increasing versions. Signing keys
(secret shares, TLS private keys) are never part of it; ``genesis`` hands them to the nodes.

Encoding (canonical msgpack; a testnet directory's registry file)::

    ["replica-registry", 3, [record, ...]]
    record = [version, [subnet, ...], [node, ...], topology]     (state_codec topology value)
    subnet = [subnet_id, [node_id, ...], threshold, public_key, [public_key_share, ...]]
    node   = [node_id, subnet_id, xnet_address, certificate_pem, signing_key]

Keys are the IC's BLS variant (``state_manager.bls``): the subnet key and the key shares are
96-byte G2 points, raw as the BLS module takes them. A node's signing key is the 44-byte DER
encoding of its Ed25519 key (``consensus_stub.node_signing_key``), not the raw 32 bytes: DER is
what the node id is the hash of and what the certified state serves agents at
``/subnet/<subnet>/node/<node>/public_key``, so the registry's bytes are used as they are, with
no encoding between the registry and either. ``decode_registry`` is strict: canonical bytes,
known version, exact arities and types, valid G2 keys, and a consistent record
(``check_record``), else ``MalformedRegistry``. Older versions are refused with
``UnsupportedRegistryVersion`` (a testnet directory made before is made again): version 1 held
keys of the project's own BLS variant (48-byte G1 points), which certifications no longer use,
and a G1 key cannot be turned into the G2 key of the same secret; version 2 had no node signing
keys, which only the nodes' secrets could supply.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping

from state_manager import bls
from state_manager.codec import CodecError, check_bytes, check_str, check_tuple, check_u64
from state_manager.encoding import EncodingError, decode, encode
from state_manager.routing_table import CanisterMigrations, NetworkTopology, RoutingTable
from state_manager.state_codec import topology_from_value, topology_to_value

from .errors import ConsensusError
from .node_signing_key import DER_PUBLIC_KEY_BYTES, is_der_public_key, node_principal_bytes

__all__ = [
    "REGISTRY_ENCODING_VERSION", "MAX_REGISTRY_BYTES",
    "RegistryError", "MalformedRegistry", "UnsupportedRegistryVersion", "InconsistentRegistry",
    "UnknownRegistryVersion",
    "NodeRecord", "SubnetRecord", "RegistryRecord", "Registry",
    "check_record", "encode_registry", "decode_registry", "is_endpoint_address",
]

#: 3: every node's Ed25519 signing key. 2: keys of the IC's BLS variant (G2); version 1's were
#: the project's own variant (G1).
REGISTRY_ENCODING_VERSION = 3
MAX_REGISTRY_BYTES = 64 * 1024 * 1024
_TAG = "replica-registry"
_MAX_ID_CHARS = 64


class RegistryError(ConsensusError):
    """Root of the registry's errors."""


class MalformedRegistry(RegistryError):
    """Bytes that are not the canonical encoding of a consistent registry."""


class UnsupportedRegistryVersion(MalformedRegistry):
    """A registry file of an encoding version this build does not read (version 1: keys of the
    project's own BLS variant; version 2: no node signing keys; module docstring)."""


class InconsistentRegistry(RegistryError):
    """A record whose parts contradict each other (see ``check_record``)."""


class UnknownRegistryVersion(RegistryError, LookupError):
    """A version the registry does not hold."""


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """One node as peers and users see it: where its XNet endpoint listens, which certificate it
    shows, and the DER Ed25519 key it signs query answers with."""

    node_id: str
    subnet_id: str
    xnet_address: str
    certificate_pem: bytes
    signing_key: bytes

    @property
    def node_principal(self) -> bytes:
        """The node's IC id, ``SHA-224(signing_key) · 0x02`` (the bytes of a self-authenticating
        principal; ``replica.ic.principal.Principal`` of them has its textual form)."""
        return node_principal_bytes(self.signing_key)


@dataclass(frozen=True, slots=True)
class SubnetRecord:
    """One subnet's membership and threshold key; ``public_key_shares[i - 1]`` is node ``i``'s."""

    subnet_id: str
    node_ids: tuple[str, ...]
    threshold: int
    public_key: bytes
    public_key_shares: tuple[bytes, ...]

    @property
    def size(self) -> int:
        return len(self.node_ids)

    def node_index(self, node_id: str) -> int:
        """The 1-based index of ``node_id`` (its share's index); ``KeyError`` if not a member."""
        try:
            return self.node_ids.index(node_id) + 1
        except ValueError:
            raise KeyError(f"{node_id!r} is not a node of subnet {self.subnet_id!r}") from None

    def key_shares_by_index(self) -> dict[int, bytes]:
        """``{node index: public key share}``, what certification aggregation takes."""
        return {i + 1: share for i, share in enumerate(self.public_key_shares)}


@dataclass(frozen=True, slots=True)
class RegistryRecord:
    """Everything the registry says at one version (subnets and nodes sorted by id)."""

    version: int
    subnets: tuple[SubnetRecord, ...]
    nodes: tuple[NodeRecord, ...]
    routing_table: RoutingTable
    canister_migrations: CanisterMigrations = CanisterMigrations()

    def subnet(self, subnet_id: str) -> SubnetRecord | None:
        for record in self.subnets:
            if record.subnet_id == subnet_id:
                return record
        return None

    def node(self, node_id: str) -> NodeRecord | None:
        for record in self.nodes:
            if record.node_id == node_id:
                return record
        return None

    def subnet_ids(self) -> tuple[str, ...]:
        return tuple(s.subnet_id for s in self.subnets)

    def nodes_of(self, subnet_id: str) -> tuple[NodeRecord, ...]:
        """The nodes of ``subnet_id`` in node-index order (empty for an unknown subnet)."""
        subnet = self.subnet(subnet_id)
        if subnet is None:
            return ()
        by_id = {n.node_id: n for n in self.nodes}
        return tuple(by_id[node_id] for node_id in subnet.node_ids)

    def topology(self) -> NetworkTopology:
        """The registry view a batch at this version is processed under."""
        return NetworkTopology(
            self.version, self.routing_table, self.canister_migrations,
            tuple((s.subnet_id, s.public_key) for s in self.subnets),
            tuple((s.subnet_id, tuple(n.signing_key for n in self.nodes_of(s.subnet_id))) for s in self.subnets),
        )

    def stored_topology(self) -> NetworkTopology:
        """What the encoding keeps of ``topology()``: the node keys are the node records'."""
        return replace(self.topology(), node_public_keys=())


def _is_id(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= _MAX_ID_CHARS and value.isprintable()


def is_endpoint_address(address: object) -> bool:
    """``host:port`` with a non-empty host and a port in ``0..65535`` (0: not bound yet)."""
    if not isinstance(address, str):
        return False
    host, sep, port = address.rpartition(":")
    return bool(sep and host and port.isdigit() and int(port) <= 65535 and host.isprintable())


def check_record(record: RegistryRecord) -> RegistryRecord:
    """Raise ``InconsistentRegistry`` unless:

    * subnet ids and node ids are unique, sorted, and 1..64 printable characters;
    * every subnet has ``n >= 1`` nodes, ``1 <= t <= n``, ``n`` key shares, 96-byte (G2) keys;
    * every node belongs to exactly the subnet that lists it, with a valid address, a PEM, and
      a signing key that is the DER encoding of an Ed25519 point, no two nodes with one key
      (the key is the node's IC id);
    * the routing table and the migration traces name only known subnets.
    """
    if type(record.version) is not int or not 0 < record.version < 2**64:
        raise InconsistentRegistry(f"registry version must be in [1, 2**64), got {record.version!r}")
    subnet_ids = [s.subnet_id for s in record.subnets]
    node_ids = [n.node_id for n in record.nodes]
    for what, ids in (("subnet", subnet_ids), ("node", node_ids)):
        if not all(_is_id(i) for i in ids):
            raise InconsistentRegistry(f"{what} ids must be 1..{_MAX_ID_CHARS} printable characters")
        if ids != sorted(set(ids)):
            raise InconsistentRegistry(f"{what} ids must be unique and sorted")
    members: dict[str, str] = {}
    for subnet in record.subnets:
        n = len(subnet.node_ids)
        if n == 0:
            raise InconsistentRegistry(f"subnet {subnet.subnet_id!r} has no nodes")
        if type(subnet.threshold) is not int or not 1 <= subnet.threshold <= n:
            raise InconsistentRegistry(f"subnet {subnet.subnet_id!r}: threshold {subnet.threshold!r} not in 1..{n}")
        if len(subnet.public_key_shares) != n:
            raise InconsistentRegistry(f"subnet {subnet.subnet_id!r}: {len(subnet.public_key_shares)} key shares for {n} nodes")
        keys = (subnet.public_key, *subnet.public_key_shares)
        if not all(isinstance(k, bytes) and len(k) == bls.PUBLIC_KEY_BYTES for k in keys):
            raise InconsistentRegistry(f"subnet {subnet.subnet_id!r}: keys must be {bls.PUBLIC_KEY_BYTES}-byte G2 points")
        for node_id in subnet.node_ids:
            if node_id in members:
                raise InconsistentRegistry(f"node {node_id!r} is listed by {members[node_id]!r} and {subnet.subnet_id!r}")
            members[node_id] = subnet.subnet_id
    for node in record.nodes:
        if members.get(node.node_id) != node.subnet_id:
            raise InconsistentRegistry(f"node {node.node_id!r} claims subnet {node.subnet_id!r}, which does not list it")
        if not is_endpoint_address(node.xnet_address):
            raise InconsistentRegistry(f"node {node.node_id!r}: bad XNet address {node.xnet_address!r}")
        if not isinstance(node.certificate_pem, bytes) or b"BEGIN CERTIFICATE" not in node.certificate_pem:
            raise InconsistentRegistry(f"node {node.node_id!r}: certificate is not a PEM certificate")
        if not is_der_public_key(node.signing_key):
            raise InconsistentRegistry(f"node {node.node_id!r}: signing key is not the DER encoding of an Ed25519 key")
    keyed = {n.signing_key for n in record.nodes}
    if len(keyed) != len(record.nodes):
        raise InconsistentRegistry("two nodes have the same signing key, hence the same IC node id")
    missing = sorted(set(members) - set(node_ids))
    if missing:
        raise InconsistentRegistry(f"nodes listed by subnets but without a node record: {missing}")
    known = set(subnet_ids)
    routed = {s for _, s in record.routing_table.entries}
    traced = {s for _, trace in record.canister_migrations.entries for s in trace}
    unknown = sorted((routed | traced) - known)
    if unknown:
        raise InconsistentRegistry(f"routing table or migrations name unknown subnets {unknown}")
    return record


class Registry:
    """An immutable sequence of registry records with strictly increasing versions."""

    __slots__ = ("_records", "_by_version", "_topologies")

    def __init__(self, records: Iterable[RegistryRecord]) -> None:
        records = tuple(records)
        if not records:
            raise InconsistentRegistry("a registry holds at least one version")
        versions = [r.version for r in records]
        for record in records:
            check_record(record)
        if any(b <= a for a, b in zip(versions, versions[1:])):
            raise InconsistentRegistry(f"registry versions must increase strictly, got {versions}")
        self._records = records
        self._by_version = {r.version: r for r in records}
        self._topologies: dict[int, NetworkTopology] = {}

    # -- versions --------------------------------------------------------------------------

    @property
    def records(self) -> tuple[RegistryRecord, ...]:
        return self._records

    @property
    def latest_version(self) -> int:
        return self._records[-1].version

    def versions(self) -> tuple[int, ...]:
        return tuple(r.version for r in self._records)

    def has_version(self, version: int) -> bool:
        return version in self._by_version

    def record(self, version: int) -> RegistryRecord:
        record = self._by_version.get(version)
        if record is None:
            raise UnknownRegistryVersion(f"registry version {version!r} is unknown (latest {self.latest_version})")
        return record

    def latest(self) -> RegistryRecord:
        return self._records[-1]

    # -- lookups ---------------------------------------------------------------------------

    def public_key_for(self, subnet_id: str, version: int) -> bytes | None:
        """The threshold public key of ``subnet_id`` at ``version``; ``None`` if either is unknown."""
        record = self._by_version.get(version)
        subnet = None if record is None else record.subnet(subnet_id)
        return None if subnet is None else subnet.public_key

    def topology(self, version: int) -> NetworkTopology:
        """The topology of ``version``, one object per version: a state's tree builder makes
        the ``/subnet`` subtrees again only when its topology is another object."""
        topology = self._topologies.get(version)
        if topology is None:
            topology = self._topologies[version] = self.record(version).topology()
        return topology

    def subnet(self, subnet_id: str, version: int) -> SubnetRecord | None:
        return self.record(version).subnet(subnet_id)

    def node(self, node_id: str, version: int) -> NodeRecord | None:
        return self.record(version).node(node_id)

    def nodes_of(self, subnet_id: str, version: int) -> tuple[NodeRecord, ...]:
        return self.record(version).nodes_of(subnet_id)

    def allowed_certificates(self, version: int) -> tuple[bytes, ...]:
        """The TLS certificates of every node at ``version`` (who may call an XNet endpoint)."""
        return tuple(n.certificate_pem for n in self.record(version).nodes)

    # -- new registries --------------------------------------------------------------------

    def with_record(self, record: RegistryRecord) -> "Registry":
        """This registry plus a newer version."""
        return Registry((*self._records, record))

    def has_hosted(self, subnet_id: str, canister_id: int, up_to_version: int) -> bool:
        """Some version ``<= up_to_version`` routes ``canister_id`` to ``subnet_id``: the subnet
        may hold pooled ingress for it from before it moved away."""
        return any(r.version <= up_to_version and r.routing_table.lookup(canister_id) == subnet_id
                   for r in self._records)

    def with_next_version(self, *, routing_table: RoutingTable | None = None,
                          canister_migrations: CanisterMigrations | None = None) -> "Registry":
        """This registry plus version ``latest + 1``: the latest record with a new routing
        table and/or canister migrations (a migration's steps; ``InconsistentRegistry`` if the
        result names unknown subnets)."""
        latest = self.latest()
        return self.with_record(replace(
            latest, version=latest.version + 1,
            routing_table=latest.routing_table if routing_table is None else routing_table,
            canister_migrations=latest.canister_migrations if canister_migrations is None else canister_migrations))

    def with_node_addresses(self, addresses: Mapping[str, str]) -> "Registry":
        """The same registry with the XNet addresses of some nodes replaced in every version
        (endpoints are bound after genesis; addresses are not part of any replicated state)."""
        unknown = sorted(set(addresses) - {n.node_id for r in self._records for n in r.nodes})
        if unknown:
            raise InconsistentRegistry(f"addresses for unknown nodes {unknown}")
        return Registry(
            replace(r, nodes=tuple(replace(n, xnet_address=addresses.get(n.node_id, n.xnet_address)) for n in r.nodes))
            for r in self._records
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Registry) and self._records == other._records

    def __repr__(self) -> str:
        return f"Registry(versions={list(self.versions())}, subnets={list(self.latest().subnet_ids())})"


# -- encoding ---------------------------------------------------------------------------------

def _record_value(record: RegistryRecord) -> tuple:
    return (
        record.version,
        tuple((s.subnet_id, s.node_ids, s.threshold, s.public_key, s.public_key_shares) for s in record.subnets),
        tuple((n.node_id, n.subnet_id, n.xnet_address, n.certificate_pem, n.signing_key) for n in record.nodes),
        topology_to_value(record.stored_topology()),
    )


def encode_registry(registry: Registry) -> bytes:
    """Canonical bytes of ``registry`` (see the module docstring)."""
    return encode((_TAG, REGISTRY_ENCODING_VERSION, tuple(_record_value(r) for r in registry.records)))


def _check_key(value: Any, what: str) -> bytes:
    key = check_bytes(value, what, bls.PUBLIC_KEY_BYTES)
    try:
        bls.parse_public_key(key)
    except bls.BlsPointError as exc:
        raise CodecError(f"{what}: {exc}") from exc
    return key


def _subnet_from_value(value: Any) -> SubnetRecord:
    subnet_id, node_ids, threshold, public_key, shares = check_tuple(value, "subnet", 5)
    return SubnetRecord(
        check_str(subnet_id, "subnet id"),
        tuple(check_str(n, "node id") for n in check_tuple(node_ids, "node ids")),
        check_u64(threshold, "threshold"),
        _check_key(public_key, "subnet public key"),
        tuple(_check_key(k, "public key share") for k in check_tuple(shares, "public key shares")),
    )


def _node_from_value(value: Any) -> NodeRecord:
    node_id, subnet_id, address, pem, signing_key = check_tuple(value, "node", 5)
    return NodeRecord(check_str(node_id, "node id"), check_str(subnet_id, "node subnet"),
                      check_str(address, "xnet address"), check_bytes(pem, "certificate"),
                      check_bytes(signing_key, "node signing key", DER_PUBLIC_KEY_BYTES))


def _record_from_value(value: Any) -> RegistryRecord:
    version, subnets, nodes, topology = check_tuple(value, "registry record", 4)
    topology = topology_from_value(topology)
    record = RegistryRecord(
        check_u64(version, "registry version"),
        tuple(_subnet_from_value(s) for s in check_tuple(subnets, "subnets")),
        tuple(_node_from_value(n) for n in check_tuple(nodes, "nodes")),
        topology.routing_table,
        topology.canister_migrations,
    )
    if topology != record.stored_topology():
        raise CodecError(f"registry version {record.version}: the topology does not match the subnet records")
    return record


def decode_registry(data: bytes) -> Registry:
    """Strict inverse of ``encode_registry``; ``MalformedRegistry`` for anything else."""
    try:
        value = decode(data, max_bytes=MAX_REGISTRY_BYTES)
        tag, version, records = check_tuple(value, "registry", 3)
        if tag != _TAG:
            raise CodecError(f"not a registry (tag {tag!r})")
        if version == 1:
            raise UnsupportedRegistryVersion(
                "registry encoding version 1 holds keys of the project's own BLS variant (G1 public keys), which "
                f"certifications no longer use; this build reads version {REGISTRY_ENCODING_VERSION} (make the "
                "testnet directory again)")
        if version == 2:
            raise UnsupportedRegistryVersion(
                "registry encoding version 2 lists no node signing keys (Ed25519), which node ids and signed query "
                f"answers need; this build reads version {REGISTRY_ENCODING_VERSION} (make the testnet directory again)")
        if type(version) is not int or version != REGISTRY_ENCODING_VERSION:
            raise UnsupportedRegistryVersion(f"unknown registry encoding version {version!r}")
        registry = Registry(_record_from_value(r) for r in check_tuple(records, "registry records"))
    except (EncodingError, CodecError, RegistryError, ValueError) as exc:
        if isinstance(exc, MalformedRegistry):
            raise
        raise MalformedRegistry(f"registry: {exc}") from exc
    return registry
