"""The ingress HTTP API over real HTTP on 127.0.0.1, as the IC's HTTP interface: every refusal
kind has its own status and reason (a plain-text message, the reason in ``X-Replica-Refusal``),
calls are answered 202 (v2) or with their certificate (v3, v4: on a subnet other than the root,
with the root subnet's delegation), queries are signed by the node and run on certified state,
read_state of a canister or a subnet proves what it is asked and shows a request's status to
its sender only, status states the root key, and the server starts and stops cleanly."""

from __future__ import annotations

import dataclasses
import socket
import time

import pytest

from replica.client.agent import Agent, error_for_answer
from replica.client.agent_errors import (
    CallRejected, CallTimeout, CanisterNotRouted, RequestRefused, UnexpectedAnswer,
)
from replica.client.http_transport import Answer
from replica.client.refusals import (
    CanisterNotOnSubnet, ExpiredIngress, IngressExpiryTooFar, IngressPoolFull, IngressRefused, IngressTooLarge,
    UnknownCanister, refusal_class,
)
from replica.client.subnet_ids import root_key_of
from replica.execution.codec import decode_reply
from replica.node.http_api import HttpApiServer
from replica.inprocess.http_apis import node_backend
from replica.ic import cbor
from replica.ic.bls import public_key_from_der, public_key_to_der
from replica.ic.canister_ranges import decode_canister_ranges
from replica.ic.certificate import decode_certificate, verify_certificate
from replica.ic.errors import (
    CanisterOutsideRanges, CertificateSignatureRefused, DelegationSubnetMismatch, QuerySignatureInvalid, QuerySignerUnknown,
)
from replica.ic.http_interface import REFUSAL_HEADER, decode_call_answer, decode_read_state_answer
from replica.ic.principal import Principal, canister_principal
from replica.ic.query_response import QueryReplied, QueryRejected, decode_query_response, verify_query_response
from replica.ic.request_id import request_id
from state_manager.hash_tree import Absent, Found, Leaf, lookup_path
from state_manager.state_tree import canister_label
from tests.integration.http_testnet import (
    ALICE, ALPHA, BETA, BOB, GREETER, PINGER, POOL_MESSAGES, SEC, agent_for, canister, canister_url, envelope,
    first_endpoints, get, post, query_envelope, read_state_envelope, running_http_testnet, subnet_id, subnet_url,
)
from tests.integration.harness import LIMITS

pytestmark = pytest.mark.timeout(120)
MAX_ANSWER = 1 << 24
CBOR_SELF_DESCRIBE = b"\xd9\xd9\xf7"


@pytest.fixture(scope="module")
def net():
    with running_http_testnet() as testnet:
        yield testnet


@pytest.fixture(scope="module")
def alpha_api(net) -> str:
    return first_endpoints(net)[ALPHA]


@pytest.fixture(scope="module")
def beta_api(net) -> str:
    return first_endpoints(net)[BETA]


@pytest.fixture(scope="module")
def agent(net):
    with agent_for(net) as client:
        yield client


def refused(response, status: int, reason: str) -> str:
    """A refusal as the IC answers it: the status, a plain-text message, the reason in its header."""
    assert response.status_code == status, response.text
    assert response.headers[REFUSAL_HEADER] == reason, response.headers
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text
    return response.text


