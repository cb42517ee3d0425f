"""The HTTP API server on its own, over a fake ``NodeBackend`` (no testnet): each refusal a
backend raises becomes its documented status and reason, queries and read_state answer in
their wire formats, and the server runs in its own thread until stopped."""

from __future__ import annotations

import datetime
import re
import time

import httpx
import pytest

from consensus_stub.genesis import SubnetSpec, genesis_registry
from message_routing.limits import DEFAULT
from replica.client import Ed25519Identity, sign_ingress
from replica.client.agent import Agent
from replica.client.agent_errors import CertificateSignatureInvalid
from replica.client.http_wire import QueryAnswer, canister_url, decode_certificate, decode_query_answer, \
    encode_read_state_request
from replica.client import refusals
from replica.client.refusals import (
    ApiError, CanisterNotOnSubnet, DuplicateIngress, IngressPoolFull, IngressRefused, NodeUnavailable, NotCertifiedYet,
    UnknownCanister, refusal_class,
)
from replica.node.http_api import HttpApiServer, NodeBackend
from state_manager import bls
from state_manager.certification import aggregate_certification, sign_certification_share
from state_manager.hash_tree import reconstruct
from state_manager.labeled_trie import build_from_sorted
from state_manager.ic_encoding import uleb128
from state_manager.state_tree import leaf

KEY = Ed25519Identity.from_seed(b"server-test")
DEAL = bls.deal_threshold_keys(1, 1, b"\x41" * 32)
CERTIFIED_TIME = time.time_ns()
TRIE = build_from_sorted([(b"metadata", build_from_sorted([(b"height", leaf(3))])), (b"time", uleb128(CERTIFIED_TIME))])
SHARE = sign_certification_share(3, TRIE.digest(), 1, DEAL.secret_share(1))
CERTIFICATION = aggregate_certification([SHARE], 1, DEAL.public_key, {1: DEAL.public_key_share(1)})


class Fake:
    """A backend whose submit raises ``self.refusal`` (if set) and records what it admitted."""

    def __init__(self) -> None:
        self.refusal: Exception | None = None
        self.submitted: list = []
        self.certified = (TRIE, CERTIFICATION)

    def backend(self) -> NodeBackend:
        def submit(ingress):
            if self.refusal is not None:
                raise self.refusal
            self.submitted.append(ingress)

        def query(canister, method, arg, caller):
            if method == "echo":
                return QueryAnswer(3, reply=repr((canister, arg, caller.hex())).encode())
            if self.refusal is not None:
                raise self.refusal
            return QueryAnswer(3, reject_code="CANISTER_ERROR", reject_message=f"no {method}")

        return NodeBackend("alpha", "alpha-node-1", DEFAULT, submit, query, lambda: self.certified,
                           lambda: {"subnet_id": "alpha", "node_id": "alpha-node-1"})


@pytest.fixture
def served():
    fake = Fake()
    server = HttpApiServer(fake.backend())
    address = server.start()
    client = httpx.Client(trust_env=False, base_url=f"http://{address}", verify=False)
    yield fake, client
    client.close()
    server.stop()


def call(receiver: int = 7, method: str = "m", arg=None, request_type: str = "call") -> bytes:
    return sign_ingress(KEY, receiver, method, arg, time.time_ns(), time.time_ns() + 60 * 10**9,
                        request_type=request_type)


def query(receiver: int = 7, method: str = "m", arg=None) -> bytes:
    return call(receiver, method, arg, "query")


@pytest.mark.parametrize("refusal", [DuplicateIngress("d"), UnknownCanister("u"), CanisterNotOnSubnet("c"),
                                     IngressPoolFull("p"), NodeUnavailable("n")])
def test_backend_refusals_become_their_status(served, refusal):
    fake, client = served
    fake.refusal = refusal
    response = client.post(canister_url(7, "call"), content=call())
    assert response.status_code == refusal.status
    assert response.json() == {"reason": refusal.reason, "message": str(refusal)}


