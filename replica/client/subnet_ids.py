"""The IC's ids of a registry's subnets (pure): their principals and the root key.

The root subnet is the registry's first subnet (the genesis order: ``subnet-0`` of a testnet);
its threshold key is the network's root key, the one key an IC agent must know. A subnet's id
is the self-authenticating principal of its threshold key in DER (``replica.ic.principal``).
"""

from __future__ import annotations

from consensus_stub.registry import RegistryRecord
from replica.ic.bls import public_key_to_der
from replica.ic.principal import subnet_principal

__all__ = ["root_subnet_id", "root_key_of", "subnet_principal_of"]


def root_subnet_id(record: RegistryRecord) -> str:
    return record.subnets[0].subnet_id


def root_key_of(record: RegistryRecord) -> bytes:
    """The root subnet's threshold public key, DER-encoded as agents take it."""
    return public_key_to_der(record.subnets[0].public_key)


def subnet_principal_of(record: RegistryRecord, subnet_id: str) -> bytes:
    subnet = record.subnet(subnet_id)
    if subnet is None:
        raise LookupError(f"subnet {subnet_id} is not in the registry")
    return subnet_principal(public_key_to_der(subnet.public_key)).raw
