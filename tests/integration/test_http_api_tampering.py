"""A node that tampers with its read_state answers is refused by the agent, each way with its
own ``CertificateInvalid`` subclass: wrong reply bytes (with the honest root, or with a
root rewritten to match), a tree of another height, a certification of another subnet, a
certified height below one the agent has already verified, and a stale ``/time``."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from replica.client.agent_errors import (
    CertificateHeightMismatch, CertificateTooOld, CertificationRollback, CertificateSignatureInvalid, PathNotProven, CertificateRootMismatch,
)
from replica.client.http_wire import encode_certificate
from replica.node.http_api import HttpApiServer
from replica.inprocess.http_apis import node_backend
from state_manager.certification import HEIGHT_PATH, Certification
from state_manager.labeled_trie import LabeledTrie
from state_manager.trie_witness import plan_paths, witness_tree
from state_manager.state_tree import leaf as state_leaf
from tests.integration.http_testnet import ALPHA, BETA, GREETER, SEC, agent_for, canister, running_http_testnet

pytestmark = pytest.mark.timeout(120)

HOME = canister(ALPHA, GREETER)


@pytest.fixture(scope="module")
def net():
    with running_http_testnet() as testnet:
        yield testnet


@pytest.fixture
def tampering(net):
    """``tampering(certified)`` serves alpha-node-1's API with ``certified`` replaced by
    ``certified(honest)``; yields the address."""
    servers = []

    def serve(tamper) -> str:
        backend = node_backend(net.subnets[ALPHA], "alpha-node-1")
        honest = backend.certified
        server = HttpApiServer(dataclasses.replace(backend, certified=lambda: tamper(honest)))
        servers.append(server)
        return server.start()

    yield serve
    for server in servers:
        server.stop()


def _replace(trie: LabeledTrie, path: list[bytes], value) -> LabeledTrie:
    head, rest = path[0], path[1:]
    return trie.insert(head, _replace(trie[head], rest, value) if rest else value)


def _with_wrong_replies(certified: LabeledTrie) -> LabeledTrie:
    statuses = certified[b"request_status"]
    for message_id, subtree in list(statuses.items()):
        if b"reply" in subtree:
            certified = _replace(certified, [b"request_status", message_id, b"reply"],
                                 state_leaf(b"\xa5evil!"))  # msgpack "evil!"
    return certified


def _honest_reply_then(net, agent_honest):
    message_id = agent_honest.submit_call(HOME, "greet", "mallory")
    assert agent_honest.wait(message_id, HOME, 20) == "hello, mallory"
    return message_id


def test_wrong_reply_bytes_are_refused(net, tampering):
    address = tampering(lambda honest: (lambda t, c: (_with_wrong_replies(t), c))(*honest()))
    with agent_for(net) as honest:
        message_id = _honest_reply_then(net, honest)
    with agent_for(net, address) as victim:
        with pytest.raises(CertificateRootMismatch):
            victim.request_status(message_id, HOME)
        with pytest.raises(CertificateRootMismatch):
            victim.update_call(HOME, "greet", "trent", timeout_s=20)


def test_wrong_reply_bytes_under_a_rewritten_root_are_refused(net, tampering):
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
    first = net.subnets[ALPHA].nodes["alpha-node-1"].state_manager.latest_certified()
    net.ticker.wait_for_heights(2)
    address = tampering(lambda honest: (first[0].certified, honest()[1]))
    with agent_for(net, address) as victim, pytest.raises(CertificateRootMismatch):
        victim.read_state(HOME, [[b"time"]])


def test_a_certification_of_another_subnet_is_refused(net, tampering):
    beta = net.subnets[BETA].nodes["beta-node-1"].state_manager

    def tamper(honest):
        trees, certification = beta.latest_certified()
        return trees.certified, certification

    address = tampering(tamper)
    with agent_for(net, address) as victim, pytest.raises(CertificateSignatureInvalid):
        victim.read_state(HOME, [[b"time"]])


def test_a_height_below_one_already_verified_is_refused(net, tampering):
    old = net.subnets[ALPHA].nodes["alpha-node-1"].state_manager.latest_certified()
    net.ticker.wait_for_heights(2)
    answers = iter(["honest"])

    def tamper(honest):  # honest first, then the old (validly certified) snapshot
        return honest() if next(answers, "old") == "honest" else (old[0].certified, old[1])

    address = tampering(tamper)
    with agent_for(net, address) as victim:
        assert victim.read_state(HOME, [[b"time"]]).height > old[1].height
        with pytest.raises(CertificationRollback):
            victim.read_state(HOME, [[b"time"]])
    with agent_for(net, address) as newcomer:  # on its own, the old snapshot verifies
        assert newcomer.read_state(HOME, [[b"time"]]).height == old[1].height


def test_a_stale_time_is_refused(net):
    with agent_for(net, clock=lambda: time.time_ns() + 600 * SEC) as late:
        with pytest.raises(CertificateTooOld):
            late.read_state(HOME, [[b"time"]])
    with agent_for(net, max_certificate_age_s=3600, clock=lambda: time.time_ns() + 600 * SEC) as patient:
        assert patient.read_state(HOME, [[b"time"]]).height > 0


def test_a_pruned_path_is_not_proven(net, monkeypatch):
    """A node that prunes what was asked for: neither revealed nor proven absent (it reveals
    the height, as every certificate must: see the test below for one that hides it)."""
    trees, certification = net.subnets[ALPHA].nodes["alpha-node-1"].state_manager.latest_certified()
    tree = witness_tree(trees.certified, plan_paths([[b"time"], list(HEIGHT_PATH)]))
    with agent_for(net) as victim:
        monkeypatch.setattr(victim._http, "request", lambda *a: (200, encode_certificate(tree, certification)))
        with pytest.raises(PathNotProven):
            victim.read_state(HOME, [[b"request_status", bytes(32)]])
        with pytest.raises(PathNotProven):
            victim.request_status(bytes(32), HOME)


def test_a_certificate_that_hides_its_height_is_refused(net, monkeypatch):
    """The signature covers the root only: a witness that prunes /metadata/height leaves the
    claimed height unproven, and the agent refuses it whatever else it reveals."""
    trees, certification = net.subnets[ALPHA].nodes["alpha-node-1"].state_manager.latest_certified()
    tree = witness_tree(trees.certified, plan_paths([[b"time"]]))
    with agent_for(net) as victim:
        monkeypatch.setattr(victim._http, "request", lambda *a: (200, encode_certificate(tree, certification)))
        with pytest.raises(CertificateHeightMismatch, match="does not reveal /metadata/height"):
            victim.read_state(HOME, [[b"time"]])


def test_honest_answers_from_every_node_verify_concurrently(net):
    """Many agents on many nodes at once: every answer verifies (no race between the API's
    threads and the subnet's rounds)."""
    errors: list[BaseException] = []

    def client(address: str) -> None:
        try:
            with agent_for(net, {ALPHA: address}) as agent:
                for _ in range(5):
                    agent.read_state(HOME, [[b"time"], [b"metadata", b"height"]])
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(address,)) for address in net.http_endpoints[ALPHA].values()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
