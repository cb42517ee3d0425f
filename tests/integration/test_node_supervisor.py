"""The launcher's node process model with fake node processes: one process per node, their
addresses published into the registry, the subnets' ``http`` and ``status`` files written
from the nodes' own, ``kill-node`` / ``restart-node`` / holds, deaths asked for not counted
toward the restart limit, ``--no-restart``, and the chaos policy (``replica.processes.chaos``)."""

from __future__ import annotations

import io
import json
import os
import random
import signal
import sys
import textwrap
import time
import types

import pytest
from hypothesis import given, settings, strategies as st

from consensus_stub.registry import decode_registry
from replica.processes import chaos as chaos_mod
from replica.testnet import launcher as tn
from replica.processes import process_models
from replica.processes import supervisor as sv
from replica.processes import lifecycle

pytestmark = pytest.mark.timeout(120)

SEED = b"node-supervisor-test-seed-32-by!"

# A stand-in for ``python -m replica node run --config FILE``: binds three ports, writes
# endpoints.json (atomically) and then status.json every 50 ms; stops on SIGTERM, when its
# parent is gone, or after two minutes. ``mode``: "ok", or "exit1" (dies at once with exit
# code 1), or "refuse" (exits with EXIT_REFUSED). ``certified``: its constant certified height.
FAKE_NODE = textwrap.dedent('''
    import json, os, signal, socket, sys, time
    config_path, mode, certified = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if mode == "exit1":
        sys.exit(1)
    if mode == "refuse":
        sys.exit(3)
    config = json.load(open(config_path))
    root = os.path.join(config["testnet_dir"], "nodes", config["node_id"])
    def write(name, value):
        tmp = os.path.join(root, name + ".tmp")
        with open(tmp, "w") as f:
            json.dump(value, f)
        os.replace(tmp, os.path.join(root, name))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sockets = [socket.socket() for _ in range(3)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    xnet, agreement, http = ("127.0.0.1:%d" % s.getsockname()[1] for s in sockets)
    print("fake node", config["node_id"], "pid", os.getpid(), flush=True)
    write("endpoints.json", {"xnet": xnet, "agreement": agreement, "http": http})
    parent, height, started = os.getppid(), 0, time.monotonic()
    while os.getppid() == parent and time.monotonic() - started < 120:
        height += 1
        write("status.json", {"node_id": config["node_id"], "height": height, "certified_height": certified,
                              "certified_root": "ab" * 32, "xnet_inducted": 0, "critical_errors": 0,
                              "streams": {}, "open_calls": 0,
                              "launcher_pid": os.environ.get("REPLICA_TESTNET_LAUNCHER_PID"), "config": config})
        time.sleep(0.05)
''')


@pytest.fixture
def fake_nodes(tmp_path, monkeypatch):
    """Replace node processes by ``FAKE_NODE``; returns ``{node: (mode, certified)}`` to tune
    them (defaults: "ok", certified height 5)."""
    script = tmp_path / "fake_replica_node.py"   # "replica" in the command line: lifecycle's pid check
    script.write_text(FAKE_NODE)
    tuning: dict[str, tuple[str, int]] = {}

    def command(layout, node):
        mode, certified = tuning.get(node, ("ok", 5))
        return [sys.executable, str(script), str(layout.node_files(node).config), mode, str(certified)]

    monkeypatch.setattr(process_models, "node_command", command)
    return tuning


def _node_testnet(tmp_path, subnets: int = 2, nodes: int = 4) -> tn.TestnetLayout:
    return tn.create_testnet(tmp_path / "net", subnets, nodes, seed=SEED, tick_s=0.1, genesis_apps=False,
                             process_model="node")


def _until(supervisor: sv.Supervisor | None, condition, what: str, timeout_s: float = 30.0):
    """Supervise (``check``) until ``condition()`` holds."""
    deadline = time.monotonic() + timeout_s
    while True:
        if supervisor is not None:
            supervisor.check()
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def _registry_addresses(layout) -> dict[str, str]:
    return {n.node_id: n.xnet_address for n in decode_registry(layout.registry.read_bytes()).latest().nodes}


def _pid(layout, node) -> int:
    return int(layout.pid(node).read_text())


