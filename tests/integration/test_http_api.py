"""The ingress HTTP API over real HTTP on 127.0.0.1: every refusal kind has its own status and
reason, calls are answered with verified certified replies (also across subnets), queries
run on certified state, read_state proves what it is asked, and the server starts and stops
cleanly."""

from __future__ import annotations

import dataclasses
import json
import socket
import time

import pytest

from replica.client.agent import Agent, error_for_answer
from replica.client.agent_errors import CallRejected, CallTimeout, CanisterNotRouted, RequestRefused
from replica.client.http_wire import canister_url, decode_query_answer, encode_read_state_request
from replica.client.refusals import (
    CanisterNotOnSubnet, ExpiredIngress, IngressExpiryTooFar, IngressPoolFull, IngressRefused, IngressTooLarge,
    UnknownCanister, refusal_class,
)
from replica.node.http_api import HttpApiServer
from replica.inprocess.http_apis import node_backend
from replica.ic.bls import public_key_from_der
from replica.ic.principal import canister_principal
from state_manager.encoding import decode, encode
from state_manager.ic_encoding import subnet_principal_bytes
from state_manager.state_tree import canister_label
from replica.ic import cbor
from replica.ic.request_id import request_id
from tests.integration.http_testnet import (
    ALICE, ALPHA, BETA, GREETER, PINGER, POOL_MESSAGES, SEC, agent_for, canister, envelope,
    first_endpoints, post, query_envelope, running_http_testnet,
)
from tests.integration.harness import LIMITS

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def net():
    with running_http_testnet() as testnet:
        yield testnet


@pytest.fixture(scope="module")
def alpha_api(net) -> str:
    return first_endpoints(net)[ALPHA]


@pytest.fixture(scope="module")
def agent(net):
    with agent_for(net) as client:
        yield client


def refused(response, status: int, reason: str) -> str:
    assert response.status_code == status, response.text
    answer = response.json()
    assert answer["reason"] == reason and answer["message"]
    return answer["message"]


# -- every refusal kind: its own status and reason -------------------------------------------------

HOME = canister(ALPHA, GREETER)


def _with_signature(data: bytes, signature: bytes) -> bytes:
    return cbor.encode(dict(cbor.decode(data, max_bytes=len(data)), sender_sig=signature))


@pytest.mark.parametrize("name, body, url_canister, status, reason", [
    ("malformed", lambda: b"\x94garbage", HOME, 400, "malformed"),
    ("bad signature", lambda: _with_signature(envelope(HOME), bytes(64)), HOME, 400, "bad_signature"),
    ("expired", lambda: envelope(HOME, expiry=time.time_ns() - SEC), HOME, 400, "expired"),
    ("expiry too far", lambda: envelope(HOME, expiry=time.time_ns() + LIMITS.max_ingress_ttl_ns + 60 * SEC), HOME,
     400, "expiry_too_far"),
    ("receiver mismatch", lambda: envelope(canister(ALPHA, PINGER)), HOME, 400, "receiver_mismatch"),
    ("too large", lambda: envelope(HOME, arg=b"x" * LIMITS.max_ingress_bytes), HOME, 413, "too_large"),
    ("body over the bound", lambda: b"\x00" * (LIMITS.max_ingress_bytes + 128 * 1024), HOME, 413, "too_large"),
    ("unknown canister", lambda: envelope(canister(ALPHA, 500)), canister(ALPHA, 500), 404, "unknown_canister"),
    ("not on this subnet", lambda: envelope(canister(BETA, GREETER)), canister(BETA, GREETER), 421,
     "canister_not_on_subnet"),
    ("a query's envelope", lambda: query_envelope(HOME), HOME, 400, "wrong_request_type"),
])
def test_each_refusal_has_its_status_and_reason(alpha_api, name, body, url_canister, status, reason):
    refused(post(alpha_api, canister_url(url_canister, "call"), body()), status, reason)


