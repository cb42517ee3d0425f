"""Certifications: encoding, strict decoding, verification errors and share aggregation."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from state_manager import bls
from state_manager import certification as cm
from state_manager.hash_tree import Empty, Fork, Labeled, Leaf, Pruned

ROOT = bytes(range(32))
OTHER_ROOT = b"\xab" * 32
HEIGHT = 42


@pytest.fixture(scope="module")
def deal():
    return bls.deal_threshold_keys(4, 3, b"\x11" * 32)


@pytest.fixture(scope="module")
def foreign():
    return bls.deal_threshold_keys(4, 3, b"\x22" * 32)


@pytest.fixture(scope="module")
def key_shares(deal):
    return {i: deal.public_key_share(i) for i in range(1, 5)}


@pytest.fixture(scope="module")
def shares(deal):
    return [cm.sign_certification_share(HEIGHT, ROOT, i, deal.secret_share(i)) for i in range(1, 5)]


@pytest.fixture(scope="module")
def cert(deal, shares, key_shares):
    return cm.aggregate_certification(shares, 3, deal.public_key, key_shares)


# --- encoding -----------------------------------------------------------------------------


def test_certification_round_trip(cert):
    data = cm.encode_certification(cert)
    assert cm.decode_certification(data) == cert
    # Golden layout: fixarray(4), version 3 (the IC's BLS variant), fixint height 42,
    # bin8(32) root, bin8(48) signature.
    assert data == bytes([0x94, 0x03, 0x2A, 0xC4, 0x20]) + ROOT + bytes([0xC4, 0x30]) + cert.signature


def test_certification_share_round_trip(shares):
    for share in shares:
        data = cm.encode_certification_share(share)
        assert cm.decode_certification_share(data) == share
        assert data[:2] == bytes([0x95, 0x03])


def test_signed_message_is_the_ics():
    # Golden: domain_sep("ic-state-root") || root, as the IC signs it (no height).
    assert cm.certification_message(ROOT) == b"\x0dic-state-root" + ROOT
    assert cm.certification_message(ROOT) == bls.state_root_message(ROOT)


@pytest.mark.parametrize("decode, fields", [
    (cm.decode_certification, [HEIGHT, ROOT, b"\x02" * 96]),
    (cm.decode_certification_share, [HEIGHT, ROOT, 1, b"\x02" * 96]),
])
@pytest.mark.parametrize("version, reason", [(1, "without its height"), (2, "project's own BLS variant")])
def test_older_versions_are_refused_naming_why(decode, fields, version, reason):
    """Version 1 left the height unauthenticated; version 2 is the project's own BLS variant
    (G2 signatures), which no IC tool verifies."""
    data = msgpack.packb([version, *fields], use_bin_type=True)
    with pytest.raises(cm.UnsupportedCertificationVersion, match=reason):
        decode(data)


def _pack(value) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


SIG = b"\x02" * 48


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00" * 135,
        _pack([3, HEIGHT, ROOT, SIG]) + b"\x00",  # trailing byte
        _pack([4, HEIGHT, ROOT, SIG]),  # unknown version
        _pack([0, HEIGHT, ROOT, SIG]),
        _pack([True, HEIGHT, ROOT, SIG]),
        _pack(["1", HEIGHT, ROOT, SIG]),
        _pack([3, HEIGHT, ROOT]),  # too few fields
        _pack([3, HEIGHT, ROOT, SIG, b""]),  # too many fields
        _pack([]),
        _pack(1),
        _pack({"height": HEIGHT}),
        _pack([3, -1, ROOT, SIG]),
        _pack([3, -(2**63), ROOT, SIG]),
        _pack([3, b"\x2a", ROOT, SIG]),
        _pack([3, False, ROOT, SIG]),
        _pack([3, HEIGHT, ROOT[:31], SIG]),
        _pack([3, HEIGHT, ROOT + b"\x00", SIG]),
        _pack([3, HEIGHT, ROOT.hex(), SIG]),
        _pack([3, HEIGHT, ROOT, SIG[:47]]),
        _pack([3, HEIGHT, ROOT, SIG + b"\x00"]),
        _pack([3, HEIGHT, ROOT, b""]),
        _pack([3, HEIGHT, ROOT, "x" * 48]),
        _pack([3, HEIGHT, ROOT, None]),
        bytes([0x94, 0x03, 0xCD, 0x00, 0x2A]) + _pack(ROOT) + _pack(SIG),  # non-shortest int
        _pack([3, HEIGHT, ROOT, SIG]).replace(b"\xc4\x30", b"\xc5\x00\x30"),  # non-shortest bin
        b"\xc1" * 8,
    ],
)
def test_decode_certification_is_strict(data):
    with pytest.raises(cm.MalformedCertification):
        cm.decode_certification(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_decode_arbitrary_bytes_only_raises_malformed(data):
    for decode in (cm.decode_certification, cm.decode_certification_share):
        try:
            decode(data)
        except cm.MalformedCertification:
            pass


def test_decode_certification_accepts_the_canonical_form():
    assert cm.decode_certification(_pack([3, HEIGHT, ROOT, SIG])) == cm.Certification(HEIGHT, ROOT, SIG)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        _pack([3, HEIGHT, ROOT, 1]),  # certification shape, no signature
        _pack([4, HEIGHT, ROOT, 1, SIG]),
        _pack([3, HEIGHT, ROOT, 0, SIG]),
        _pack([3, HEIGHT, ROOT, 2**32, SIG]),
        _pack([3, HEIGHT, ROOT, True, SIG]),
        _pack([3, HEIGHT, ROOT, 1, SIG[:47]]),
        _pack([3, HEIGHT, ROOT[:31], 1, SIG]),
        _pack([3, HEIGHT, ROOT, 1, SIG]) + b"\x90",
    ],
)
def test_decode_certification_share_is_strict(data):
    with pytest.raises(cm.MalformedCertification):
        cm.decode_certification_share(data)


def test_dataclasses_check_field_types():
    with pytest.raises(cm.MalformedCertification):
        cm.Certification(-1, ROOT, SIG)
    with pytest.raises(cm.MalformedCertification):
        cm.Certification(HEIGHT, ROOT[:31], SIG)
    with pytest.raises(cm.MalformedCertification):
        cm.Certification(HEIGHT, ROOT, SIG.hex())
    with pytest.raises(cm.MalformedCertification):
        cm.CertificationShare(HEIGHT, ROOT, 0, SIG)


# --- verification -------------------------------------------------------------------------


def test_aggregated_certification_verifies(deal, cert):
    assert (cert.height, cert.root) == (HEIGHT, ROOT)
    assert cm.verify_certification(cert, deal.public_key) is None
    decoded = cm.decode_certification(cm.encode_certification(cert))
    cm.verify_certification(decoded, deal.public_key)


@pytest.mark.parametrize("signature", [b"", b"\x00", b"\x00" * 48])
def test_empty_certification_is_rejected(deal, signature):
    with pytest.raises(cm.EmptySignature):
        cm.verify_certification(cm.Certification(HEIGHT, ROOT, signature), deal.public_key)


def test_all_zero_certification_is_rejected(deal):
    zero = cm.decode_certification(_pack([3, 0, b"\x00" * 32, b"\x00" * 48]))
    with pytest.raises(cm.EmptySignature):
        cm.verify_certification(zero, deal.public_key)


def test_identity_signature_is_rejected(deal):
    with pytest.raises(cm.IdentitySignature):
        cm.verify_certification(cm.Certification(HEIGHT, ROOT, b"\xc0" + bytes(47)), deal.public_key)


@pytest.mark.parametrize(
    "signature",
    [b"\x02" * 48, b"\xff" * 48, b"\x80" + b"\x00" * 47, b"\x01" * 47, b"\x01" * 49, b"\xc0" + bytes(46) + b"\x01",
     b"\x02" * 96],
)
def test_malformed_signature_is_rejected(deal, signature):
    with pytest.raises(cm.MalformedSignature):
        cm.verify_certification(cm.Certification(HEIGHT, ROOT, signature), deal.public_key)


def test_wrong_root_or_key_is_an_invalid_signature(deal, foreign, cert):
    with pytest.raises(cm.InvalidSignature):
        cm.verify_certification(cm.Certification(HEIGHT, OTHER_ROOT, cert.signature), deal.public_key)
    with pytest.raises(cm.InvalidSignature):
        cm.verify_certification(cert, foreign.public_key)


def _tree(height_leaf):
    """A certified tree (as a revealed witness) whose ``/metadata/height`` leaf is ``height_leaf``."""
    return Fork(Labeled(b"metadata", Fork(Labeled(b"height", Leaf(height_leaf)),
                                          Labeled(b"prev_state_hash", Pruned(b"\x01" * 32)))),
                Labeled(b"time", Leaf(b"\x00")))


@pytest.mark.parametrize("height", [0, HEIGHT - 1, HEIGHT + 1, 2**63, 2**64 - 1])
def test_the_tree_not_the_signature_authenticates_the_height(deal, cert, height):
    """The signature covers the root only (as on the IC): the same signature under another
    height still verifies, and the certified tree's ``/metadata/height`` refuses it."""
    relabeled = cm.Certification(height, ROOT, cert.signature)
    cm.verify_certification(relabeled, deal.public_key)
    tree = _tree(cm.certified_height_leaf(HEIGHT))
    cm.check_certified_height(cert, tree)
    with pytest.raises(cm.CertifiedHeightMismatch, match=f"claims height {height}"):
        cm.check_certified_height(relabeled, tree)


