"""A node's signing key: Ed25519, as the IC's nodes have one, and the node id it authenticates.

On the IC every node holds an Ed25519 *node signing key*. Its public key, DER-encoded
(RFC 8410 ``SubjectPublicKeyInfo``: a fixed 12-byte prefix, then the 32-byte key), is what the
certified state shows at ``/subnet/<subnet>/node/<node>/public_key``; the node's IC id is the
self-authenticating principal of that DER key (the interface specification, *Principals*)::

    node_principal(key) = SHA-224(DER(key)) · 0x02

and what the node signs with it (query responses: ``"\\x0Bic-response" · hash_of_map(response)``)
is checked by agents against that DER key. The registry lists every node's DER key
(``consensus_stub.registry``), genesis derives the private keys from its seed (``derive``).

Pure: key derivation takes the seed as an argument; point checks are arithmetic.
"""

from __future__ import annotations

import hashlib

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from state_manager.hash_tree import domain_sep

__all__ = [
    "ED25519_DER_PREFIX", "PRIVATE_KEY_BYTES", "RAW_PUBLIC_KEY_BYTES", "DER_PUBLIC_KEY_BYTES",
    "derive_signing_key", "der_public_key", "is_der_public_key", "node_principal_bytes",
]

#: ``SEQUENCE(42) { SEQUENCE { OID 1.3.101.112 } BIT STRING(33, 0 unused bits) }`` (RFC 8410).
ED25519_DER_PREFIX = bytes.fromhex("302a300506032b6570032100")
PRIVATE_KEY_BYTES = 32
RAW_PUBLIC_KEY_BYTES = 32
DER_PUBLIC_KEY_BYTES = len(ED25519_DER_PREFIX) + RAW_PUBLIC_KEY_BYTES
_DERIVE_DOMAIN = domain_sep("replica-genesis-node-signing-key")
_SELF_AUTHENTICATING = b"\x02"

# Edwards25519 (RFC 8032, 5.1): the field prime and the curve constant d.
_P = 2**255 - 19
_D = (-121665 * pow(121666, _P - 2, _P)) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)


def derive_signing_key(seed: bytes, node_id: str) -> bytes:
    """The 32 private bytes of ``node_id``'s key at the genesis of ``seed``::

        SHA-256(domain_sep("replica-genesis-node-signing-key") · u64(len(seed)) · seed · utf8(node_id))

    (the seed's length first, so no other seed and node id give the same bytes)."""
    return hashlib.sha256(_DERIVE_DOMAIN + len(seed).to_bytes(8, "big") + seed + node_id.encode("utf-8")).digest()


def der_public_key(private_key: bytes) -> bytes:
    """The DER public key of the Ed25519 key whose private bytes are ``private_key`` (RFC 8032)."""
    raw = Ed25519PrivateKey.from_private_bytes(private_key).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return ED25519_DER_PREFIX + raw


def _is_point(raw: bytes) -> bool:
    """Whether ``raw`` decodes to a point of edwards25519 (RFC 8032, 5.1.3): ``y < p``, and
    ``x² = (y² - 1) / (d·y² + 1)`` has a root whose parity the sign bit may choose."""
    y = int.from_bytes(raw, "little") & ((1 << 255) - 1)
    sign = raw[31] >> 7
    if y >= _P:
        return False
    u, v = (y * y - 1) % _P, (_D * y * y + 1) % _P
    x2 = u * pow(v, _P - 2, _P) % _P
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P != 0:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P != 0:
        return False
    return not (x == 0 and sign == 1)


def is_der_public_key(value: object) -> bool:
    """Whether ``value`` is the DER encoding of an Ed25519 public key that is a curve point."""
    return (type(value) is bytes and len(value) == DER_PUBLIC_KEY_BYTES and value.startswith(ED25519_DER_PREFIX)
            and _is_point(value[len(ED25519_DER_PREFIX):]))


def node_principal_bytes(der_key: bytes) -> bytes:
    """``SHA-224(der_key) · 0x02``: the bytes of the node id ``der_key`` authenticates (what
    ``replica.ic.principal.node_principal`` computes, for layers below ``replica``)."""
    return hashlib.sha224(der_key).digest() + _SELF_AUTHENTICATING