@pytest.fixture
def running(tmp_path, fake_nodes):
    """A node-model testnet of 2 x 4 fake nodes under a ``Supervisor``, published."""
    layout = _node_testnet(tmp_path)
    out = io.StringIO()
    supervisor = sv.Supervisor(layout, ["subnet-0", "subnet-1"], out)
    try:
        supervisor.start_all()
        supervisor.wait_published()
        _until(supervisor, lambda: all(layout.status(s).exists() for s in supervisor.subnets), "the subnets' status")
        yield layout, supervisor, out
    finally:
        pids = [p.pid for p in supervisor.processes.values()]
        supervisor.stop()
        assert not any(_alive(pid) for pid in pids)


def test_the_node_model_starts_every_node_and_publishes_its_endpoints(tmp_path, fake_nodes):
    layout = _node_testnet(tmp_path)
    assert layout.read_manifest()["process_model"] == "node"
    # an operator's config is kept; the others are written from the manifest
    from replica.node.process_config import NodeProcessConfig

    kept = NodeProcessConfig(testnet_dir=str(layout.root.resolve()), node_id="subnet-1-node-3", subnet_id="subnet-1",
                             checkpoint_interval=7)
    layout.node_files("subnet-1-node-3").root.mkdir(parents=True)
    layout.node_files("subnet-1-node-3").config.write_text(kept.to_json())
    stale = layout.node_files("subnet-0-node-1")
    stale.root.mkdir(parents=True)
    stale.endpoints.write_text(json.dumps({"xnet": "127.0.0.1:1", "agreement": "127.0.0.1:2", "http": "127.0.0.1:3"}))
    fake_nodes["subnet-0-node-3"] = ("ok", 9)     # the most certified node of subnet-0
    fake_nodes["subnet-1-node-2"] = ("ok", 9)     # tied with subnet-1-node-4: the first in registry order
    fake_nodes["subnet-1-node-4"] = ("ok", 9)
    supervisor = sv.Supervisor(layout, ["subnet-0", "subnet-1"], io.StringIO())
    try:
        supervisor.start_all()
        nodes = [f"subnet-{s}-node-{i}" for s in range(2) for i in range(1, 5)]
        assert supervisor.units == nodes and sorted(supervisor.processes) == sorted(nodes)
        assert {node: _pid(layout, node) for node in nodes} == {n: p.pid for n, p in supervisor.processes.items()}
        supervisor.wait_published()
        endpoints = {node: json.loads(layout.node_files(node).endpoints.read_text()) for node in nodes}
        assert endpoints["subnet-0-node-1"]["xnet"] != "127.0.0.1:1"           # the stale file was removed
        assert _registry_addresses(layout) == {node: e["xnet"] for node, e in endpoints.items()}
        _until(supervisor, lambda: all(layout.status(s).exists() for s in supervisor.subnets), "the subnets' status")
        for position, subnet in enumerate(("subnet-0", "subnet-1")):
            assert json.loads(layout.http(subnet).read_text()) == {
                n: endpoints[n]["http"] for n in nodes if n.startswith(f"{subnet}-")}
        assert json.loads(layout.status("subnet-0").read_text())["node_id"] == "subnet-0-node-3"
        assert json.loads(layout.status("subnet-1").read_text())["node_id"] == "subnet-1-node-2"
        status = json.loads(layout.status("subnet-0").read_text())
        assert status["launcher_pid"] == str(os.getpid())
        assert status["config"] == {
            "testnet_dir": str(layout.root.resolve()), "node_id": "subnet-0-node-3", "subnet_id": "subnet-0",
            "tick_s": 0.1, "block_interval_s": 0.1, "round_timeout_s": 1.0, "checkpoint_interval": 100,
            "checkpoints_kept": 3, "retained_heights": 1000, "registry_poll_s": 0.0,
            "fault_diverge_at_height": 0}
        assert NodeProcessConfig.from_file(layout.node_files("subnet-1-node-3").config) == kept
        # the lifecycle's view: every node running, the ingress addresses of each subnet
        rows = lifecycle.status(layout.root)
        assert [(r.subnet, r.running, r.nodes_running, r.process_model) for r in rows] == [
            ("subnet-0", True, 4, "node"), ("subnet-1", True, 4, "node")]
        assert rows[0].endpoints == json.loads(layout.http("subnet-0").read_text())
        assert any("fake node subnet-1-node-2" in line
                   for line in lifecycle.log_lines(layout.root, "subnet-1-node-2", follow=False))
        with pytest.raises(tn.TestnetError, match="each of its nodes"):
            list(lifecycle.log_lines(layout.root, "subnet-1", follow=False))
        pids = [p.pid for p in supervisor.processes.values()]
    finally:
        supervisor.stop()
    assert not any(_alive(pid) for pid in pids)
    assert not list((layout.root / "pids").iterdir())
    assert not layout.http("subnet-0").exists() and not layout.http("subnet-1").exists()   # nothing serves
    assert layout.status("subnet-0").exists()                                               # the last word stays
    rows = lifecycle.status(layout.root)
    assert not any(r.running for r in rows) and all(r.nodes_running == 0 for r in rows)


