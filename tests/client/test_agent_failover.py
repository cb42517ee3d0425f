"""The agent reaches a subnet through any of its nodes: a node that gives no HTTP answer, or
answers 503 ``unavailable``, is passed over for the next, which is used first from then on;
a call resubmitted that way and refused as ``duplicate`` counts as submitted. Every other
answer — a refusal included — is the caller's, from the first node that gave one.

The nodes are a scripted transport: what each endpoint answers is the test's choice."""

from __future__ import annotations

import json

import pytest

from replica.client.agent import Agent
from replica.client.agent_errors import TransportError
from replica.client.identity import UserKey
from replica.client.refusals import DuplicateIngress
from tests.golden import fixtures as fx

NODES = ("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3")


class ScriptedNodes:
    """Answers per endpoint: "silent" (no HTTP answer), "pooled+silent" (takes the call, then
    no answer), or an HTTP status with a reason; "accept" answers 202 with the message id."""

    def __init__(self, script: dict[str, str]) -> None:
        self.script = dict(script)
        self.asked: list[str] = []
        self.pooled: set[bytes] = set()

    def request(self, method: str, endpoint: str, path: str, body: bytes | None) -> tuple[int, bytes]:
        self.asked.append(endpoint)
        behaviour = self.script[endpoint]
        if behaviour == "silent":
            raise TransportError(f"{endpoint}: connection refused")
        if behaviour == "pooled+silent" or behaviour == "accept":
            first_time = body not in self.pooled
            self.pooled.add(body)
            if behaviour == "pooled+silent":
                raise TransportError(f"{endpoint}: connection reset")
            if not first_time:
                return 409, json.dumps({"reason": "duplicate", "message": "already pooled"}).encode()
            return 202, json.dumps({"message_id": self.expected_id}).encode()
        status, reason = behaviour.split(" ")
        return int(status), json.dumps({"reason": reason, "message": f"{endpoint} says {reason}"}).encode()

    def close(self) -> None:
        pass


def _agent(script: dict[str, str]) -> tuple[Agent, ScriptedNodes]:
    agent = Agent({fx.A: list(NODES), fx.B: "127.0.0.1:9"}, UserKey.from_seed(b"failover"), fx.registry())
    nodes = ScriptedNodes(script)
    agent._http = nodes   # the transport is the one seam between the agent and the network
    original = agent._envelope

    def envelope(canister_id, method, arg):   # let the scripted nodes answer with the right id
        signed, message_id = original(canister_id, method, arg)
        nodes.expected_id = message_id.hex()
        return signed, message_id

    agent._envelope = envelope
    return agent, nodes


def test_a_silent_node_is_passed_over_and_the_next_one_is_kept():
    agent, nodes = _agent({NODES[0]: "silent", NODES[1]: "accept", NODES[2]: "accept"})
    agent.submit_call(5, "increment", 1)
    assert nodes.asked == [NODES[0], NODES[1]]
    assert agent.endpoint_for(5) == NODES[1]
    agent.submit_call(5, "increment", 2)
    assert nodes.asked[2:] == [NODES[1]]          # the node that answered goes first now
    assert agent.endpoint_for(150) == "127.0.0.1:9"   # other subnets are untouched


def test_an_unavailable_node_is_passed_over():
    agent, nodes = _agent({NODES[0]: "503 unavailable", NODES[1]: "accept", NODES[2]: "accept"})
    agent.submit_call(5, "increment", 1)
    assert nodes.asked == [NODES[0], NODES[1]]


def test_a_call_pooled_by_a_node_that_went_silent_counts_as_submitted():
    agent, nodes = _agent({NODES[0]: "pooled+silent", NODES[1]: "accept", NODES[2]: "accept"})
    message_id = agent.submit_call(5, "increment", 1)
    assert len(message_id) == 32 and nodes.asked == [NODES[0], NODES[1]]


def test_a_duplicate_without_a_failover_is_the_callers_refusal():
    agent, nodes = _agent({NODES[0]: "409 duplicate", NODES[1]: "accept", NODES[2]: "accept"})
    with pytest.raises(DuplicateIngress):
        agent.submit_call(5, "increment", 1)
    assert nodes.asked == [NODES[0]]


@pytest.mark.parametrize("answer", ["400 malformed", "503 not_certified_yet", "404 unknown_canister"])
def test_other_answers_are_the_first_nodes_and_not_retried_elsewhere(answer):
    agent, nodes = _agent({NODES[0]: answer, NODES[1]: "accept", NODES[2]: "accept"})
    with pytest.raises(Exception, match=answer.split(" ")[1]):
        agent.submit_call(5, "increment", 1)
    assert nodes.asked == [NODES[0]]


def test_no_answer_from_any_node_is_a_transport_error():
    agent, nodes = _agent({node: "silent" for node in NODES})
    with pytest.raises(TransportError, match=NODES[2]):
        agent.submit_call(5, "increment", 1)
    assert nodes.asked == list(NODES)
    agent, nodes = _agent({NODES[0]: "503 unavailable", NODES[1]: "503 unavailable", NODES[2]: "503 unavailable"})
    with pytest.raises(Exception, match="unavailable"):
        agent.submit_call(5, "increment", 1)
    assert nodes.asked == list(NODES)


class CertifyingLater(ScriptedNodes):
    """Every node says 503 not_certified_yet to the first ``refusals`` queries, then answers."""

    def __init__(self, refusals: int) -> None:
        super().__init__({n: "503 not_certified_yet" for n in NODES})
        self.refusals = refusals

    def request(self, method, endpoint, path, body):
        if self.refusals > 0:
            self.refusals -= 1
            return super().request(method, endpoint, path, body)
        self.asked.append(endpoint)
        from replica.client.http_wire import QueryAnswer, encode_query_answer
        from state_manager.encoding import encode
        return 200, encode_query_answer(QueryAnswer(7, reply=encode(42)))


def test_a_query_passes_over_nodes_not_certified_yet_and_asks_again_until_one_is():
    agent, _ = _agent({n: "accept" for n in NODES})
    nodes = agent._http = CertifyingLater(refusals=4)   # all three, then the first again
    assert agent.query_call(5, "get") == 42
    assert nodes.asked[:3] == list(NODES) and len(nodes.asked) == 5   # all passed over, then asked again


def test_a_query_no_node_certifies_in_time_is_refused_with_the_reason():
    agent, _ = _agent({n: "accept" for n in NODES})
    agent._http = CertifyingLater(refusals=10**6)
    with pytest.raises(Exception, match="not_certified_yet"):
        agent.query_answer(5, "get", timeout_s=0.2)