def test_duplicate_is_409(alpha_api):
    data = envelope(HOME)
    assert post(alpha_api, canister_url(HOME, "call"), data).status_code == 202
    refused(post(alpha_api, canister_url(HOME, "call"), data), 409, "duplicate")


def test_pool_full_is_503_and_passes_once_a_block_took_the_messages(net, alpha_api):
    net.ticker.wait_for_heights(2)  # blocks took what earlier tests submitted
    with net.ticker.paused():
        for _ in range(POOL_MESSAGES):
            response = post(alpha_api, canister_url(HOME, "call"), envelope(HOME))
            assert response.status_code == 202, response.text
        refused(post(alpha_api, canister_url(HOME, "call"), envelope(HOME)), 503, "pool_full")
    net.ticker.wait_for_heights(1)
    assert post(alpha_api, canister_url(HOME, "call"), envelope(HOME)).status_code == 202


@pytest.mark.parametrize("path, status, reason", [
    ("/api/v2/canister/01/call", 400, "invalid_canister_id"),
    ("/api/v2/canister/18446744073709551616/call", 400, "invalid_canister_id"),
    ("/api/v2/canister/-1/query", 400, "invalid_canister_id"),
    ("/api/v2/canister/1/nothing", 404, "not_found"),
    ("/api/v3/status", 404, "not_found"),
    ("/api/v2/status", 405, "method_not_allowed"),
])
def test_routes_and_canister_ids(alpha_api, path, status, reason):
    refused(post(alpha_api, path, b""), status, reason)


def test_every_refusal_reason_maps_back_to_its_class():
    for cls in IngressRefused.__subclasses__():
        assert refusal_class(cls.reason) is cls and 400 <= cls.status < 600
        error = error_for_answer(cls.status, json.dumps({"reason": cls.reason, "message": "why"}).encode())
        assert type(error) is cls and str(error) == "why"
    other = error_for_answer(400, json.dumps({"reason": "path_not_allowed", "message": "no"}).encode())
    assert isinstance(other, RequestRefused) and other.status == 400 and other.reason == "path_not_allowed"


def test_the_agent_raises_the_nodes_refusals(net, agent):
    with pytest.raises(UnknownCanister):
        agent.submit_call(canister(ALPHA, 500), "greet", "x")
    pinned = agent_for(net, first_endpoints(net)[ALPHA])
    with pytest.raises(CanisterNotOnSubnet):
        pinned.submit_call(canister(BETA, GREETER), "greet", "x")
    with pytest.raises(ExpiredIngress):
        agent_for(net, ingress_ttl_s=-5).submit_call(HOME, "greet", "x")
    with pytest.raises(IngressExpiryTooFar):
        agent_for(net, ingress_ttl_s=3600).submit_call(HOME, "greet", "x")
    with pytest.raises(IngressTooLarge):
        agent.submit_call(HOME, "greet", b"x" * LIMITS.max_ingress_bytes)
    with pytest.raises(CanisterNotRouted):
        agent.submit_call(10**9, "greet", "x")


def test_the_agent_raises_pool_full(net):
    backend = node_backend(net.subnets[ALPHA], "alpha-node-1")

    def full(ingress):
        raise IngressPoolFull("the pool is at its bound")

    server = HttpApiServer(dataclasses.replace(backend, submit=full))
    address = server.start()
    try:
        with pytest.raises(IngressPoolFull):
            agent_for(net, address).submit_call(HOME, "greet", "x")
    finally:
        server.stop()


# -- calls: accepted, then a verified certified answer ------------------------------------------------

def test_call_is_accepted_with_its_message_id(alpha_api):
    data = envelope(HOME, arg="carol")
    response = post(alpha_api, canister_url(HOME, "call"), data)
    assert response.status_code == 202
    content = cbor.decode(data, max_bytes=len(data))["content"]
    assert response.json() == {"message_id": request_id(content).hex(), "status": "accepted"}


