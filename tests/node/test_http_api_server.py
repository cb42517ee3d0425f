"""The HTTP API server on its own, over a fake ``NodeBackend`` (no testnet): each refusal a
backend raises becomes its documented status, a plain-text message and its reason in the
refusal header; calls, queries and read_state answer in the IC's bodies (CBOR; query answers
signed by the node, certificates of the latest certified state); and the server runs in its
own thread until stopped."""

from __future__ import annotations

import datetime
import re
import time

import httpx
import pytest

from consensus_stub.genesis import SubnetSpec, genesis_registry
from message_routing.limits import DEFAULT
from replica.client import Ed25519Identity, sign_ingress
from replica.client import refusals
from replica.client.agent import Agent
from replica.client.agent_errors import CertificateSignatureInvalid
from replica.client.answers import QueryAnswer, decode_query_answer
from replica.client.envelope import QUERY, sign_request
from replica.client.refusals import (
    ApiError, CanisterNotOnSubnet, DuplicateIngress, IngressPoolFull, IngressRefused, NodeUnavailable, NotCertifiedYet,
    UnknownCanister, refusal_class,
)
from replica.execution.codec import encode_value
from replica.ic.certificate import CertificateDelegation, decode_certificate, verify_certificate
from replica.ic.envelope import encode_envelope, sign_envelope
from replica.ic.http_interface import REFUSAL_HEADER, canister_path, decode_call_answer, decode_read_state_answer
from replica.ic.principal import canister_principal, node_principal, principal_to_text
from replica.ic.query_response import QueryReplied, decode_query_response, verify_query_response
from replica.node.http_api import HttpApiServer, NodeBackend
from state_manager import bls
from state_manager.certification import Certification, aggregate_certification, sign_certification_share
from state_manager.hash_tree import Found, Leaf, Unknown, lookup_path, reconstruct
from state_manager.ic_encoding import uleb128
from state_manager.labeled_trie import LabeledTrie, build_from_sorted
from state_manager.state_tree import leaf

KEY = Ed25519Identity.from_seed(b"server-test")
NODE = Ed25519Identity.from_seed(b"server-test node")
DEAL = bls.deal_threshold_keys(1, 1, b"\x41" * 32)
#: A request of someone else's, certified replied: what a read_state must not reveal unasked.
ELSEWHERE = b"\x09" * 32
SECOND = 10**9


def certified_trie(time_ns: int, replied: tuple[bytes, ...] = (ELSEWHERE,)) -> LabeledTrie:
    return build_from_sorted([
        (b"metadata", build_from_sorted([(b"height", leaf(3))])),
        (b"request_status", build_from_sorted(
            (mid, build_from_sorted([(b"reply", b"DIDL\x00\x00"), (b"status", b"replied")])) for mid in sorted(replied))),
        (b"time", uleb128(time_ns)),
    ])


def certify(trie: LabeledTrie, keys=DEAL, node_index: int = 1, secret: bytes | None = None, threshold: int = 1,
            public_key: bytes | None = None, key_shares=None) -> Certification:
    secret = keys.secret_share(1) if secret is None else secret
    share = sign_certification_share(3, trie.digest(), node_index, secret)
    return aggregate_certification([share], threshold, keys.public_key if public_key is None else public_key,
                                   {1: keys.public_key_share(1)} if key_shares is None else key_shares)


class Fake:
    """A backend whose submit raises ``self.refusal`` (if set) and records what it admitted;
    with ``self.execute``, an admitted call is certified replied at once."""

    def __init__(self) -> None:
        self.refusal: Exception | None = None
        self.submitted: list = []
        self.execute = False
        self.time_ns = time.time_ns()   # the certified time: fresh for each test
        self.trie = certified_trie(self.time_ns)
        self.certified = (self.trie, certify(self.trie))
        self.delegation: CertificateDelegation | None = None

    def backend(self) -> NodeBackend:
        def submit(ingress):
            if self.refusal is not None:
                raise self.refusal
            self.submitted.append(ingress)
            if self.execute:
                self.trie = certified_trie(self.time_ns, (ELSEWHERE, ingress.message_id))
                self.certified = (self.trie, certify(self.trie))

        def query(canister, method, arg, caller):
            if method == "echo":
                return QueryAnswer(3, reply=repr((canister, arg, caller.hex())).encode())
            if self.refusal is not None:
                raise self.refusal
            return QueryAnswer(3, reject_code="CANISTER_ERROR", reject_message=f"no {method}")

        return NodeBackend("alpha", "alpha-node-1", DEFAULT, submit, query, lambda: self.certified,
                           lambda: {"subnet_id": "alpha", "node_id": "alpha-node-1"}, node_signer=NODE,
                           delegation=lambda certified: self.delegation)


