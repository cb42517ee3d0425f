"""``replica simulate`` (``run_simulation``): the example apps in the in-process simulation.

The apps of ``replica demo`` (``live_demo``), over a deliberately hostile network (delays,
stale and duplicated slices, shuffled tick order), audited the same way. Faster; no
processes or sockets.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from examples.counter import Counter
from examples.ledger import Ledger, account_of
from examples.ping_pong import PingPong
from message_routing.limits import DEFAULT
from replica.execution import ExecutionEnvironment, install_canister, run_query
from replica.client import Ed25519Identity, decode_signed_ingress, sign_ingress, source_of
from replica.ic.textual_ids import canister_text
from replica.progress import Progress
from replica.testnet.naming import subnet_name
from replica.inprocess.simulation import TICK_NS, NetworkKnobs, Simulation
from state_manager.encoding import decode
from state_manager.ingress_history import IngressState
from state_manager.messages import Reply

__all__ = ["DemoNetwork", "build_demo", "run_simulation"]

SUBNETS = {subnet_name(i): (i * 1000, i * 1000 + 999) for i in range(3)}
LEDGER, PINGER, COUNTER = 1, 2, 3
INITIAL_BALANCE = 1_000_000


@dataclass
class DemoNetwork:
    simulation: Simulation
    users: dict[str, Ed25519Identity]
    home: dict[str, str]           # user -> subnet whose ledger holds their tokens
    initial_supply: int
    submitted: list[bytes]


def _canister(subnet: str, offset: int) -> int:
    return SUBNETS[subnet][0] + offset


def build_demo(seed: int) -> DemoNetwork:
    env = ExecutionEnvironment([Ledger, PingPong, Counter])
    knobs = NetworkKnobs(max_delay_ticks=2, stale_probability=0.1, duplicate_probability=0.1, shuffle_tick_order=True)
    sim = Simulation(SUBNETS, env, limits=DEFAULT, knobs=knobs, seed=seed)
    users = {name: Ed25519Identity.from_seed(name.encode()) for name in ("alice", "bob", "carol")}
    home = dict(zip(users, sorted(SUBNETS)))
    for subnet in SUBNETS:
        state = sim.state_of(subnet)
        holders = tuple((account_of(source_of(users[u])), INITIAL_BALANCE) for u in users if home[u] == subnet)
        install_canister(state, _canister(subnet, LEDGER), Ledger, {"balances": holders})
        install_canister(state, _canister(subnet, PINGER), PingPong)
        install_canister(state, _canister(subnet, COUNTER), Counter)
    return DemoNetwork(sim, users, home, INITIAL_BALANCE * len(users), [])


def _submit(net: DemoNetwork, user: str, receiver: int, method: str, arg, nonce: int) -> None:
    sim = net.simulation
    envelope = sign_ingress(net.users[user], receiver, method, arg, nonce, sim.now + 120 * TICK_NS)
    ingress = decode_signed_ingress(envelope, DEFAULT.max_ingress_bytes, now_ns=sim.now)  # the ingress API's checks
    sim.submit(ingress)
    net.submitted.append(ingress.message_id)


def drive_traffic(net: DemoNetwork, rng: random.Random, ticks: int, status: Progress | None = None) -> None:
    subnets = sorted(SUBNETS)
    nonce = 0
    for tick in range(ticks):
        for user in sorted(net.users):
            nonce += 1
            src, dst = net.home[user], rng.choice(subnets)
            action = rng.random()
            if action < 0.5:
                to_user = rng.choice(sorted(net.users))
                _submit(net, user, _canister(src, LEDGER), "transfer",
                        {"to_ledger": _canister(dst, LEDGER), "to": account_of(source_of(net.users[to_user])),
                         "amount": rng.randint(1, 500)}, nonce)
            elif action < 0.8:
                _submit(net, user, _canister(rng.choice(subnets), COUNTER), "increment", rng.randint(1, 9), nonce)
            else:
                target = rng.choice([s for s in subnets if s != src])
                _submit(net, user, _canister(src, PINGER), "ping",
                        {"target": _canister(target, PINGER), "rounds": rng.randint(1, 4)}, nonce)
        net.simulation.tick()
        if status:
            status.update(f"height {tick + 1}", done=tick + 1)


def _query(net: DemoNetwork, subnet: str, canister: int, method: str, arg=None):
    sim = net.simulation
    answer = run_query(sim.execution_environment.registry, sim.state_of(subnet), canister, method, arg, b"demo",
                       sim.limits)
    if type(answer) is not Reply:
        raise RuntimeError(f"query {method} on canister {canister_text(canister)} was rejected: {answer.message}")
    return decode(answer.data) if answer.data else None


def ledger_totals(net: DemoNetwork) -> tuple[int, int]:
    """(Σ balances, Σ escrow) over every ledger, read with queries."""
    balances = escrow = 0
    for subnet in SUBNETS:
        ledger = _canister(subnet, LEDGER)
        balances += sum(amount for _, amount in _query(net, subnet, ledger, "accounts"))
        escrow += _query(net, subnet, ledger, "escrow")
    return balances, escrow


def run_simulation(seed: int = 7, ticks: int = 40, out: str = "runs/simulation") -> int:
    rng = random.Random(seed)
    net = build_demo(seed)
    sim = net.simulation
    status = Progress("simulation: 3 subnets running", total=ticks)
    drive_traffic(net, rng, ticks, status)
    settle = sim.run_until_quiescent(max_ticks=500)
    status.finish(f"({ticks} ticks of traffic, {settle} more to settle)")

    outcomes = {state: 0 for state in IngressState}
    for subnet in SUBNETS:
        history = sim.state_of(subnet).ingress_history
        for mid in net.submitted:
            status_ = history.get(mid)
            if status_ is not None:
                outcomes[status_.state] += 1
    balances, escrow = ledger_totals(net)
    print("\n== Subnets ==")
    for subnet, sub in sim.subnets.items():
        c = sub.state.metadata.counters
        height, full_hash, certified_root = sub.hashes[-1]
        print(f"  {subnet:6} height {height:4}  xnet inducted {c['xnet_messages_inducted']:5}  "
              f"synthetic rejects {c['synthetic_rejects']:3}  root {certified_root.hex()[:16]}  full {full_hash.hex()[:16]}")
    print(f"  slice deliveries refused by validation (stale/duplicate): {sim.rejected_deliveries}")
    print("\n== User calls ==")
    print("  " + ", ".join(f"{s.name.lower()} {n}" for s, n in outcomes.items() if n))
    print("\n== Apps ==")
    for subnet in SUBNETS:
        counter = _query(net, subnet, _canister(subnet, COUNTER), "get")
        pings = _query(net, subnet, _canister(subnet, PINGER), "stats")
        print(f"  {subnet:6} counter {counter:5}  ping-pong {pings}")
    ok = balances == net.initial_supply and escrow == 0
    print(f"  ledger supply: {balances} in balances + {escrow} in escrow (initial {net.initial_supply}) "
          f"-> {'invariant holds' if ok else 'INVARIANT BROKEN'}")

    print("\n== Determinism audit of the recorded run ==")
    from replica.audit.session import audit_run_log
    from replica.testnet.recording import record_run

    run_dir = Path(out) / "run"
    audited = audit_run_log(record_run(sim, run_dir), run_dir=str(run_dir), out=Path(out) / "audit")
    return 0 if ok and audited == 0 else 1
