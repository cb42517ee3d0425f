"""Fuzzing every endpoint of the ingress HTTP API over real HTTP: random bytes, random msgpack
values, mutated envelopes, well-formed but hostile IC envelopes, random paths and canister ids,
wrong content lengths and huge bodies. The node never answers 500, every refusal is JSON with a reason, and it still
serves a valid call (with a verified reply) afterwards."""

from __future__ import annotations

import dataclasses
import socket
import time
from urllib.parse import quote

import httpx
import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replica.client.http_wire import canister_url, encode_read_state_request
from replica.node.http_api import HttpApiServer
from replica.inprocess.http_apis import node_backend
from state_manager.encoding import decode, encode
from state_manager.state_tree import canister_label
from tests.integration.http_testnet import (
    ALPHA, GREETER, agent_for, canister, envelope, first_endpoints, get, running_http_testnet, post,
)
from tests.integration.harness import LIMITS
from tests.properties.test_bad_ingress import hostile_envelopes

pytestmark = pytest.mark.timeout(180)

HOME = canister(ALPHA, GREETER)
_http = httpx.Client(trust_env=False, timeout=10.0, verify=False)  # plain HTTP on 127.0.0.1
ENDPOINTS = ("call", "query", "dry_run", "read_state")
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def net():
    with running_http_testnet() as testnet:
        yield testnet


@pytest.fixture(scope="module")
def api(net) -> str:
    return first_endpoints(net)[ALPHA]


def still_serving(net) -> None:
    with agent_for(net) as agent:
        assert agent.update_call(HOME, "greet", "after the fuzz", timeout_s=20) == "hello, after the fuzz"


def answered_cleanly(response) -> None:
    """Any status but a 5xx other than 503, and a refusal names its reason."""
    assert response.status_code < 500 or response.status_code == 503, response.text
    if response.status_code >= 400:
        answer = response.json()
        assert isinstance(answer["reason"], str) and isinstance(answer["message"], str)


msgpack_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.binary(max_size=40) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=30,
)


@FUZZ
@given(endpoint=st.sampled_from(ENDPOINTS), body=st.binary(max_size=300))
def test_random_bytes(api, endpoint, body):
    answered_cleanly(post(api, canister_url(HOME, endpoint), body))


@FUZZ
@given(endpoint=st.sampled_from(ENDPOINTS), value=msgpack_values)
def test_random_msgpack_values(api, endpoint, value):
    answered_cleanly(post(api, canister_url(HOME, endpoint), msgpack.packb(value, use_bin_type=True)))


@FUZZ
@given(endpoint=st.sampled_from(ENDPOINTS[:3]), position=st.integers(0, 10**6), byte=st.integers(0, 255),
       method=st.text(max_size=140), arg=msgpack_values)
def test_mutated_envelopes(api, endpoint, position, byte, method, arg):
    try:
        data = envelope(HOME, method or "greet", arg)
    except ValueError:  # an argument without a canonical encoding: mutate a plain one
        data = envelope(HOME)
    mutated = bytearray(data)
    mutated[position % len(mutated)] = byte
    answered_cleanly(post(api, canister_url(HOME, endpoint), bytes(mutated)))


@FUZZ
@given(endpoint=st.sampled_from(ENDPOINTS[:3]), data=hostile_envelopes())
def test_hostile_ic_envelopes(api, endpoint, data):
    answered_cleanly(post(api, canister_url(HOME, endpoint), data))


@FUZZ
@given(paths=st.lists(st.lists(st.sampled_from([b"time", b"request_status", b"canister", b"subnet", b"metadata",
                                                 b"height", b"alpha", b"public_key", b"module_hash", bytes(32),
                                                 b"controllers", b"canister_ranges", canister_label(HOME),
                                                 HOME.to_bytes(8, "big")]) | st.binary(max_size=140),
                                max_size=10), max_size=70))
def test_random_read_state_paths(api, paths):
    response = post(api, canister_url(HOME, "read_state"), encode({"paths": paths}))
    answered_cleanly(response)
    if response.status_code == 200:
        assert set(decode(response.content)) == {"certificate"}


