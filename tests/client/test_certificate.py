"""Certificate verification (pure): an honest certificate verifies and answers lookups; each
failed check raises its own ``CertificateInvalid`` subclass; no single-byte change of an
honest answer is accepted."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replica.client.agent_errors import (
    CertificateHeightMismatch, CertificateInvalid, CertificateTooOld, CertificationRollback, CertificateSignatureInvalid, MalformedCertificate,
    PathNotProven, CertificateRootMismatch,
)
from replica.client.certificate import verify_certificate
from replica.client.http_wire import Certificate, WireError, decode_certificate, encode_certificate
from state_manager import bls
from state_manager.certification import Certification, aggregate_certification, sign_certification_share
from state_manager.labeled_trie import build_from_sorted
from state_manager.trie_witness import plan_paths, witness_tree
from state_manager.ic_encoding import uleb128
from state_manager.state_tree import leaf

NOW = 1_700_000_000 * 10**9
HEIGHT_PATH = [b"metadata", b"height"]   # every answer reveals it: it authenticates the height
MID = bytes(range(32))
KEY = bls.deal_threshold_keys(1, 1, b"\x31" * 32)
OTHER = bls.deal_threshold_keys(1, 1, b"\x32" * 32)


def certified_tree(time_ns: int = NOW, reply: bytes = b"\xa2hi"):
    return build_from_sorted([
        (b"metadata", build_from_sorted([(b"height", leaf(7))])),
        (b"request_status", build_from_sorted([
            (MID, build_from_sorted([(b"reply", reply), (b"status", b"replied")])),
        ])),
        (b"time", uleb128(time_ns)),
    ])


def certify(trie, height: int = 7, deal=KEY) -> Certification:
    root = trie.digest()
    share = sign_certification_share(height, root, 1, deal.secret_share(1))
    return aggregate_certification([share], 1, deal.public_key, {1: deal.public_key_share(1)})


def answer(paths=([b"request_status", MID],), trie=None, height: int = 7) -> Certificate:
    trie = trie if trie is not None else certified_tree()
    return Certificate(witness_tree(trie, plan_paths([list(p) for p in paths] + [[b"time"], HEIGHT_PATH])),
                       certify(trie, height))


def check(certificate: Certificate, *, key: bytes = KEY.public_key, now: int = NOW, min_height: int = 0):
    return verify_certificate(certificate, subnet_id="alpha", public_key=key, now_ns=now, max_age_ns=300 * 10**9,
                              min_height=min_height)


def test_an_honest_certificate_verifies_and_answers_lookups():
    verified = check(answer())
    assert (verified.height, verified.time_ns, verified.subnet_id) == (7, NOW, "alpha")
    assert verified.lookup_value([b"request_status", MID, b"status"]) == "replied"
    assert verified.lookup_value([b"request_status", MID, b"reply"]) == b"\xa2hi"
    assert verified.lookup_value([b"request_status", bytes(32), b"status"]) is None  # proven absent
    assert verified.lookup_value(HEIGHT_PATH) == 7
    with pytest.raises(PathNotProven):   # pruned: neither revealed nor excluded
        check(answer(paths=())).lookup([b"request_status", MID, b"status"])


def test_a_tree_that_does_not_match_the_root():
    honest = answer()
    forged = answer(trie=certified_tree(reply=b"\xa5evil!"))
    with pytest.raises(CertificateRootMismatch):
        check(Certificate(forged.tree, honest.certification))


def test_a_root_rewritten_to_match_does_not_verify():
    forged = answer(trie=certified_tree(reply=b"\xa5evil!"))
    honest = answer()
    rewritten = Certification(7, forged.certification.root, honest.certification.signature)
    with pytest.raises(CertificateSignatureInvalid):
        check(Certificate(forged.tree, rewritten))


def test_a_certification_under_another_key():
    trie = certified_tree()
    with pytest.raises(CertificateSignatureInvalid):
        check(Certificate(witness_tree(trie, plan_paths([[b"time"], HEIGHT_PATH])), certify(trie, deal=OTHER)))


def test_a_relabeled_height_is_refused_by_the_tree():
    """The signature covers the root only (the IC's message): the revealed ``/metadata/height``
    authenticates the height, so another claimed height is refused."""
    honest = answer()
    for height in (0, 6, 8, 2**64 - 1):
        relabeled = Certification(height, honest.certification.root, honest.certification.signature)
        with pytest.raises(CertificateHeightMismatch, match=f"claims height {height}"):
            check(Certificate(honest.tree, relabeled))


def test_a_witness_that_hides_the_height_is_refused():
    trie = certified_tree()
    hidden = Certificate(witness_tree(trie, plan_paths([[b"time"]])), certify(trie))
    with pytest.raises(CertificateHeightMismatch, match="does not reveal /metadata/height"):
        check(hidden)
    heightless = build_from_sorted([(b"time", uleb128(NOW))])   # a tree without /metadata at all
    with pytest.raises(CertificateHeightMismatch, match="no /metadata/height"):
        check(Certificate(witness_tree(heightless, plan_paths([[b"time"], HEIGHT_PATH])), certify(heightless)))


def test_a_height_below_one_already_verified():
    assert check(answer(), min_height=7).height == 7
    with pytest.raises(CertificationRollback):
        check(answer(), min_height=8)


def test_a_stale_time():
    assert check(answer(), now=NOW + 300 * 10**9).time_ns == NOW
    with pytest.raises(CertificateTooOld):
        check(answer(), now=NOW + 301 * 10**9)


def test_time_must_be_revealed_and_leaves_well_formed():
    trie = certified_tree()
    without_time = Certificate(witness_tree(trie, plan_paths([HEIGHT_PATH])), certify(trie))
    with pytest.raises(PathNotProven):
        check(without_time)
    odd = build_from_sorted([(b"metadata", build_from_sorted([(b"height", leaf(7))])),
                             (b"time", b"\x92\x82")])  # not one LEB128 number (the last byte continues)
    with pytest.raises(MalformedCertificate):
        check(Certificate(witness_tree(odd, plan_paths([[b"time"], HEIGHT_PATH])), certify(odd)))


def test_the_wire_form_round_trips():
    honest = answer()
    decoded = decode_certificate(encode_certificate(honest.tree, honest.certification))
    assert check(decoded).lookup_value([b"time"]) == NOW


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_no_single_byte_change_is_accepted(data):
    honest = answer()
    encoded = bytearray(encode_certificate(honest.tree, honest.certification))
    position = data.draw(st.integers(0, len(encoded) - 1))
    value = data.draw(st.integers(0, 255).filter(lambda b: b != encoded[position]))
    encoded[position] = value
    try:
        certificate = decode_certificate(bytes(encoded))
    except WireError:
        return
    with pytest.raises(CertificateInvalid):
        check(certificate)
