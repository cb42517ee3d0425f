"""``replica testnet``: one process per subnet on 127.0.0.1, demo traffic across them,
then settle and check the ledgers' supply."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from consensus_stub.registry import decode_registry
from replica.testnet import launcher as tn
from replica.processes import process_models
from replica.processes import supervisor as sv
from replica.audit.run_log import load_run_log

pytestmark = pytest.mark.timeout(180)


def test_two_subnet_processes_exchange_traffic_and_settle(tmp_path):
    layout = tn.create_testnet(tmp_path / "net", 2, 2, seed=b"launcher-test-seed-of-32-bytes!!", tick_s=0.1, process_model="subnet")
    out = io.StringIO()
    assert sv.launch(layout.root, duration_s=2.0, settle_timeout_s=60, stream=out) == 0, out.getvalue()
    assert "invariant holds" in out.getvalue()
    statuses = {s: json.loads(layout.status(s).read_text()) for s in ("subnet-0", "subnet-1")}
    for status in statuses.values():
        assert status["height"] > 0 and status["certified_height"] == status["height"]
        assert status["xnet_inducted"] > 0 and status["critical_errors"] == 0
    registry = decode_registry(layout.registry.read_bytes())
    assert all(n.xnet_address.startswith("127.0.0.1:") for n in registry.latest().nodes)
    assert layout.blocks("subnet-0").stat().st_size > 0
    # the run is recorded for a determinism audit (and it replays to the live hashes)
    assert f"replica audit {layout.run}" in out.getvalue()
    run = load_run_log(layout.run)
    assert run.subnet_ids() == ("subnet-0", "subnet-1")
    assert run.subnet("subnet-0").height >= statuses["subnet-0"]["height"]
    with pytest.raises(tn.TestnetError):
        tn.create_testnet(layout.root, 2, 2, seed=b"launcher-test-seed-of-32-bytes!!", process_model="subnet")


def test_a_directory_without_a_testnet_is_refused(tmp_path):
    with pytest.raises(tn.TestnetError):
        sv.launch(tmp_path, duration_s=0)
    assert not tn.TestnetLayout(tmp_path).manifest.exists()


# -- supervision: restarts, refusals, signals ------------------------------------------------

SEED = b"launcher-test-seed-of-32-bytes!!"


def _alive(pid: int) -> bool:
    """``pid`` is a running subnet or node process (not a pid the system has since reused)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
        with open(f"/proc/{pid}/stat", "rb") as f:
            zombie = f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except OSError:
        return False
    ours = b"replica.processes.subnet_process" in cmdline or b"replica.cli\x00node\x00run" in cmdline
    return ours and not zombie


