"""The client side of the management canister: module specs, routing of management calls,
and ``replica canister install`` refusing bad input before any testnet is needed."""

from __future__ import annotations

import pytest

from replica.cli import main
from replica.client.agent import Agent
from replica.client.agent_errors import CanisterNotRouted
from replica.client.identity import Ed25519Identity
from replica.client.management import MANAGEMENT_CANISTER_ID, ModuleSpecError, read_module
from tests.golden import fixtures as fx


def test_read_module_reads_the_file_and_the_class_name(tmp_path):
    path = tmp_path / "dir:with:colons" / "app.py"
    path.parent.mkdir()
    path.write_text("class App: pass\n")
    assert read_module(f"{path}:App") == ("class App: pass\n", "App", path)
    assert read_module(f"{path}:Outer.Inner")[1] == "Outer.Inner"
    for spec, text in [("app.py", "not PATH.py:ClassName"), (f"{path}:", "not PATH.py:ClassName"),
                       (f"{path}:not-a-name", "not a Python class name"), (f"{tmp_path}/missing.py:App", "cannot read")]:
        with pytest.raises(ModuleSpecError, match=text):
            read_module(spec)


def test_management_calls_name_their_subnet_and_other_calls_may_only_confirm_theirs():
    a, b = fx.A, fx.B   # canisters 0-99 on a, 100-199 on b
    with Agent({a: "127.0.0.1:1", b: "127.0.0.1:2"}, Ed25519Identity.from_seed(b"t"), fx.registry()) as agent:
        assert agent.subnet_of(MANAGEMENT_CANISTER_ID, b) == b
        assert agent.endpoint_for(MANAGEMENT_CANISTER_ID, b) == "127.0.0.1:2"
        with pytest.raises(CanisterNotRouted, match="names the subnet"):
            agent.subnet_of(MANAGEMENT_CANISTER_ID)
        with pytest.raises(CanisterNotRouted, match="not in the registry"):
            agent.subnet_of(MANAGEMENT_CANISTER_ID, "subnet-z")
        assert agent.subnet_of(150) == agent.subnet_of(150, b) == b
        with pytest.raises(CanisterNotRouted, match=f"is on subnet {b}, not {a}"):
            agent.subnet_of(150, a)


def test_canister_install_refuses_a_bad_module_spec_before_reaching_a_testnet(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("REPLICA_HOME", str(tmp_path / "home"))
    assert main(["canister", "install", str(tmp_path / "missing.py") + ":App", "--dir", str(tmp_path)]) == 2
    assert "ModuleSpecError" in capsys.readouterr().err
    module = tmp_path / "app.py"
    module.write_text("x = 1\n")
    assert main(["canister", "install", f"{module}:App", "--dir", str(tmp_path / "none")]) == 2
    assert "testnet" in capsys.readouterr().err.lower()