def _documented_refusals() -> dict[str, tuple[str, int]]:
    """``{class name: (reason, status)}`` from the tables of ``replica.client.refusals``."""
    rows = re.findall(r"^(\w+) +``(\w+)`` +(\d{3}) ", refusals.__doc__, re.MULTILINE)
    return {name: (reason, int(status)) for name, reason, status in rows}


def test_the_refusal_tables_are_the_classes():
    classes = [IngressRefused, ApiError, *IngressRefused.__subclasses__(), *ApiError.__subclasses__()]
    documented = _documented_refusals()
    assert documented == {cls.__name__: (cls.reason, cls.status) for cls in classes if cls is not IngressRefused}
    assert all(refusal_class(cls.reason) is cls for cls in IngressRefused.__subclasses__())


def test_an_accepted_call_reaches_the_backend(served):
    fake, client = served
    response = client.post(canister_url(7, "call"), content=call(arg={"x": 1}))
    assert response.status_code == 202 and fake.submitted[0].message_id.hex() == response.json()["message_id"]
    assert fake.submitted[0].source == KEY.principal.raw and fake.submitted[0].receiver == 7


def test_queries_answer_in_msgpack(served):
    fake, client = served
    answer = decode_query_answer(client.post(canister_url(7, "query"), content=query(method="echo", arg=5)).content,
                                 10**6)
    assert answer == QueryAnswer(3, reply=repr((7, 5, KEY.principal.raw.hex())).encode())
    rejected = decode_query_answer(client.post(canister_url(7, "query"), content=query(method="nope")).content, 10**6)
    assert rejected.reject_code == "CANISTER_ERROR" and not rejected.replied
    fake.refusal = NotCertifiedYet("later")
    response = client.post(canister_url(7, "query"), content=query(method="nope"))
    assert (response.status_code, response.json()["reason"]) == (503, "not_certified_yet")


@pytest.mark.parametrize("route, envelope", [("call", query), ("query", call), ("dry_run", call)])
def test_an_envelope_of_another_request_type_is_refused(served, route, envelope):
    """A signed query (or dry run) is never executed as a call, nor a call's envelope answered
    as a query: each route takes its own request_type."""
    fake, client = served
    response = client.post(canister_url(7, route), content=envelope(method="echo"))
    assert (response.status_code, response.json()["reason"]) == (400, "wrong_request_type")
    assert fake.submitted == []


def test_read_state_reveals_the_paths_and_time_only(served):
    _, client = served
    body = client.post(canister_url(7, "read_state"), content=encode_read_state_request([[b"metadata", b"height"]]))
    certificate = decode_certificate(body.content)
    assert certificate.certification == CERTIFICATION and reconstruct(certificate.tree) == TRIE.digest()


def test_an_agent_verifies_under_the_registry_key_only(served):
    fake, client = served
    registry, secrets = genesis_registry([SubnetSpec("alpha", 1, ((0, 99),))], b"\x42" * 32,
                                         not_before=datetime.datetime.now(datetime.timezone.utc))
    node = secrets["alpha-node-1"] if "alpha-node-1" in secrets else next(iter(secrets.values()))
    share = sign_certification_share(3, TRIE.digest(), node.node_index, node.secret_share)
    record = registry.latest().subnet("alpha")
    fake.certified = (TRIE, aggregate_certification([share], record.threshold, record.public_key,
                                                    record.key_shares_by_index()))
    address = str(client.base_url).removeprefix("http://").rstrip("/")
    # the agent's clock is the certified time: the test does not depend on when it runs
    with Agent(address, KEY, registry, clock=lambda: CERTIFIED_TIME) as agent:
        assert agent.read_state(7, [[b"time"]]).height == 3
        fake.certified = (TRIE, CERTIFICATION)  # a valid certification under another key
        with pytest.raises(CertificateSignatureInvalid):
            agent.read_state(7, [[b"time"]])