@pytest.fixture
def served():
    fake = Fake()
    server = HttpApiServer(fake.backend(), sync_call_s=1.0)
    address = server.start()
    client = httpx.Client(trust_env=False, base_url=f"http://{address}", verify=False)
    yield fake, client
    client.close()
    server.stop()


def route(endpoint: str, canister: int = 7, version: int = 2) -> str:
    return canister_path(version, principal_to_text(canister_principal(canister).raw), endpoint)


def signed(receiver: int = 7, method: str = "m", arg=None, request_type: str = "call"):
    """The envelope and request id of a call (or query) of ``method(arg)``."""
    return sign_request(KEY, receiver, method, encode_value(arg), nonce=time.time_ns(),
                        expiry=time.time_ns() + 60 * SECOND, request_type=request_type)


def call(receiver: int = 7, method: str = "m", arg=None, request_type: str = "call") -> bytes:
    return sign_ingress(KEY, receiver, method, arg, time.time_ns(), time.time_ns() + 60 * SECOND,
                        request_type=request_type)


def query(receiver: int = 7, method: str = "m", arg=None) -> bytes:
    return call(receiver, method, arg, QUERY)


def read_state(paths) -> bytes:
    content = {"request_type": "read_state", "sender": KEY.principal.raw, "paths": [list(p) for p in paths],
               "ingress_expiry": time.time_ns() + 60 * SECOND}
    return encode_envelope(sign_envelope(content, KEY))


def assert_refused(response: httpx.Response, status: int, reason: str, message: str | None = None) -> None:
    """The IC's refusal: the status, a plain-text message, the reason in the refusal header."""
    assert (response.status_code, response.headers.get(REFUSAL_HEADER)) == (status, reason), response.text
    assert response.headers["content-type"].startswith("text/plain")
    if message is not None:
        assert response.text == message


@pytest.mark.parametrize("refusal", [DuplicateIngress("d"), UnknownCanister("u"), CanisterNotOnSubnet("c"),
                                     IngressPoolFull("p"), NodeUnavailable("n")])
def test_backend_refusals_become_their_status(served, refusal):
    fake, client = served
    fake.refusal = refusal
    assert_refused(client.post(route("call"), content=call()), refusal.status, refusal.reason, str(refusal))
    assert fake.submitted == []


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
    request = signed(arg={"x": 1})
    response = client.post(route("call"), content=request.envelope)
    assert (response.status_code, response.content) == (202, b"")   # v2: accepted, nothing more
    (ingress,) = fake.submitted
    assert ingress.message_id == request.message_id   # the request id is the message id
    assert (ingress.source, ingress.receiver, ingress.method_name) == (KEY.principal.raw, 7, "m")
    assert ingress.method_payload == encode_value({"x": 1})


def test_a_synchronous_call_is_answered_with_the_certificate_of_its_reply(served):
    fake, client = served
    fake.execute = True
    request = signed()
    response = client.post(route("call", version=3), content=request.envelope)
    assert response.status_code == 200 and response.headers["content-type"] == "application/cbor"
    answer = decode_call_answer(response.content, 1 << 20)
    assert answer.status == "replied"
    certificate = decode_certificate(answer.certificate)
    verify_certificate(certificate, root_key=DEAL.public_key)
    status = lookup_path(certificate.tree, [b"request_status", request.message_id, b"status"])
    assert isinstance(status, Found) and status.tree == Leaf(b"replied")
    assert isinstance(lookup_path(certificate.tree, [b"request_status", ELSEWHERE, b"status"]), Unknown)
    fake.execute = False   # accepted, never certified within the server's wait: 202, poll read_state
    response = client.post(route("call", version=3), content=call())
    assert response.status_code == 202 and len(fake.submitted) == 2


