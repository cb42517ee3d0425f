"""Small runs for the audit tests: a hand-driven recorded simulation and generated workloads."""

from __future__ import annotations

from examples.counter import Counter
from examples.ledger import Ledger
from examples.ping_pong import PingPong
from replica.testnet.recording import run_log_from_simulation
from replica.audit.run_log import RunLog
from replica.inprocess.workload import WorkloadConfig, generate_run
from replica.execution import ExecutionEnvironment, install_canister
from replica.sdk import encode_value
from replica.inprocess.simulation import GENESIS_TIME_NS, Simulation
from state_manager.messages import Ingress

A, B = "subnet-a", "subnet-b"
USER = b"\x05" * 29 + b"\x02"

#: Small enough for thousands of replicas in seconds, big enough for XNet traffic both ways.
SMALL = WorkloadConfig(subnets=2, canisters=6, batches=10, messages=12, seed=5, checkpoint_interval=4)


def recorded_simulation(ticks: int = 10) -> Simulation:
    """Two subnets with counters, ping-pong players and ledgers, driven by hand."""
    sim = Simulation({A: (0, 99), B: (100, 199)}, ExecutionEnvironment([Counter, PingPong, Ledger]), seed=3)
    for subnet, base in ((A, 0), (B, 100)):
        state = sim.state_of(subnet)
        install_canister(state, base + 1, Counter, 5)
        install_canister(state, base + 2, PingPong)
        install_canister(state, base + 3, Ledger, {"balances": ((USER.hex(), 1000),)})
    n = 0
    for tick in range(ticks):
        for receiver, method, arg in ((1, "increment", tick + 1), (101, "increment", 2),
                                      (2, "ping", {"target": 102, "rounds": 2}),
                                      (103, "transfer", {"to_ledger": 3, "to": "bob", "amount": 7})):
            n += 1
            sim.submit(Ingress(USER, receiver, method, encode_value(arg), n.to_bytes(32, "big"),
                               GENESIS_TIME_NS + (tick + 60) * 10**9))
        sim.tick()
    return sim


def recorded_run(ticks: int = 10, checkpoint_interval: int = 4) -> RunLog:
    return run_log_from_simulation(recorded_simulation(ticks), checkpoint_interval=checkpoint_interval)


def small_run(**changes) -> RunLog:
    from dataclasses import replace
    return generate_run(replace(SMALL, **changes))
