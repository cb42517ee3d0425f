"""Real IC agents against a running two-subnet testnet: icp-py-core and @dfinity/agent fetch the
root key from ``/api/v2/status``, call a Candid method on the root subnet and on the other one
(whose certificates carry the root subnet's delegation), query it and read the call's status —
every certificate verified by the library's own code, trusting only the root key it fetched."""

from __future__ import annotations

import contextlib
import sys
import threading

import pytest

from consensus_stub.genesis import SubnetSpec
from replica.execution import ExecutionEnvironment, install_canister
from replica.ic.principal import canister_principal, principal_to_text
from replica.inprocess.local import LocalTestnet
from replica.sdk import Canister, query, update
from tests.ic_clients import py_live
from tests.ic_clients.node import JsScriptFailed, run_script
from tests.integration.harness import CONFIG, LIMITS, SEED

ROOT, OTHER = "root", "subnet"   # the registry's first subnet (sorted by id) is the root subnet
RANGES = {ROOT: (0, 99), OTHER: (100, 199)}
GREETER = {ROOT: 7, OTHER: 107}
NAME = "ic agent"
#: Candid ``("ic agent")`` and ``("hello, ic agent")``: DIDL, no type table, one text argument.
ARG = b"DIDL\x00\x01\x71" + bytes([len(NAME)]) + NAME.encode()
REPLY = b"DIDL\x00\x01\x71" + bytes([len("hello, " + NAME)]) + ("hello, " + NAME).encode()
COUNT_ARG = b"DIDL\x00\x00"


class CandidGreeter(Canister):
    VERSION = 1

    @update(candid="(text) -> (text)")
    def greet(self, name):
        self.stable["greeted"] = self.stable.get("greeted", 0) + 1
        return f"hello, {name}"

    @query(candid="() -> (nat)")
    def greeted(self):
        return self.stable.get("greeted", 0)


def _setup(subnet: str, state) -> None:
    install_canister(state, GREETER[subnet], CandidGreeter)


@pytest.fixture(scope="module")
def testnet():
    specs = [SubnetSpec(s, 4, (RANGES[s],)) for s in (ROOT, OTHER)]
    net = LocalTestnet(specs, ExecutionEnvironment([CandidGreeter]), LIMITS, seed=SEED, setup=_setup,
                       config=CONFIG, http_api=True).start()
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(0.05):
            net.step()
    ticker = threading.Thread(target=tick, name="ticker", daemon=True)
    ticker.start()
    try:
        yield net
    finally:
        stop.set()
        ticker.join(timeout=30)
        net.stop()


def _url(net, subnet: str) -> str:
    return "http://" + next(iter(net.http_endpoints[subnet].values()))


def _text(canister: int) -> str:
    return principal_to_text(canister_principal(canister).raw)


@pytest.mark.parametrize("subnet", [ROOT, OTHER])
def test_icp_py_core_calls_queries_and_reads_status(testnet, subnet, monkeypatch):
    from icp_certificate import certificate
    monkeypatch.setattr(certificate, "IC_ROOT_KEY", certificate.IC_ROOT_KEY)   # py_live sets it from /api/v2/status
    monkeypatch.delitem(sys.modules, "blst", raising=False)
    report = py_live.run(_url(testnet, subnet), _text(GREETER[subnet]), "greet", ARG, query_method="greeted",
                         query_arg=COUNT_ARG, timeout_s=60)
    failed = {k: v for k, v in report.items() if isinstance(v, dict) and not v["ok"]}
    assert not failed, failed
    # the query's node signature checked under the node key the library read at
    # /subnet/<id>/node/<node>/public_key of a certificate it verified
    assert report["query_signed"]["signatures_verified"] and report["query_signed"]["reply"] == report["query"]["reply"]
    assert report["update"]["reply"] == [{"type": "text", "value": "hello, " + NAME}]   # Candid-decoded by the library
    assert report["call"]["certificate_verified"] and bytes.fromhex(report["call"]["reply"]) == REPLY
    assert report["request_status"]["certificate_verified"] and report["request_status"]["status"] in ("replied", b"replied")
    # the live node's certificate with one byte changed: refused by the library, every way
    expected = {"signature", "tree leaf"} | ({"delegation"} if subnet == OTHER else set())
    assert set(report["tampered"]["refused"]) == expected, report["tampered"]


@pytest.mark.parametrize("subnet", [ROOT, OTHER])
def test_dfinity_agent_calls_queries_and_reads_status(js, testnet, subnet):
    args = (_url(testnet, subnet), "--canister", _text(GREETER[subnet]), "--method", "greet", "--arg", ARG.hex(),
            "--query-method", "greeted", "--query-arg", COUNT_ARG.hex(), "--timeout-ms", "60000")
    try:
        report = run_script("live.mjs", {}, args=args, timeout=240)
    except JsScriptFailed as exc:
        pytest.fail(str(exc), pytrace=False)
    update = report["update"]
    assert update["ok"] and update["certificate_verified"] and update["status"] == "replied", update
    assert bytes.fromhex(update["reply"]) == REPLY
    query = report["query"]   # its node signature checked by the library (node keys from read_state)
    assert query["ok"] and query["signatures"] == 1 and query["signatures_verified"], query
    assert report["request_status"]["status"] == "replied" and report["request_status"]["certificate_verified"]
