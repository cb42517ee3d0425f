"""The agent reaches a subnet through any of its nodes, the same way for every kind of request
(call, query, read_state, status): a node that gives no HTTP answer (refused, reset, timed
out) or answers a 5xx is passed over for the next, which is asked first from then on; when
no node answers, the agent re-reads where the nodes are and asks again, for up to its
``failover_s``. An answer below 500 is the caller's, from the first node that gave one; a
call is refused only by a node's typed refusal. A call resubmitted after a failover and
refused as ``duplicate`` counts as submitted; a call no node confirmed raises
``SubmissionUncertain`` with its message id.

Scripted nodes (what each endpoint answers is the test's choice), then real HTTP API servers
that are stopped, silent or restarted on the same port."""

from __future__ import annotations

import socket
import time

import pytest

from replica.client.agent import Agent
from replica.client.agent_errors import CertificationRollback, RequestRefused, SubmissionUncertain, TransportError
from replica.client.answers import QueryAnswer
from replica.client.envelope import decode_signed_ingress
from replica.client.http_transport import Answer
from replica.client.identity import Ed25519Identity
from consensus_stub.registry import Registry
from message_routing.limits import DEFAULT
from replica.client.refusals import DuplicateIngress, IngressPoolFull, MalformedIngress, UnknownCanister
from replica.ic.http_interface import STATUS_PATH, canister_path, encode_read_state_answer, encode_status
from replica.ic.principal import canister_principal, principal_to_text
from replica.node.backend import NodeBackend
from replica.node.ingress_requests import encode_query_answer
from state_manager import certification as cm
from state_manager.encoding import encode
from state_manager.labeled_trie import build_from_sorted
from state_manager.ic_encoding import uleb128
from state_manager.state_tree import leaf
from replica.node.read_state import certificate_for
from tests.golden import fixtures as fx

NODES = ("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3")
KINDS = ("call", "query", "read_state", "status")
#: How a node fails: no HTTP answer (connection refused, a timeout) or a 5xx.
FAILURES = ("refused", "timeout", "500 internal_error", "503 unavailable", "503 not_certified_yet")


def _certificate(message_id: bytes, height: int = fx.HEIGHT) -> bytes:
    """Subnet A's certificate (3 of its 4 key shares) at ``height`` that ``message_id`` is
    replied 42, at the fixtures' time."""
    trie = build_from_sorted([
        (b"metadata", build_from_sorted([(b"height", leaf(height))])),
        (b"request_status", build_from_sorted([
            (message_id, build_from_sorted([(b"reply", encode(42)), (b"status", b"replied")]))])),
        (b"time", uleb128(fx.TIME)),
    ])
    shares = fx.certification_shares(height, trie.digest())
    key_shares = {i: fx.deal(fx.A).public_key_share(i) for i in range(1, fx.N + 1)}
    certification = cm.aggregate_certification(shares, fx.T, fx.deal(fx.A).public_key, key_shares)
    return encode_read_state_answer(certificate_for(trie, certification, [[b"request_status", message_id]], None))   # A is the root subnet


#: The routes of canister 5 (on subnet A), as the interface names them.
CANISTER_5 = principal_to_text(canister_principal(5).raw)
ROUTES = {"call": canister_path(2, CANISTER_5, "call"), "query": canister_path(2, CANISTER_5, "query"),
          "read_state": canister_path(2, CANISTER_5, "read_state"), "status": STATUS_PATH}
#: A node's side of a query answer: its encoder, signed by node 1 of A.
QUERY_NODE = NodeBackend(fx.A, f"{fx.A}-node-1", DEFAULT, lambda ingress: None, lambda *args: None, lambda: None, dict,
                         clock=lambda: fx.TIME, node_signer=fx.node_signing_identity())


