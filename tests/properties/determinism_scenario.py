"""A recorded multi-subnet run for the determinism tests, usable in-process and as a script.

``record_run()`` drives three subnets through seeded traffic (recorders calling each other
across subnets, ledger transfers, ping-pong, counters, optionally the nondeterministic
``SetOrder`` canister) over a hostile network with ``MINIMAL`` limits, and returns the
simulation with every subnet's genesis, batches and committed hashes recorded.
``summary(sim)`` is what must be identical everywhere: per subnet, the hashes of every
height and the digest of the final canonical state encoding.

Run as ``python -m tests.properties.determinism_scenario [--nondeterministic]`` it prints
the summary as one JSON line (the tests run it under several ``PYTHONHASHSEED`` values).
"""

from __future__ import annotations

import hashlib
import json
import random
import sys

from examples.counter import Counter
from examples.ledger import Ledger, account_of
from examples.nondeterministic import SetOrder
from examples.ping_pong import PingPong
from message_routing.limits import MINIMAL
from replica.execution import ExecutionEnvironment, install_canister
from replica.sdk import encode_value
from replica.inprocess.simulation import NetworkKnobs, Simulation
from state_manager.messages import Ingress
from state_manager.state_codec import encode_state

from .canisters import Recorder

__all__ = ["CLASSES", "LIMITS", "record_run", "summary", "environment"]

CLASSES = (Recorder, Ledger, PingPong, Counter, SetOrder)
LIMITS = MINIMAL
RANGES = {"subnet-a": (0, 99), "subnet-b": (100, 199), "subnet-c": (200, 299)}
KNOBS = NetworkKnobs(max_delay_ticks=2, stale_probability=0.2, duplicate_probability=0.2, drop_probability=0.1,
                     shuffle_tick_order=True)
RECORDERS = (1, 101, 201)
LEDGERS = (10, 110, 210)
PINGERS = (20, 120)
COUNTER = 130
SET_ORDER = 230
USERS = tuple(bytes([i]) * 29 + b"\x02" for i in range(1, 4))
TARGETS = RECORDERS + LEDGERS + (50, 1_000)


def environment() -> ExecutionEnvironment:
    return ExecutionEnvironment(CLASSES)


def record_run(*, nondeterministic: bool = False, ticks: int = 40, seed: int = 7) -> Simulation:
    sim = Simulation(RANGES, environment(), limits=LIMITS, knobs=KNOBS, seed=seed)
    balances = tuple((account_of(user), 500) for user in USERS)
    for cid in RECORDERS:
        install_canister(sim.state_of(sim.subnet_of(cid)), cid, Recorder)
    for cid in LEDGERS:
        install_canister(sim.state_of(sim.subnet_of(cid)), cid, Ledger, {"balances": balances})
    for cid in PINGERS:
        install_canister(sim.state_of(sim.subnet_of(cid)), cid, PingPong)
    install_canister(sim.state_of(sim.subnet_of(COUNTER)), COUNTER, Counter, 5)
    install_canister(sim.state_of(sim.subnet_of(SET_ORDER)), SET_ORDER, SetOrder)

    rng = random.Random(seed)
    nonce = 0

    def submit(receiver: int, method: str, arg, source: bytes = USERS[0]) -> None:
        nonce_bytes = (nonce).to_bytes(32, "big")
        sim.submit(Ingress(source, receiver, method, encode_value(arg), nonce_bytes,
                           sim.now + rng.choice((3, 20, 60)) * 10**9))

    for tick in range(ticks):
        for _ in range(rng.randint(0, 3)):
            nonce += 1
            kind = rng.randrange(5)
            if kind == 0:
                calls = tuple((rng.choice(TARGETS), rng.choice(("ping", "relay")), rng.choice(TARGETS))
                              for _ in range(rng.randint(1, 6)))
                submit(rng.choice(RECORDERS), "fire", calls)
            elif kind == 1:
                submit(rng.choice(LEDGERS), "transfer",
                       {"to_ledger": rng.choice(LEDGERS + (50,)), "to": account_of(rng.choice(USERS)),
                        "amount": rng.choice((1, 30, 400))}, source=rng.choice(USERS))
            elif kind == 2:
                submit(PINGERS[0], "ping", {"target": rng.choice((PINGERS[1], COUNTER)), "rounds": rng.randint(1, 3)})
            elif kind == 3:
                submit(COUNTER, "increment", rng.randint(1, 9))
            elif nondeterministic:
                submit(SET_ORDER, "record", None)
        sim.tick()
    sim.run_until_quiescent(max_ticks=300)
    return sim


def summary(sim: Simulation) -> dict[str, dict[str, object]]:
    """Per subnet: the hex hashes of every committed height and of the final state encoding."""
    return {
        subnet: {
            "hashes": [[height, full.hex(), certified.hex()] for height, full, certified in recorded.hashes],
            "state_sha256": hashlib.sha256(encode_state(recorded.state)).hexdigest(),
        }
        for subnet, recorded in sorted(sim.subnets.items())
    }


def main(argv: list[str]) -> None:
    print(json.dumps(summary(record_run(nondeterministic="--nondeterministic" in argv)), sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