def _kill_survivors(pids) -> None:
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _wait_for(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def test_a_subnet_process_killed_during_traffic_is_restarted_and_nothing_is_lost(tmp_path):
    """SIGKILL subnet-1's process mid-traffic; the launcher restarts it (block log re-executed,
    new ports published), the run continues until Ctrl-C (SIGINT: settle). Checked invariants:
    the ledgers' supply (no transfer lost or doubled across the restart); every ping call
    finished (no open call context) with pings sent = pongs sent = pongs received over both
    subnets (each request inducted exactly once, each reply exactly once); streams
    acknowledged both ways (quiescence needs the peer to have fetched from the new ports);
    and the run log, rebuilt by the restarted process, replays to its hashes."""
    layout = tn.create_testnet(tmp_path / "net", 2, 2, seed=SEED, tick_s=0.1, process_model="subnet")
    out = io.StringIO()
    seen: dict = {}
    finished = threading.Event()

    def status(subnet):
        return layout.read_json(layout.status(subnet)) or {}

    def kill_then_interrupt():
        try:
            first = _wait_for(lambda: all(status(s).get("xnet_inducted") for s in ("subnet-0", "subnet-1"))
                              and status("subnet-1").get("height", 0) >= 10, 90, "traffic between the subnets")
            assert first
            pid = int(layout.pid("subnet-1").read_text())
            seen["killed"] = (pid, status("subnet-1")["height"])
            os.kill(pid, signal.SIGKILL)
            _wait_for(lambda: layout.pid("subnet-1").exists() and int(layout.pid("subnet-1").read_text()) != pid,
                      60, "the restart")
            seen["restarted"] = int(layout.pid("subnet-1").read_text())
            _wait_for(lambda: status("subnet-1").get("height", 0) >= seen["killed"][1] + 10, 90,
                      "the restarted process to make heights")
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            seen["error"] = exc
        finally:
            if not finished.is_set():
                os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C: settle and stop

    thread = threading.Thread(target=kill_then_interrupt, daemon=True)
    thread.start()
    try:
        code = sv.launch(layout.root, duration_s=None, settle_timeout_s=90, stream=out)
    finally:
        finished.set()
        thread.join(timeout=5)
    assert "error" not in seen, (seen, out.getvalue())
    assert code == 0, out.getvalue()
    text = out.getvalue()
    killed_pid, killed_height = seen["killed"]
    assert f"the process of subnet-1 (pid {killed_pid}) exited with signal SIGKILL; restarting" in text
    assert f"restarted subnet-1 as pid {seen['restarted']}" in text and "interrupted: settling" in text
    assert "invariant holds" in text and "restarted 1x" in text
    assert "launcher: the process of subnet-1" in layout.log("subnet-1").read_text()
    assert not _alive(killed_pid) and not _alive(seen["restarted"])
    assert not list((layout.root / "pids").iterdir())

    statuses = {s: json.loads(layout.status(s).read_text()) for s in ("subnet-0", "subnet-1")}
    assert statuses["subnet-1"]["height"] > killed_height + 5
    assert tn.quiescent(statuses)
    assert tn.total_supply(statuses) == 2 * tn.INITIAL_BALANCE
    pings = [s["pings"] for s in statuses.values()]
    sent = sum(p["pings_sent"] for p in pings)
    assert sent > 0
    assert sent == sum(p["pongs_sent"] for p in pings) == sum(p["pongs_received"] for p in pings)
    assert all(s["critical_errors"] == 0 for s in statuses.values())
    run = load_run_log(layout.run)  # written by the launcher after replaying the recordings
    for subnet, s in statuses.items():
        assert run.subnet(subnet).height >= s["height"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_stopping_the_launcher_stops_every_node_process(tmp_path, sig):
    """``replica testnet`` as its own process: SIGTERM stops every node process it started
    (exit 143); after SIGKILL the node processes notice their launcher is gone and stop."""
    root = tmp_path / "net"
    log = open(tmp_path / "launcher.out", "wb")
    launcher = subprocess.Popen(
        [sys.executable, "-m", "replica.cli", "testnet", "run", "--subnets", "2", "--nodes", "1", "--dir", str(root),
         "--round-ms", "100"], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    layout = tn.TestnetLayout(root)
    children: list[int] = []
    try:
        _wait_for(lambda: all((layout.read_json(layout.status(s)) or {}).get("height", 0) >= 3
                              for s in ("subnet-0", "subnet-1")), 90, "both subnets to make heights")
        nodes = [n for members in tn.testnet_nodes(layout).values() for n in members]
        children = [int(layout.pid(n).read_text()) for n in nodes]   # one process per node
        assert int(layout.pid("launcher").read_text()) == launcher.pid
        assert all(_alive(pid) for pid in children)
        os.kill(launcher.pid, sig)
        code = launcher.wait(timeout=60)
        if sig == signal.SIGTERM:
            assert code == 128 + signal.SIGTERM
            assert not any(_alive(pid) for pid in children)
            assert b"terminated: stopped every" in (tmp_path / "launcher.out").read_bytes()
            assert not list((root / "pids").iterdir())
        else:
            _wait_for(lambda: not any(_alive(pid) for pid in children), 30, "orphaned subnet processes to stop")
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
        _kill_survivors(children)
        log.close()


def _fake_children(monkeypatch, scripts: dict[str, str]) -> None:
    """Replace the subnet processes by tiny Python scripts (per subnet)."""
    monkeypatch.setattr(process_models, "subnet_command", lambda layout, subnet: [sys.executable, "-c", scripts[subnet]])


def test_a_subnet_process_that_refuses_to_start_is_not_restarted(tmp_path, monkeypatch):
    layout = tn.create_testnet(tmp_path / "net", 2, 1, seed=SEED, tick_s=0.1, process_model="subnet")
    _fake_children(monkeypatch, {"subnet-0": "import time; time.sleep(120)",
                                 "subnet-1": f"import sys; sys.exit({tn.EXIT_REFUSED})"})
    out = io.StringIO()
    started = time.monotonic()
    with pytest.raises(tn.TestnetError) as caught:
        sv.launch(layout.root, duration_s=5, stream=out)
    message = str(caught.value)
    assert "subnet-1" in message and "refused to start" in message and str(layout.log("subnet-1")) in message
    assert "restart" not in out.getvalue().replace("not restarting", "")
    assert time.monotonic() - started < 30  # the sleeping subnet-0 was stopped, not waited for
    assert not list((layout.root / "pids").iterdir())


def test_a_subnet_process_that_keeps_dying_stops_the_testnet(tmp_path, monkeypatch):
    layout = tn.create_testnet(tmp_path / "net", 2, 1, seed=SEED, tick_s=0.1, process_model="subnet")
    _fake_children(monkeypatch, {"subnet-0": "import time; time.sleep(120)", "subnet-1": "import sys; sys.exit(1)"})
    out = io.StringIO()
    with pytest.raises(tn.TestnetError) as caught:
        sv.launch(layout.root, duration_s=5, stream=out)
    message = str(caught.value)
    assert "subnet-1" in message and f"died {tn.RESTART_LIMIT} times" in message
    assert str(layout.log("subnet-1")) in message
    assert out.getvalue().count("restarted subnet-1 as pid") == tn.RESTART_LIMIT - 1
    assert layout.log("subnet-1").read_text().count("launcher: the process of subnet-1") == tn.RESTART_LIMIT
    assert not list((layout.root / "pids").iterdir())


def test_no_restart_stops_the_testnet_at_the_first_death(tmp_path, monkeypatch):
    from replica.cli import build_parser

    assert build_parser().parse_args(["testnet", "run", "--dir", "x", "--no-restart"]).no_restart
    assert not build_parser().parse_args(["testnet", "up", "--dir", "x"]).no_restart
    layout = tn.create_testnet(tmp_path / "net", 2, 1, seed=SEED, tick_s=0.1, process_model="subnet")
    _fake_children(monkeypatch, {"subnet-0": "import time; time.sleep(120)", "subnet-1": "import sys; sys.exit(1)"})
    with pytest.raises(tn.TestnetError, match="subnet-1 .* exited with exit code 1"):
        sv.launch(layout.root, duration_s=5, stream=io.StringIO(), restart=False)
    assert "restarts are off" in layout.log("subnet-1").read_text()