def test_queries_answer_in_cbor_signed_by_the_node(served):
    fake, client = served
    request = signed(method="echo", arg=5, request_type=QUERY)
    body = client.post(route("query"), content=request.envelope).content
    expected = repr((7, encode_value(5), KEY.principal.raw.hex())).encode()
    assert decode_query_answer(body, 10**6) == QueryAnswer(None, reply=expected)
    response = decode_query_response(body, max_bytes=10**6)
    assert response.outcome == QueryReplied(expected)
    node = node_principal(NODE.der_public_key)
    verify_query_response(response, request.message_id, {node: NODE.der_public_key})
    rejected = decode_query_answer(client.post(route("query"), content=query(method="nope")).content, 10**6)
    assert rejected.reject_code == "CANISTER_ERROR" and rejected.reject_message == "no nope" and not rejected.replied
    fake.refusal = NotCertifiedYet("later")
    assert_refused(client.post(route("query"), content=query(method="nope")), 503, "not_certified_yet", "later")
    assert fake.submitted == []


@pytest.mark.parametrize("endpoint, envelope", [("call", query), ("query", call), ("dry_run", call)])
def test_an_envelope_of_another_request_type_is_refused(served, endpoint, envelope):
    """A signed query (or dry run) is never executed as a call, nor a call's envelope answered
    as a query: each route takes its own request_type."""
    fake, client = served
    assert_refused(client.post(route(endpoint), content=envelope(method="echo")), 400, "wrong_request_type")
    assert fake.submitted == []


def test_read_state_reveals_the_paths_time_and_height_only(served):
    fake, client = served
    response = client.post(route("read_state"), content=read_state([[b"metadata", b"height"]]))
    assert response.status_code == 200 and response.headers["content-type"] == "application/cbor"
    certificate = decode_certificate(decode_read_state_answer(response.content, 1 << 20))
    assert certificate.signature == fake.certified[1].signature and certificate.delegation is None
    assert reconstruct(certificate.tree) == fake.trie.digest()
    assert verify_certificate(certificate, root_key=DEAL.public_key).time_ns == fake.time_ns
    assert lookup_path(certificate.tree, [b"metadata", b"height"]) == Found(Leaf(leaf(3)))
    assert isinstance(lookup_path(certificate.tree, [b"request_status", ELSEWHERE]), Unknown)   # not asked: pruned
    # with the root subnet's delegation (a node of another subnet), the certificate carries it
    fake.delegation = CertificateDelegation(b"\x01" * 29, b"the root subnet's certificate")
    response = client.post(route("read_state"), content=read_state([[b"time"]]))
    assert decode_certificate(decode_read_state_answer(response.content, 1 << 20)).delegation == fake.delegation


def test_an_agent_verifies_under_the_registry_key_only(served):
    fake, client = served
    registry, secrets = genesis_registry([SubnetSpec("alpha", 1, ((0, 99),))], b"\x42" * 32,
                                         not_before=datetime.datetime.now(datetime.timezone.utc))
    node = secrets["alpha-node-1"] if "alpha-node-1" in secrets else next(iter(secrets.values()))
    record = registry.latest().subnet("alpha")
    fake.certified = (fake.trie, certify(fake.trie, node_index=node.node_index, secret=node.secret_share,
                                         threshold=record.threshold, public_key=record.public_key,
                                         key_shares=record.key_shares_by_index()))
    address = str(client.base_url).removeprefix("http://").rstrip("/")
    with Agent(address, KEY, registry) as agent:
        assert agent.read_state(7, [[b"time"]]).height == 3
        # the agent's largest poll (63 request ids, one certificate) is within the node's bounds
        polled = [bytes([n]) * 32 for n in range(100, 163)]
        statuses = agent.request_statuses(polled, 7)
        assert {status.status for status in statuses.values()} == {"unknown"}   # proven absent
        fake.certified = (fake.trie, certify(fake.trie))  # a valid certification under another key
        with pytest.raises(CertificateSignatureInvalid):
            agent.read_state(7, [[b"time"]])
