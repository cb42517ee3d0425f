"""Verifying a read_state certificate (pure): the client never trusts the node.

``verify_certificate(certificate, subnet, public_key, now, max_age, min_height)`` checks, in
order, each failure with its own ``CertificateInvalid`` subclass:

1. ``reconstruct(tree) == certification.root``                          (``CertificateRootMismatch``)
2. the tree reveals ``/metadata/height`` and it is ``certification.height``: the signature
   covers the root only, the tree authenticates the height
   (``certification.check_certified_height``)                       (``CertificateHeightMismatch``)
3. ``e(σ, g2) == e(H(domain_sep("ic-state-root") ‖ root), pk)`` (the IC's BLS variant) under the
   key of the subnet whose registry ranges cover the canister  (``CertificateSignatureInvalid``)
4. ``certification.height >= min_height`` (the highest height already verified for that
   subnet: no rollback)                                                (``CertificationRollback``)
5. ``/time`` is revealed and ``now - time <= max_age``                   (``CertificateTooOld``)

A ``VerifiedCertificate`` then answers lookups: a revealed leaf's value, ``None`` for a path
the tree proves absent, ``PathNotProven`` for one it leaves pruned. Leaves are decoded as the
certified tree encodes them (``state_manager.state_tree``): the IC's paths with ``replica.ic``'s
decoders (``/time`` and reject codes LEB128, statuses and reject messages text, controllers and
canister ranges CBOR, other blobs as they are), the project's own (``/metadata``, ``/streams``)
as canonical msgpack ``[version, value]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from state_manager.certification import (
    Certification, CertificationError, CertifiedHeightError, check_certified_height, verify_certification,
)
from state_manager.codec import LEAF_VERSION
from state_manager.encoding import EncodingError, decode
from state_manager.hash_tree import Absent, Found, HashTree, Leaf, lookup_path, reconstruct

from replica.ic import cbor
from replica.ic.canister_ranges import decode_canister_ranges
from replica.ic.errors import IcFormatError
from replica.ic.principal import MAX_PRINCIPAL_BYTES, Principal
from replica.ic.request_id import decode_uleb128

from .agent_errors import (
    CertificateHeightMismatch, CertificateTooOld, CertificationRollback, CertificateSignatureInvalid,
    MalformedCertificate, PathNotProven, CertificateRootMismatch,
)
from .http_wire import Certificate

__all__ = ["VerifiedCertificate", "verify_certificate", "leaf_value"]


def _path_text(path: Sequence[bytes]) -> str:
    """``/time``, ``/request_status/<hex id>/status``: printable labels as text, others in hex."""
    return "/" + "/".join(
        label.decode() if label.isascii() and label.decode().isprintable() and b"/" not in label else label.hex()
        for label in path)


def _msgpack_leaf(raw: bytes, path: Sequence[bytes]) -> Any:
    """The value of one of the project's leaves, ``encode([LEAF_VERSION, value])``."""
    try:
        value = decode(raw)
    except EncodingError as exc:
        raise MalformedCertificate(f"leaf at {_path_text(path)} is not canonical msgpack: {exc}") from exc
    if not (isinstance(value, tuple) and len(value) == 2 and type(value[0]) is int and value[0] == LEAF_VERSION):
        raise MalformedCertificate(f"leaf at {_path_text(path)} is not [{LEAF_VERSION}, value]")
    return value[1]


def _controllers(raw: bytes) -> tuple[Principal, ...]:
    value = cbor.decode(raw, max_bytes=len(raw), max_depth=1)
    if type(value) is not list or any(type(p) is not bytes or len(p) > MAX_PRINCIPAL_BYTES for p in value):
        raise MalformedCertificate("controllers are an array of principals")
    return tuple(Principal(p) for p in value)


