"""A node that tampers with its certified tree, its certification or its delegation is refused by
the agent, each way with its own ``CertificateInvalid`` subclass. An IC certificate is
``{tree, signature, delegation?}`` with no root of its own: the signature covers the root the
tree reconstructs to, so a changed leaf (wrong reply bytes, a tree of another height) makes the
signature fail whatever root the node claims. So do a certification of another height or of
another subnet, a delegation the root subnet did not sign or whose tree was changed, and a
certificate of a subnet other than the root without the root subnet's delegation. A delegation
to another subnet than the one asked is malformed; a certified height below one the agent has
already verified, a stale ``/time``, a pruned path and a hidden height are refused too."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from replica.client.agent_errors import (
    CertificateHeightMismatch, CertificateSignatureInvalid, CertificateTooOld, CertificationRollback,
    MalformedCertificate, PathNotProven,
)
from replica.client.http_transport import Answer
from replica.ic.certificate import Certificate, encode_certificate
from replica.ic.http_interface import encode_read_state_answer
from replica.inprocess.http_apis import in_process_delegation, node_backend
from replica.client.refusals import DelegationUnavailable
from replica.node.delegation import covering, delegation_of
from replica.node.http_api import HttpApiServer
from state_manager.certification import HEIGHT_PATH, Certification
from state_manager.ic_encoding import canister_principal_bytes, encode_canister_ranges
from state_manager.labeled_trie import LabeledTrie
from state_manager.trie_witness import plan_paths, witness_tree
from tests.integration.http_testnet import (
    ALPHA, BETA, GREETER, SEC, agent_for, canister, running_http_testnet, subnet_id,
)

pytestmark = pytest.mark.timeout(120)

HOME = canister(ALPHA, GREETER)
AWAY = canister(BETA, GREETER)


@pytest.fixture(scope="module")
def net():
    with running_http_testnet() as testnet:
        yield testnet


@pytest.fixture
def tampering(net):
    """``tampering(tamper, subnet=ALPHA, delegation=None)`` serves the first node of ``subnet``
    with its ``certified`` replaced by ``tamper(honest certified)`` (and its delegation by
    ``delegation()``, if given); yields the address."""
    servers = []

    def serve(tamper, subnet: str = ALPHA, delegation=None) -> str:
        sub = net.subnets[subnet]
        honest_delegation = in_process_delegation(net.subnets[ALPHA], sub)
        backend = node_backend(sub, f"{subnet}-node-1", delegation=delegation or honest_delegation)
        honest = backend.certified
        server = HttpApiServer(dataclasses.replace(backend, certified=lambda: tamper(honest)))
        servers.append(server)
        return server.start()

    yield serve
    for server in servers:
        server.stop()


def _latest(net, subnet: str) -> tuple[LabeledTrie, Certification]:
    trees, certification = net.subnets[subnet].nodes[f"{subnet}-node-1"].state_manager.latest_certified()
    return trees.certified, certification


def _replace(trie: LabeledTrie, path: list[bytes], value) -> LabeledTrie:
    head, rest = path[0], path[1:]
    return trie.insert(head, _replace(trie[head], rest, value) if rest else value)


def _with_wrong_replies(certified: LabeledTrie) -> LabeledTrie:
    """Every reply leaf replaced by other bytes (reply leaves are the raw reply blobs)."""
    statuses = certified[b"request_status"]
    for message_id, subtree in list(statuses.items()):
        if b"reply" in subtree:
            certified = _replace(certified, [b"request_status", message_id, b"reply"], b"evil!")
    return certified


def _honest_reply_then(net, agent_honest):
    message_id = agent_honest.submit_call(HOME, "greet", "mallory")
    assert agent_honest.wait(message_id, HOME, 20) == "hello, mallory"
    return message_id


def test_the_honest_node_is_believed(net, tampering):
    """The control: the same server, not tampering, verifies (so every refusal below is the tampering's)."""
    alpha, beta = tampering(lambda honest: honest()), tampering(lambda honest: honest(), BETA)
    with agent_for(net, {ALPHA: alpha, BETA: beta}) as agent:
        assert agent.update_call(HOME, "greet", "walter", timeout_s=20) == "hello, walter"
        assert agent.update_call(AWAY, "greet", "wendy", timeout_s=20) == "hello, wendy"
        assert agent.read_state(AWAY, [[b"time"]]).height > 0


def test_wrong_reply_bytes_are_refused(net, tampering):
    address = tampering(lambda honest: (lambda t, c: (_with_wrong_replies(t), c))(*honest()))
    with agent_for(net) as honest:
        message_id = _honest_reply_then(net, honest)
    with agent_for(net, address) as victim:
        with pytest.raises(CertificateSignatureInvalid):
            victim.request_status(message_id, HOME)
        with pytest.raises(CertificateSignatureInvalid):   # a v3 call's certificate too
            victim.update_call(HOME, "greet", "trent", timeout_s=20)


def test_wrong_reply_bytes_under_a_rewritten_root_are_refused(net, tampering):
    """The certification's root is no part of the certificate: claiming the tampered tree's root
    changes nothing, the signature is over the honest one."""
    def tamper(honest):
        trie, certification = honest()
        trie = _with_wrong_replies(trie)
        return trie, Certification(certification.height, trie.digest(), certification.signature)

    address = tampering(tamper)
    with agent_for(net) as honest:
        message_id = _honest_reply_then(net, honest)
    with agent_for(net, address) as victim, pytest.raises(CertificateSignatureInvalid):
        victim.request_status(message_id, HOME)


def test_a_tree_of_another_height_is_refused(net, tampering):
    first, _ = _latest(net, ALPHA)
    net.ticker.wait_for_heights(2)
    address = tampering(lambda honest: (first, honest()[1]))
    with agent_for(net, address) as victim, pytest.raises(CertificateSignatureInvalid):
        victim.read_state(HOME, [[b"time"]])


def test_a_signature_of_another_height_is_refused(net, tampering):
    _, old = _latest(net, ALPHA)
    net.ticker.wait_for_heights(2)
    address = tampering(lambda honest: (honest()[0], old))
    with agent_for(net, address) as victim, pytest.raises(CertificateSignatureInvalid):
        victim.read_state(HOME, [[b"time"]])


@pytest.mark.parametrize("signature", [bytes(48), b"\xff" * 48, b"", b"\x01" * 96])
def test_a_forged_signature_is_refused(net, tampering, signature):
    def tamper(honest):
        trie, certification = honest()
        return trie, Certification(certification.height, certification.root, signature)

    address = tampering(tamper)
    with agent_for(net, address) as victim, pytest.raises(CertificateSignatureInvalid):
        victim.read_state(HOME, [[b"time"]])


def test_a_certification_of_another_subnet_is_refused(net, tampering):
    address = tampering(lambda honest: _latest(net, BETA))
    with agent_for(net, address) as victim, pytest.raises(CertificateSignatureInvalid):
        victim.read_state(HOME, [[b"time"]])


def test_another_subnets_certificate_with_its_delegation_is_refused(net, tampering):
    """beta's tree, certification and (valid) delegation, served for a canister of alpha: the
    delegation is to another subnet than the one the agent asked."""
    address = tampering(lambda honest: _latest(net, BETA), ALPHA,
                        delegation=in_process_delegation(net.subnets[ALPHA], net.subnets[BETA]))
    with agent_for(net, address) as victim, pytest.raises(MalformedCertificate, match="delegation"):
        victim.read_state(HOME, [[b"time"]])


def test_the_root_subnets_certificate_without_a_delegation_is_refused_for_another_subnet(net, tampering):
    """A beta node that serves the root subnet's (validly signed) certificate for a canister of
    beta: without a delegation it is checked under beta's key, and fails."""
    address = tampering(lambda honest: _latest(net, ALPHA), BETA, delegation=lambda certified: None)
    with agent_for(net, {BETA: address}) as victim, pytest.raises(CertificateSignatureInvalid):
        victim.read_state(AWAY, [[b"time"]])


def test_a_delegation_the_subnet_signed_itself_is_refused(net, tampering):
    beta = subnet_id(net, BETA)
    address = tampering(lambda honest: honest(), BETA, delegation=lambda certified: delegation_of(*_latest(net, BETA), beta))
    with agent_for(net, {BETA: address}) as victim, pytest.raises(CertificateSignatureInvalid):
        victim.read_state(AWAY, [[b"time"]])


def test_a_delegation_is_served_only_with_the_state_whose_ranges_it_delegates(net):
    """After a migration the subnet's own state and the root subnet's delegation may name
    different ranges for a moment: the node holds back (503, asked again) rather than send a
    certificate that an agent refuses for a canister the delegation does not cover."""
    beta = subnet_id(net, BETA)
    own, _ = _latest(net, BETA)
    delegation = delegation_of(*_latest(net, ALPHA), beta)
    assert covering(delegation, own) is delegation
    moved_here = _replace(own, [b"subnet", beta, b"canister_ranges"],
                          encode_canister_ranges(((canister_principal_bytes(0), canister_principal_bytes(1999)),)))
    with pytest.raises(DelegationUnavailable, match="canister ranges"):
        covering(delegation, moved_here)
    with pytest.raises(DelegationUnavailable, match="canister ranges"):
        in_process_delegation(net.subnets[ALPHA], net.subnets[BETA])(moved_here)
    assert in_process_delegation(net.subnets[ALPHA], net.subnets[BETA])(own).subnet_id == beta


def test_a_delegation_with_widened_canister_ranges_is_refused(net, tampering):
    """The root subnet's delegation to beta with beta's ranges widened to alpha's canisters too:
    the root subnet's signature no longer covers the delegation's tree."""
    beta = subnet_id(net, BETA)
    wide = encode_canister_ranges(((canister_principal_bytes(0), canister_principal_bytes(1999)),))

    def widened(certified):
        trie, certification = _latest(net, ALPHA)
        trie = _replace(trie, [b"subnet", beta, b"canister_ranges"], wide)
        trie = _replace(trie, [b"canister_ranges", beta], LabeledTrie.empty().insert(canister_principal_bytes(0), wide))
        return delegation_of(trie, certification, beta)

    address = tampering(lambda honest: honest(), BETA, delegation=widened)
    with agent_for(net, {ALPHA: address, BETA: address}) as victim:
        with pytest.raises(CertificateSignatureInvalid):
            victim.read_state(AWAY, [[b"time"]])
        with pytest.raises(MalformedCertificate, match="delegation"):   # and it is no delegation to alpha
            victim.read_state(HOME, [[b"time"]])


def test_a_height_below_one_already_verified_is_refused(net, tampering):
    old = _latest(net, ALPHA)
    net.ticker.wait_for_heights(2)
    answers = iter(["honest"])

    def tamper(honest):  # honest first, then the old (validly certified) snapshot
        return honest() if next(answers, "old") == "honest" else old

    address = tampering(tamper)
    with agent_for(net, address) as victim:
        assert victim.read_state(HOME, [[b"time"]]).height > old[1].height
        with pytest.raises(CertificationRollback):
            victim.read_state(HOME, [[b"time"]])
    with agent_for(net, address) as newcomer:  # on its own, the old snapshot verifies
        assert newcomer.read_state(HOME, [[b"time"]]).height == old[1].height


def test_a_stale_time_is_refused(net):
    """An agent whose clock is 10 minutes ahead finds every certificate too old (its requests
    expire a minute from the node's now, which the node accepts: a read_state is signed too)."""
    skew = {"clock": lambda: time.time_ns() + 600 * SEC, "ingress_ttl_s": -540}
    with agent_for(net, **skew) as late:
        with pytest.raises(CertificateTooOld):
            late.read_state(HOME, [[b"time"]])
        with pytest.raises(CertificateTooOld):
            late.read_state(AWAY, [[b"time"]])
    with agent_for(net, max_certificate_age_s=3600, **skew) as patient:
        assert patient.read_state(HOME, [[b"time"]]).height > 0


def _answering(tree, certification: Certification):
    """A transport's ``request`` answering every request with the certificate of ``tree``."""
    body = encode_read_state_answer(encode_certificate(Certificate(tree, certification.signature)))
    return lambda *args: Answer(200, body, "")


def test_a_pruned_path_is_not_proven(net, monkeypatch):
    """A node that prunes what was asked for: neither revealed nor proven absent (it reveals
    the height, as every certificate must: see the test below for one that hides it)."""
    certified, certification = _latest(net, ALPHA)
    tree = witness_tree(certified, plan_paths([[b"time"], list(HEIGHT_PATH)]))
    with agent_for(net) as victim:
        monkeypatch.setattr(victim._http, "request", _answering(tree, certification))
        assert victim.read_state(HOME, [[b"time"]]).height == certification.height   # the certificate is genuine
        with pytest.raises(PathNotProven):
            victim.read_state(HOME, [[b"request_status", bytes(32)]])
        with pytest.raises(PathNotProven):
            victim.request_status(bytes(32), HOME)


def test_a_certificate_that_hides_its_height_is_refused(net, monkeypatch):
    """The signature covers the root only: a witness that prunes /metadata/height leaves the
    claimed height unproven, and the agent refuses it whatever else it reveals."""
    certified, certification = _latest(net, ALPHA)
    tree = witness_tree(certified, plan_paths([[b"time"]]))
    with agent_for(net) as victim:
        monkeypatch.setattr(victim._http, "request", _answering(tree, certification))
        with pytest.raises(CertificateHeightMismatch, match="/metadata/height"):
            victim.read_state(HOME, [[b"time"]])


def test_honest_answers_from_every_node_verify_concurrently(net):
    """Many agents on many nodes of both subnets at once: every answer verifies (no race between
    the API's threads and the subnets' rounds; beta's through the root subnet's delegation)."""
    errors: list[BaseException] = []

    def client(subnet: str, address: str) -> None:
        target = HOME if subnet == ALPHA else AWAY
        try:
            with agent_for(net, {subnet: address}) as agent:
                for _ in range(5):
                    agent.read_state(target, [[b"time"], [b"metadata", b"height"]])
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(subnet, address))
               for subnet in (ALPHA, BETA) for address in net.http_endpoints[subnet].values()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
