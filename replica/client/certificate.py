"""Verifying a certificate as the agent does (pure): the client never trusts the node.

A certificate is the IC's (``replica.ic.certificate``). ``verify_answer_certificate`` checks, in
order, each failure with its own ``CertificateInvalid`` subclass:

1. it decodes, its tree is well formed, its delegation (if any) is the root subnet's, signed
   by the root key, for the subnet asked and covering the canister asked
   (``MalformedCertificate``, ``CertificateSignatureInvalid``);
2. its signature verifies under the delegated key — or, without a delegation, under the root
   key if the subnet asked is the root subnet, else under that subnet's key in the agent's
   registry (a node that serves no delegation is still checked against a key the agent trusts)
   (``CertificateSignatureInvalid``);
3. the tree reveals ``/metadata/height`` (the certified height: the signature covers the root
   only) and it is at least ``min_height``, the highest height already verified for that
   subnet: no rollback (``CertificateHeightMismatch``, ``CertificationRollback``);
4. ``/time`` is revealed and ``now - time <= max_age`` (``CertificateTooOld``).

The signature check costs a pairing; ``SignatureCache`` remembers certificates whose signature
verified (the same certification answers every read at one height), and the delegations
verified once, so a busy agent pays about one pairing per certified height and subnet.
A ``VerifiedCertificate`` then answers lookups: a revealed leaf, ``None`` for a path the tree
proves absent, ``PathNotProven`` for one it leaves pruned. Leaves are decoded as the certified
tree encodes them (``state_manager.state_tree``): the IC's paths with ``replica.ic``'s decoders
(``/time`` and reject codes LEB128, statuses and reject messages text, controllers and canister
ranges CBOR, other blobs as they are), the replica's own (``/metadata``, ``/streams``) as
canonical msgpack ``[version, value]``.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Sequence

from replica.ic import cbor
from replica.ic.canister_ranges import check_canister_in_ranges, decode_canister_ranges
from replica.ic.certificate import decode_certificate, verify_certificate
from replica.ic.errors import (
    CanisterOutsideRanges, CanisterRangesMissing, CertificateMalformed, CertificateSignatureRefused, IcFormatError,
)
from replica.ic.principal import MAX_PRINCIPAL_BYTES, Principal
from replica.ic.request_id import decode_uleb128
from state_manager.certification import HEIGHT_PATH, SignatureMemo
from state_manager.codec import LEAF_VERSION
from state_manager.encoding import EncodingError, decode
from state_manager.hash_tree import Absent, Found, HashTree, Leaf, lookup_path, reconstruct

from .agent_errors import (
    CertificateHeightMismatch, CertificateSignatureInvalid, CertificateTooOld, CertificationRollback,
    MalformedCertificate, PathNotProven,
)

__all__ = ["VerifiedCertificate", "SignatureCache", "verify_answer_certificate", "leaf_value", "path_text"]

_REMEMBERED = 64


def path_text(path: Sequence[bytes]) -> str:
    """``/time``, ``/request_status/<hex id>/status``: printable labels as text, others in hex."""
    return "/" + "/".join(
        label.decode() if label.isascii() and label.decode().isprintable() and b"/" not in label else label.hex()
        for label in path)


def _msgpack_leaf(raw: bytes, path: Sequence[bytes]) -> Any:
    """The value of one of the project's leaves, ``encode([LEAF_VERSION, value])``."""
    try:
        value = decode(raw)
    except EncodingError as exc:
        raise MalformedCertificate(f"leaf at {path_text(path)} is not canonical msgpack: {exc}") from exc
    if not (isinstance(value, tuple) and len(value) == 2 and type(value[0]) is int and value[0] == LEAF_VERSION):
        raise MalformedCertificate(f"leaf at {path_text(path)} is not [{LEAF_VERSION}, value]")
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
            raise MalformedCertificate(f"leaf at {path_text(path)} is not UTF-8 text") from exc
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
        raise MalformedCertificate(f"leaf at {path_text(path)}: {exc}") from exc


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
            raise PathNotProven(f"the certificate neither reveals nor excludes {path_text(path)}")
        if not isinstance(result.tree, Leaf):
            raise MalformedCertificate(f"{path_text(path)} is a subtree, not a leaf")
        return result.tree.value

    def lookup_value(self, path: Sequence[bytes]) -> Any:
        """The decoded value of the leaf at ``path`` (``leaf_value``; ``None`` if absent)."""
        raw = self.lookup(path)
        return None if raw is None else leaf_value(raw, path)