def _ic_leaf(raw: bytes, path: Sequence[bytes]) -> Any:
    """The value of a leaf at one of the IC's paths (module docstring)."""
    head, last = path[0], path[-1]
    if (head == b"time" and len(path) == 1) or (head == b"request_status" and last == b"reject_code"):
        return decode_uleb128(raw)
    if head == b"request_status" and last in (b"status", b"reject_message", b"error_code"):
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedCertificate(f"leaf at {_path_text(path)} is not UTF-8 text") from exc
    if head == b"canister" and last == b"controllers":
        return _controllers(raw)
    if head == b"canister_ranges" or (head == b"subnet" and last == b"canister_ranges"):
        return decode_canister_ranges(raw)
    return raw


def leaf_value(raw: bytes, path: Sequence[bytes]) -> Any:
    """The value of the certified tree's leaf at ``path``, decoded by the encoding of its path
    (module docstring); ``MalformedCertificate`` when it is not that encoding."""
    if not path or path[0] in (b"metadata", b"streams"):
        return _msgpack_leaf(raw, path)
    try:
        return _ic_leaf(raw, path)
    except IcFormatError as exc:
        raise MalformedCertificate(f"leaf at {_path_text(path)}: {exc}") from exc


@dataclass(frozen=True, slots=True)
class VerifiedCertificate:
    """A certificate that passed every check, for ``subnet_id`` at ``height``, state time ``time_ns``."""

    subnet_id: str
    height: int
    time_ns: int
    tree: HashTree

    def lookup(self, path: Sequence[bytes]) -> bytes | None:
        """The raw leaf at ``path``; ``None`` if the tree proves it absent."""
        result = lookup_path(self.tree, list(path))
        if isinstance(result, Absent):
            return None
        if not isinstance(result, Found):
            raise PathNotProven(f"the certificate neither reveals nor excludes {_path_text(path)}")
        if not isinstance(result.tree, Leaf):
            raise MalformedCertificate(f"{_path_text(path)} is a subtree, not a leaf")
        return result.tree.value

    def lookup_value(self, path: Sequence[bytes]) -> Any:
        """The decoded value of the leaf at ``path`` (``None`` if proven absent)."""
        raw = self.lookup(path)
        return None if raw is None else leaf_value(raw, path)


def verify_certificate(certificate: Certificate, *, subnet_id: str, public_key: bytes, now_ns: int,
                       max_age_ns: int, min_height: int,
                       verify_signature: Callable[[Certification, bytes], None] = verify_certification,
                       ) -> VerifiedCertificate:
    """The checks of the module docstring, in order; a ``VerifiedCertificate`` if all hold.
    ``verify_signature`` is check 3 (an agent may pass one that remembers certifications it
    verified already: many answers at one height carry the same one)."""
    certification = certificate.certification
    root = reconstruct(certificate.tree)
    if root != certification.root:
        raise CertificateRootMismatch(f"the tree's root {root.hex()} is not the certified root {certification.root.hex()}")
    try:
        check_certified_height(certification, certificate.tree)
    except CertifiedHeightError as exc:
        raise CertificateHeightMismatch(str(exc)) from exc
    try:
        verify_signature(certification, public_key)
    except CertificationError as exc:
        raise CertificateSignatureInvalid(
            f"the certification of height {certification.height} does not verify under the key of "
            f"{subnet_id}: {exc}") from exc
    if certification.height < min_height:
        raise CertificationRollback(
            f"certified height {certification.height} is below height {min_height}, already verified for {subnet_id}")
    verified = VerifiedCertificate(subnet_id, certification.height, 0, certificate.tree)
    time_ns = verified.lookup_value([b"time"])
    if type(time_ns) is not int or time_ns < 0:
        raise PathNotProven("the certificate does not reveal /time")
    if now_ns - time_ns > max_age_ns:
        raise CertificateTooOld(
            f"the certified state time is {(now_ns - time_ns) / 1e9:.1f} s old (at most {max_age_ns / 1e9:.0f} s)")
    return VerifiedCertificate(subnet_id, certification.height, time_ns, certificate.tree)
