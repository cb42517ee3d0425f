"""Same seed and calls → same state hashes, in this process and in another with another hash seed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st

from replica.testing import Testnet

from .apps import Greeter
from .scenario import run_scenario

ROOT = Path(__file__).resolve().parents[2]


def test_same_seed_same_hashes_and_another_seed_other_hashes():
    first = run_scenario("s1")
    assert run_scenario("s1") == first
    other = run_scenario("s2")
    assert set(other) == set(first) and all(other[s] != first[s] for s in first)   # other keys, other states


def test_another_process_with_another_hash_seed_computes_the_same_hashes():
    here = run_scenario("s1")
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=str(ROOT))
    child = subprocess.run([sys.executable, "-m", "tests.testing.scenario", "s1"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout.strip().splitlines()[-1]) == here


# An operation: (kind, subnet index, value).
_operations = st.lists(
    st.tuples(st.sampled_from(["greet", "ask", "tick", "advance"]), st.integers(0, 1), st.integers(0, 3)),
    min_size=1, max_size=8)


def _run(operations) -> tuple[list, dict]:
    answers = []
    with Testnet(seed=7) as net:
        canisters = [net.install(Greeter, subnet=s) for s in net.subnets]
        pending = []
        for kind, index, value in operations:
            if kind == "greet":
                pending.append(net.submit_call(canisters[index], "greet", str(value)))
            elif kind == "ask":
                pending.append(net.submit_call(canisters[index], "ask", canisters[1 - index]))
            elif kind == "tick":
                net.tick(value)
            else:
                net.advance_time(value * 10**9)
        answers = [net.await_call(mid) for mid in pending]
        return answers, {s: net.state_hash(s) for s in net.subnets}


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_operations)
def test_any_sequence_of_calls_replays_to_the_same_hashes(operations):
    assert _run(operations) == _run(operations)


def _cross_traffic(reads: bool) -> dict:
    with Testnet(seed="reads") as net:
        a = net.install(Greeter, subnet="subnet-0")
        b = net.install(Greeter, subnet="subnet-1")
        ids = [net.submit_call(b, "ask", a), net.submit_call(a, "ask", b)]
        hashes = []
        for _ in range(10):   # the calls and then their acknowledgements travel
            net.tick()
            if reads:   # observing must not change what happens
                for mid in ids:
                    net.ingress_status(mid)
                net.query_call(a, "greeted")
            hashes.append(tuple(net.state_hash(s) for s in net.subnets))
        return {"answers": [net.await_call(mid) for mid in ids], "hashes": hashes}


def test_reading_statuses_and_queries_does_not_change_the_run():
    assert _cross_traffic(reads=True) == _cross_traffic(reads=False)
