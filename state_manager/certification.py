"""Certifications of state roots: threshold BLS signatures in the IC's variant
(``state_manager.bls``: signatures in G1, keys in G2) on ``domain_sep("ic-state-root") || root``.

A ``CertificationShare`` is one node's signature share on the root at a height; ``t`` valid
shares on the same (height, root) aggregate into a ``Certification`` that verifies under the
subnet public key. Verification raises one error class per failure; a caller that verifies
remote data for one protocol step (the certified-slice decoder) passes its own classes
(``SignatureErrors``) and gets them raised directly.

**The height is authenticated by the tree, not the signature** (docs/architecture.md,
*Certifications*). The IC signs the root alone; the certified tree states its height at
``/metadata/height``. So a certification's ``height`` field is a claim, and every consumer
that relies on it checks it against the certified tree: ``check_certified_height`` for a
revealed witness (the agent), the slice decoder for a slice's witness, and a node or state
sync by recomputing the root of its own state of that height. A share travels between the
nodes with ``height_witness``, the certified tree pruned to ``/metadata/height``
(``certified_height_witness``), and is aggregated only if it proves the share's height
(``check_share_height``): else one node could relabel ``t`` honest shares of an old root to
another height and they would combine into a certification that verifies.

Encodings (canonical msgpack, version first):

* certification: ``[3, height, root(32), signature(48)]``
* share:         ``[3, height, root(32), node_index, signature_share(48)]``

Older versions are refused with ``UnsupportedCertificationVersion``: version 1 signed the root
without its height and nothing authenticated the height; version 2 signed
``domain_sep || height || root`` in the project's own BLS variant (signatures in G2, keys in
G1), which no IC tool verifies. No verifier of version 2 is kept: nothing durable needs one
(a node re-certifies every height it executes, and a registry of that variant's keys is
refused too, see ``consensus_stub.registry``).

Pure: keys and shares arrive as arguments; signing keys never live here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from state_manager import bls, encoding
from state_manager.codec import LEAF_VERSION
from state_manager.errors import StateManagerError
from state_manager.hash_tree import Absent, Found, HashTree, Leaf, lookup_path, reconstruct
from state_manager.labeled_trie import LabeledTrie
from state_manager.tree_encoding import TreeDecodeError, decode_tree, encode_tree
from state_manager.trie_witness import plan_paths, witness_tree

__all__ = [
    "CERTIFICATION_VERSION",
    "CERTIFICATION_SHARE_VERSION",
    "MAX_HEIGHT",
    "MAX_NODE_INDEX",
    "CertificationError",
    "MalformedCertification",
    "UnsupportedCertificationVersion",
    "EmptySignature",
    "IdentitySignature",
    "MalformedSignature",
    "InvalidSignature",
    "InvalidPublicKey",
    "CertifiedHeightError",
    "CertifiedHeightNotRevealed",
    "CertifiedHeightMismatch",
    "NotEnoughValidShares",
    "ConflictingShares",
    "SignatureErrors",
    "CERTIFICATION_ERRORS",
    "Certification",
    "CertificationShare",
    "encode_certification",
    "decode_certification",
    "encode_certification_share",
    "decode_certification_share",
    "certification_message",
    "HEIGHT_PATH", "MAX_HEIGHT_WITNESS_BYTES", "certified_height_leaf", "check_certified_height",
    "certified_height_witness", "check_share_height",
    "verify_certification", "SignatureMemo",
    "sign_certification_share",
    "verify_certification_share",
    "aggregate_certification", "combine_unverified",
]

#: 3: the IC's BLS variant over ``domain_sep || root``, the height authenticated by the tree.
CERTIFICATION_VERSION = 3
CERTIFICATION_SHARE_VERSION = 3
#: Why each older version is refused (named in the error).
_REFUSED_VERSIONS = {
    1: "signs the state root without its height and nothing authenticates the height",
    2: "is signed in the project's own BLS variant (signatures in G2, keys in G1), not the IC's",
}
#: Where the certified tree states its height.
HEIGHT_PATH = (b"metadata", b"height")
#: Bound on a share's height witness (an honest one is a few pruned digests: ~250 bytes).
MAX_HEIGHT_WITNESS_BYTES = 2048
_MAX_HEIGHT_WITNESS_DEPTH = 64
MAX_HEIGHT = 2**64 - 1
MAX_NODE_INDEX = 2**32 - 1
# Generous bound on an encoded certification or share (both are ~140 bytes).
_MAX_ENCODED_BYTES = 1024


class CertificationError(StateManagerError, ValueError):
    """Base class of every error raised by this module."""


class MalformedCertification(CertificationError):
    """Bytes or field values that are not a canonical certification (or share)."""


class UnsupportedCertificationVersion(MalformedCertification):
    """A certification or share of another version: version 1 left the height unauthenticated,
    version 2 is the project's own BLS variant (module docstring)."""


