"""Fixtures of the interoperability tests: the JavaScript agent (the tests fail, never skip,
when it is not installed) and icp-py-core's certificate code with its ``blst`` import served."""

from __future__ import annotations

import sys

import cbor2
import pytest

from tests.ic_clients import blst_standin
from tests.ic_clients.node import JsClientsUnavailable, JsScriptFailed, node_binary, run_script


@pytest.fixture(scope="session")
def js():
    """``js(script, payload)``: run a script of tests/ic_clients/js and return its JSON."""
    try:
        node_binary()
    except JsClientsUnavailable as exc:
        pytest.fail(f"the JavaScript IC agent is not installed: {exc}", pytrace=False)

    def run(script, payload, **kwargs):
        try:
            return run_script(script, payload, **kwargs)
        except JsScriptFailed as exc:
            pytest.fail(str(exc), pytrace=False)
    return run


class IcpCertificates:
    """icp-py-core's certificate module, verifying BLS through ``blst_standin``, trusting the
    root key ``trust`` names: the library reads its root key from a module constant, not from
    the agent it is handed (``Certificate.read_root_key``)."""

    def __init__(self, monkeypatch):
        from icp_certificate import certificate
        self.module = certificate
        self._monkeypatch = monkeypatch
        monkeypatch.setitem(sys.modules, "blst", blst_standin)

    def trust(self, der_root_key: bytes) -> None:
        self._monkeypatch.setattr(self.module, "IC_ROOT_KEY", der_root_key)

    def parse(self, data: bytes):
        return self.module.Certificate(cbor2.loads(data))

    def verify(self, data: bytes, canister_id: str) -> None:
        """The library's check of an answer about ``canister_id`` (what its agent calls)."""
        self.parse(data).assert_certificate_valid(canister_id)


@pytest.fixture
def icp_certificates(monkeypatch):
    return IcpCertificates(monkeypatch)