@FUZZ
@given(text=st.text(max_size=30), endpoint=st.sampled_from(ENDPOINTS))
def test_random_canister_ids(api, text, endpoint):
    response = post(api, f"/api/v2/canister/{quote(text, safe='')}/{endpoint}", encode_read_state_request([[b"time"]]))
    answered_cleanly(response)


@FUZZ
@given(method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS"]), tail=st.text(max_size=30),
       body=st.binary(max_size=50))
def test_random_requests_on_status_and_unknown_routes(api, method, tail, body):
    for path in ("/api/v2/status", f"/api/v2/{quote(tail, safe='/')}"):
        response = _http.request(method, f"http://{api}{path}", content=body if method != "GET" else None)
        assert response.status_code < 500, response.text
        if method == "GET" and path == "/api/v2/status":
            assert response.json()["subnet_id"] == ALPHA


def _raw(address: str, request: bytes, *, close_write: bool = False, timeout_s: float = 5.0) -> bytes:
    """Send raw bytes; everything the server answers until it closes or goes quiet."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.sendall(request)
        if close_write:
            sock.shutdown(socket.SHUT_WR)
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except (TimeoutError, ConnectionResetError):
            pass
    return b"".join(chunks)


def _head(path: str, length: str | int, extra: str = "") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\nConnection: close\r\n{extra}\r\n").encode()


def _statuses(answer: bytes) -> list[int]:
    return [int(line.split()[1]) for line in answer.split(b"\r\n") if line.startswith(b"HTTP/1.")]


@pytest.fixture
def impatient(net):
    """alpha-node-2's API with a 0.3 s body timeout."""
    server = HttpApiServer(node_backend(net.subnets[ALPHA], "alpha-node-2"), body_timeout_s=0.3)
    yield server.start()
    server.stop()


def test_wrong_content_lengths_and_huge_bodies(net, api, impatient):
    path = canister_url(HOME, "call")
    # a body shorter than announced, then the client stops sending: the read times out (408)
    assert _statuses(_raw(impatient, _head(path, 100) + b"short")) == [408]
    # ... or closes its side: no 500, the connection just ends
    assert 500 not in _statuses(_raw(impatient, _head(path, 100) + b"short", close_write=True))
    # a body longer than announced: the rest is a malformed next request (refused by the parser)
    assert _statuses(_raw(api, _head(path, 3) + b"\x94garbage and more bytes")) == [400]
    assert _statuses(_raw(api, _head(path, 3).replace(b"Connection: close\r\n", b"") + b"\x94garbage")) == [400]
    # a content length that is not a number
    assert _statuses(_raw(api, _head(path, "12abc") + b"x" * 12)) == [400]
    # an announced huge body is refused before it is read
    started = time.monotonic()
    assert _statuses(_raw(api, _head(path, 10**12))) == [413]
    assert time.monotonic() - started < 3
    # a huge chunked body is refused once it passes the bound
    big = b"x" * (LIMITS.max_ingress_bytes + 100 * 1024)
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(big), big)
    request = (f"POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
               .encode() + chunked)
    assert _statuses(_raw(api, request)) == [413]
    for endpoint in ENDPOINTS:
        assert post(api, canister_url(HOME, endpoint), big).status_code == 413
    still_serving(net)


def test_the_node_still_serves_after_the_fuzz(net):
    still_serving(net)


def test_a_failing_backend_is_a_500_with_a_reason_not_a_dead_server(net):
    """The one path to a 500 is a bug in the backend: answered, and the server goes on."""
    backend = node_backend(net.subnets[ALPHA], "alpha-node-3")

    def broken():
        raise KeyError("a bug")

    server = HttpApiServer(dataclasses.replace(backend, status=broken))
    address = server.start()
    try:
        failed = get(address, "/api/v2/status")
        assert failed.status_code == 500 and failed.json()["reason"] == "internal_error"
        with agent_for(net, address) as agent:  # and it goes on serving
            assert agent.read_state(1, [[b"time"]]).height > 0
    finally:
        server.stop()