class EmptySignature(CertificationError):
    """The signature is empty or all zero bytes: the state was never certified."""


class IdentitySignature(CertificationError):
    """The signature is the identity point of G1, which verifies nothing."""


class MalformedSignature(CertificationError):
    """The signature bytes are not a valid G1 point of the prime-order subgroup."""


class InvalidSignature(CertificationError):
    """A well-formed signature that does not verify under the given key."""


class InvalidPublicKey(CertificationError):
    """The public key (or key share) given to verify against is not a valid G2 point."""


class CertifiedHeightError(CertificationError):
    """The certified tree does not authenticate the height the certification claims."""


class CertifiedHeightNotRevealed(CertifiedHeightError):
    """The witness does not reveal ``/metadata/height``, so the claimed height is unproven."""


class CertifiedHeightMismatch(CertifiedHeightError):
    """The certified tree's ``/metadata/height`` is not the claimed height (a relabeled one)."""


class NotEnoughValidShares(CertificationError):
    """No (height, root) has ``t`` valid shares."""


class ConflictingShares(CertificationError):
    """More than one (height, root) has ``t`` valid shares, which honest nodes never produce."""


@dataclass(frozen=True, slots=True)
class SignatureErrors:
    """The class raised for each way a signature check fails (defaults: this module's)."""

    invalid_key: type[Exception] = InvalidPublicKey
    empty: type[Exception] = EmptySignature
    identity: type[Exception] = IdentitySignature
    malformed: type[Exception] = MalformedSignature
    invalid: type[Exception] = InvalidSignature


CERTIFICATION_ERRORS = SignatureErrors()


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_fields(height: object, root: object) -> None:
    if not encoding.is_u64(height):
        raise MalformedCertification(f"height must be an integer in [0, 2**64), got {height!r}")
    if not isinstance(root, bytes) or len(root) != bls.ROOT_BYTES:
        raise MalformedCertification(f"root must be {bls.ROOT_BYTES} bytes")


@dataclass(frozen=True, slots=True)
class Certification:
    """A subnet's threshold signature on the state root at ``height``.

    The signature is only type-checked here; its validity is ``verify_certification``'s job
    (so that an empty or bogus signature can be represented and rejected with its own error).
    """

    height: int
    root: bytes
    signature: bytes

    def __post_init__(self) -> None:
        _check_fields(self.height, self.root)
        if not isinstance(self.signature, bytes):
            raise MalformedCertification("signature must be bytes")


@dataclass(frozen=True, slots=True)
class CertificationShare:
    """Node ``node_index``'s signature share on the state root at ``height``.

    ``height_witness`` (encoded, ``tree_encoding``) is the certified tree pruned to
    ``/metadata/height``: what proves ``height`` to the peers that aggregate the share
    (``check_share_height``). It travels in the agreement's gossip, not in the share's own
    encoding, and takes no part in equality."""

    height: int
    root: bytes
    node_index: int
    signature_share: bytes
    height_witness: bytes = field(default=b"", compare=False, repr=False)

    def __post_init__(self) -> None:
        _check_fields(self.height, self.root)
        if not _is_int(self.node_index) or not 1 <= self.node_index <= MAX_NODE_INDEX:
            raise MalformedCertification(f"node index must be in [1, 2**32), got {self.node_index!r}")
        if not isinstance(self.signature_share, bytes):
            raise MalformedCertification("signature share must be bytes")
        if not isinstance(self.height_witness, bytes):
            raise MalformedCertification("height witness must be bytes")


def encode_certification(cert: Certification) -> bytes:
    """``msgpack([version, height, root, signature])``."""
    return encoding.encode((CERTIFICATION_VERSION, cert.height, cert.root, cert.signature))


