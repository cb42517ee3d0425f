"""Issue 26, part 2, on node processes: a recorded 2 x 1 testnet is forked at a height in the
middle of its run (``Testnet.fork``; and once while it runs, from its nodes' records). The fork's nodes start from the recorded state hashes
of that height (what each node reports it started from, and the fork's own run log, which
replays from the source's genesis through the fork's heights at ``down``); the fork has the
source's canisters and values of that height, serves calls and dry runs, and the source
directory is byte for byte what it was. A dry run is answered but reaches no block."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest

from consensus_stub.registry import decode_registry
from message_routing.batch import decode_batch
from replica.audit.run_log import load_run_log
from replica.cli import main as cli_main
from replica.processes import lifecycle
from replica.testing import Testnet
from replica.testnet.fork import ForkError, aligned_heights, fork_testnet, started_states
from replica.testnet import launcher

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
COUNTER = ROOT / "examples" / "counter.py"
PING_PONG = ROOT / "examples" / "ping_pong.py"


def _checksums(directory: Path) -> dict[str, str]:
    """Every file under ``directory`` (symlinks as their target) with its SHA-256."""
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def _heights(directory: Path) -> dict[str, int]:
    return {row.subnet: row.height or 0 for row in lifecycle.status(directory)}


def _wait_heights(directory: Path, more: int, deadline_s: float = 120.0) -> dict[str, int]:
    start = _heights(directory)
    deadline = time.monotonic() + deadline_s
    while True:
        now = _heights(directory)
        if all(now[s] >= h + more for s, h in start.items()):
            return now
        assert time.monotonic() < deadline, f"the subnets did not make {more} heights: {start} -> {now}"
        time.sleep(0.1)


def test_fork_of_a_recorded_run(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLICA_HOME", str(tmp_path / "home"))   # the command line's identities
    source = tmp_path / "source"
    with Testnet(subnets=2, nodes=1, mode="live", directory=source, round_ms=20) as net:
        counter = net.install(COUNTER.read_text(), class_name="Counter", subnet="subnet-0")
        pinger = net.install(PING_PONG.read_text(), class_name="PingPong", subnet="subnet-1")
        ponger = net.install(PING_PONG.read_text(), class_name="PingPong", subnet="subnet-0")
        assert net.update_call(counter, "increment", 5) == 5
        assert net.update_call(pinger, "ping", {"target": ponger, "rounds": 2})["pongs_received"] == 2
        _wait_heights(source, 30)
        # every call so far answered, the streams quiet: each subnet forks at its height of this
        # moment (the subnets started apart, so one height number is two different moments)
        fork_at = _heights(source)
        _wait_heights(source, 30)
        assert net.update_call(counter, "increment", 100) == 105   # after the fork height
        _wait_heights(source, 5)
        # while it runs (no run log yet): from the nodes' executed logs and checkpoints
        while_running = fork_testnet(source, fork_at, tmp_path / "while-running")
        assert not launcher.TestnetLayout(source).run.exists()
    recorded = load_run_log(launcher.TestnetLayout(source).run)
    for forked in while_running.subnets:
        at = fork_at[forked.subnet_id]
        assert (forked.full_hash, forked.certified_root) == recorded.subnet(forked.subnet_id).hashes[at - 1][1:]
    assert all(s.height > fork_at[s.subnet_id] + 20 for s in recorded.subnets)
    before = _checksums(source)

    with pytest.raises(ForkError, match="not an empty directory"):
        fork_testnet(source, fork_at, source / "run")
    with pytest.raises(ForkError, match="inside the source"):
        fork_testnet(source, fork_at, source / "fork")
    with pytest.raises(ForkError, match="has no height"):
        fork_testnet(source, 10**6, tmp_path / "never")
    assert not (tmp_path / "never").exists()

    target = tmp_path / "fork"
    with Testnet.fork(source, fork_at, target) as fork:
        report = fork.fork_report
        for forked in report.subnets:
            at = fork_at[forked.subnet_id]
            height, full, root = recorded.subnet(forked.subnet_id).hashes[at - 1]
            assert (forked.height, forked.full_hash, forked.certified_root) == (height, full, root) == (at, full, root)
            assert forked.replayed == at - forked.checkpoint_height < recorded.checkpoint_interval
        started = started_states(target)
        assert sorted(started) == ["subnet-0-node-1", "subnet-1-node-1"]
        for node, (subnet, height, full_hash) in started.items():
            at = fork_at[subnet]
            assert (height, full_hash) == (at, recorded.subnet(subnet).hashes[at - 1][1].hex()), node
        # the fork's keys are its own
        source_keys = {s.subnet_id: s.public_key
                       for s in decode_registry(launcher.TestnetLayout(source).registry.read_bytes()).latest().subnets}
        assert all(fork.root_key(s) != source_keys[s] for s in fork.subnets)

        # the state of the fork height: the increment of 100 came later
        assert fork.query_call(counter, "get") == 5
        dry = fork.dry_run(counter, "increment", 7)
        assert (dry.status, dry.instructions > 0) == ("replied", True)
        assert any(path.startswith(f"/canister_state/{counter}/stable") for path in dry.changed_paths)
        assert fork.query_call(counter, "get") == 5   # nothing committed
        capsys.readouterr()
        assert cli_main(["call", str(counter), "increment", "7", "--dry-run", "--json", "--dir", str(target)]) == 0
        printed = json.loads(capsys.readouterr().out)
        assert (printed["status"], printed["reply"], printed["instructions"] > 0) == ("replied", 12, True)
        assert f"/canister_state/{counter}/stable/value" in printed["changed_paths"]
        assert fork.query_call(counter, "get") == 5
        crossing = fork.dry_run(pinger, "ping", {"target": ponger, "rounds": 1})
        assert crossing.status == "waiting" and [c.receiver for c in crossing.calls] == [ponger]
        assert fork.update_call(counter, "increment", 1) == 6
        assert fork.update_call(pinger, "ping", {"target": ponger, "rounds": 1})["pongs_received"] == 3
        fork.tick(3)

    # the fork's run log: the source's history up to the fork height, then the fork's own, which
    # the launcher replayed from the source's genesis at down (every height checked)
    forked_log = load_run_log(launcher.TestnetLayout(target).run)
    for s in recorded.subnets:
        mine = forked_log.subnet(s.subnet_id)
        at = fork_at[s.subnet_id]
        assert mine.hashes[:at] == s.hashes[:at]
        assert mine.height > at
        # no block of the fork carried the dry run's call
        for data in mine.batches[at:]:
            assert all(m.method_payload != dry_payload(7) or m.method_name != "increment"
                       for m in decode_batch(data).ingress)
    assert _checksums(source) == before

    # the command line: subnet-1 at subnet-0's moment (--align), written only (--no-start), the
    # recorded hashes printed
    heights = aligned_heights(recorded, {"subnet-0": fork_at["subnet-0"] + 10})
    assert cli_main(["testnet", "fork", "--from", str(source), "--at", f"subnet-0={heights['subnet-0']}", "--align",
                     "--dir", str(tmp_path / "cli-fork"), "--no-start"]) == 0
    printed = capsys.readouterr().out
    for subnet, height in heights.items():
        full = recorded.subnet(subnet).hashes[height - 1][1].hex()[:16]
        assert any(line.split()[:2] == [subnet, str(height)] and full in line for line in printed.splitlines()), printed
    assert _checksums(source) == before


def dry_payload(value: int) -> bytes:
    from replica.execution.codec import encode_value

    return encode_value(value)
