"""The Node runner fails loudly, with the install command, when the packages are missing, and
bounds every script with a time-out."""

from __future__ import annotations

import pytest

from tests.ic_clients import node


def test_missing_packages_name_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setattr(node, "JS_DIR", tmp_path)
    with pytest.raises(node.JsClientsUnavailable, match="make setup.*npm ci"):
        node.node_binary()


def test_missing_node_names_the_install_command(monkeypatch):
    monkeypatch.setenv("PATH", "")
    with pytest.raises(node.JsClientsUnavailable, match="no `node` on PATH.*Node.js 20"):
        node.node_binary()


def test_a_script_that_fails_reports_its_error(js):
    with pytest.raises(node.JsScriptFailed, match="exited 1"):
        node.run_script("request_ids.mjs", {"contents": [{"n": 1}]})


def test_a_script_past_its_time_out_is_stopped(js, tmp_path, monkeypatch):
    installed = tmp_path / "node_modules" / "@dfinity" / "agent"
    installed.mkdir(parents=True)
    (installed / "package.json").write_text("{}")
    (tmp_path / "hang.mjs").write_text("setTimeout(() => {}, 60000);\n")
    monkeypatch.setattr(node, "JS_DIR", tmp_path)
    with pytest.raises(node.JsScriptFailed, match="did not finish within 0.5 s"):
        node.run_script("hang.mjs", {}, timeout=0.5)