def test_kill_node_is_restarted_and_not_counted_toward_the_restart_limit(running):
    layout, supervisor, out = running
    node = "subnet-0-node-2"
    for round_ in range(tn.RESTART_LIMIT + 1):   # more deaths than the limit: all asked for
        pid = _pid(layout, node)
        before = json.loads(layout.node_files(node).endpoints.read_text())["xnet"]
        said = lifecycle.kill_node(layout.root, node)
        assert said == f"killed {node} (pid {pid}) with SIGKILL; the supervisor restarts it"
        _until(supervisor, lambda: node in supervisor.processes and supervisor.published
               and supervisor.processes[node].pid != pid, "the restart")
        assert not _alive(pid)
        after = json.loads(layout.node_files(node).endpoints.read_text())["xnet"]
        assert after != before and _registry_addresses(layout)[node] == after
        _until(supervisor, lambda: json.loads(layout.http("subnet-0").read_text())[node]
               == json.loads(layout.node_files(node).endpoints.read_text())["http"], "the new ingress address")
    assert supervisor.restarts[node] == tn.RESTART_LIMIT + 1 and supervisor.restarts_of("subnet-0") == tn.RESTART_LIMIT + 1
    assert not supervisor._deaths[node]
    assert not layout.expected_death(node).exists()   # each marker consumed
    assert "(kill-node); restarting it (not counted toward the restart limit)" in layout.log(node).read_text()
    # restart-node on a running node: SIGTERM, restarted, not counted either
    pid = _pid(layout, node)
    assert lifecycle.restart_node(layout.root, node) == f"sent SIGTERM to {node} (pid {pid}); the supervisor restarts it"
    _until(supervisor, lambda: node in supervisor.processes and supervisor.processes[node].pid != pid
           and supervisor.published, "the restart")
    assert f"exited with exit code 0 (restart-node)" in out.getvalue()
    assert not supervisor._deaths[node]


def test_kill_node_hold_keeps_it_down_until_restart_node(running):
    layout, supervisor, out = running
    node = "subnet-1-node-4"
    pid = _pid(layout, node)
    said = lifecycle.kill_node(layout.root, node, hold=True)
    assert said.startswith(f"killed {node} (pid {pid}) with SIGKILL; it is held")
    assert layout.hold(node).exists()
    _until(supervisor, lambda: node in supervisor.held, "the held node's death")
    for _ in range(10):   # it stays down
        supervisor.check()
        time.sleep(0.02)
    assert node not in supervisor.processes and not layout.pid(node).exists()
    assert node not in json.loads(layout.http("subnet-1").read_text())
    assert len(json.loads(layout.http("subnet-1").read_text())) == 3
    assert node in supervisor.down_units()
    row = [r for r in lifecycle.status(layout.root) if r.subnet == "subnet-1"][0]
    assert row.held == (node,) and row.nodes_running == 3 and row.running
    with pytest.raises(tn.TestnetError, match="is not running \\(it is held\\)"):
        lifecycle.kill_node(layout.root, node)
    assert "is held" in layout.log(node).read_text()

    said = lifecycle.restart_node(layout.root, node)
    assert said.startswith(f"removed the hold on {node}; {node} is not running")
    assert not layout.hold(node).exists()
    _until(supervisor, lambda: node in supervisor.processes and supervisor.published, "the start")
    assert _pid(layout, node) != pid and node not in supervisor.held
    _until(supervisor, lambda: node in json.loads(layout.http("subnet-1").read_text()), "its ingress address")
    assert f"the hold on {node} is gone: starting it" in out.getvalue()