def test_a_witness_must_reveal_the_height(cert):
    pruned = Fork(Pruned(b"\x02" * 32), Labeled(b"time", Leaf(b"\x00")))
    with pytest.raises(cm.CertifiedHeightNotRevealed):
        cm.check_certified_height(cert, pruned)
    pruned_leaf = Fork(Labeled(b"metadata", Labeled(b"height", Pruned(b"\x03" * 32))), Labeled(b"time", Leaf(b"\x00")))
    with pytest.raises(cm.CertifiedHeightNotRevealed):
        cm.check_certified_height(cert, pruned_leaf)
    without = Fork(Labeled(b"canister", Empty()), Labeled(b"time", Leaf(b"\x00")))   # proves /metadata absent
    with pytest.raises(cm.CertifiedHeightMismatch, match="no /metadata/height"):
        cm.check_certified_height(cert, without)
    assert cm.certified_height_leaf(HEIGHT) == msgpack.packb([1, HEIGHT])   # state_tree.leaf of the height


def test_forged_certification_is_rejected(deal, foreign):
    foreign_shares = [cm.sign_certification_share(HEIGHT, ROOT, i, foreign.secret_share(i)) for i in (1, 2, 3)]
    forged = bls.combine_shares({s.node_index: s.signature_share for s in foreign_shares}, 3)
    with pytest.raises(cm.InvalidSignature):
        cm.verify_certification(cm.Certification(HEIGHT, ROOT, forged), deal.public_key)


