"""Genesis: deal every subnet's threshold key and every node's TLS identity and signing key;
build version 1.

``genesis_registry(subnet_specs, seed, not_before=...)`` returns the public ``Registry`` and,
separately, each node's ``NodeSecrets`` (its secret key share, TLS identity and Ed25519 node
signing key). Threshold keys are dealt deterministically from ``seed`` (``t =
threshold_for(n)``), and so are the node signing keys (``node_signing_key.derive_signing_key``:
the node ids they authenticate are then the same for the same seed, as the subnet keys are);
TLS keys come from the operating system's randomness (``node_keys``), with certificates valid
from the given ``not_before``. Node ``i`` (1-based) of subnet ``s`` is ``"<s>-node-<i>"``.

Node secrets travel to node processes as canonical msgpack::

    ["replica-node-secrets", 2, node_id, subnet_id, node_index, secret_share, certificate_pem, private_key_pem,
     signing_key]                                                 (signing_key: the 32 private Ed25519 bytes)

Version 1 had no signing key; it is refused with ``UnsupportedNodeSecretsVersion`` (the key
cannot be made up afterwards: the registry lists its public half).
"""

from __future__ import annotations

import datetime
import hashlib
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from state_manager import bls
from state_manager.codec import CodecError, check_bytes, check_str, check_tuple, check_u64
from state_manager.encoding import EncodingError, decode, encode
from state_manager.routing_table import CanisterIdRange, RoutingTable, RoutingTableError

from .errors import ConsensusError
from .node_keys import NodeIdentity, NodeKeyError, generate_node_identity, load_node_identity
from .node_signing_key import PRIVATE_KEY_BYTES, der_public_key, derive_signing_key
from .registry import InconsistentRegistry, NodeRecord, Registry, RegistryRecord, SubnetRecord

__all__ = [
    "SubnetSpec", "NodeSecrets", "GenesisError", "UnsupportedNodeSecretsVersion", "genesis_registry", "node_id_for",
    "encode_node_secrets", "decode_node_secrets", "UNBOUND_ADDRESS",
]

#: The address of a node whose endpoint is not bound yet (see ``Registry.with_node_addresses``).
UNBOUND_ADDRESS = "127.0.0.1:0"
_SECRETS_TAG = "replica-node-secrets"
_SECRETS_VERSION = 2
_DEAL_DOMAIN = b"\x17replica-genesis-subnet-key"


class GenesisError(ConsensusError):
    """Subnet specifications that cannot make a registry, or unreadable node secrets."""


class UnsupportedNodeSecretsVersion(GenesisError):
    """Node secrets of an encoding version this build does not read (version 1: no signing key)."""


@dataclass(frozen=True, slots=True)
class SubnetSpec:
    """A subnet to create: its id, its node count and the canister-id ranges it hosts."""

    subnet_id: str
    nodes: int
    canister_ranges: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class NodeSecrets:
    """What only one node holds: its share of the subnet key, its TLS private key and the
    private bytes of its Ed25519 node signing key."""

    node_id: str
    subnet_id: str
    node_index: int
    secret_share: bytes = field(repr=False)
    identity: NodeIdentity = field(repr=False)
    signing_key: bytes = field(repr=False)

    @property
    def signing_public_key(self) -> bytes:
        """The DER public key of ``signing_key``: what the registry lists for this node."""
        return der_public_key(self.signing_key)


def node_id_for(subnet_id: str, index: int) -> str:
    """``"<subnet>-node-<index>"`` (1-based)."""
    return f"{subnet_id}-node-{index}"


def _deal_seed(seed: bytes, subnet_id: str) -> bytes:
    """``SHA-256(domain ‖ seed ‖ subnet_id)``: one independent dealing seed per subnet."""
    return hashlib.sha256(_DEAL_DOMAIN + seed + subnet_id.encode("utf-8")).digest()