class ScriptedNodes:
    """Answers per endpoint: "refused" / "timeout" (no HTTP answer), "pooled+silent" (takes the
    call, then no answer), "ok" (202 for a call, a query answer, a certificate, a status, in
    the IC's bodies), or an HTTP status with a reason (a refusal: plain text, the reason in
    the refusal header). A call's message id is the request id of the envelope the agent
    sent (``message_id``: the last one)."""

    def __init__(self, script: dict[str, str]) -> None:
        self.script = dict(script)
        self.asked: list[str] = []
        self.paths: list[tuple[str, str]] = []
        self.pooled: set[bytes] = set()
        self.message_id = b"\x01" * 32
        #: The certified height each node's read_state answers are at.
        self.heights: dict[str, int] = {}

    def request(self, method: str, endpoint: str, path: str, body: bytes | None) -> Answer:
        self.asked.append(endpoint)
        self.paths.append((method, path))
        if path.endswith("/call"):   # what the agent sent: a signed call to canister 5
            ingress = decode_signed_ingress(body, DEFAULT.max_ingress_bytes, now_ns=fx.TIME)
            assert ingress.receiver == 5
            self.message_id = ingress.message_id
        behaviour = self.script.get(endpoint, "refused")
        if behaviour in ("refused", "timeout"):
            raise TransportError(f"{method} http://{endpoint}{path}: {'connection refused' if behaviour == 'refused' else 'timed out'}")
        if behaviour in ("pooled+silent", "ok"):
            if path.endswith("/call"):
                first_time = body not in self.pooled
                self.pooled.add(body)
                if behaviour == "pooled+silent":
                    raise TransportError(f"{endpoint}: connection reset")
                if not first_time:
                    return Answer(409, b"already pooled", "duplicate")
                return Answer(202, b"")
            if path.endswith("/query"):
                query = decode_signed_ingress(body, DEFAULT.max_ingress_bytes, now_ns=fx.TIME, request_type="query")
                return Answer(200, encode_query_answer(QueryAnswer(7, reply=encode(42)), query.message_id, QUERY_NODE))
            if path.endswith("/read_state"):
                return Answer(200, _certificate(self.message_id, self.heights.get(endpoint, fx.HEIGHT)))
            return Answer(200, encode_status({"root_key": b"", "node": endpoint, "finalized_height": 9}))
        status, reason = behaviour.split(" ")
        return Answer(int(status), f"{endpoint} says {reason}".encode(), reason)

    def close(self) -> None:
        pass


def _agent(script: dict[str, str], **options) -> tuple[Agent, ScriptedNodes]:
    options.setdefault("failover_s", 0.0)
    agent = Agent({fx.A: list(NODES), fx.B: "127.0.0.1:9"}, Ed25519Identity.from_seed(b"failover"), fx.registry(),
                  clock=lambda: fx.TIME, poll_interval_s=0.01, max_poll_interval_s=0.02, **options)
    nodes = ScriptedNodes(script)
    agent._http = nodes   # the transport is the one seam between the agent and the network
    return agent, nodes


def _ask(agent: Agent, kind: str):
    """One request of ``kind`` to subnet A (canister 5); its decoded result."""
    if kind == "call":
        return agent.submit_call(5, "increment", 1)
    if kind == "query":
        return agent.query_call(5, "get")
    if kind == "read_state":
        return agent.request_status(b"\x01" * 32, 5).status
    return agent.status(subnet=fx.A)["node"]


@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("kind", KINDS)
def test_a_failing_node_is_passed_over_for_every_kind_of_request_and_the_next_one_is_kept(kind, failure):
    agent, nodes = _agent({NODES[0]: failure, NODES[1]: "ok", NODES[2]: "ok"})
    result = _ask(agent, kind)
    assert nodes.asked == [NODES[0], NODES[1]]
    assert {"call": len(result) == 32 if isinstance(result, bytes) else False, "query": result == 42,
            "read_state": result == "replied", "status": result == NODES[1]}[kind]
    assert agent.endpoint_for(5) == NODES[1]
    _ask(agent, kind)
    assert nodes.asked[2:] == [NODES[1]]              # the node that answered goes first now
    assert set(nodes.paths) == {("GET" if kind == "status" else "POST", ROUTES[kind])}   # the interface's routes
    assert agent.endpoint_for(150) == "127.0.0.1:9"   # other subnets are untouched


def test_a_call_pooled_by_a_node_that_went_silent_counts_as_submitted():
    agent, nodes = _agent({NODES[0]: "pooled+silent", NODES[1]: "ok", NODES[2]: "ok"})
    message_id = agent.submit_call(5, "increment", 1)
    assert message_id == nodes.message_id and nodes.asked == [NODES[0], NODES[1]]


def test_a_duplicate_without_a_failover_is_the_callers_refusal():
    agent, nodes = _agent({NODES[0]: "409 duplicate", NODES[1]: "ok", NODES[2]: "ok"})
    with pytest.raises(DuplicateIngress):
        agent.submit_call(5, "increment", 1)
    assert nodes.asked == [NODES[0]]


@pytest.mark.parametrize("kind", ["call", "query"])
@pytest.mark.parametrize("answer", ["400 malformed", "404 unknown_canister", "421 canister_not_on_subnet"])
def test_a_4xx_is_the_first_nodes_answer_and_not_asked_elsewhere(kind, answer):
    agent, nodes = _agent({NODES[0]: answer, NODES[1]: "ok", NODES[2]: "ok"}, failover_s=5.0)
    status, reason = answer.split(" ")
    with pytest.raises(Exception, match=f"{NODES[0]} says {reason}") as raised:
        _ask(agent, kind)
    assert nodes.asked == [NODES[0]]
    assert raised.value.reason == reason   # read from the refusal header
    if answer == "404 unknown_canister":
        assert isinstance(raised.value, UnknownCanister)
    if answer == "400 malformed":
        assert isinstance(raised.value, MalformedIngress)