def _decode_array(data: bytes, what: str) -> tuple:
    try:
        value = encoding.decode(data, max_bytes=_MAX_ENCODED_BYTES)
    except encoding.EncodingError as exc:
        raise MalformedCertification(f"{what}: {exc}") from exc
    if not isinstance(value, tuple) or not value:
        raise MalformedCertification(f"{what} must be a non-empty array")
    return value


def _check_signature_length(signature: object, what: str) -> None:
    if not isinstance(signature, bytes) or len(signature) != bls.SIGNATURE_BYTES:
        raise MalformedCertification(f"{what} must be {bls.SIGNATURE_BYTES} bytes")


def _check_version(version: object, expected: int, what: str) -> None:
    if not _is_int(version):
        raise MalformedCertification(f"{what} version must be an integer, got {version!r}")
    if version in _REFUSED_VERSIONS:
        raise UnsupportedCertificationVersion(
            f"{what} version {version} {_REFUSED_VERSIONS[version]}; it is no longer accepted "
            f"(expected version {expected})")
    if version != expected:
        raise UnsupportedCertificationVersion(f"unknown {what} version {version!r} (expected {expected})")


def decode_certification(data: bytes) -> Certification:
    """Inverse of ``encode_certification``; raises ``MalformedCertification`` for anything
    else (non-canonical msgpack, unknown version, wrong arity, types or lengths)."""
    value = _decode_array(data, "certification")
    _check_version(value[0], CERTIFICATION_VERSION, "certification")
    if len(value) != 4:
        raise MalformedCertification(f"certification has {len(value)} fields, expected 4")
    _, height, root, signature = value
    _check_signature_length(signature, "signature")
    return Certification(height=height, root=root, signature=signature)


def encode_certification_share(share: CertificationShare) -> bytes:
    """``msgpack([version, height, root, node_index, signature_share])``."""
    return encoding.encode(
        (CERTIFICATION_SHARE_VERSION, share.height, share.root, share.node_index, share.signature_share)
    )


def decode_certification_share(data: bytes) -> CertificationShare:
    """Inverse of ``encode_certification_share``, as strict as ``decode_certification``."""
    value = _decode_array(data, "certification share")
    _check_version(value[0], CERTIFICATION_SHARE_VERSION, "certification share")
    if len(value) != 5:
        raise MalformedCertification(f"certification share has {len(value)} fields, expected 5")
    _, height, root, node_index, signature_share = value
    _check_signature_length(signature_share, "signature share")
    return CertificationShare(height=height, root=root, node_index=node_index, signature_share=signature_share)


def certification_message(root: bytes) -> bytes:
    """The signed bytes: ``domain_sep("ic-state-root") || root`` (``bls.state_root_message``)."""
    return bls.state_root_message(root)


def certified_height_leaf(height: int) -> bytes:
    """The leaf at ``/metadata/height`` of a certified tree of ``height``: ``[LEAF_VERSION, height]``
    (``state_tree.leaf``)."""
    return encoding.encode_unchecked((LEAF_VERSION, height))


def check_certified_height(cert: Certification | CertificationShare, tree: HashTree) -> None:
    """The certified tree authenticates the claimed height: ``lookup(/metadata/height, tree) ==
    certified_height_leaf(cert.height)``. For a witness whose root is ``cert.root`` (the caller
    checked that): ``CertifiedHeightNotRevealed`` if it does not reveal the leaf,
    ``CertifiedHeightMismatch`` if the leaf states another height."""
    found = lookup_path(tree, list(HEIGHT_PATH))
    if isinstance(found, Absent):
        raise CertifiedHeightMismatch("the certified tree has no /metadata/height")
    if not isinstance(found, Found) or not isinstance(found.tree, Leaf):
        raise CertifiedHeightNotRevealed(
            f"the witness does not reveal /metadata/height, so height {cert.height} is unproven")
    if found.tree.value != certified_height_leaf(cert.height):
        raise CertifiedHeightMismatch(
            f"the certification claims height {cert.height}, the certified tree's /metadata/height differs")


def certified_height_witness(certified: LabeledTrie) -> bytes:
    """The certified tree pruned to ``/metadata/height`` (encoded): a share's height proof."""
    return encode_tree(witness_tree(certified, plan_paths([list(HEIGHT_PATH)])))


