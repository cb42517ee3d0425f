"""The agent checks every query answer's node signature under the key its registry lists for a
node of the canister's subnet: an answer unsigned, signed by a key of no node, by a node of
another subnet, for another request, or changed after signing is refused with
``QueryAnswerInvalid`` naming why; an answer signed by any node of the subnet is taken."""

from __future__ import annotations

import pytest

from message_routing.limits import DEFAULT
from replica.client.agent import Agent
from replica.client.agent_errors import QueryAnswerInvalid
from replica.client.envelope import decode_signed_ingress
from replica.client.http_transport import Answer
from replica.ic import cbor
from replica.ic.identities import Ed25519Identity
from replica.ic.query_response import (
    QueryReplied, QueryResponse, query_response_to_value, sign_query_response,
)
from state_manager.encoding import encode
from tests.golden import fixtures as fx

REPLY = encode(42)


def _node(subnet: str, index: int) -> Ed25519Identity:
    return Ed25519Identity.from_private_bytes(fx.node_signing_key(f"{subnet}-node-{index}"))


class SigningNode:
    """Answers every query with ``reply`` signed by ``signer`` over the request id it was asked
    (or ``request_id``, if given); ``tamper`` changes the body after signing."""

    def __init__(self, signer: Ed25519Identity | None, *, request_id: bytes | None = None,
                 reply: bytes = REPLY, tamper=None) -> None:
        self.signer, self.request_id, self.reply, self.tamper = signer, request_id, reply, tamper

    def request(self, method: str, endpoint: str, path: str, body: bytes | None) -> Answer:
        query = decode_signed_ingress(body, DEFAULT.max_ingress_bytes, now_ns=fx.TIME, request_type="query")
        outcome = QueryReplied(self.reply)
        signatures = () if self.signer is None else (
            sign_query_response(outcome, self.request_id or query.message_id, fx.TIME, self.signer),)
        if signatures:
            value = query_response_to_value(QueryResponse(outcome, signatures))
        else:
            value = {"status": "replied", "reply": {"arg": self.reply}, "signatures": []}
        if self.tamper is not None:
            value = self.tamper(value)
        return Answer(200, cbor.encode(value, self_describe=False))

    def close(self) -> None:
        pass


def _query(node: SigningNode):
    agent = Agent({fx.A: ["127.0.0.1:1"], fx.B: ["127.0.0.1:2"]}, Ed25519Identity.from_seed(b"asker"), fx.registry(),
                  clock=lambda: fx.TIME, failover_s=0.0)
    agent._http = node   # the transport is the one seam between the agent and the network
    return agent.query_call(5, "get")   # canister 5 is on subnet A


@pytest.mark.parametrize("index", range(1, fx.N + 1))
def test_an_answer_signed_by_any_node_of_the_subnet_is_taken(index):
    assert _query(SigningNode(_node(fx.A, index))) == 42


def _reply_changed(value):
    return {**value, "reply": {"arg": encode(43)}}


def _timestamp_changed(value):
    return {**value, "signatures": [{**value["signatures"][0], "timestamp": fx.TIME + 1}]}


@pytest.mark.parametrize("node, why", [
    (SigningNode(None), "at least one node signature"),
    (SigningNode(Ed25519Identity.from_seed(b"no node")), "not a node of the answering subnet"),
    (SigningNode(_node(fx.B, 1)), "not a node of the answering subnet"),
    (SigningNode(_node(fx.A, 1), request_id=bytes(32)), "does not sign this answer"),
    (SigningNode(_node(fx.A, 1), tamper=_reply_changed), "does not sign this answer"),
    (SigningNode(_node(fx.A, 1), tamper=_timestamp_changed), "does not sign this answer"),
], ids=["unsigned", "a key of no node", "a node of another subnet", "another request", "reply changed",
        "timestamp changed"])
def test_an_answer_not_signed_by_a_node_of_the_subnet_is_refused(node, why):
    with pytest.raises(QueryAnswerInvalid, match=why):
        _query(node)