def test_a_full_pool_on_every_node_is_the_nodes_refusal_not_asked_again():
    agent, nodes = _agent({node: "503 pool_full" for node in NODES}, failover_s=5.0)
    with pytest.raises(IngressPoolFull):
        agent.submit_call(5, "increment", 1)
    assert nodes.asked == list(NODES)   # each node once: every one refused it


def test_a_full_pool_is_passed_over_for_a_node_with_room():
    agent, nodes = _agent({NODES[0]: "503 pool_full", NODES[1]: "ok", NODES[2]: "ok"})
    agent.submit_call(5, "increment", 1)
    assert nodes.asked == [NODES[0], NODES[1]]


@pytest.mark.parametrize("failure, said", [("refused", "connection refused"), ("timeout", "timed out"),
                                           ("503 unavailable", "unavailable"), ("500 internal_error", "internal_error")])
def test_a_call_no_node_confirmed_is_uncertain_with_its_message_id_after_asking_again(failure, said):
    agent, nodes = _agent({node: failure for node in NODES}, failover_s=0.2)
    started = time.monotonic()
    with pytest.raises(SubmissionUncertain, match=said) as raised:
        agent.submit_call(5, "increment", 1)
    assert raised.value.message_id == nodes.message_id
    assert len(nodes.asked) > len(NODES) and set(nodes.asked) == set(NODES)   # asked again, within the patience
    assert 0.2 <= time.monotonic() - started < 2.0


@pytest.mark.parametrize("kind", ["query", "read_state", "status"])
def test_no_answer_from_any_node_is_a_transport_error_after_the_patience(kind):
    agent, nodes = _agent({node: "refused" for node in NODES}, failover_s=0.1)
    with pytest.raises(TransportError):
        _ask(agent, kind) if kind != "query" else agent.query_answer(5, "get", timeout_s=0.1)
    assert len(nodes.asked) > len(NODES)


def test_every_node_answering_5xx_gives_the_last_answer_after_the_patience():
    agent, nodes = _agent({node: "503 unavailable" for node in NODES}, failover_s=0.1)
    with pytest.raises(RequestRefused, match="unavailable"):
        agent.request_status(b"\x01" * 32, 5)
    with pytest.raises(RequestRefused, match="not_certified_yet"):
        nodes.script = {node: "503 not_certified_yet" for node in NODES}
        agent.query_answer(5, "get", timeout_s=0.1)


@pytest.mark.parametrize("kind", KINDS)
def test_when_no_node_answers_the_agent_rereads_where_the_nodes_are(kind):
    moved = "127.0.0.1:7"   # a node back on a new port, as the testnet directory now says
    source_calls = []

    def source():
        source_calls.append(1)
        return {fx.A: [NODES[1], moved], fx.B: ["127.0.0.1:9"]}

    agent, nodes = _agent({NODES[0]: "refused", NODES[1]: "refused", NODES[2]: "refused", moved: "ok"},
                          failover_s=5.0, endpoints_source=source)
    _ask(agent, kind)
    assert source_calls and nodes.asked[:3] == list(NODES) and nodes.asked[-1] == moved
    assert agent.endpoint_for(5) == moved
    assert moved not in nodes.asked[:-1]


def test_a_node_seen_silent_makes_the_agent_learn_its_new_address_though_another_answered():
    agent, nodes = _agent({NODES[0]: "refused", NODES[1]: "ok", NODES[2]: "ok", "127.0.0.1:7": "ok"},
                          endpoints_source=lambda: {fx.A: ["127.0.0.1:7", NODES[1], NODES[2]]})
    agent.submit_call(5, "increment", 1)
    assert agent._book.candidates(fx.A) == (NODES[1], NODES[2], "127.0.0.1:7")   # the old address is gone


def test_a_newer_registry_from_the_source_is_taken_an_older_one_is_not():
    newer = fx.registry()
    older = Registry(newer.records[:1])
    offered = [newer]
    agent, _ = _agent({node: "refused" for node in NODES} | {"127.0.0.1:7": "ok"}, failover_s=1.0,
                      registry_source=lambda: offered[0], endpoints_source=lambda: {fx.A: ["127.0.0.1:7"]})
    agent.registry = older
    agent.submit_call(5, "increment", 1)
    assert agent.registry is newer
    offered[0] = older
    agent._http.script["127.0.0.1:7"] = "refused"
    with pytest.raises(SubmissionUncertain):
        agent.submit_call(5, "increment", 2)   # asked again for a second: re-read more than once
    assert agent.registry is newer


