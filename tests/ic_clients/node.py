"""Running the pinned JavaScript agent's scripts (``js/*.mjs``) from Python.

Each script reads one JSON document on stdin and writes one on stdout; a script that fails
writes ``{"error": ...}`` and exits 1. Every run has a time-out. When Node.js (20 or later) or
the installed packages are missing, ``JsClientsUnavailable`` says how to install them: the
interoperability tests fail with that message rather than skip.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
from typing import Any

JS_DIR = pathlib.Path(__file__).resolve().parent / "js"
MIN_NODE_MAJOR = 20
INSTALL_HINT = ("install Node.js 20 or later with npm, then run `make setup` "
                "(or `npm ci` in tests/ic_clients/js)")
DEFAULT_TIMEOUT_S = 180.0   # generous: a loaded machine runs the BLS sweeps slowly; a hang still ends


class JsClientsUnavailable(RuntimeError):
    """Node.js or the pinned packages are not installed."""


class JsScriptFailed(RuntimeError):
    """A script exited with an error, timed out, or printed no JSON."""


def node_binary() -> str:
    """The ``node`` to run, after checking its version and the installed packages."""
    node = shutil.which("node")
    if node is None:
        raise JsClientsUnavailable(f"no `node` on PATH: {INSTALL_HINT}")
    try:
        version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
        major = int(version.lstrip("v").split(".")[0])
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        raise JsClientsUnavailable(f"cannot tell the version of {node}: {exc}; {INSTALL_HINT}") from exc
    if major < MIN_NODE_MAJOR:
        raise JsClientsUnavailable(f"node {version} is older than {MIN_NODE_MAJOR}: {INSTALL_HINT}")
    if not (JS_DIR / "node_modules" / "@dfinity" / "agent" / "package.json").is_file():
        raise JsClientsUnavailable(f"{JS_DIR / 'node_modules'} lacks @dfinity/agent: {INSTALL_HINT}")
    return node


def run_script(script: str, payload: Any, *, timeout: float = DEFAULT_TIMEOUT_S, args: tuple[str, ...] = ()) -> Any:
    """The JSON ``script`` (a file in ``js/``) prints for ``payload``; ``JsScriptFailed`` if it fails."""
    command = [node_binary(), str(JS_DIR / script), *args]
    try:
        done = subprocess.run(command, input=json.dumps(payload), capture_output=True, text=True,
                              timeout=timeout, cwd=JS_DIR)
    except subprocess.TimeoutExpired as exc:
        raise JsScriptFailed(f"{script} did not finish within {timeout} s") from exc
    try:
        result = json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        raise JsScriptFailed(f"{script} exited {done.returncode} without JSON: {done.stdout[:500]!r} "
                             f"stderr: {done.stderr[-2000:]}") from exc
    if done.returncode != 0:
        raise JsScriptFailed(f"{script} exited {done.returncode}: {result.get('error')} stderr: {done.stderr[-2000:]}")
    return result