def cbor_answer(response) -> bytes:
    """A 200 answer's CBOR body (behind the self-describe tag)."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/cbor"
    assert REFUSAL_HEADER not in response.headers
    return response.content


def message_id_of(data: bytes) -> bytes:
    return request_id(cbor.decode(data, max_bytes=len(data))["content"])


def revealed(tree, path: list[bytes]) -> bytes:
    """The leaf at ``path``, which the tree must reveal."""
    found = lookup_path(tree, path)
    assert isinstance(found, Found) and isinstance(found.tree, Leaf), (path, found)
    return found.tree.value


def raw_key(net, subnet: str) -> bytes:
    registry = net.current_registry
    return registry.public_key_for(subnet, registry.latest_version)


def root_key(net) -> bytes:
    """The root key: the first subnet's (alpha's) raw key."""
    return raw_key(net, ALPHA)


# -- every refusal kind: its own status and reason -------------------------------------------------

HOME = canister(ALPHA, GREETER)


def _with_signature(data: bytes, signature: bytes) -> bytes:
    return cbor.encode(dict(cbor.decode(data, max_bytes=len(data)), sender_sig=signature))


@pytest.mark.parametrize("name, body, url_canister, status, reason", [
    ("malformed", lambda: b"\x94garbage", HOME, 400, "malformed"),
    ("the former msgpack format", lambda: b"\x94\x01" + bytes(40), HOME, 400, "malformed"),
    ("bad signature", lambda: _with_signature(envelope(HOME), bytes(64)), HOME, 400, "bad_signature"),
    ("another sender's key", lambda: cbor.encode(dict(cbor.decode(envelope(HOME), max_bytes=1 << 16),
                                                      sender_pubkey=BOB.der_public_key)), HOME, 400, "bad_signature"),
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
    ("a read_state's envelope", lambda: read_state_envelope([[b"time"]]), HOME, 400, "wrong_request_type"),
])
@pytest.mark.parametrize("version", [2, 3, 4])
def test_each_refusal_has_its_status_and_reason(alpha_api, name, body, url_canister, status, reason, version):
    refused(post(alpha_api, canister_url(url_canister, "call", version), body()), status, reason)


def test_the_former_format_is_refused_naming_its_version(alpha_api):
    message = refused(post(alpha_api, canister_url(HOME, "call"), b"\x94\x01" + bytes(40)), 400, "malformed")
    assert "version-1" in message


def test_duplicate_is_409(alpha_api):
    data = envelope(HOME)
    response = post(alpha_api, canister_url(HOME, "call"), data)
    assert response.status_code == 202, response.text
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


_HOME_TEXT = canister_url(HOME, "call").split("/")[4]


@pytest.mark.parametrize("path, status, reason", [
    ("/api/v2/canister/01/call", 400, "invalid_canister_id"),
    ("/api/v2/canister/1/call", 400, "invalid_canister_id"),               # a number is no principal
    ("/api/v2/canister/18446744073709551616/call", 400, "invalid_canister_id"),
    ("/api/v2/canister/-1/query", 400, "invalid_canister_id"),
    ("/api/v2/canister/2vxsx-fae/call", 400, "invalid_canister_id"),       # the anonymous principal
    (f"/api/v2/canister/{_HOME_TEXT[:-1]}/read_state", 400, "invalid_canister_id"),   # a wrong checksum
    (f"/api/v2/canister/{_HOME_TEXT}/nothing", 404, "not_found"),
    (f"/api/v4/canister/{_HOME_TEXT}/query", 404, "not_found"),
    (f"/api/v4/canister/{_HOME_TEXT}/read_state", 404, "not_found"),
    (f"/api/v3/canister/{_HOME_TEXT}/dry_run", 404, "not_found"),
    (f"/api/v1/canister/{_HOME_TEXT}/call", 404, "not_found"),
    ("/api/v4/subnet/aaaaa-aa/read_state", 404, "not_found"),
    ("/api/v3/status", 404, "not_found"),
    ("/api/v2/status", 405, "method_not_allowed"),
])
def test_routes_and_canister_ids(alpha_api, path, status, reason):
    refused(post(alpha_api, path, b""), status, reason)


def test_every_refusal_reason_maps_back_to_its_class():
    for cls in IngressRefused.__subclasses__():
        assert refusal_class(cls.reason) is cls and 400 <= cls.status < 600
        error = error_for_answer(Answer(cls.status, b"why", cls.reason))
        assert type(error) is cls and str(error) == "why"
    other = error_for_answer(Answer(400, b"no", "path_not_allowed"))
    assert isinstance(other, RequestRefused) and other.status == 400 and other.reason == "path_not_allowed"
    assert other.message == "no"
    assert isinstance(error_for_answer(Answer(400, b"no reason given")), UnexpectedAnswer)
    assert isinstance(error_for_answer(Answer(302, b"", "duplicate")), UnexpectedAnswer)


def test_the_agent_raises_the_nodes_refusals(net, agent):
    with pytest.raises(UnknownCanister):
        agent.submit_call(canister(ALPHA, 500), "greet", "x")
    with agent_for(net, first_endpoints(net)[ALPHA]) as pinned, pytest.raises(CanisterNotOnSubnet):
        pinned.submit_call(canister(BETA, GREETER), "greet", "x")
    with agent_for(net, ingress_ttl_s=-5) as late, pytest.raises(ExpiredIngress):
        late.submit_call(HOME, "greet", "x")
    with agent_for(net, ingress_ttl_s=3600) as early, pytest.raises(IngressExpiryTooFar):
        early.submit_call(HOME, "greet", "x")
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
        with agent_for(net, address) as pinned, pytest.raises(IngressPoolFull):
            pinned.submit_call(HOME, "greet", "x")
    finally:
        server.stop()


# -- calls: accepted, or answered with their certificate -------------------------------------------------

def test_a_v2_call_is_accepted_with_an_empty_body(net, agent, alpha_api):
    data = envelope(HOME, arg="carol")
    response = post(alpha_api, canister_url(HOME, "call"), data)
    assert response.status_code == 202 and response.content == b"", response.text
    assert REFUSAL_HEADER not in response.headers
    # its message id is the envelope's request id: its sender polls its certified status by it
    assert agent.wait(message_id_of(data), HOME, timeout_s=20) == "hello, carol"


def test_a_v3_call_is_answered_with_its_certificate_in_one_round_trip(net, alpha_api):
    data = envelope(HOME, arg="frank")
    message_id = message_id_of(data)
    body = cbor_answer(post(alpha_api, canister_url(HOME, "call", 3), data))
    assert body.startswith(CBOR_SELF_DESCRIBE)
    answer = decode_call_answer(body, MAX_ANSWER)
    assert answer.status == "replied" and answer.certificate is not None
    verified = verify_certificate(answer.certificate, root_key=root_key(net), canister_id=canister_principal(HOME))
    assert verified.subnet_id is None and decode_certificate(answer.certificate).delegation is None  # the root subnet
    assert abs(verified.time_ns - time.time_ns()) < 60 * SEC
    assert revealed(verified.tree, [b"request_status", message_id, b"status"]) == b"replied"
    assert decode_reply(revealed(verified.tree, [b"request_status", message_id, b"reply"])) == "hello, frank"
    # under another key than the root key, it does not verify
    with pytest.raises(CertificateSignatureRefused):
        verify_certificate(answer.certificate, root_key=raw_key(net, BETA))
    # the same call again: answered with its certificate, not refused as a duplicate
    again = decode_call_answer(cbor_answer(post(alpha_api, canister_url(HOME, "call", 3), data)), MAX_ANSWER)
    repeated = verify_certificate(again.certificate, root_key=root_key(net))
    assert revealed(repeated.tree, [b"request_status", message_id, b"status"]) == b"replied"
    # ... though a v2 call of it is one
    refused(post(alpha_api, canister_url(HOME, "call", 2), data), 409, "duplicate")


def test_a_v3_call_that_is_rejected_is_answered_with_its_certificate(net, alpha_api):
    data = envelope(HOME, "fail", None)
    message_id = message_id_of(data)
    answer = decode_call_answer(cbor_answer(post(alpha_api, canister_url(HOME, "call", 3), data)), MAX_ANSWER)
    verified = verify_certificate(answer.certificate, root_key=root_key(net), canister_id=canister_principal(HOME))
    prefix = [b"request_status", message_id]
    assert revealed(verified.tree, prefix + [b"status"]) == b"rejected"
    assert revealed(verified.tree, prefix + [b"reject_code"]) == b"\x05"   # CANISTER_ERROR, LEB128
    assert "on purpose" in revealed(verified.tree, prefix + [b"reject_message"]).decode()
    assert isinstance(lookup_path(verified.tree, prefix + [b"reply"]), Absent)


def test_a_v4_call_on_another_subnet_carries_the_root_subnets_delegation(net, beta_api):
    target = canister(BETA, GREETER)
    beta = subnet_id(net, BETA)
    data = envelope(target, arg="grace")
    message_id = message_id_of(data)
    answer = decode_call_answer(cbor_answer(post(beta_api, canister_url(target, "call", 4), data)), MAX_ANSWER)
    assert answer.status == "replied"
    certificate = decode_certificate(answer.certificate)
    assert certificate.delegation is not None and certificate.delegation.subnet_id == beta
    # the root key alone verifies it: the delegation states beta's key, which signs the certificate
    verified = verify_certificate(answer.certificate, root_key=root_key(net), canister_id=canister_principal(target),
                                  subnet_id=beta)
    assert verified.subnet_id == beta
    assert revealed(verified.tree, [b"request_status", message_id, b"status"]) == b"replied"
    assert decode_reply(revealed(verified.tree, [b"request_status", message_id, b"reply"])) == "hello, grace"
    # the delegation: a certificate of the root subnet, stating beta's key and ranges in both layouts
    inner = verify_certificate(certificate.delegation.certificate, root_key=root_key(net))
    assert inner.subnet_id is None and decode_certificate(certificate.delegation.certificate).delegation is None
    assert public_key_from_der(revealed(inner.tree, [b"subnet", beta, b"public_key"])) == raw_key(net, BETA)
    ranges = ((canister_principal(1000), canister_principal(1999)),)
    assert decode_canister_ranges(revealed(inner.tree, [b"subnet", beta, b"canister_ranges"])) == ranges
    assert decode_canister_ranges(revealed(inner.tree, [b"canister_ranges", beta, canister_label(1000)])) == ranges
    # beta's own key is no root of trust, the delegation covers beta's canisters only, and is beta's
    with pytest.raises(CertificateSignatureRefused):
        verify_certificate(answer.certificate, root_key=raw_key(net, BETA))
    with pytest.raises(CanisterOutsideRanges):
        verify_certificate(answer.certificate, root_key=root_key(net), canister_id=canister_principal(HOME))
    with pytest.raises(DelegationSubnetMismatch):
        verify_certificate(answer.certificate, root_key=root_key(net), subnet_id=subnet_id(net, ALPHA))


def test_update_call_returns_the_verified_reply(agent):
    assert agent.update_call(HOME, "greet", "dave", timeout_s=20) == "hello, dave"
    assert agent.verified_height(ALPHA) > 0


def test_cross_subnet_call_returns_the_verified_reply(agent):
    assert agent.update_call(HOME, "ask", canister(BETA, GREETER), timeout_s=30) == "hello, friend"
    assert agent.update_call(canister(BETA, GREETER), "ask", HOME, timeout_s=30) == "hello, friend"
    assert agent.verified_height(BETA) > 0
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


def test_a_request_status_is_shown_to_its_sender_only(net, agent, alpha_api):
    message_id = agent.submit_call(HOME, "greet", "heidi")
    assert agent.wait(message_id, HOME, timeout_s=20) == "hello, heidi"
    paths = [[b"request_status", message_id, b"status"]]
    for other in (BOB, None):   # another user, the anonymous sender
        refused(post(alpha_api, canister_url(HOME, "read_state"), read_state_envelope(paths, key=other)), 403,
                "request_status_forbidden")
    with agent_for(net) as alice_again:
        assert alice_again.request_status(message_id, HOME).status == "replied"
    with Agent(first_endpoints(net), BOB, net.current_registry) as bob, pytest.raises(RequestRefused) as info:
        bob.request_status(message_id, HOME)
    assert (info.value.status, info.value.reason) == (403, "request_status_forbidden")
    answer = decode_read_state_answer(cbor_answer(post(alpha_api, canister_url(HOME, "read_state"),
                                                       read_state_envelope(paths))), MAX_ANSWER)
    verified = verify_certificate(answer, root_key=root_key(net))
    assert revealed(verified.tree, paths[0]) == b"replied"


# -- queries ------------------------------------------------------------------------------------------

def _node_keys(net, subnet: str) -> dict[Principal, bytes]:
    return {Principal(node.node_principal): node.signing_key for node in net.current_registry.latest().nodes_of(subnet)}


def test_queries_are_answered_signed_by_the_node(net, agent, alpha_api):
    agent.update_call(HOME, "greet", "erin", timeout_s=20)
    assert agent.query_call(HOME, "greeted") >= 1
    data = query_envelope(HOME)
    started = time.time_ns()
    response = decode_query_response(cbor_answer(post(alpha_api, canister_url(HOME, "query", 3), data)),
                                     max_bytes=MAX_ANSWER)
    assert isinstance(response.outcome, QueryReplied) and decode_reply(response.outcome.arg) >= 1
    verify_query_response(response, message_id_of(data), _node_keys(net, ALPHA))
    (signature,) = response.signatures
    alpha_node_1 = net.current_registry.latest().node("alpha-node-1")
    assert signature.identity == Principal(alpha_node_1.node_principal)
    assert started - 5 * SEC <= signature.timestamp <= time.time_ns() + 5 * SEC
    # an answer to another query, or under another subnet's node keys, does not verify
    with pytest.raises(QuerySignatureInvalid):
        verify_query_response(response, message_id_of(query_envelope(HOME)), _node_keys(net, ALPHA))
    with pytest.raises(QuerySignerUnknown):
        verify_query_response(response, message_id_of(data), _node_keys(net, BETA))
    rejected = decode_query_response(cbor_answer(post(alpha_api, canister_url(HOME, "query", 2),
                                                      query_envelope(HOME, "greet", "x"))), max_bytes=MAX_ANSWER)
    assert isinstance(rejected.outcome, QueryRejected) and rejected.outcome.reject_code == 5


def test_dry_runs_run_at_a_certified_height(net, alpha_api):
    data = query_envelope(HOME, "greet", "ivan")
    answer = cbor.decode(cbor_answer(post(alpha_api, canister_url(HOME, "dry_run"), data)), max_bytes=MAX_ANSWER)
    certified = net.subnets[ALPHA].nodes["alpha-node-1"].state_manager.latest_certified()[1].height
    assert 0 < answer["height"] <= certified
    assert answer["status"] == "replied" and decode_reply(answer["reply"]) == "hello, ivan"
    # a call's envelope is never taken for a dry run
    refused(post(alpha_api, canister_url(HOME, "dry_run"), envelope(HOME)), 400, "wrong_request_type")


def test_query_rejects_and_refusals(agent, alpha_api):
    with pytest.raises(CallRejected) as info:
        agent.query_call(HOME, "greet", "x")  # an update method
    assert info.value.code == "CANISTER_ERROR"
    for version in (2, 3):
        refused(post(alpha_api, canister_url(canister(BETA, GREETER), "query", version),
                     query_envelope(canister(BETA, GREETER))), 421, "canister_not_on_subnet")
        refused(post(alpha_api, canister_url(HOME, "query", version), query_envelope(HOME, expiry=1)), 400, "expired")
        refused(post(alpha_api, canister_url(HOME, "query", version),
                     query_envelope(HOME, expiry=time.time_ns() + LIMITS.max_ingress_ttl_ns + 60 * SEC)), 400,
                "expiry_too_far")
        refused(post(alpha_api, canister_url(HOME, "query", version), query_envelope(PINGER)), 400,
                "receiver_mismatch")
        refused(post(alpha_api, canister_url(HOME, "query", version), envelope(HOME, "greeted")), 400,
                "wrong_request_type")
        refused(post(alpha_api, canister_url(HOME, "query", version),
                     _with_signature(query_envelope(HOME), bytes(64))), 400, "bad_signature")


# -- read_state ---------------------------------------------------------------------------------------

def test_read_state_of_time_and_the_subnet_key(net, agent):
    alpha, beta = subnet_id(net, ALPHA), subnet_id(net, BETA)
    certificate = agent.read_state(HOME, [[b"time"], [b"subnet", alpha, b"public_key"],
                                          [b"subnet", beta, b"canister_ranges"], [b"canister_ranges", beta]])
    assert abs(certificate.time_ns - time.time_ns()) < 60 * SEC
    assert public_key_from_der(certificate.lookup_value([b"subnet", alpha, b"public_key"])) == raw_key(net, ALPHA)
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
    [[b"canister", canister_label(HOME), b"stable"]],
    [[b"request_status", b"short"]],
    [[b"request_status", bytes(32), b"nothing"]],
    [[b"subnet", b"alpha", b"nothing"]],
    [[b"metadata", b"prev_state_hash"]],
    [[b"time"], [b"ingress_history"]],   # one path not allowed refuses the read
])
def test_read_state_refuses_other_paths(alpha_api, paths):
    refused(post(alpha_api, canister_url(HOME, "read_state"), read_state_envelope(paths)), 400, "path_not_allowed")


@pytest.mark.parametrize("body", [
    lambda: b"", lambda: b"\xc1", lambda: read_state_envelope([]), lambda: read_state_envelope([[]]),
    lambda: cbor.encode({"content": {"request_type": "read_state", "sender": b"\x04", "paths": [["time"]],
                                     "ingress_expiry": time.time_ns() + 60 * SEC}}),
    lambda: cbor.encode({"content": {"request_type": "read_state", "sender": b"\x04", "path": [[b"time"]],
                                     "ingress_expiry": time.time_ns() + 60 * SEC}}),
    lambda: read_state_envelope([[b"time"]] * 1001),
    lambda: envelope(HOME),          # a call's envelope
    lambda: query_envelope(HOME),    # a query's
])
@pytest.mark.parametrize("version", [2, 3])
def test_read_state_refuses_malformed_requests(alpha_api, body, version):
    refused(post(alpha_api, canister_url(HOME, "read_state", version), body()), 400, "malformed_request")


@pytest.mark.parametrize("body, reason", [
    (lambda: _with_signature(read_state_envelope([[b"time"]]), bytes(64)), "bad_signature"),
    (lambda: read_state_envelope([[b"time"]], expiry=1), "expired"),
    (lambda: read_state_envelope([[b"time"]], expiry=time.time_ns() + LIMITS.max_ingress_ttl_ns + 60 * SEC),
     "expiry_too_far"),
])
def test_read_state_refuses_bad_credentials_and_expiry(alpha_api, body, reason):
    refused(post(alpha_api, canister_url(HOME, "read_state"), body()), 400, reason)


def test_read_state_before_any_certification_is_503(net):
    backend = node_backend(net.subnets[ALPHA], "alpha-node-1")
    server = HttpApiServer(dataclasses.replace(backend, certified=lambda: None))
    address = server.start()
    try:
        refused(post(address, canister_url(HOME, "read_state"), read_state_envelope([[b"time"]])), 503,
                "not_certified_yet")
        with agent_for(net, address, failover_s=0.5) as pinned, pytest.raises(RequestRefused) as info:
            pinned.read_state(HOME, [[b"time"]])
        assert info.value.reason == "not_certified_yet" and info.value.status == 503
    finally:
        server.stop()


# -- read_state of a subnet ---------------------------------------------------------------------------

@pytest.mark.parametrize("subnet", [ALPHA, BETA])
@pytest.mark.parametrize("key", [ALICE, None], ids=["alice", "anonymous"])
def test_subnet_read_state_of_its_public_key(net, subnet, key):
    api, own = first_endpoints(net)[subnet], subnet_id(net, subnet)
    paths = [[b"subnet", own, b"public_key"], [b"subnet", own, b"canister_ranges"], [b"time"]]
    for version in (2, 3):
        body = cbor_answer(post(api, subnet_url(own, version), read_state_envelope(paths, key=key)))
        certificate = decode_read_state_answer(body, MAX_ANSWER)
        verified = verify_certificate(certificate, root_key=root_key(net), subnet_id=own)
        assert verified.subnet_id == (None if subnet == ALPHA else own)   # beta's: through the delegation
        assert public_key_from_der(revealed(verified.tree, [b"subnet", own, b"public_key"])) == raw_key(net, subnet)
        assert revealed(verified.tree, [b"subnet", own, b"public_key"]) == public_key_to_der(raw_key(net, subnet))
        low, high = (0, 999) if subnet == ALPHA else (1000, 1999)
        assert decode_canister_ranges(revealed(verified.tree, [b"subnet", own, b"canister_ranges"])) == \
            ((canister_principal(low), canister_principal(high)),)
        assert abs(verified.time_ns - time.time_ns()) < 60 * SEC


def test_subnet_read_state_refusals(net, alpha_api):
    alpha, beta = subnet_id(net, ALPHA), subnet_id(net, BETA)
    good = read_state_envelope([[b"time"]])
    for text in ("not-a-principal", "aaaaa-aa", "2vxsx-fae", _HOME_TEXT, "01"):   # no subnet id, or another's
        refused(post(alpha_api, f"/api/v2/subnet/{text}/read_state", good), 400, "invalid_subnet_id")
    refused(post(alpha_api, subnet_url(beta), good), 400, "invalid_subnet_id")   # a foreign subnet
    refused(post(alpha_api, subnet_url(beta, 3), good), 400, "invalid_subnet_id")
    for paths in ([[b"request_status", bytes(32)]], [[b"canister", canister_label(HOME), b"module_hash"]],
                  [[b"time"], [b"request_status", bytes(32), b"status"]], [[b"subnet", alpha, b"nothing"]]):
        refused(post(alpha_api, subnet_url(alpha), read_state_envelope(paths)), 400, "path_not_allowed")
    refused(post(alpha_api, subnet_url(alpha), b"\xc1"), 400, "malformed_request")
    refused(post(alpha_api, subnet_url(alpha), read_state_envelope([])), 400, "malformed_request")
    refused(post(alpha_api, subnet_url(alpha), _with_signature(good, bytes(64))), 400, "bad_signature")


# -- status and lifecycle -----------------------------------------------------------------------------

def test_status(net, agent, alpha_api):
    status = agent.status(alpha_api)
    registry = net.current_registry
    assert status["root_key"] == public_key_to_der(root_key(net)) == root_key_of(registry.latest())
    assert public_key_from_der(status["root_key"]) == raw_key(net, ALPHA)
    assert status["replica_health_status"] == "healthy"
    assert status["impl_version"] == status["replica_version"] and status["replica_version"]
    assert status["subnet_id"] == ALPHA and status["node_id"] == "alpha-node-1"
    assert status["finalized_height"] >= status["certified_height"] > 0
    assert len(bytes.fromhex(status["certified_root"])) == 32
    assert bytes.fromhex(status["subnet_public_key"]) == raw_key(net, ALPHA)
    response = get(alpha_api, "/api/v2/status")
    assert cbor_answer(response).startswith(CBOR_SELF_DESCRIBE)


def test_every_node_serves_its_own_view(net):
    root = public_key_to_der(root_key(net))
    for subnet, nodes in net.http_endpoints.items():
        for node_id, address in nodes.items():
            with Agent(address, ALICE, net.current_registry) as pinned:
                status = pinned.status()
            assert (status["subnet_id"], status["node_id"]) == (subnet, node_id)
            assert status["root_key"] == root   # every subnet's nodes state the root subnet's key


def test_stop_closes_the_socket_and_joins_the_thread(net):
    server = HttpApiServer(node_backend(net.subnets[ALPHA], "alpha-node-2"))
    address = server.start()
    port = int(address.rsplit(":", 1)[1])
    refused(post(address, f"/api/v2/canister/{_HOME_TEXT}/nothing", b""), 404, "not_found")
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
