"""Fuzzing every route of the ingress HTTP API over real HTTP: v2, v3 and v4 call, v2 and v3
query, v2 and v3 read_state of a canister and of the subnet, dry_run and status. Random bytes,
random CBOR values and envelopes of them, mutated envelopes, well-formed but hostile IC
envelopes (signed ones too), random read_state paths, random canister and subnet ids (bad
ones and foreign ones), wrong content lengths and huge bodies. The node never answers 500,
every refusal is the IC's (a status, a plain-text message) with its reason in
``X-Replica-Refusal``, every 200 is CBOR (a read_state's a certificate that verifies under the
root key and proves every path asked for), and it still serves calls with verified replies
afterwards."""

from __future__ import annotations

import dataclasses
import socket
import time
from urllib.parse import quote

import cbor2
import httpx
import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replica.ic import cbor
from replica.ic.certificate import verify_certificate
from replica.ic.envelope import sign_envelope
from replica.ic.http_interface import REFUSAL_HEADER, decode_call_answer, decode_read_state_answer, decode_status
from replica.ic.principal import canister_principal, principal_to_text
from replica.ic.query_response import decode_query_response
from replica.ic.request_id import request_id
from replica.client.answers import decode_dry_run_answer
from replica.node.http_api import HttpApiServer
from replica.inprocess.http_apis import node_backend
from state_manager.hash_tree import Unknown, lookup_path
from state_manager.state_tree import canister_label
from tests.integration.http_testnet import (
    ALICE, ALPHA, BETA, BOB, GREETER, SEC, agent_for, canister, canister_url, envelope, first_endpoints, get,
    post, read_state_envelope, running_http_testnet, subnet_id, subnet_url,
)
from tests.integration.harness import LIMITS
from tests.properties.test_bad_ingress import hostile_envelopes, raw

pytestmark = pytest.mark.timeout(300)

HOME = canister(ALPHA, GREETER)
_http = httpx.Client(trust_env=False, timeout=30.0, verify=False)  # plain HTTP on 127.0.0.1
MAX_ANSWER = 1 << 24
#: Every POST route: ``(version, kind)``; ``subnet`` is the subnet's read_state.
CALLS = [(2, "call"), (3, "call"), (4, "call")]
UNREPLICATED = [(2, "query"), (3, "query"), (2, "dry_run")]
READS = [(2, "read_state"), (3, "read_state"), (2, "subnet"), (3, "subnet")]
ROUTES = CALLS + UNREPLICATED + READS
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def net():
    with running_http_testnet() as testnet:
        yield testnet


@pytest.fixture(scope="module")
def api(net) -> str:
    return first_endpoints(net)[ALPHA]


@pytest.fixture(scope="module")
def ids(net) -> dict:
    """The subnets' ids and the root key."""
    registry = net.current_registry
    return {ALPHA: subnet_id(net, ALPHA), BETA: subnet_id(net, BETA),
            "root_key": registry.public_key_for(ALPHA, registry.latest_version)}


def url(ids: dict, route: tuple[int, str]) -> str:
    version, kind = route
    return subnet_url(ids[ALPHA], version) if kind == "subnet" else canister_url(HOME, kind, version)


def still_serving(net) -> None:
    with agent_for(net) as agent:
        assert agent.update_call(HOME, "greet", "after the fuzz", timeout_s=20) == "hello, after the fuzz"
        assert agent.update_call(canister(BETA, GREETER), "greet", "beta", timeout_s=20) == "hello, beta"
        assert agent.query_call(HOME, "greeted") >= 1


def answered_cleanly(response, ids: dict, route: tuple[int, str] | None = None, paths=None) -> None:
    """No 5xx but a 503; a refusal is plain text with its reason in the header; a 200 is the
    route's CBOR answer (a read_state's certificate verifies and proves ``paths``)."""
    assert response.status_code < 500 or response.status_code == 503, response.text
    if response.status_code >= 400:
        assert response.headers.get(REFUSAL_HEADER), response.headers
        assert response.headers["content-type"].startswith("text/plain") and response.text
        return
    if response.status_code == 202:
        assert route in CALLS, route
        return
    assert response.status_code == 200, response.status_code
    assert response.headers["content-type"] == "application/cbor"
    if route is None:
        return
    kind = route[1]
    if kind == "call":
        assert route[0] > 2
        answer = decode_call_answer(response.content, MAX_ANSWER)
        verify_certificate(answer.certificate, root_key=ids["root_key"])
    elif kind == "query":
        decode_query_response(response.content, max_bytes=MAX_ANSWER)
    elif kind == "dry_run":
        decode_dry_run_answer(response.content, MAX_ANSWER)
    else:
        certificate = decode_read_state_answer(response.content, MAX_ANSWER)
        verified = verify_certificate(certificate, root_key=ids["root_key"])
        for path in paths or ():
            assert not isinstance(lookup_path(verified.tree, list(path)), Unknown), path


# -- garbage ---------------------------------------------------------------------------------------

cbor_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.binary(max_size=40) | st.text(max_size=20)
    | st.floats(allow_nan=False),
    lambda children: st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=30,
)
msgpack_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.binary(max_size=40) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=30,
)


