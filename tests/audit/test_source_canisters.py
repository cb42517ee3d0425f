"""A run with canisters installed from source strings (importable nowhere) is replayed from
the recorded state: the run log names no module for them, and replicas agree with the live
hashes — restarted from checkpoints taken after the install, with shuffled containers, in a
subprocess whose only access to the code is the state."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from replica.audit.inputs import prepare_run
from replica.audit.perturbation import parse_perturbation
from replica.audit.run_log import load_run_log, write_run_log
from replica.execution import MANAGEMENT_CANISTER_ID, ExecutionEnvironment
from replica.sdk import decode_payload, encode_value
from replica.testnet.recording import run_log_from_simulation
from replica.inprocess.simulation import GENESIS_TIME_NS, Simulation
from state_manager.ingress_history import IngressState
from state_manager.messages import Ingress

A, B = "subnet-a", "subnet-b"
USER = b"\x05" * 29 + b"\x02"

#: A module that exists only as this string (its module name is derived from its hash).
SOURCE = textwrap.dedent('''
    from replica.sdk import Canister, update, callback

    class Relay(Canister):
        def init(self, arg):
            self.stable["name"] = arg

        @update
        def greet(self, who):
            self.stable["greeted"] = self.stable.get("greeted", 0) + 1
            return f"{self.stable['name']} greets {who}"

        @update
        def ask(self, other):
            self.call(other, "greet", self.stable["name"], on_reply=self.got, on_reject=self.failed)

        @callback
        def got(self, reply, context):
            self.stable["last"] = reply
            self.reply(reply)

        @callback
        def failed(self, reject, context):
            self.reject(str(reject))
''')


class Driver:
    def __init__(self) -> None:
        self.sim = Simulation({A: (0, 99), B: (100, 199)}, ExecutionEnvironment([]), seed=4)
        self.n = 0

    def submit(self, subnet: str, receiver: int, method: str, arg=None) -> tuple[str, bytes]:
        self.n += 1
        mid = self.n.to_bytes(32, "big")
        self.sim.submit(Ingress(USER, receiver, method, encode_value(arg), mid,
                                GENESIS_TIME_NS + (self.sim.tick_count + 60) * 10**9), subnet)
        return subnet, mid

    def answer(self, ticket: tuple[str, bytes]):
        subnet, mid = ticket
        for _ in range(30):
            status = self.sim.state_of(subnet).ingress_history.get(mid)
            if status is not None and status.state is IngressState.REPLIED:
                return decode_payload(status.reply)
            if status is not None and status.state is IngressState.REJECTED:
                raise AssertionError(status.reject_message)
            self.sim.tick()
        raise AssertionError("no answer")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    d = Driver()
    created = [d.submit(s, MANAGEMENT_CANISTER_ID, "create_canister") for s in (A, B)]
    ids = [d.answer(t)["canister_id"] for t in created]
    assert ids == [0, 100]
    installs = [d.submit(s, MANAGEMENT_CANISTER_ID, "install_code", {
        "canister_id": cid, "mode": "install", "source": SOURCE, "class_name": "Relay", "arg": s})
        for s, cid in zip((A, B), ids)]
    for ticket in installs:
        d.answer(ticket)
    asks = [d.submit(A, 0, "ask", 100), d.submit(B, 100, "ask", 0), d.submit(A, 0, "ask", 100)]
    assert [d.answer(t) for t in asks] == ["subnet-b greets subnet-a", "subnet-a greets subnet-b"] * 1 + \
        ["subnet-b greets subnet-a"]
    for round_ in range(6):   # more heights, so checkpoints after the install exist
        d.submit(A if round_ % 2 else B, 0 if round_ % 2 else 100, "ask", 100 if round_ % 2 else 0)
        d.sim.tick()
    d.sim.run_until_quiescent(max_ticks=50)
    log = run_log_from_simulation(d.sim, checkpoint_interval=3)
    assert log.canister_modules == ()   # nothing to import: the code is in the states
    directory = tmp_path_factory.mktemp("source-run")
    write_run_log(log, directory)
    return directory


@pytest.mark.parametrize("perturbation", ["none", "shuffle:3", "checkpoint@6+restart@7+shuffle:5", "hashseed:9"])
def test_replicas_replay_source_canisters_from_the_recorded_states(run_dir, perturbation):
    run = prepare_run(load_run_log(run_dir))
    for subnet in (A, B):
        replayed = {s.height: (s.full_hash, s.certified_root) for s in run.replay(subnet, parse_perturbation(perturbation))}
        live = {h: (f, c) for h, f, c in run.subnet(subnet).hashes}
        assert len(live) >= 10 and 6 in run.subnet(subnet).checkpoints
        assert {h: replayed.get(h) for h in live if h >= min(replayed)} == \
            {h: live[h] for h in live if h >= min(replayed)}, f"{subnet} under {perturbation}"
        assert max(replayed) == max(live)


def test_replay_one_in_a_process_without_the_source_anywhere(run_dir, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-m", "replica.cli", "replay-one", str(run_dir), "--subnet", A,
                           "--perturbation", "checkpoint@6+restart@7+shuffle:2"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "live: DIFFERS" not in done.stdout and "live: same" in done.stdout
