"""The example apps, run through the real state machine (loopback and across subnets)."""

from __future__ import annotations

import pathlib
import random
import subprocess
import sys

from examples.counter import Counter
from examples.ledger import Ledger, account_of
from examples.nondeterministic import SetOrder
from examples.ping_pong import PingPong
from message_routing.limits import DEFAULT, MINIMAL
from replica.execution import ExecutionEnvironment, install_canister
from replica.sdk import encode_value
from replica.inprocess.simulation import GENESIS_TIME_NS, Simulation
from state_manager.encoding import decode
from state_manager.ingress_history import IngressState
from state_manager.messages import Ingress, RejectCode

from .harness import SingleSubnet, message_id

ALL = [Counter, PingPong, Ledger, SetOrder]


def test_counter():
    net = SingleSubnet(ALL)
    install_canister(net.state, 1, Counter, 10)
    first, second = net.submit(1, "increment", 5), net.submit(1, "increment")
    bad = net.submit(1, "increment", "x")
    net.run_until_quiet()
    history = net.state.ingress_history
    assert decode(history.get(first).reply) == 15 and decode(history.get(second).reply) == 16
    assert history.get(bad).reject_code is RejectCode.CANISTER_ERROR
    assert net.query(1, "get") == 16


def test_ping_pong_on_one_subnet():
    net = SingleSubnet(ALL)
    install_canister(net.state, 1, PingPong)
    install_canister(net.state, 2, PingPong)
    mid = net.submit(1, "ping", {"target": 2, "rounds": 5})
    net.run_until_quiet()
    status = net.state.ingress_history.get(mid)
    assert status.state is IngressState.REPLIED
    assert decode(status.reply) == {"pings_sent": 5, "pongs_received": 5, "pongs_sent": 0}
    assert net.query(2, "stats") == {"pings_sent": 0, "pongs_received": 0, "pongs_sent": 5}


def test_ping_pong_to_a_missing_canister_rejects_the_caller():
    net = SingleSubnet(ALL)
    install_canister(net.state, 1, PingPong)
    mid = net.submit(1, "ping", {"target": 42, "rounds": 3})
    net.run_until_quiet()
    status = net.state.ingress_history.get(mid)
    assert status.reject_code is RejectCode.CANISTER_REJECT and "ping 1 failed (code 3)" in status.reject_message


def test_ping_pong_across_subnets():
    sim = Simulation({"subnet-a": (0, 99), "subnet-b": (100, 199)}, ExecutionEnvironment(ALL))
    install_canister(sim.state_of("subnet-a"), 1, PingPong)
    install_canister(sim.state_of("subnet-b"), 100, PingPong)
    ingress = Ingress(b"user", 1, "ping", encode_value({"target": 100, "rounds": 4}), message_id(1),
                      GENESIS_TIME_NS + 60 * 10**9)
    sim.submit(ingress)
    sim.run_until_quiescent()
    status = sim.state_of("subnet-a").ingress_history.get(ingress.message_id)
    assert decode(status.reply) == {"pings_sent": 4, "pongs_received": 4, "pongs_sent": 0}
    assert sim.state_of("subnet-b").canisters[100].stable["pongs_sent"] == 4


# -- ledger ----------------------------------------------------------------------------------

USERS = [bytes([i]) * 29 + b"\x02" for i in range(1, 4)]
LEDGERS = (1, 2)


def _ledger_net(limits):
    net = SingleSubnet(ALL, limits)
    for ledger in LEDGERS:
        balances = tuple((account_of(user), 100 * ledger) for user in USERS)
        install_canister(net.state, ledger, Ledger, {"balances": balances})
    install_canister(net.state, 3, Counter)  # not a ledger: transfers to it are refunded
    return net


def _totals(net):
    balances = sum(amount for ledger in LEDGERS for _, amount in net.query(ledger, "accounts"))
    escrow = sum(net.query(ledger, "escrow") for ledger in LEDGERS)
    return balances, escrow