def test_update_call_returns_the_verified_reply(agent):
    assert agent.update_call(HOME, "greet", "dave", timeout_s=20) == "hello, dave"
    assert agent.verified_height(ALPHA) > 0


def test_cross_subnet_call_returns_the_verified_reply(agent):
    assert agent.update_call(HOME, "ask", canister(BETA, GREETER), timeout_s=30) == "hello, friend"
    assert agent.update_call(canister(BETA, GREETER), "ask", HOME, timeout_s=30) == "hello, friend"
    counts = agent.update_call(canister(ALPHA, PINGER), "ping", {"target": canister(BETA, PINGER), "rounds": 2},
                               timeout_s=30)
    assert counts["pongs_received"] >= 2


def test_reject_codes_reach_the_caller_unchanged(agent):
    with pytest.raises(CallRejected) as trapped:
        agent.update_call(HOME, "fail", timeout_s=20)
    assert trapped.value.code == "CANISTER_ERROR" and "on purpose" in trapped.value.message
    with pytest.raises(CallRejected) as rejected:
        agent.update_call(HOME, "ask", canister(BETA, 700), timeout_s=30)  # no such canister on beta
    assert rejected.value.code == "CANISTER_REJECT" and "3:" in rejected.value.message  # DESTINATION_INVALID


def test_request_status_of_an_unknown_message_is_unknown(agent):
    status = agent.request_status(bytes(32), HOME)
    assert status.status == "unknown" and status.certificate.height > 0
    with pytest.raises(CallTimeout):
        agent.wait(bytes(32), HOME, timeout_s=0.3)


# -- queries ------------------------------------------------------------------------------------------

def test_query_answers_at_a_certified_height(net, agent, alpha_api):
    agent.update_call(HOME, "greet", "erin", timeout_s=20)
    assert agent.query_call(HOME, "greeted") >= 1
    answer = decode_query_answer(post(alpha_api, canister_url(HOME, "query"), query_envelope(HOME)).content,
                                 10**6)
    certified = net.subnets[ALPHA].nodes["alpha-node-1"].state_manager.latest_certified()[1].height
    assert answer.replied and 0 < answer.height <= certified


def test_query_rejects_and_refusals(agent, alpha_api):
    with pytest.raises(CallRejected) as info:
        agent.query_call(HOME, "greet", "x")  # an update method
    assert info.value.code == "CANISTER_ERROR"
    refused(post(alpha_api, canister_url(canister(BETA, GREETER), "query"), query_envelope(canister(BETA, GREETER))),
            421, "canister_not_on_subnet")
    refused(post(alpha_api, canister_url(HOME, "query"), query_envelope(HOME, expiry=1)), 400, "expired")
    refused(post(alpha_api, canister_url(HOME, "query"), query_envelope(PINGER)), 400, "receiver_mismatch")
    refused(post(alpha_api, canister_url(HOME, "query"), envelope(HOME, "greeted")), 400, "wrong_request_type")


# -- read_state ---------------------------------------------------------------------------------------

def test_read_state_of_time_and_the_subnet_key(net, agent):
    registry = net.current_registry
    alpha, beta = (subnet_principal_bytes(registry.public_key_for(s, registry.latest_version)) for s in (ALPHA, BETA))
    certificate = agent.read_state(HOME, [[b"time"], [b"subnet", alpha, b"public_key"],
                                          [b"subnet", beta, b"canister_ranges"], [b"canister_ranges", beta]])
    assert abs(certificate.time_ns - time.time_ns()) < 60 * SEC
    assert public_key_from_der(certificate.lookup_value([b"subnet", alpha, b"public_key"])) == \
        registry.public_key_for(ALPHA, registry.latest_version)
    beta_ranges = ((canister_principal(1000), canister_principal(1999)),)
    assert certificate.lookup_value([b"subnet", beta, b"canister_ranges"]) == beta_ranges
    assert certificate.lookup_value([b"canister_ranges", beta, canister_label(1000)]) == beta_ranges
    module_hash = agent.read_state(HOME, [[b"canister", canister_label(HOME), b"module_hash"],
                                          [b"canister", canister_label(HOME), b"controllers"]])
    assert len(module_hash.lookup_value([b"canister", canister_label(HOME), b"module_hash"])) == 32
    # installed at genesis: no controller (a user's create_canister would make the user one)
    assert module_hash.lookup_value([b"canister", canister_label(HOME), b"controllers"]) == ()


