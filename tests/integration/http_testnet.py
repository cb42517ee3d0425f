"""A two-subnet testnet with every node's ingress HTTP API, stepped by a background ticker.

Canisters (the README's ``Greeter`` and the ping-pong example) on each subnet:
``GREETER`` and ``PINGER`` at offsets 1 and 2 of alpha's range (0-999) and beta's
(1000-1999). The ingress pools hold at most ``POOL_MESSAGES`` messages, so a test can fill
one while the ticker is paused. Routes and bodies are the IC's HTTP interface: ``canister_url``
and ``subnet_url`` name the routes, ``envelope``, ``query_envelope`` and ``read_state_envelope``
make signed IC envelopes (the anonymous sender's with ``key=None``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time

import httpx

from consensus_stub.genesis import SubnetSpec
from examples.ping_pong import PingPong
from replica.client import Identity, identity_from_seed, sign_ingress
from replica.client.agent import Agent
from replica.client.subnet_ids import subnet_principal_of
from replica.ic.envelope import encode_envelope, sign_envelope
from replica.ic.http_interface import canister_path, subnet_read_state_path
from replica.ic.principal import Principal, canister_principal, principal_to_text
from replica.execution import ExecutionEnvironment, install_canister
from replica.sdk import Canister, callback, query, update
from replica.inprocess.local import LocalTestnet
from tests.integration.harness import CONFIG, LIMITS, SEED

ALPHA, BETA = "alpha", "beta"
RANGES = {ALPHA: (0, 999), BETA: (1000, 1999)}
GREETER, PINGER = 1, 2
POOL_MESSAGES = 4
ALICE = identity_from_seed(b"alice-http")
BOB = identity_from_seed(b"bob-http")
SEC = 10**9


class Greeter(Canister):
    """The README's canister, plus a method that traps."""

    VERSION = 1

    @update
    def greet(self, name):
        self.stable["greeted"] = self.stable.get("greeted", 0) + 1
        return f"hello, {name}"

    @update
    def ask(self, other):
        self.call(other, "greet", "friend", on_reply=self.got, on_reject=self.failed)

    @callback
    def got(self, reply, context):
        self.reply(reply)

    @callback
    def failed(self, reject, context):
        code, message = reject
        self.reject(f"{code}: {message}")

    @update
    def fail(self):
        raise RuntimeError("greeter failed on purpose")

    @query
    def greeted(self):
        return self.stable.get("greeted", 0)


def canister(subnet: str, offset: int) -> int:
    return RANGES[subnet][0] + offset


def _setup(subnet: str, state) -> None:
    install_canister(state, canister(subnet, GREETER), Greeter)
    install_canister(state, canister(subnet, PINGER), PingPong)


def make_http_testnet() -> LocalTestnet:
    specs = [SubnetSpec(s, 4, (RANGES[s],)) for s in (ALPHA, BETA)]
    config = dataclasses.replace(CONFIG, ingress_pool_messages=POOL_MESSAGES)
    return LocalTestnet(specs, ExecutionEnvironment([Greeter, PingPong]), LIMITS, seed=SEED, setup=_setup,
                        config=config, http_api=True)


class Ticker:
    """Steps every subnet of ``net`` every ``interval_s`` on a thread; ``paused()`` holds it."""

    def __init__(self, net: LocalTestnet, interval_s: float = 0.02) -> None:
        self.net = net
        self.interval_s = interval_s
        self._hold = threading.Lock()
        self._stop = threading.Event()
        self.failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="ticker", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            with self._hold:
                try:
                    self.net.step()
                except BaseException as exc:  # noqa: BLE001 - reported by the test that stops us
                    self.failure = exc
                    return

    def start(self) -> "Ticker":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        if self.failure is not None:
            raise self.failure

    @contextlib.contextmanager
    def paused(self):
        with self._hold:
            yield

    def wait_for_heights(self, count: int, timeout_s: float = 20.0) -> None:
        """Until every subnet made ``count`` more heights."""
        start = {s: sub.height for s, sub in self.net.subnets.items()}
        deadline = time.monotonic() + timeout_s
        while any(sub.height < start[s] + count for s, sub in self.net.subnets.items()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"fewer than {count} heights in {timeout_s} s")
            time.sleep(0.01)


@contextlib.contextmanager
def running_http_testnet():
    """A started ``make_http_testnet()`` with its ``ticker`` running, stopped on exit."""
    testnet = make_http_testnet().start()
    testnet.ticker = Ticker(testnet).start()
    try:
        testnet.ticker.wait_for_heights(1)
        yield testnet
    finally:
        testnet.ticker.stop()
        testnet.stop()


def first_endpoints(net: LocalTestnet) -> dict[str, str]:
    """``{subnet: address of its first node's API}``."""
    return {subnet: next(iter(nodes.values())) for subnet, nodes in net.http_endpoints.items()}


def agent_for(net: LocalTestnet, endpoint: str | dict | None = None, **options) -> Agent:
    return Agent(endpoint if endpoint is not None else first_endpoints(net), ALICE, net.current_registry, **options)


_nonce = iter(range(1, 2**62))


def envelope(receiver: int, method: str = "greet", arg=None, *, key: Identity | None = ALICE,
             expiry: int | None = None, request_type: str = "call") -> bytes:
    expiry = time.time_ns() + 60 * SEC if expiry is None else expiry
    return sign_ingress(key, receiver, method, "bob" if arg is None else arg, next(_nonce), expiry,
                        request_type=request_type)


def query_envelope(receiver: int, method: str = "greeted", arg=None, **options) -> bytes:
    return envelope(receiver, method, arg, request_type="query", **options)


def read_state_envelope(paths, *, key: Identity | None = ALICE, expiry: int | None = None) -> bytes:
    """A read_state of ``paths`` signed by ``key`` (``None``: the anonymous sender)."""
    sender = Principal.anonymous() if key is None else key.principal
    content = {"request_type": "read_state", "sender": sender.raw, "paths": [list(path) for path in paths],
               "ingress_expiry": time.time_ns() + 60 * SEC if expiry is None else expiry,
               "nonce": next(_nonce).to_bytes(8, "big")}
    return encode_envelope(sign_envelope(content, key))


def canister_url(receiver: int, endpoint: str, version: int = 2) -> str:
    """``/api/v<version>/canister/<receiver's principal>/<endpoint>``."""
    return canister_path(version, principal_to_text(canister_principal(receiver).raw), endpoint)


def subnet_id(net: LocalTestnet, subnet: str) -> bytes:
    """The IC id (principal bytes) of ``subnet``."""
    return subnet_principal_of(net.current_registry.latest(), subnet)


def subnet_url(subnet_principal: bytes, version: int = 2) -> str:
    return subnet_read_state_path(version, principal_to_text(subnet_principal))


_client = httpx.Client(trust_env=False, timeout=10.0, verify=False)  # plain HTTP on 127.0.0.1


def post(address: str, path: str, body: bytes) -> httpx.Response:
    return _client.post(f"http://{address}{path}", content=body)


def get(address: str, path: str) -> httpx.Response:
    return _client.get(f"http://{address}{path}")
