"""The example apps, tested only through ``replica.testing`` and its ``testnet`` fixture —
the way an app developer would test them."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from examples.counter import Counter
from examples.ledger import Ledger, account_of
from examples.ping_pong import PingPong
from examples.treasury import Treasury
from replica.testing import CallRejected, Ed25519Identity, Testnet

OWNER = Ed25519Identity.from_seed(b"treasury owner")
ALICE, BOB = Ed25519Identity.from_seed(b"alice"), Ed25519Identity.from_seed(b"bob")
FUNDING, ALICE_TOKENS = 10_000, 500


def _deploy(net: Testnet) -> dict:
    """Ledger A + Treasury on subnet-0, ledger B on subnet-1; alice's tokens fund the treasury."""
    ledger_a = net.install(Ledger, subnet="subnet-0", arg={"balances": ((account_of(ALICE.principal.raw), FUNDING + ALICE_TOKENS),)})
    ledger_b = net.install(Ledger, subnet="subnet-1", arg={"balances": ()})
    treasury = net.install(Treasury, subnet="subnet-0", arg={"ledger": ledger_a, "owner": OWNER.principal.raw})
    net.update_call(ledger_a, "transfer_local",
                    {"from": account_of(ALICE.principal.raw), "to": account_of(treasury), "amount": FUNDING})
    return {"a": ledger_a, "b": ledger_b, "treasury": treasury}


def _supply(net: Testnet, apps: dict) -> int:
    return net.query_call(apps["a"], "supply") + net.query_call(apps["b"], "supply")


def test_a_payout_crosses_subnets_through_three_canisters(testnet):
    apps = _deploy(testnet)
    bob = account_of(BOB.principal.raw)
    balance = testnet.update_call(apps["treasury"], "pay", {"to_ledger": apps["b"], "to": bob, "amount": 300},
                                  sender=OWNER)
    assert balance == FUNDING - 300
    assert testnet.query_call(apps["b"], "balance", bob) == 300
    assert testnet.query_call(apps["treasury"], "report") == {"paid": 300, "payouts": 1, "failed": 0, "in_flight": 0}
    assert testnet.query_call(apps["a"], "escrow") == 0
    assert _supply(testnet, apps) == FUNDING + ALICE_TOKENS


def test_a_payout_to_a_missing_ledger_is_refunded(testnet):
    apps = _deploy(testnet)
    nowhere = testnet.topology()["subnet-1"].canister_ranges[0][0] + 99     # in subnet-1's range, no canister
    with pytest.raises(CallRejected) as rejected:
        testnet.update_call(apps["treasury"], "pay", {"to_ledger": nowhere, "to": "x", "amount": 5}, sender=OWNER)
    assert rejected.value.code == "CANISTER_REJECT" and "payout of 5 failed" in rejected.value.message
    assert testnet.query_call(apps["a"], "balance", account_of(apps["treasury"])) == FUNDING
    assert testnet.query_call(apps["treasury"], "report")["failed"] == 1
    assert _supply(testnet, apps) == FUNDING + ALICE_TOKENS


def test_only_the_owner_pays_and_bad_arguments_are_rejected(testnet):
    apps = _deploy(testnet)
    payout = {"to_ledger": apps["b"], "to": "bob", "amount": 1}
    with pytest.raises(CallRejected, match="owner"):
        testnet.update_call(apps["treasury"], "pay", payout, sender=ALICE)
    with pytest.raises(CallRejected, match="positive int"):
        testnet.update_call(apps["treasury"], "pay", dict(payout, amount=0), sender=OWNER)
    with pytest.raises(CallRejected, match="insufficient funds"):
        testnet.update_call(apps["treasury"], "pay", dict(payout, amount=FUNDING + 1), sender=OWNER)


def test_payouts_submitted_in_one_round_are_all_answered(testnet):
    apps = _deploy(testnet)
    ids = [testnet.submit_call(apps["treasury"], "pay", {"to_ledger": apps["b"], "to": f"r{i}", "amount": 10 + i},
                               sender=OWNER) for i in range(5)]
    testnet.tick()
    assert testnet.query_call(apps["treasury"], "report")["in_flight"] == 5   # all escrowed, none credited yet
    answers = [testnet.await_call(mid) for mid in ids]
    assert answers[-1] == FUNDING - sum(10 + i for i in range(5))
    assert [testnet.query_call(apps["b"], "balance", f"r{i}") for i in range(5)] == [10, 11, 12, 13, 14]


# A payout: (to ledger B or to a missing one, amount).
_payouts = st.lists(st.tuples(st.booleans(), st.integers(1, 4_000)), min_size=1, max_size=6)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(payouts=_payouts)
def test_supply_is_invariant_and_the_treasury_balance_is_funding_minus_paid(payouts):
    with Testnet(seed=3) as net:
        apps = _deploy(net)
        missing = net.topology()["subnet-1"].canister_ranges[0][0] + 99
        ids = [net.submit_call(apps["treasury"], "pay",
                               {"to_ledger": apps["b"] if valid else missing, "to": "r", "amount": amount},
                               sender=OWNER) for valid, amount in payouts]
        for mid in ids:
            net.tick()
            # In flight: nothing created or lost, at most parked in escrow.
            assert _supply(net, apps) == FUNDING + ALICE_TOKENS
            try:
                net.await_call(mid)
            except CallRejected:
                pass
        report = net.query_call(apps["treasury"], "report")
        assert report["in_flight"] == 0 and report["payouts"] + report["failed"] == len(payouts)
        assert net.query_call(apps["a"], "balance", account_of(apps["treasury"])) == FUNDING - report["paid"]
        assert net.query_call(apps["b"], "balance", "r") == report["paid"]
        assert net.query_call(apps["a"], "escrow") == 0


def test_ping_pong_round_trips_across_subnets(testnet):
    a = testnet.install(PingPong, subnet="subnet-0")
    b = testnet.install(PingPong, subnet="subnet-1")
    testnet.update_call(a, "ping", {"target": b, "rounds": 3})
    assert testnet.query_call(a, "stats")["pongs_received"] == 3
    assert testnet.query_call(b, "stats")["pongs_sent"] == 3


def test_counter_counts_and_survives_an_upgrade(testnet):
    c = testnet.install(Counter, arg=5)
    assert testnet.update_call(c, "increment", 2) == 7
    testnet.install(Counter, mode="upgrade", canister_id=c)
    assert testnet.query_call(c, "get") == 7