@pytest.mark.parametrize("paths", [
    [[b"streams"]],
    [[b"time", b"x"]],
    [[b"canister", canister_label(5), b"module_hash"]],   # another canister
    [[b"canister", HOME.to_bytes(8, "big"), b"module_hash"]],   # not a principal
    [[b"request_status", b"short"]],
    [[b"subnet", b"alpha"]],
    [[b"metadata", b"prev_state_hash"]],
])
def test_read_state_refuses_other_paths(alpha_api, paths):
    refused(post(alpha_api, canister_url(HOME, "read_state"), encode_read_state_request(paths)), 400,
            "path_not_allowed")


@pytest.mark.parametrize("body", [b"", b"\xc1", encode({"paths": []}), encode({"paths": [[]]}),
                                  encode({"paths": [["time"]]}), encode({"path": [[b"time"]]}),
                                  encode({"paths": [[b"time"]] * 65})])
def test_read_state_refuses_malformed_requests(alpha_api, body):
    refused(post(alpha_api, canister_url(HOME, "read_state"), body), 400, "malformed_request")


def test_read_state_before_any_certification_is_503(net):
    backend = node_backend(net.subnets[ALPHA], "alpha-node-1")
    server = HttpApiServer(dataclasses.replace(backend, certified=lambda: None))
    address = server.start()
    try:
        refused(post(address, canister_url(HOME, "read_state"), encode_read_state_request([[b"time"]])), 503,
                "not_certified_yet")
        with pytest.raises(RequestRefused) as info:
            agent_for(net, address).read_state(HOME, [[b"time"]])
        assert info.value.reason == "not_certified_yet" and info.value.status == 503
    finally:
        server.stop()


# -- status and lifecycle -----------------------------------------------------------------------------

def test_status(net, agent, alpha_api):
    status = agent.status(alpha_api)
    registry = net.current_registry
    assert status["subnet_id"] == ALPHA and status["node_id"] == "alpha-node-1"
    assert status["finalized_height"] >= status["certified_height"] > 0
    assert len(bytes.fromhex(status["certified_root"])) == 32
    assert bytes.fromhex(status["subnet_public_key"]) == registry.public_key_for(ALPHA, registry.latest_version)
    assert status["replica_version"]


def test_every_node_serves_its_own_view(net):
    for subnet, nodes in net.http_endpoints.items():
        for node_id, address in nodes.items():
            status = Agent(address, ALICE, net.current_registry).status()
            assert (status["subnet_id"], status["node_id"]) == (subnet, node_id)


def test_stop_closes_the_socket_and_joins_the_thread(net):
    server = HttpApiServer(node_backend(net.subnets[ALPHA], "alpha-node-2"))
    address = server.start()
    port = int(address.rsplit(":", 1)[1])
    assert post(address, "/api/v2/canister/1/nothing", b"").status_code == 404
    assert server.running
    server.stop()
    assert not server.running
    with socket.socket() as probe:  # nothing listens there any more (closed connections may linger)
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))
        probe.listen()
    server.stop()  # idempotent
    with pytest.raises(RuntimeError):
        busy = HttpApiServer(node_backend(net.subnets[ALPHA], "alpha-node-2"))
        busy.start()
        try:
            busy.start()
        finally:
            busy.stop()