def test_a_hold_at_start_leaves_the_node_down(tmp_path, fake_nodes):
    layout = _node_testnet(tmp_path, subnets=1)
    layout.hold("subnet-0-node-1").parent.mkdir(parents=True)
    layout.hold("subnet-0-node-1").write_text("")
    out = io.StringIO()
    supervisor = sv.Supervisor(layout, ["subnet-0"], out)
    try:
        supervisor.start_all()
        supervisor.wait_published()
        assert sorted(supervisor.processes) == ["subnet-0-node-2", "subnet-0-node-3", "subnet-0-node-4"]
        assert "subnet-0-node-1 is held" in out.getvalue()
        _until(supervisor, lambda: layout.status("subnet-0").exists(), "the status")
        assert json.loads(layout.status("subnet-0").read_text())["node_id"] == "subnet-0-node-2"
    finally:
        supervisor.stop()


def test_the_node_commands_refuse_what_they_cannot_do(tmp_path, running):
    layout, supervisor, out = running
    with pytest.raises(tn.TestnetError, match="no node 'subnet-7-node-1'"):
        lifecycle.kill_node(layout.root, "subnet-7-node-1")
    subnet_model = tn.create_testnet(tmp_path / "subnets", 1, 4, seed=SEED, genesis_apps=False, process_model="subnet")
    assert subnet_model.read_manifest()["process_model"] == "subnet"
    for command in (lambda: lifecycle.kill_node(subnet_model.root, "subnet-0-node-1"),
                    lambda: lifecycle.restart_node(subnet_model.root, "subnet-0-node-1")):
        with pytest.raises(tn.TestnetError, match="one process per subnet"):
            command()
    with pytest.raises(tn.TestnetError, match="process model 'subnet', not 'node'"):
        lifecycle.up(subnet_model.root, process_model="node", out=io.StringIO())
    with pytest.raises(tn.TestnetError, match="chaos-kill kills nodes"):
        sv.launch(subnet_model.root, duration_s=0, chaos_kill=1.0, stream=io.StringIO())
    with pytest.raises(tn.TestnetError, match="no process model"):
        tn.create_testnet(tmp_path / "bad", 1, 1, seed=SEED, process_model="thread")


def test_a_node_dying_by_itself_counts_toward_the_limit(tmp_path, fake_nodes):
    layout = _node_testnet(tmp_path, subnets=1)
    fake_nodes["subnet-0-node-3"] = ("exit1", 0)
    out = io.StringIO()
    supervisor = sv.Supervisor(layout, ["subnet-0"], out)
    try:
        supervisor.start_all()
        with pytest.raises(tn.TestnetError, match=f"subnet-0-node-3 .* died {tn.RESTART_LIMIT} times"):
            _until(supervisor, lambda: False, "the restart limit")
    finally:
        supervisor.stop()
    assert out.getvalue().count("restarted subnet-0-node-3 as pid") == tn.RESTART_LIMIT - 1
    assert not list((layout.root / "pids").iterdir())


def test_a_node_that_refuses_to_start_stops_the_testnet(tmp_path, fake_nodes):
    layout = _node_testnet(tmp_path, subnets=1)
    fake_nodes["subnet-0-node-1"] = ("refuse", 0)
    with pytest.raises(tn.TestnetError, match="subnet-0-node-1 .* refused to start") as caught:
        sv.launch(layout.root, duration_s=5, stream=io.StringIO())
    assert str(layout.log("subnet-0-node-1")) in str(caught.value)
    assert not list((layout.root / "pids").iterdir())


def test_no_restart_stops_at_a_death_nobody_asked_for_but_not_at_a_held_one(tmp_path, fake_nodes):
    layout = _node_testnet(tmp_path, subnets=1)
    supervisor = sv.Supervisor(layout, ["subnet-0"], io.StringIO(), restart=False)
    try:
        supervisor.start_all()
        supervisor.wait_published()
        lifecycle.kill_node(layout.root, "subnet-0-node-1", hold=True)   # intended: no error
        _until(supervisor, lambda: "subnet-0-node-1" in supervisor.held, "the held death")
        lifecycle.kill_node(layout.root, "subnet-0-node-2")              # asked for: restarted
        _until(supervisor, lambda: supervisor.restarts["subnet-0-node-2"] == 1 and supervisor.published, "the restart")
        os.kill(_pid(layout, "subnet-0-node-3"), signal.SIGKILL)         # nobody asked
        with pytest.raises(tn.TestnetError, match="subnet-0-node-3 .* exited with signal SIGKILL"):
            _until(supervisor, lambda: False, "the error")
    finally:
        supervisor.stop()
    assert "restarts are off (--no-restart)" in layout.log("subnet-0-node-3").read_text()

    fake_nodes["subnet-0-node-4"] = ("exit1", 0)
    layout.hold("subnet-0-node-1").unlink()
    with pytest.raises(tn.TestnetError, match="subnet-0-node-4 .* exited with exit code 1"):
        sv.launch(layout.root, duration_s=5, stream=io.StringIO(), restart=False)