@FUZZ
@given(route=st.sampled_from(ROUTES), body=st.binary(max_size=300))
def test_random_bytes(api, ids, route, body):
    answered_cleanly(post(api, url(ids, route), body), ids, route)


@FUZZ
@given(route=st.sampled_from(ROUTES), value=cbor_values, tagged=st.booleans(), wrapped=st.booleans())
def test_random_cbor_values(api, ids, route, value, tagged, wrapped):
    """Any CBOR value, or an envelope ``{content: value}``, with or without the self-describe tag."""
    data = cbor2.dumps({"content": value} if wrapped else value, canonical=True)
    answered_cleanly(post(api, url(ids, route), cbor.SELF_DESCRIBE_PREFIX + data if tagged else data), ids, route)


@FUZZ
@given(route=st.sampled_from(ROUTES), value=msgpack_values)
def test_random_msgpack_values(api, ids, route, value):
    """The replica's former wire format: never understood, never a 500."""
    answered_cleanly(post(api, url(ids, route), msgpack.packb(value, use_bin_type=True)), ids, route)


@FUZZ
@given(route=st.sampled_from(CALLS + UNREPLICATED), position=st.integers(0, 10**6), byte=st.integers(0, 255),
       method=st.text(max_size=140), arg=msgpack_values)
def test_mutated_envelopes(api, ids, route, position, byte, method, arg):
    request_type = "query" if route in UNREPLICATED else "call"
    try:
        data = envelope(HOME, method or "greet", arg, request_type=request_type)
    except ValueError:  # an argument without a canonical encoding: mutate a plain one
        data = envelope(HOME, request_type=request_type)
    mutated = bytearray(data)
    mutated[position % len(mutated)] = byte
    answered_cleanly(post(api, url(ids, route), bytes(mutated)), ids, route)


@FUZZ
@given(route=st.sampled_from(ROUTES), data=hostile_envelopes())
def test_hostile_ic_envelopes(api, ids, route, data):
    answered_cleanly(post(api, url(ids, route), data), ids, route)


# -- read_state: hostile envelopes, random paths ------------------------------------------------------

_LABELS = st.sampled_from([b"time", b"request_status", b"canister", b"subnet", b"metadata", b"height", b"alpha",
                           b"public_key", b"module_hash", bytes(32), b"controllers", b"canister_ranges", b"node",
                           b"streams", b"header", b"messages", b"status", b"reply", b"certified_data",
                           canister_label(HOME), HOME.to_bytes(8, "big"), canister_principal(1000).raw]) \
    | st.binary(max_size=140)
_PATHS = st.lists(st.lists(_LABELS, max_size=10), max_size=70)


@st.composite
def hostile_read_states(draw, ids: dict):
    """read_state envelopes whose fields may be missing, mistyped or out of bounds, signed (by
    the sender or someone else), anonymous, or carrying credentials that are no one's."""
    good = {"request_type": "read_state", "sender": ALICE.principal.raw,
            "paths": [[b"time"], [b"subnet", ids[ALPHA], b"public_key"]],
            "ingress_expiry": time.time_ns() + 60 * SEC}
    content = {}
    for name, value in good.items():
        choice = draw(st.integers(0, 9))
        if choice < 6:
            content[name] = value
        elif choice < 8:
            content[name] = draw({"request_type": st.sampled_from(["call", "query", "read_state", ""]),
                                  "sender": st.sampled_from([b"\x04", BOB.principal.raw, b""]) | st.binary(max_size=30),
                                  "paths": _PATHS, "ingress_expiry": st.integers(-1, 2**65)}[name])
        elif choice < 9:
            content[name] = draw(cbor_values)
    if draw(st.booleans()):
        content["nonce"] = draw(st.binary(max_size=40) | cbor_values)
    signer = draw(st.sampled_from([ALICE, BOB, None]))
    try:
        value = sign_envelope(content, signer).to_value()
        request_id(content)
    except Exception:  # noqa: BLE001 - content no request id can be made of: sent unsigned
        value = {"content": content}
    if not draw(st.integers(0, 4)):
        value["sender_sig"] = draw(st.binary(max_size=80))
    if not draw(st.integers(0, 4)):
        value["sender_pubkey"] = draw(st.sampled_from([ALICE.der_public_key, BOB.der_public_key]) | st.binary(max_size=60))
    return raw(value)


@FUZZ
@given(route=st.sampled_from(READS), data=st.data())
def test_hostile_read_state_envelopes(api, ids, route, data):
    answered_cleanly(post(api, url(ids, route), data.draw(hostile_read_states(ids))), ids, route)


@FUZZ
@given(route=st.sampled_from(READS), paths=_PATHS, anonymous=st.booleans())
def test_random_read_state_paths(api, ids, route, paths, anonymous):
    """Well-signed reads of random paths: refused, or a certificate that proves every path."""
    response = post(api, url(ids, route), read_state_envelope(paths, key=None if anonymous else ALICE))
    answered_cleanly(response, ids, route, paths)


# -- random ids in routes ---------------------------------------------------------------------------