class FailingFirst:
    """No HTTP answer to the first ``failures`` requests, then ``nodes`` answers."""

    def __init__(self, nodes: ScriptedNodes, failures: int) -> None:
        self.nodes, self.failures, self.asked = nodes, failures, 0

    def request(self, method, endpoint, path, body):
        self.asked += 1
        if self.asked <= self.failures:
            raise TransportError(f"{endpoint}: connection refused")
        return self.nodes.request(method, endpoint, path, body)

    def close(self) -> None:
        pass


def test_a_node_behind_what_the_agent_verified_is_passed_over_for_read_state():
    agent, nodes = _agent({node: "ok" for node in NODES})
    assert agent.request_status(b"\x01" * 32, 5).certificate.height == fx.HEIGHT
    nodes.heights[NODES[0]] = fx.HEIGHT - 1   # restarted, catching up: an older certified state
    assert agent.request_status(b"\x01" * 32, 5).certificate.height == fx.HEIGHT
    assert nodes.asked[1:] == [NODES[0], NODES[1]] and agent.endpoint_for(5) == NODES[1]
    nodes.heights = {node: fx.HEIGHT - 1 for node in NODES}   # every node behind: the last one's answer
    with pytest.raises(CertificationRollback):
        agent.request_status(b"\x01" * 32, 5)


def test_wait_asks_again_while_no_node_answers():
    agent, nodes = _agent({node: "ok" for node in NODES})
    message_id = agent.submit_call(5, "increment", 1)
    agent._http = FailingFirst(nodes, failures=2 * len(NODES))   # two rounds of silence
    assert agent.wait(message_id, 5, timeout_s=5.0) == 42


# -- real HTTP API servers, stopped, silent and restarted ------------------------------------------

@pytest.fixture
def servers():
    """Three HTTP API servers of subnet A over a backend that takes calls and answers queries."""
    from message_routing.limits import DEFAULT
    from replica.node.http_api import HttpApiServer, NodeBackend

    submitted = []

    def backend(name):
        return NodeBackend(fx.A, name, DEFAULT, submitted.append,
                           lambda canister, method, arg, caller: QueryAnswer(3, reply=encode(42)),
                           lambda: None, lambda: {"node_id": name, "finalized_height": 3},
                           node_signer=fx.node_signing_identity())   # each signs as node 1 of A

    running = {name: HttpApiServer(backend(name)) for name in ("n1", "n2", "n3")}
    addresses = {name: server.start() for name, server in running.items()}
    yield running, addresses, backend, submitted
    for server in running.values():
        server.stop()


def test_stopped_and_silent_real_nodes_are_passed_over(servers):
    running, addresses, _, submitted = servers
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()   # accepts connections, never answers: a timeout
    silent_address = f"127.0.0.1:{silent.getsockname()[1]}"
    running["n1"].stop()
    try:
        where = {fx.A: [addresses["n1"], silent_address, addresses["n2"]]}
        with Agent(dict(where), Ed25519Identity.from_seed(b"real"), fx.registry(), timeout_s=0.5,
                   endpoints_source=lambda: where) as agent:
            started = time.monotonic()
            agent.submit_call(5, "increment", 1)
            assert len(submitted) == 1 and time.monotonic() - started < 5
            assert agent.endpoint_for(5) == addresses["n2"]
            assert agent.query_call(5, "get") == 42
            assert agent.status(subnet=fx.A)["node_id"] == "n2"
            running["n2"].stop()   # now only the silent one and n3, which the agent learns of
            where[fx.A] = [addresses["n3"]]
            assert agent.status(subnet=fx.A)["node_id"] == "n3"
    finally:
        silent.close()


def test_a_node_restarted_on_its_port_answers_the_agent_again(servers):
    from replica.node.http_api import HttpApiServer

    running, addresses, backend, _ = servers
    with Agent(addresses["n1"], Ed25519Identity.from_seed(b"real"), fx.registry(), failover_s=5.0) as agent:
        assert agent.status()["node_id"] == "n1"          # a kept-alive connection to it now
        running["n1"].stop()
        port = int(addresses["n1"].rsplit(":", 1)[1])
        running["n1"] = HttpApiServer(backend("n1 again"), port=port)
        assert running["n1"].start() == addresses["n1"]   # the same port, at once
        assert agent.status()["node_id"] == "n1 again"