def test_launch_runs_the_node_model_with_chaos_and_summarizes(tmp_path, fake_nodes, monkeypatch):
    layout = _node_testnet(tmp_path, subnets=2, nodes=4)
    written = []
    monkeypatch.setattr(sv, "_write_run_log", lambda layout, subnets, out: written.append(subnets))
    kills = []
    real_kill = sv.Supervisor.kill

    def watched_kill(self, unit, cause):
        # at each kill, at most f = 1 node of the victim's subnet is down already: none
        subnet = self.subnet_of[unit]
        assert not [u for u in self.down_units() if self.subnet_of[u] == subnet], (unit, self.down_units())
        kills.append(unit)
        return real_kill(self, unit, cause)

    monkeypatch.setattr(sv.Supervisor, "kill", watched_kill)
    out = io.StringIO()
    assert sv.launch(layout.root, duration_s=3.0, settle_timeout_s=20, stream=out, chaos_kill=4.0, chaos_seed=7) == 0, \
        out.getvalue()
    text = out.getvalue()
    assert written == [["subnet-0", "subnet-1"]]
    assert kills, text
    per_subnet = {s: sum(1 for k in kills if k.startswith(f"{s}-")) for s in ("subnet-0", "subnet-1")}
    assert (f"chaos (rate 4/s, seed 7): {len(kills)} kills (subnet-0 {per_subnet['subnet-0']}, "
            f"subnet-1 {per_subnet['subnet-1']})") in text
    assert text.count("chaos: killing ") == len(kills)
    for node in set(kills):
        assert "launcher: chaos: killing" in layout.log(node).read_text()
    assert "restarts are off" not in text and "times within" not in text
    assert "subnet-0: height" in text and "restarted" in text
    assert not list((layout.root / "pids").iterdir())


def test_the_run_log_takes_each_subnets_longest_node_recording(tmp_path, monkeypatch):
    layout = _node_testnet(tmp_path, subnets=2, nodes=4)
    lengths = {"subnet-0-node-1": 3, "subnet-0-node-2": 5, "subnet-0-node-3": None, "subnet-0-node-4": 5,
               "subnet-1-node-1": None, "subnet-1-node-2": None, "subnet-1-node-3": 1, "subnet-1-node-4": None}

    def read_recording(files):
        node = files.root.name
        count = lengths[node]
        return None if count is None else types.SimpleNamespace(node=node, batches=[b""] * count)

    import replica.testnet.recording as recording
    monkeypatch.setattr(recording, "read_node_recording", read_recording)
    model = process_models.NodeModel(layout, ["subnet-0", "subnet-1"])
    assert [r.node for r in model.recordings()] == ["subnet-0-node-2", "subnet-1-node-3"]
    lengths["subnet-1-node-3"] = None
    with pytest.raises(tn.TestnetError, match="no node of subnet-1"):
        model.recordings()


def test_the_command_line_takes_the_node_options():
    from replica.cli import build_parser

    parser = build_parser()
    up = parser.parse_args(["testnet", "up", "--process-model", "node", "--chaos-kill", "0.5", "--chaos-seed", "3"])
    assert (up.process_model, up.chaos_kill, up.chaos_seed) == ("node", 0.5, 3)
    run = parser.parse_args(["testnet", "run"])
    assert (run.process_model, run.chaos_kill, run.chaos_seed) == (None, 0.0, None)
    kill = parser.parse_args(["testnet", "kill-node", "subnet-0-node-1", "--hold"])
    assert (kill.node, kill.hold) == ("subnet-0-node-1", True)
    assert parser.parse_args(["testnet", "restart-node", "subnet-0-node-1"]).node == "subnet-0-node-1"