_PRINCIPALS = st.sampled_from([b"", b"\x04", canister_principal(1000).raw, canister_principal(500).raw]) \
    | st.binary(max_size=29)


@FUZZ
@given(text=st.text(max_size=70), principal=_PRINCIPALS, as_text=st.booleans(), route=st.sampled_from(ROUTES))
def test_random_canister_and_subnet_ids(api, ids, text, principal, as_text, route):
    """Any text, and any principal (no subnet's, another subnet's canister, the management
    canister, the anonymous principal) as the route's canister or subnet id."""
    version, kind = route
    named = quote(text, safe="") if as_text else principal_to_text(principal)
    path = f"/api/v{version}/subnet/{named}/read_state" if kind == "subnet" else \
        f"/api/v{version}/canister/{named}/{kind}"
    body = read_state_envelope([[b"time"]]) if route in READS else envelope(HOME)
    response = post(api, path, body)
    answered_cleanly(response, ids)
    if kind == "subnet" and response.status_code != 404:   # a text with "/" may be no route at all
        assert response.status_code == 400 and response.headers[REFUSAL_HEADER] == "invalid_subnet_id"


@pytest.mark.parametrize("version", [2, 3])
def test_a_foreign_or_bad_subnet_id_is_refused(net, api, ids, version):
    body = read_state_envelope([[b"time"]])
    for named in (principal_to_text(ids[BETA]), principal_to_text(ids[ALPHA])[:-1], principal_to_text(b""),
                  principal_to_text(canister_principal(HOME).raw), "x", principal_to_text(ids[ALPHA]).upper() + "a"):
        response = post(api, f"/api/v{version}/subnet/{named}/read_state", body)
        assert response.status_code == 400 and response.headers[REFUSAL_HEADER] == "invalid_subnet_id", named
    # and each subnet's node serves its own subnet's read_state only
    beta_api = first_endpoints(net)[BETA]
    answered_cleanly(post(beta_api, subnet_url(ids[BETA], version), body), ids, (version, "subnet"), [[b"time"]])
    response = post(beta_api, subnet_url(ids[ALPHA], version), body)
    assert response.status_code == 400 and response.headers[REFUSAL_HEADER] == "invalid_subnet_id"


@FUZZ
@given(method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"]),
       tail=st.text(max_size=30), body=st.binary(max_size=50))
def test_random_requests_on_status_and_unknown_routes(api, ids, method, tail, body):
    for path in ("/api/v2/status", f"/api/v2/{quote(tail, safe='/')}", f"/api/v3/{quote(tail, safe='/')}",
                 f"/api/v4/{quote(tail, safe='/')}"):
        response = _http.request(method, f"http://{api}{path}", content=body if method != "GET" else None)
        assert response.status_code < 500, response.text
        if response.status_code >= 400 and method != "HEAD":
            assert response.headers.get(REFUSAL_HEADER) and response.text
        if method == "GET" and path == "/api/v2/status":
            status = decode_status(response.content)
            assert status["subnet_id"] == ALPHA and status["root_key"]


# -- HTTP itself: content lengths, huge bodies ----------------------------------------------------------

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


def test_wrong_content_lengths_and_huge_bodies(net, api, ids, impatient):
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
    # an announced huge body is refused before it is read, on every route
    for route in ROUTES:
        started = time.monotonic()
        assert _statuses(_raw(api, _head(url(ids, route), 10**12))) == [413], route
        assert time.monotonic() - started < 3
    # a huge chunked body is refused once it passes the bound
    big = b"x" * (LIMITS.max_ingress_bytes + 100 * 1024)
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(big), big)
    request = (f"POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
               .encode() + chunked)
    assert _statuses(_raw(api, request)) == [413]
    for route in ROUTES:
        response = post(api, url(ids, route), big)
        assert response.status_code == 413 and response.headers[REFUSAL_HEADER] == "too_large", route
    still_serving(net)


def test_the_node_still_serves_after_the_fuzz(net, api, ids):
    still_serving(net)
    answered_cleanly(post(api, subnet_url(ids[ALPHA]), read_state_envelope([[b"time"]])), ids, (2, "subnet"),
                     [[b"time"]])
    v3 = post(api, canister_url(HOME, "call", 3), envelope(HOME, arg="v3"))
    answered_cleanly(v3, ids, (3, "call"))
    assert v3.status_code == 200


def test_a_failing_backend_is_a_500_with_a_reason_not_a_dead_server(net):
    """The one path to a 500 is a bug in the backend: answered, and the server goes on."""
    backend = node_backend(net.subnets[ALPHA], "alpha-node-3")

    def broken():
        raise KeyError("a bug")

    server = HttpApiServer(dataclasses.replace(backend, status=broken))
    address = server.start()
    try:
        failed = get(address, "/api/v2/status")
        assert failed.status_code == 500 and failed.headers[REFUSAL_HEADER] == "internal_error"
        assert failed.headers["content-type"].startswith("text/plain") and "a bug" not in failed.text
        with agent_for(net, address) as agent:  # and it goes on serving
            assert agent.read_state(1, [[b"time"]]).height > 0
    finally:
        server.stop()
