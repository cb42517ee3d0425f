"""``Testnet.migrate`` in deterministic mode: a canister moves between subnets in the middle of
cross-subnet traffic, keeps its id and state, and no call is lost or answered twice; the same
seed and calls give the same hashes, migrations included.

The load canister (``replica.load.load_canister``) relays calls and counts, per caller, any
echo that arrives twice or out of order."""

from __future__ import annotations

import inspect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replica.client import Ed25519Identity
from replica.testing import CallRejected, Testnet
from replica.load import load_canister
from replica.testnet.migration import MigrationError

SOURCE = inspect.getsource(load_canister)


def _install(net: Testnet, subnet: str) -> int:
    return net.install(SOURCE, subnet=subnet, class_name="LoadCanister")


def test_a_canister_moves_keeps_its_state_and_its_callers_reach_it(testnet):
    a0, a1 = _install(testnet, "subnet-0"), _install(testnet, "subnet-0")
    b0 = _install(testnet, "subnet-1")
    assert testnet.update_call(a0, "relay", {"target": b0}) == 1
    report = testnet.migrate(a0, "subnet-1")
    assert (report.source, report.destination) == ("subnet-0", "subnet-1") and report.rounds >= 1
    assert testnet.get_subnet(a0) == "subnet-1" and testnet.get_subnet(a1) == "subnet-0"
    assert testnet.query_call(a0, "stats")["relayed"] == 1           # its state came along
    assert testnet.update_call(a0, "relay", {"target": a1}) == 2      # now it calls across subnets
    assert testnet.update_call(a1, "relay", {"target": a0}) == 1      # and is called across them
    testnet.migrate(a0, "subnet-0")
    assert testnet.update_call(a0, "relay", {"target": b0}) == 3
    assert testnet.query_call(b0, "stats")["violations"] == 0


def test_a_migration_refuses_what_it_cannot_do(testnet):
    a0 = _install(testnet, "subnet-0")
    with pytest.raises(MigrationError, match="already"):
        testnet.migrate(a0, "subnet-0")
    with pytest.raises(MigrationError, match="no subnet hosts"):
        testnet.migrate(99_999, "subnet-1")
    stranger = Ed25519Identity.from_seed(b"not the controller")
    with pytest.raises(MigrationError, match="controller"):
        testnet.migrate(a0, "subnet-1", sender=stranger)
    assert testnet.update_call(a0, "relay", {"target": a0}) == 1   # nothing moved, nothing broke


def _run(seed: int, plan: list[tuple[str, int]]) -> tuple[dict, dict, list[bytes]]:
    """Users' relay calls submitted in bursts, a migration between bursts; every call awaited."""
    with Testnet(subnets=2, nodes=1, seed=seed) as net:
        canisters = [_install(net, s) for s in ("subnet-0", "subnet-0", "subnet-1", "subnet-1")]
        submitted = []
        for action, k in plan:
            if action == "burst":
                for j in range(3):
                    source, target = canisters[(k + j) % 4], canisters[(k + 2 * j + 1) % 4]
                    submitted.append(net.submit_call(source, "relay", {"target": target}))
                net.tick()
            else:
                mover = canisters[k % 4]
                net.migrate(mover, "subnet-1" if net.get_subnet(mover) == "subnet-0" else "subnet-0")
        answers = {"replied": 0, "rejected": 0}
        for message_id in submitted:
            try:
                net.await_call(message_id)
                answers["replied"] += 1
            except CallRejected:
                answers["rejected"] += 1
        totals = {key: sum(net.query_call(c, "stats")[key] for c in canisters)
                  for key in ("relayed", "echoed", "replied", "rejected", "violations")}
        hashes = [net.state_hash(s) for s in net.subnets]
    return answers, totals, hashes


@settings(max_examples=6, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["burst", "burst", "migrate"]), st.integers(0, 3)), min_size=2, max_size=6))
def test_every_call_is_answered_exactly_once_whatever_moves_when(plan):
    answers, totals, _ = _run(7, plan)
    calls = 3 * sum(1 for action, _ in plan if action == "burst")
    assert answers["replied"] + answers["rejected"] == calls
    assert totals["violations"] == 0
    assert totals["replied"] + totals["rejected"] == totals["relayed"]   # each relay's callback ran once
    assert totals["echoed"] == totals["replied"]                          # each echo answered once


def test_migrations_replay_to_the_same_hashes():
    plan = [("burst", 0), ("migrate", 0), ("burst", 1), ("migrate", 2), ("burst", 2)]
    assert _run(11, plan) == _run(11, plan)