# -- the chaos policy (pure) ------------------------------------------------------------------

def _subnets(sizes: list[int]) -> dict[str, list[str]]:
    return {f"subnet-{s}": [f"subnet-{s}-node-{i}" for i in range(1, n + 1)] for s, n in enumerate(sizes)}


def test_fault_tolerance_is_n_minus_one_over_three():
    assert [chaos_mod.fault_tolerance(n) for n in range(1, 11)] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3]


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(1, 10), min_size=1, max_size=4), seed=st.integers(0, 2**32),
       rate=st.floats(0.1, 50.0), steps=st.lists(st.tuples(st.floats(0.0, 2.0), st.integers(0, 2**16)), max_size=40),
       initially_down=st.sets(st.integers(0, 39), max_size=6))
def test_chaos_never_leaves_more_than_f_of_a_subnet_down(sizes, seed, rate, steps, initially_down):
    subnets = _subnets(sizes)
    every = [n for nodes in subnets.values() for n in nodes]
    down = {every[i % len(every)] for i in initially_down}   # e.g. held nodes: possibly beyond f
    before = {s: sum(n in down for n in nodes) for s, nodes in subnets.items()}
    now = 0.0
    state = chaos_mod.initial_state(rate, seed, now)
    for gap, recover in steps:
        now += gap
        while True:
            decision = chaos_mod.decide(state, now, subnets, frozenset(down))
            assert decision == chaos_mod.decide(state, now, subnets, frozenset(down))   # pure
            if decision.due:
                assert decision.state.next_at > state.next_at and decision.state.next_at >= now - chaos_mod.MAX_LAG_S
            else:
                assert decision.state == state and decision.victim is None
            state = decision.state
            if not decision.due:
                break
            if decision.victim is not None:
                assert decision.victim not in down
                down.add(decision.victim)
        for subnet, nodes in subnets.items():
            count = sum(n in down for n in nodes)
            assert count <= max(chaos_mod.fault_tolerance(len(nodes)), before[subnet])
            if chaos_mod.fault_tolerance(len(nodes)) == 0:
                assert count == before[subnet]
        if down and recover % 3 == 0:   # some node comes back (re-published)
            down.discard(sorted(down)[recover % len(down)])
            before = {s: min(before[s], sum(n in down for n in nodes)) for s, nodes in subnets.items()}


def test_chaos_is_repeatable_from_its_seed_and_kills_at_the_rate():
    subnets = _subnets([7, 4])

    def run(seed):
        state, victims, now = chaos_mod.initial_state(2.0, seed, 0.0), [], 0.0
        while now < 500:
            now += 0.25
            while True:
                decision = chaos_mod.decide(state, now, subnets, frozenset())   # every node back at once
                state = decision.state
                if not decision.due:
                    break
                victims.append(decision.victim)
        return victims

    first = run(11)
    assert first == run(11) and first != run(12)
    assert 850 < len(first) < 1150   # about 2 a second for 500 s
    assert None not in first and set(first) == {n for nodes in subnets.values() for n in nodes}


def test_the_chaos_shell_kills_through_the_supervisor_and_counts():
    class FakeSupervisor:
        nodes_by_subnet = _subnets([4, 7, 2])

        def __init__(self):
            self.down: set[str] = set()
            self.killed: list[str] = []

        def down_units(self):
            return set(self.down)

        def kill(self, unit, cause):
            assert cause == "chaos"
            self.killed.append(unit)
            self.down.add(unit)
            return True

    supervisor = FakeSupervisor()
    shell = chaos_mod.Chaos(supervisor, 10.0, seed=5, now=0.0)
    rng = random.Random(1)
    for tick in range(1, 200):
        shell.tick(now=tick * 0.1)
        for subnet, nodes in supervisor.nodes_by_subnet.items():
            assert sum(n in supervisor.down for n in nodes) <= chaos_mod.fault_tolerance(len(nodes))
        if supervisor.down and rng.random() < 0.5:
            supervisor.down.discard(sorted(supervisor.down)[0])
    assert sum(shell.kills.values()) == len(supervisor.killed) > 0 and shell.kills["subnet-2"] == 0
    assert shell.skipped > 0   # at 10/s, often every subnet already had f down
    assert shell.summary().startswith(f"chaos (rate 10/s, seed 5): {len(supervisor.killed)} kills (subnet-0 ")