@dataclass
class SignatureCache:
    """Certificates whose signature verified (by ``(signature, root, delegation, key trusted)``:
    without a delegation, the key it verified under is part of what was verified) and the
    delegations verified (``replica.ic.certificate``'s cache), each bounded."""

    signatures: "OrderedDict[tuple[bytes, bytes, bytes, bytes], None]" = field(default_factory=OrderedDict)
    delegations: dict = field(default_factory=dict)

    def remember(self, key: tuple[bytes, bytes, bytes, bytes]) -> None:
        self.signatures[key] = None
        while len(self.signatures) > _REMEMBERED:
            self.signatures.popitem(last=False)
        if len(self.delegations) > _REMEMBERED:
            self.delegations.clear()


def verify_answer_certificate(data: bytes, *, subnet_id: str, subnet_principal: bytes, is_root: bool,
                              root_key: bytes, subnet_key: bytes, canister: Principal | None, now_ns: int,
                              max_age_ns: int, min_height: int, cache: SignatureCache,
                              memo: SignatureMemo | None = None) -> VerifiedCertificate:
    """The checks of the module docstring; ``root_key`` and ``subnet_key`` are raw 96-byte
    keys (the registry's), ``canister`` the canister the answer is about (None: the
    management canister, whose subnet the agent chose); ``memo``: pairing checks this process
    passed already (a client in one process with the subnet's nodes, ``replica.testing``)."""
    try:
        certificate = decode_certificate(data)
        delegation = certificate.delegation
        if delegation is not None and delegation.subnet_id != subnet_principal:
            raise CertificateMalformed(f"a delegation to {Principal(delegation.subnet_id)}, not to {subnet_id}")
        root = reconstruct(certificate.tree)
        trusted = root_key if delegation is not None or is_root else subnet_key
        key = (certificate.signature, root, b"" if delegation is None else delegation.certificate, trusted)
        # a delegation the cache has forgotten since (it forgets them all when it holds many)
        # is verified again with the certificate
        delegated = None if delegation is None else cache.delegations.get((delegation.subnet_id,
                                                                           delegation.certificate))
        if key in cache.signatures and (delegation is None or delegated is not None):
            if delegation is not None and delegated is not None and canister is not None:
                check_canister_in_ranges(delegated[1], delegation.subnet_id, canister)
        else:
            verify_certificate(certificate, root_key=trusted, canister_id=canister,
                               subnet_id=subnet_principal if delegation is not None else None,
                               delegation_cache=cache.delegations, memo=memo)
            cache.remember(key)
    except (CertificateSignatureRefused, CanisterOutsideRanges, CanisterRangesMissing) as exc:
        raise CertificateSignatureInvalid(f"a certificate of {subnet_id}: {exc}") from exc
    except IcFormatError as exc:
        raise MalformedCertificate(f"a certificate of {subnet_id}: {exc}") from exc
    verified = VerifiedCertificate(subnet_id, 0, 0, certificate.tree)
    try:
        height = verified.lookup_value(list(HEIGHT_PATH))
    except PathNotProven:   # pruned: not revealed either
        height = None
    if type(height) is not int or height < 0:
        raise CertificateHeightMismatch("the certificate does not reveal its height (/metadata/height)")
    if height < min_height:
        raise CertificationRollback(f"certified height {height} is below height {min_height}, already verified for {subnet_id}")
    raw_time = verified.lookup([b"time"])
    if raw_time is None:
        raise PathNotProven("the certificate does not reveal /time")
    try:
        time_ns = decode_uleb128(raw_time)
    except IcFormatError as exc:
        raise MalformedCertificate(f"/time is not a LEB128 nat: {exc}") from exc
    if now_ns - time_ns > max_age_ns:
        raise CertificateTooOld(
            f"the certified state time is {(now_ns - time_ns) / 1e9:.1f} s old (at most {max_age_ns / 1e9:.0f} s)")
    return VerifiedCertificate(subnet_id, height, time_ns, certificate.tree)