def check_share_height(share: CertificationShare) -> None:
    """The share's ``height_witness`` proves its height: it decodes (bounded), reconstructs to
    ``share.root`` and states ``/metadata/height = share.height`` (``check_certified_height``).
    ``CertifiedHeightNotRevealed`` or ``CertifiedHeightMismatch`` otherwise."""
    try:
        tree = decode_tree(share.height_witness, max_bytes=MAX_HEIGHT_WITNESS_BYTES,
                           max_depth=_MAX_HEIGHT_WITNESS_DEPTH)
    except TreeDecodeError as exc:
        raise CertifiedHeightNotRevealed(f"share of node {share.node_index}: no height witness: {exc}") from exc
    if reconstruct(tree) != share.root:
        raise CertifiedHeightMismatch(f"share of node {share.node_index}: the height witness is of another root")
    check_certified_height(share, tree)


def _parse_public_key(public_key: bytes, what: str, errors: SignatureErrors = CERTIFICATION_ERRORS):
    try:
        return bls.parse_public_key(public_key)
    except bls.BlsPointError as exc:
        raise errors.invalid_key(f"{what}: {exc}") from exc


class SignatureMemo:
    """Signatures already verified, by their exact public key, root and signature bytes (the
    signed message is the root's): a pairing check depends on nothing else, so one that
    passed passes again. A
    process that verifies the same certification many times (the nodes of a subnet in one
    process, a client reading many statuses at one height) passes one memo to skip the
    repeats; nothing is remembered that did not verify. Bounded: it forgets everything when
    full. Its answers never change a result, only its cost."""

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._verified: dict[tuple[bytes, bytes, bytes], None] = {}

    def __contains__(self, key: tuple[bytes, bytes, bytes]) -> bool:
        return key in self._verified

    def add(self, key: tuple[bytes, bytes, bytes]) -> None:
        if len(self._verified) >= self.capacity:
            self._verified = {}
        self._verified[key] = None


#: The compressed identity of G1: the infinity flag over zeros.
_G1_IDENTITY = b"\xc0" + bytes(bls.SIGNATURE_BYTES - 1)


def _check_signature(root: bytes, signature: bytes, public_key: bytes, what: str,
                     errors: SignatureErrors = CERTIFICATION_ERRORS, *, memo: SignatureMemo | None = None) -> None:
    """Raise the first failure among: empty, malformed, identity, not verifying (a signature
    ``memo`` holds under ``public_key`` verified before). ``public_key`` was parsed already."""
    if not any(signature):
        raise errors.empty(f"{what} is empty or all zero")
    key = (public_key, root, signature)
    if memo is not None and key in memo:
        return
    if signature == _G1_IDENTITY:
        raise errors.identity(f"{what} is the identity point")
    try:
        valid = bls.verify(public_key, certification_message(root), signature)
    except bls.BlsPointError as exc:
        raise errors.malformed(f"{what}: {exc}") from exc
    if not valid:
        raise errors.invalid(f"{what} does not verify for this root")
    if memo is not None:
        memo.add(key)


def verify_certification(cert: Certification, subnet_public_key: bytes,
                         errors: SignatureErrors = CERTIFICATION_ERRORS, memo: SignatureMemo | None = None) -> None:
    """Check ``e(signature, g2) == e(H(domain_sep("ic-state-root") || root), pk)``: the root is
    certified. The height is not part of the signed message; whoever relies on ``cert.height``
    checks it against the certified tree (module docstring).

    Returns ``None`` on success; raises ``errors.empty``, ``errors.identity``,
    ``errors.malformed``, ``errors.invalid`` (or ``errors.invalid_key`` for a bad key): by
    default ``EmptySignature``, ``IdentitySignature``, ``MalformedSignature``,
    ``InvalidSignature`` and ``InvalidPublicKey``.
    """
    _parse_public_key(subnet_public_key, "subnet public key", errors)
    _check_signature(cert.root, cert.signature, subnet_public_key, "certification signature", errors, memo=memo)


