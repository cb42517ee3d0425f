"""A status is believed only if its certificate verifies: every check bites in the testnet's path."""

from __future__ import annotations

import pytest

from replica.client.agent_errors import (
    CertificateSignatureInvalid, CertificateTooOld, CertificationRollback,
)
from replica.testing.certified_status import status_from_certificate, verified_certificate

from .apps import Greeter

MAX_AGE = 300 * 10**9


@pytest.fixture
def answered(testnet):
    g = testnet.install(Greeter)
    mid = testnet.submit_call(g, "greet", "z")
    testnet.tick()
    testnet.ingress_status(mid)   # certifies the latest height
    trees, certification = testnet._net.subnets["subnet-0"].online_node().state_manager.latest_certified()
    return testnet, mid, trees.certified, certification


def _verify(net, certified, certification, mid, **changes):
    options = dict(subnet_id="subnet-0", public_key=net.root_key("subnet-0"), now_ns=net.get_time(),
                   max_age_ns=MAX_AGE, min_height=0)
    options.update(changes)
    return verified_certificate(certified, certification, [[b"request_status", mid]], **options)


def test_an_honest_certificate_gives_the_reply(answered):
    net, mid, certified, certification = answered
    status = status_from_certificate(_verify(net, certified, certification, mid), mid)
    assert status.status == "replied" and status.reply is not None


def test_the_other_subnets_key_is_refused(answered):
    net, mid, certified, certification = answered
    with pytest.raises(CertificateSignatureInvalid):
        _verify(net, certified, certification, mid, public_key=net.root_key("subnet-1"))


def test_a_tree_the_certification_did_not_sign_is_refused(answered):
    """The certificate's signature covers the root of the tree it carries: a node that changes
    the reply (the certified tree) while keeping the signature is found out."""
    net, mid, certified, certification = answered
    status_path = [b"request_status", mid]
    changed = certified.update([(b"request_status", certified.get_subtree(b"request_status").update(
        [(mid, certified.get_subtree(b"request_status").get_subtree(mid).insert(b"reply", b"forged"))]))])
    with pytest.raises(CertificateSignatureInvalid):
        verified_certificate(changed, certification, [status_path], subnet_id="subnet-0",
                             public_key=net.root_key("subnet-0"), now_ns=net.get_time(), max_age_ns=MAX_AGE,
                             min_height=0)


def test_rollback_and_staleness_are_refused(answered):
    net, mid, certified, certification = answered
    with pytest.raises(CertificationRollback):
        _verify(net, certified, certification, mid, min_height=certification.height + 1)
    with pytest.raises(CertificateTooOld):
        _verify(net, certified, certification, mid, now_ns=net.get_time() + MAX_AGE + 1)


def test_an_unknown_message_is_proven_absent(answered):
    net, _, certified, certification = answered
    other = bytes(32)
    assert status_from_certificate(_verify(net, certified, certification, other), other).status == "unknown"