def test_bad_public_key_is_reported_as_such(cert):
    for key in (b"", b"\x00" * 96, bytes([0xC0]) + bytes(95), bls.public_key_of(b"\x01" * 32)[:48]):
        with pytest.raises(cm.InvalidPublicKey):
            cm.verify_certification(cert, key)


# --- shares and aggregation ---------------------------------------------------------------


def test_shares_verify_against_their_key_share(shares, key_shares, foreign):
    for share in shares:
        cm.verify_certification_share(share, key_shares[share.node_index])
        with pytest.raises(cm.InvalidSignature):
            cm.verify_certification_share(share, key_shares[share.node_index % 4 + 1])
    alien = cm.sign_certification_share(HEIGHT, ROOT, 2, foreign.secret_share(2))
    with pytest.raises(cm.InvalidSignature):
        cm.verify_certification_share(alien, key_shares[2])


def test_aggregation_skips_bad_shares(deal, foreign, shares, key_shares):
    alien = cm.sign_certification_share(HEIGHT, ROOT, 1, foreign.secret_share(1))
    garbage = cm.CertificationShare(HEIGHT, ROOT, 2, b"\x00" * 48)
    # The bad shares come first and hold the smallest indices: they must not be combined.
    mixed = [alien, garbage, *shares[2:], shares[0]]
    cert = cm.aggregate_certification(mixed, 3, deal.public_key, key_shares)
    cm.verify_certification(cert, deal.public_key)


def test_aggregation_needs_t_valid_shares(deal, foreign, shares, key_shares):
    with pytest.raises(cm.NotEnoughValidShares):
        cm.aggregate_certification(shares[:2], 3, deal.public_key, key_shares)
    alien = cm.sign_certification_share(HEIGHT, ROOT, 3, foreign.secret_share(3))
    with pytest.raises(cm.NotEnoughValidShares):
        cm.aggregate_certification([shares[0], shares[1], alien], 3, deal.public_key, key_shares)
    # Repeating one node's share does not make it count twice.
    with pytest.raises(cm.NotEnoughValidShares):
        cm.aggregate_certification([shares[0], shares[0], shares[1]], 3, deal.public_key, key_shares)
    # Shares from nodes without a key share are ignored.
    partial_keys = {1: key_shares[1], 2: key_shares[2]}
    with pytest.raises(cm.NotEnoughValidShares):
        cm.aggregate_certification(shares, 3, deal.public_key, partial_keys)
    with pytest.raises(cm.NotEnoughValidShares):
        cm.aggregate_certification([], 3, deal.public_key, key_shares)


