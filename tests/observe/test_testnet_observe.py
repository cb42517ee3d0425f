"""A running ``replica testnet`` observed through its commands and its page: ``status --json``,
``trace --json`` and the live status page, rendered by a real headless Chromium.

One testnet (2 subnets x 2 nodes, 100 ms rounds) for the module: ping-pong installed on both
subnets from source, one cross-subnet ping made with ``--async``. The screenshot of the page
is kept in ``build/test-artifacts/status-page.png``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from replica.ic.textual_ids import canister_text, parse_canister

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "build" / "test-artifacts"
PING_PONG = ROOT / "examples" / "ping_pong.py"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _replica(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("REPLICA_TESTNET", None)
    env["REPLICA_HOME"] = str(cwd / "home")
    done = subprocess.run([sys.executable, "-m", "replica.cli", *args, "--dir", str(cwd / "net")], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=240)
    if done.returncode != 0:
        raise AssertionError(f"replica {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


@pytest.fixture(scope="module")
def testnet(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("observe")
    started = _replica(cwd, "testnet", "up", "--subnets", "2", "--nodes", "2", "--round-ms", "100")
    try:
        page = re.search(r"live status page: (http://127\.0\.0\.1:\d+/)", started.stdout)
        assert page is not None, started.stdout
        pingers = [parse_canister(_replica(cwd, "canister", "install", f"{PING_PONG}:PingPong", "--subnet", subnet)
                                  .stdout.strip()) for subnet in ("subnet-0", "subnet-1")]
        message_id = _replica(cwd, "call", canister_text(pingers[0]), "ping",
                              json.dumps({"target": pingers[1], "rounds": 1}), "--async").stdout.strip()
        yield {"cwd": cwd, "page": page.group(1), "pingers": pingers, "message_id": message_id}
    finally:
        _replica(cwd, "testnet", "down")


def _replied_trace(testnet) -> dict:
    for _ in range(50):
        trace = json.loads(_replica(testnet["cwd"], "trace", testnet["message_id"], "--json").stdout)
        if trace["status"] == "replied" and trace["certified"] and trace["certified"]["status"] == "replied":
            return trace
        time.sleep(0.2)
    raise AssertionError(f"not replied: {trace}")


def test_trace_and_status_commands_on_a_running_testnet(testnet):
    trace = _replied_trace(testnet)
    assert trace["found"] and trace["subnet"] == "subnet-0" and trace["canister"] == canister_text(testnet["pingers"][0])
    kinds = [(h["kind"], h["subnet"]) for h in trace["hops"]]
    for hop in [("routed", "subnet-0"), ("inducted", "subnet-1"), ("response", "subnet-1"), ("inducted", "subnet-0"),
                ("callback", "subnet-0"), ("replied", "subnet-0")]:
        assert hop in kinds, trace
    assert not trace["stuck"]
    replied = next(h for h in trace["hops"] if h["kind"] == "replied")
    assert trace["certified"]["height"] >= replied["height"]

    status = json.loads(_replica(testnet["cwd"], "testnet", "status", "--json", "--interval", "0.3").stdout)
    assert [r["subnet"] for r in status["subnets"]] == ["subnet-0", "subnet-1"]
    certified = status["certified"]
    # each subnet's IC principal beside its name, the same in the directory's view and the certified one
    principals = [r["principal"] for r in status["subnets"]]
    assert [s["principal"] for s in certified["subnets"]] == principals and len(set(principals)) == 2
    # each subnet's certified height covers what the trace saw on that subnet (with a process
    # per node the two subnets' heights move independently: compare each with its own hops)
    seen = {name: max(h["height"] for h in trace["hops"] if h["subnet"] == name) for name in ("subnet-0", "subnet-1")}
    assert seen["subnet-0"] >= replied["height"]
    for subnet in certified["subnets"]:
        assert subnet["error"] is None and subnet["nodes_up"] == subnet["nodes"] == 2
        assert subnet["certified_height"] >= seen[subnet["subnet"]] and subnet["rounds_per_s"] > 0
    pairs = {(s["source"], s["destination"]): s for s in certified["streams"]}
    assert set(pairs) == {("subnet-0", "subnet-1"), ("subnet-1", "subnet-0")}
    assert pairs[("subnet-0", "subnet-1")]["end"] >= 1    # the ping went out on this stream
    text = _replica(testnet["cwd"], "testnet", "status").stdout
    assert "subnet-0 -> subnet-1" in text and "rounds/s" in text


def test_status_page_serves_the_view(testnet):
    _replied_trace(testnet)
    view = httpx.get(testnet["page"] + "api/view", timeout=20, trust_env=False).json()
    assert not view["starting"] and view["certification"] == []    # no node diverged or sees a stall
    assert [s["subnet"] for s in view["subnets"]] == ["subnet-0", "subnet-1"]
    recent = {c["message_id"]: c for c in view["recent"]}
    assert recent[testnet["message_id"]]["status"] == "replied"
    assert recent[testnet["message_id"]]["canister"] == canister_text(testnet["pingers"][0])
    assert all(len(s["principal"]) == 63 for s in view["subnets"])
    trace = httpx.get(testnet["page"] + "api/trace", params={"id": testnet["message_id"]}, timeout=30,
                      trust_env=False).json()
    assert trace["found"] and trace["status"] == "replied"


@pytest.mark.skipif(CHROMIUM is None,
                    reason="needs Debian's chromium (make test installs it where it can: .ci/install-chromium)")
def test_status_page_renders_in_headless_chromium(testnet):
    _replied_trace(testnet)
    url = f"{testnet['page']}?trace={testnet['message_id']}"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    screenshot = ARTIFACTS / "status-page.png"
    screenshot.unlink(missing_ok=True)
    common = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--no-proxy-server", "--window-size=1100,1500", "--virtual-time-budget=6000",
              f"--user-data-dir={testnet['cwd'] / 'chromium'}"]
    dom = subprocess.run(common + ["--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    # rendered by the page's script from /api/view and /api/trace, not present in the served HTML
    for text in ("subnet-0 → subnet-1", "subnet-1 → subnet-0", 'class="stream"', "backlog", testnet["message_id"][:16],
                 "status: <b>replied</b>", "inducted on subnet-1", canister_text(testnet["pingers"][0])):
        assert text in html, text
    shot = subprocess.run(common + [f"--screenshot={screenshot}", url], capture_output=True, text=True, timeout=120)
    assert shot.returncode == 0 and screenshot.stat().st_size > 10_000, shot.stderr[-2000:]


def test_status_watch_repeats_until_interrupted(testnet):
    import signal

    env = dict(os.environ)
    env.pop("REPLICA_TESTNET", None)
    process = subprocess.Popen([sys.executable, "-m", "replica.cli", "testnet", "status", "--watch", "--json",
                                "--interval", "0.3", "--dir", str(testnet["cwd"] / "net")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines = []
    try:
        while sum(line == "}\n" for line in lines) < 2:   # each view is one indented JSON object
            line = process.stdout.readline()
            assert line, process.stderr.read()
            lines.append(line)
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    views = [json.loads(part) for part in re.split(r"(?m)^(?=\{$)", "".join(lines)) if part.strip()]
    assert len(views) >= 2
    heights = [v["certified"]["subnets"][0]["certified_height"] for v in views]
    assert heights == sorted(heights) and heights[-1] > heights[0]   # new certified heights each time