def genesis_registry(
    subnet_specs: Iterable[SubnetSpec],
    seed: bytes,
    *,
    not_before: datetime.datetime,
    addresses: Mapping[str, str] | None = None,
    version: int = 1,
) -> tuple[Registry, dict[str, NodeSecrets]]:
    """Registry version ``version`` for ``subnet_specs`` plus every node's secrets (by node id)."""
    specs = sorted(subnet_specs, key=lambda s: s.subnet_id)
    if not specs:
        raise GenesisError("genesis needs at least one subnet")
    if not isinstance(seed, bytes) or len(seed) < bls.MIN_SEED_BYTES:
        raise GenesisError(f"the genesis seed must be at least {bls.MIN_SEED_BYTES} bytes")
    addresses = dict(addresses or {})
    subnets, nodes, routes, secrets = [], [], [], {}
    for spec in specs:
        if type(spec.nodes) is not int or spec.nodes < 1:
            raise GenesisError(f"subnet {spec.subnet_id!r} needs at least one node")
        t = bls.threshold_for(spec.nodes)
        deal = bls.deal_threshold_keys(spec.nodes, t, _deal_seed(seed, spec.subnet_id))
        node_ids = tuple(node_id_for(spec.subnet_id, i) for i in range(1, spec.nodes + 1))
        subnets.append(SubnetRecord(spec.subnet_id, node_ids, t, deal.public_key, deal.public_key_shares))
        for index, node_id in enumerate(node_ids, start=1):
            try:
                identity = generate_node_identity(node_id, not_before)
            except NodeKeyError as exc:
                raise GenesisError(str(exc)) from exc
            signing_key = derive_signing_key(seed, node_id)
            nodes.append(NodeRecord(node_id, spec.subnet_id, addresses.pop(node_id, UNBOUND_ADDRESS),
                                    identity.certificate_pem(), der_public_key(signing_key)))
            secrets[node_id] = NodeSecrets(node_id, spec.subnet_id, index, deal.secret_share(index), identity,
                                           signing_key)
        for lo, hi in spec.canister_ranges:
            routes.append((CanisterIdRange(lo, hi), spec.subnet_id))
    if addresses:
        raise GenesisError(f"addresses given for unknown nodes {sorted(addresses)}")
    try:
        record = RegistryRecord(version, tuple(subnets), tuple(sorted(nodes, key=lambda n: n.node_id)),
                                RoutingTable(tuple(routes)))
        return Registry([record]), secrets
    except (RoutingTableError, InconsistentRegistry) as exc:
        raise GenesisError(str(exc)) from exc


def encode_node_secrets(secrets: NodeSecrets) -> bytes:
    """Canonical bytes of one node's secrets (the file a node process reads at start)."""
    identity = secrets.identity
    return encode((_SECRETS_TAG, _SECRETS_VERSION, secrets.node_id, secrets.subnet_id, secrets.node_index,
                   secrets.secret_share, identity.certificate_pem(), identity.private_key_pem(), secrets.signing_key))


def decode_node_secrets(data: bytes) -> NodeSecrets:
    """Strict inverse of ``encode_node_secrets``; ``GenesisError`` for anything else."""
    try:
        value: Any = decode(data, max_bytes=64 * 1024)
        items = check_tuple(value, "node secrets")
        if len(items) < 2 or items[0] != _SECRETS_TAG:
            raise CodecError("not node secrets")
        if type(items[1]) is not int or items[1] != _SECRETS_VERSION:
            raise UnsupportedNodeSecretsVersion(
                f"node secrets of encoding version {items[1]!r}; this build reads version {_SECRETS_VERSION}, which "
                "holds the node's signing key (make the testnet directory again)")
        _, _, node_id, subnet_id, index, share, cert, key, signing_key = check_tuple(value, "node secrets", 9)
        identity = load_node_identity(check_bytes(cert, "certificate"), check_bytes(key, "private key"))
        secrets = NodeSecrets(check_str(node_id, "node id"), check_str(subnet_id, "subnet id"),
                              check_u64(index, "node index"), check_bytes(share, "secret share", bls.SECRET_KEY_BYTES),
                              identity, check_bytes(signing_key, "signing key", PRIVATE_KEY_BYTES))
    except (EncodingError, CodecError, NodeKeyError) as exc:
        raise GenesisError(f"node secrets: {exc}") from exc
    if identity.node_id != secrets.node_id:
        raise GenesisError("node secrets: the certificate names another node")
    return secrets