def test_aggregation_picks_the_root_with_t_shares(deal, shares, key_shares):
    dissent = cm.sign_certification_share(HEIGHT, OTHER_ROOT, 4, deal.secret_share(4))
    cert = cm.aggregate_certification([*shares[:3], dissent], 3, deal.public_key, key_shares)
    assert cert.root == ROOT


def test_aggregation_refuses_two_certifiable_roots(deal, shares, key_shares):
    equivocation = [cm.sign_certification_share(HEIGHT, OTHER_ROOT, i, deal.secret_share(i)) for i in (1, 2, 3)]
    with pytest.raises(cm.ConflictingShares):
        cm.aggregate_certification([*shares[:3], *equivocation], 3, deal.public_key, key_shares)


def test_aggregation_with_mismatched_subnet_key(foreign, shares, key_shares):
    with pytest.raises(cm.InvalidSignature):
        cm.aggregate_certification(shares, 3, foreign.public_key, key_shares)


def test_errors_share_one_hierarchy():
    for cls in (
        cm.MalformedCertification,
        cm.EmptySignature,
        cm.IdentitySignature,
        cm.MalformedSignature,
        cm.InvalidSignature,
        cm.InvalidPublicKey,
        cm.CertifiedHeightNotRevealed,
        cm.CertifiedHeightMismatch,
        cm.NotEnoughValidShares,
        cm.ConflictingShares,
    ):
        assert issubclass(cls, cm.CertificationError)


def test_a_signature_memo_skips_only_the_exact_check_that_passed(deal, foreign, cert, monkeypatch):
    memo = cm.SignatureMemo(capacity=2)
    pairings = []
    real = bls.verify
    monkeypatch.setattr(bls, "verify", lambda *a: pairings.append(1) or real(*a))
    cm.verify_certification(cert, deal.public_key, memo=memo)
    cm.verify_certification(cert, deal.public_key, memo=memo)
    assert len(pairings) == 1                       # the repeat is remembered
    # the signed message is the root's: another claimed height is the same check (the tree
    # authenticates the height, check_certified_height)
    cm.verify_certification(cm.Certification(HEIGHT + 1, ROOT, cert.signature), deal.public_key, memo=memo)
    assert len(pairings) == 1
    for wrong, key in [(cm.Certification(HEIGHT, OTHER_ROOT, cert.signature), deal.public_key),
                       (cert, foreign.public_key)]:
        for _ in range(2):                          # a failure is never remembered
            with pytest.raises(cm.InvalidSignature):
                cm.verify_certification(wrong, key, memo=memo)
    with pytest.raises(cm.EmptySignature):
        cm.verify_certification(cm.Certification(HEIGHT, ROOT, b""), deal.public_key, memo=memo)
    assert len(pairings) == 1 + 4
    for n in (1, 2, 3):                             # bounded: a full memo starts over
        memo.add((b"k", bytes([n]) * 32, b"s"))
    assert (b"k", b"\x03" * 32, b"s") in memo and (deal.public_key, ROOT, cert.signature) not in memo


def test_optimistic_combination_is_kept_only_when_it_verifies(deal, foreign, shares, key_shares):
    """``combine_unverified``: t good shares give the certification ``aggregate_certification``
    gives (one pairing check instead of t + 1); a bad share among them, too few shares, or
    shares on two roots give ``None`` — never a certification that does not verify."""
    cert = cm.combine_unverified(shares[:3], 3, deal.public_key)
    assert cert == cm.aggregate_certification(shares[:3], 3, deal.public_key, key_shares)
    cm.verify_certification(cert, deal.public_key)
    alien = cm.sign_certification_share(HEIGHT, ROOT, 1, foreign.secret_share(1))
    garbage = cm.CertificationShare(HEIGHT, ROOT, 2, b"\x00" * 48)
    assert cm.combine_unverified([alien, *shares[1:3]], 3, deal.public_key) is None
    assert cm.combine_unverified([garbage, shares[0], shares[2]], 3, deal.public_key) is None
    assert cm.combine_unverified(shares[:2], 3, deal.public_key) is None
    dissent = cm.sign_certification_share(HEIGHT, OTHER_ROOT, 4, deal.secret_share(4))
    assert cm.combine_unverified([*shares[:2], dissent], 3, deal.public_key) is None
    memo = cm.SignatureMemo()
    cert = cm.combine_unverified(shares[1:4], 3, deal.public_key, memo)
    assert (deal.public_key, cert.root, cert.signature) in memo   # delivery skips the check
