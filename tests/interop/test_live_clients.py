"""The live client scripts (``tests/ic_clients``: ``js/live.mjs`` and ``py_live``) run end to end
against the stand-in ingress API (``stub_ingress``), so they are known to work before the
real server lands; the lead's live tests run them against a testnet."""

from __future__ import annotations

import sys

import pytest

from tests.ic_clients import py_live
from tests.ic_clients.node import JsScriptFailed, run_script

from .network import IN_RANGE, ROOT
from .stub_ingress import StubIngress


@pytest.fixture(params=[True, False], ids=["tagged", "untagged"])
def stub(request):
    """The stand-in ingress API, its answers with and without CBOR's self-describe tag."""
    server = StubIngress(self_describe=request.param)
    yield server
    server.stop()


def test_agent_js_live_script(js, stub):
    args = (stub.url, "--canister", str(IN_RANGE), "--method", "echo", "--arg", b"DIDL\x00\x00hi".hex(),
            "--timeout-ms", "60000")
    try:
        report = run_script("live.mjs", {}, args=args, timeout=180)
    except JsScriptFailed as exc:
        pytest.fail(f"{exc}; endpoints seen: {stub.seen}", pytrace=False)
    assert report["status"]["root_key"] == ROOT.der_key.hex()
    update = report["update"]
    assert update["ok"] and update["via"] == "polled read_state" and update["certificate_verified"]
    assert update["status"] == "replied" and update["reply"] == b"DIDL\x00\x00hi".hex()
    assert report["query"]["ok"] and report["query"]["signatures_verified"] and report["query"]["signatures"] == 1
    assert report["request_status"]["status"] == "replied" and report["request_status"]["certificate_verified"]
    canister = f"/api/v{{}}/canister/{IN_RANGE}"
    assert f"POST {canister.format(3)}/call" in stub.seen and f"POST {canister.format(2)}/query" in stub.seen
    assert f"POST {canister.format(2)}/read_state" in stub.seen and "GET /api/v2/status" in stub.seen


def run_py_live(stub, monkeypatch, arg: bytes) -> dict:
    from icp_certificate import certificate
    monkeypatch.setattr(certificate, "IC_ROOT_KEY", certificate.IC_ROOT_KEY)   # py_live sets it: undone after
    monkeypatch.delitem(sys.modules, "blst", raising=False)                    # likewise its blst
    return py_live.run(stub.url, str(IN_RANGE), "echo", arg, timeout_s=60)


def failures(report: dict) -> dict:
    return {k: v for k, v in report.items() if isinstance(v, dict) and not v["ok"]}


def test_icp_py_core_live_module(stub, monkeypatch):
    arg = b"DIDL\x00\x00"   # Candid's empty tuple: the library decodes replies that look like Candid
    report = run_py_live(stub, monkeypatch, arg)
    failed = failures(report)
    if stub.self_describe:
        # cbor2 6 (our pin) decodes what follows the self-describe tag as frozendicts and
        # tuples; icp-py-core 2.3.1 wants the query's signatures as a list, finds none and gives
        # up. Under cbor2 5 it got a list. Only its opt-in query signature check is affected.
        assert failed.pop("query_signed")["error"]["name"] == "MissingSignature"
    assert not failed, f"{failed}; endpoints seen: {stub.seen}"
    assert report["status"]["root_key"] == ROOT.der_key.hex()
    assert report["update"]["reply"] == [] and report["query"]["reply"] == []
    assert report["call"]["reply"] == arg.hex() and report["call"]["certificate_verified"]
    assert report["request_status"]["status"] == "replied" and report["request_status"]["reply"] == arg.hex()
    assert stub.self_describe or report["query_signed"]["signatures_verified"]
    canister = f"/api/v{{}}/canister/{IN_RANGE}"
    assert f"POST {canister.format(4)}/call" in stub.seen and f"POST {canister.format(3)}/query" in stub.seen
    assert f"POST {canister.format(3)}/read_state" in stub.seen
    assert stub.self_describe or f"POST /api/v3/subnet/{ROOT.principal}/read_state" in stub.seen


def test_icp_py_core_update_raw_decodes_every_reply_as_candid(monkeypatch):
    """``update_raw`` hands a reply to the Candid decoder whatever it is; ``query_raw`` only
    when it starts with ``DIDL``. The live module's ``call`` step keeps the raw reply."""
    stub = StubIngress()
    try:
        report = run_py_live(stub, monkeypatch, b"not candid")
    finally:
        stub.stop()
    assert report["update"]["error"] == {"name": "ValueError", "message": "Invalid prefix"}
    assert report["call"]["reply"] == b"not candid".hex() and report["query"]["reply"] == b"not candid".hex()