def _run_transfers(limits, seed, rounds=30):
    net = _ledger_net(limits)
    supply = _totals(net)[0]
    rng = random.Random(seed)
    seen = []

    def check(net):
        balances, escrow = _totals(net)
        assert balances <= supply <= balances + escrow
        seen.append(escrow)

    for _ in range(rounds):
        for _ in range(rng.randint(0, 3)):
            user = rng.choice(USERS)
            ledger = rng.choice(LEDGERS)
            target = rng.choice((1, 2, 2, 1, 3, 42))  # 3 has no credit method, 42 does not exist
            amount = rng.choice((1, 5, 50, 500))
            net.submit(ledger, "transfer", {"to_ledger": target, "to": account_of(rng.choice(USERS)), "amount": amount},
                       source=user)
        net.round()
        check(net)
    net.run_until_quiet(each_round=check)
    balances, escrow = _totals(net)
    assert balances == supply and escrow == 0
    assert sum(net.query(ledger, "supply") for ledger in LEDGERS) == supply
    assert any(seen)  # some transfers were in flight at a round boundary
    return net


def test_ledger_transfers_keep_the_supply_invariant():
    net = _run_transfers(DEFAULT, seed=1)
    states = [s.state for s in net.state.ingress_history.statuses.values()]
    assert IngressState.REPLIED in states and IngressState.REJECTED in states


def test_ledger_transfers_keep_the_supply_invariant_under_back_pressure():
    _run_transfers(MINIMAL.with_(max_ingress_ttl_ns=DEFAULT.max_ingress_ttl_ns), seed=2, rounds=40)


def test_ledger_scenario_is_deterministic():
    assert _run_transfers(DEFAULT, seed=3).state == _run_transfers(DEFAULT, seed=3).state


def test_ledger_transfer_moves_tokens_and_refunds_failures():
    net = _ledger_net(DEFAULT)
    alice, bob = USERS[0], USERS[1]
    ok = net.submit(1, "transfer", {"to_ledger": 2, "to": "carol", "amount": 30}, source=alice)
    refunded = net.submit(1, "transfer", {"to_ledger": 3, "to": "carol", "amount": 20}, source=bob)
    poor = net.submit(1, "transfer", {"to_ledger": 2, "to": "carol", "amount": 1000}, source=bob)
    minted = net.submit(2, "credit", {"to": "mallory", "amount": 5}, source=alice)
    local = net.submit(1, "transfer_local", {"from": account_of(alice), "to": "dave", "amount": 10})
    net.run_until_quiet()
    history = net.state.ingress_history
    assert decode(history.get(ok).reply) == 60
    assert "transfer failed" in history.get(refunded).reject_message
    assert "insufficient funds" in history.get(poor).reject_message
    assert "ledgers only" in history.get(minted).reject_message
    assert decode(history.get(local).reply) == 60  # ingress runs in order: 100 - 30 - 10
    assert net.query(2, "balance", "carol") == 30 and net.query(1, "balance", "dave") == 10
    assert net.query(1, "balance", account_of(bob)) == 100
    assert net.query(1, "supply") == 270 and net.query(2, "supply") == 630


# -- the bad example -------------------------------------------------------------------------

_RECORD = """
from examples.nondeterministic import SetOrder
from replica.execution import ExecutionEnvironment, install_canister
from tests.execution.harness import SingleSubnet
net = SingleSubnet([SetOrder])
install_canister(net.state, 1, SetOrder)
net.submit(1, "record")
net.run_until_quiet()
print(net.query(1, "order"))
"""


def test_the_nondeterministic_example_diverges_across_hash_seeds():
    def order(seed):
        env = {"PYTHONHASHSEED": str(seed), "PATH": ""}
        return subprocess.run([sys.executable, "-c", _RECORD], env=env, capture_output=True, text=True,
                              check=True, cwd=_project_root()).stdout

    assert order(1) == order(1)
    assert len({order(seed) for seed in range(1, 5)}) > 1


def _project_root():
    return str(pathlib.Path(__file__).resolve().parents[2])