def sign_certification_share(height: int, root: bytes, node_index: int, secret_share: bytes,
                             height_witness: bytes = b"") -> CertificationShare:
    """Node ``node_index``'s share ``s_i · H(domain_sep("ic-state-root") || root)`` on the root of
    ``height``, with the height's proof for its peers (``certified_height_witness``)."""
    _check_fields(height, root)
    signature_share = bls.sign_share(secret_share, certification_message(root))
    return CertificationShare(height=height, root=root, node_index=node_index, signature_share=signature_share,
                              height_witness=height_witness)


def verify_certification_share(share: CertificationShare, public_key_share: bytes,
                               memo: SignatureMemo | None = None) -> None:
    """Check the share against the node's public key share; same errors as
    ``verify_certification``."""
    _parse_public_key(public_key_share, f"public key share of node {share.node_index}")
    _check_signature(share.root, share.signature_share, public_key_share, f"share of node {share.node_index}",
                     memo=memo)


def combine_unverified(
    shares: Iterable[CertificationShare],
    t: int,
    subnet_public_key: bytes,
    memo: SignatureMemo | None = None,
) -> Certification | None:
    """The optimistic path of aggregation: combine ``t`` shares on one (height, root) without
    checking each, and keep the result only if it verifies under the subnet key — then it is a
    valid certification whatever the shares were. One pairing check instead of ``t + 1``;
    ``None`` when the shares are not ``t`` of one root or the result does not verify (then
    ``aggregate_certification`` finds the bad shares)."""
    chosen: dict[int, bytes] = {}
    first: CertificationShare | None = None
    for share in shares:
        if first is None:
            first = share
        elif (share.height, share.root) != (first.height, first.root):
            return None
        chosen.setdefault(share.node_index, share.signature_share)
    if first is None or not _is_int(t) or len(chosen) < t:
        return None
    try:
        _parse_public_key(subnet_public_key, "subnet public key")
        signature = bls.combine_shares(chosen, t)
        _check_signature(first.root, signature, subnet_public_key, "combined signature", memo=memo)
    except (bls.BlsError, CertificationError):
        return None
    return Certification(height=first.height, root=first.root, signature=signature)


def aggregate_certification(
    shares: Iterable[CertificationShare],
    t: int,
    subnet_public_key: bytes,
    public_key_shares: Mapping[int, bytes],
    memo: SignatureMemo | None = None,
) -> Certification:
    """Combine ``t`` valid shares on one (height, root) into a verified ``Certification``.

    Each share is verified against ``public_key_shares[node_index]``; shares from unknown
    nodes or that fail verification are ignored, as are duplicates from one node. Among the
    (height, root) pairs, exactly one must have at least ``t`` valid shares; its ``t``
    smallest node indices are combined: ``sigma = sum(lambda_i * sigma_i)``. The result is
    verified under the subnet key before it is returned. A malformed public key share
    raises ``InvalidPublicKey``: that is a registry fault, not a bad share.
    """
    if not _is_int(t) or t < 1:
        raise NotEnoughValidShares(f"threshold must be an integer >= 1, got {t!r}")
    _parse_public_key(subnet_public_key, "subnet public key")
    valid: dict[tuple[int, bytes], dict[int, bytes]] = {}
    for share in shares:
        group = valid.setdefault((share.height, share.root), {})
        if share.node_index in group:
            continue
        public_key_share = public_key_shares.get(share.node_index)
        if public_key_share is None:
            continue
        try:
            verify_certification_share(share, public_key_share, memo)
        except (EmptySignature, IdentitySignature, MalformedSignature, InvalidSignature):
            continue
        group[share.node_index] = share.signature_share
    ready = sorted(key for key, group in valid.items() if len(group) >= t)
    if not ready:
        best = max((len(group) for group in valid.values()), default=0)
        raise NotEnoughValidShares(f"at most {best} valid shares on one root, need {t}")
    if len(ready) > 1:
        raise ConflictingShares(f"{len(ready)} different (height, root) pairs have {t} valid shares")
    height, root = ready[0]
    signature = bls.combine_shares(valid[ready[0]], t)
    cert = Certification(height=height, root=root, signature=signature)
    try:
        _check_signature(root, signature, subnet_public_key, "combined signature", memo=memo)
    except (IdentitySignature, MalformedSignature) as exc:
        # Valid shares that combine to garbage mean the key shares do not match the key.
        raise InvalidSignature(f"combined signature does not verify: {exc}") from exc
    return cert
