"""A seeded generator of multi-subnet batch logs, so audits run without a live testnet.

``generate_run(WorkloadConfig(...))`` builds a ``replica.inprocess.simulation.Simulation`` of
``subnets`` subnets, installs ``canisters`` example canisters on each (counters, ping-pong
players and ledgers, in turn), and every round submits about ``messages`` messages' worth
of user traffic per subnet:

* counter increments;
* pings to a ping-pong player on another subnet (request and reply cross as XNet messages)
  or on the same subnet (loopback);
* ledger transfers to a ledger on another subnet (an XNet ``credit`` call) or local ones.

Ingress is sized so that ingress plus XNet messages per batch come to about ``messages``.
The network delays, repeats and reorders stream slices (seeded ``NetworkKnobs``); every
slice a batch carries was trimmed and validated against the receiver's expected indices,
as a payload builder does. With ``nondeterministic`` each subnet also hosts the
deliberately broken ``examples.nondeterministic.SetOrder`` canister, called at heights
3, 8, 13, … Checkpoints are captured live every ``checkpoint_interval`` heights.

Pure: the same config gives the same run log, byte for byte (randomness from ``seed``).
"""

from __future__ import annotations

import hashlib
import random
import sys
from dataclasses import astuple, dataclass
from typing import Callable

from examples.counter import Counter
from examples.ledger import Ledger
from examples.nondeterministic import SetOrder
from examples.ping_pong import PingPong
from replica.execution import ExecutionEnvironment, install_canister
from replica.sdk import encode_value
from replica.testnet.naming import subnet_name
from replica.inprocess.simulation import NetworkKnobs, Simulation
from state_manager.messages import Ingress
from state_manager.state_codec import encode_state

from replica.audit.errors import IsolationError, WorkloadError
from replica.audit.isolation import check_child_hash_seed, decode_request, encode_answer, run_isolated
from replica.audit.run_log import LIMIT_PRESETS, RunLog, encode_run_log
from replica.testnet.recording import run_log_from_simulation

__all__ = ["WorkloadConfig", "generate_run", "generate_isolated", "NONDETERMINISTIC_PERIOD", "NONDETERMINISTIC_FIRST"]

SUBNET_SPAN = 1 << 20          # canister ids per subnet range
INGRESS_TTL_NS = 120 * 10**9
USERS = 8
INITIAL_BALANCE = 10**9
NONDETERMINISTIC_FIRST = 3     # SetOrder is called at heights 3, 8, 13, ...
NONDETERMINISTIC_PERIOD = 5
#: XNet messages a cross-subnet call adds to batches (its request and its reply).
_XNET_PER_CALL = 2
#: (kind, share of ingress); "remote" kinds cross subnets.
_MIX = (("increment", 0.35), ("ping_remote", 0.25), ("ping_local", 0.15),
        ("transfer_remote", 0.15), ("transfer_local", 0.10))


@dataclass(frozen=True)
class WorkloadConfig:
    subnets: int = 4
    canisters: int = 16
    batches: int = 50
    messages: int = 100
    seed: int = 1
    nondeterministic: bool = False
    checkpoint_interval: int = 10
    limits: str = "DEFAULT"

    def __post_init__(self) -> None:
        for name in ("subnets", "canisters", "batches", "messages", "checkpoint_interval"):
            if type(getattr(self, name)) is not int or getattr(self, name) < 1:
                raise WorkloadError(f"{name} must be a positive int")
        if self.canisters < 3:
            raise WorkloadError("at least 3 canisters per subnet (one of each example app)")
        if self.subnets > 999:
            raise WorkloadError("at most 999 subnets")
        if self.limits not in LIMIT_PRESETS:
            raise WorkloadError(f"limits must be one of {sorted(LIMIT_PRESETS)}")


def _user(seed: int, n: int) -> bytes:
    """A user id shaped as the IC's self-authenticating principals are (``SHA-224 · 0x02``, 29
    bytes), of no key: the workload's calls skip the ingress API."""
    return hashlib.sha224(f"workload-user/{seed}/{n}".encode()).digest() + b"\x02"


class _SeededTraffic:
    """Picks the seeded calls of one round."""

    def __init__(self, config: WorkloadConfig, apps: dict[str, dict[type, list[int]]]) -> None:
        self.config = config
        self.apps = apps
        self.rng = random.Random(f"workload/{config.seed}")
        self.users = [_user(config.seed, n) for n in range(USERS)]
        self.sent = 0
        cross = sum(share for kind, share in _MIX if kind.endswith("_remote")) if config.subnets > 1 else 0.0
        self.per_round = max(1, round(config.messages / (1 + _XNET_PER_CALL * cross)))

    def _other(self, subnet: str, cls: type) -> int:
        others = [s for s in self.apps if s != subnet]
        return self.rng.choice(self.apps[self.rng.choice(others)][cls])

    def call(self, subnet: str) -> tuple[int, str, object, bytes]:
        rng, apps, remote = self.rng, self.apps[subnet], len(self.apps) > 1
        kind = rng.choices([k for k, _ in _MIX], [w for _, w in _MIX])[0]
        user = rng.choice(self.users)
        if kind == "increment":
            return rng.choice(apps[Counter]), "increment", rng.randint(1, 9), user
        if kind.startswith("ping"):
            target = self._other(subnet, PingPong) if kind == "ping_remote" and remote else rng.choice(apps[PingPong])
            return rng.choice(apps[PingPong]), "ping", {"target": target, "rounds": 1}, user
        if kind == "transfer_remote" and remote:
            arg = {"to_ledger": self._other(subnet, Ledger), "to": f"acct-{rng.randrange(64)}", "amount": rng.randint(1, 99)}
            return rng.choice(apps[Ledger]), "transfer", arg, user
        arg = {"from": user.hex(), "to": f"acct-{rng.randrange(64)}", "amount": rng.randint(1, 99)}
        return rng.choice(apps[Ledger]), "transfer_local", arg, user

    def ingress(self, receiver: int, method: str, arg: object, user: bytes, now: int) -> Ingress:
        self.sent += 1
        message_id = hashlib.sha256(f"workload-ingress/{self.config.seed}/{self.sent}".encode()).digest()
        return Ingress(user, receiver, method, encode_value(arg), message_id, now + INGRESS_TTL_NS)


def _install(sim: Simulation, config: WorkloadConfig, users: list[bytes]) -> dict[str, dict[type, list[int]]]:
    apps: dict[str, dict[type, list[int]]] = {}
    balances = tuple((u.hex(), INITIAL_BALANCE) for u in users)
    for position, subnet in enumerate(sorted(sim.subnets)):
        state = sim.state_of(subnet)
        apps[subnet] = {Counter: [], PingPong: [], Ledger: [], SetOrder: []}
        low = position * SUBNET_SPAN
        for k in range(config.canisters):
            cls = (Counter, PingPong, Ledger)[k % 3]
            install_canister(state, low + k, cls, {"balances": balances} if cls is Ledger else None)
            apps[subnet][cls].append(low + k)
        if config.nondeterministic:
            install_canister(state, low + config.canisters, SetOrder)
            apps[subnet][SetOrder].append(low + config.canisters)
    return apps


def generate_run(config: WorkloadConfig, progress: Callable[[int, int], None] | None = None) -> RunLog:
    """Run the workload (module docstring) and return its run log."""
    ranges = {subnet_name(i): (i * SUBNET_SPAN, (i + 1) * SUBNET_SPAN - 1) for i in range(config.subnets)}
    classes = [Counter, PingPong, Ledger] + ([SetOrder] if config.nondeterministic else [])
    knobs = NetworkKnobs(max_delay_ticks=1, stale_probability=0.05, duplicate_probability=0.05,
                         shuffle_tick_order=True)
    sim = Simulation(ranges, ExecutionEnvironment(classes), limits=LIMIT_PRESETS[config.limits], knobs=knobs,
                     seed=config.seed)
    traffic = _SeededTraffic(config, {})
    traffic.apps = _install(sim, config, traffic.users)
    checkpoints: dict[str, dict[int, bytes]] = {s: {} for s in sim.subnets}
    for tick in range(1, config.batches + 1):
        for subnet in sorted(sim.subnets):
            for _ in range(traffic.per_round):
                receiver, method, arg, user = traffic.call(subnet)
                sim.submit(traffic.ingress(receiver, method, arg, user, sim.now), subnet)
            if config.nondeterministic and tick % NONDETERMINISTIC_PERIOD == NONDETERMINISTIC_FIRST % NONDETERMINISTIC_PERIOD:
                target = traffic.apps[subnet][SetOrder][0]
                sim.submit(traffic.ingress(target, "record", None, traffic.users[0], sim.now), subnet)
        sim.tick()
        if tick % config.checkpoint_interval == 0:
            for subnet in sim.subnets:
                checkpoints[subnet][tick] = encode_state(sim.state_of(subnet))
        if progress is not None:
            progress(tick, config.batches)
    return run_log_from_simulation(sim, checkpoint_interval=config.checkpoint_interval, checkpoints=checkpoints)


def generate_isolated(config: WorkloadConfig, hash_seed: int) -> bytes:
    """``generate_run(config)`` in a child process under ``hash_seed``, as a run-log blob.

    A workload with the nondeterministic canister depends on the hash seed of the process
    that runs it; generating under the seed the audit's workers use makes the "live" run
    the one a plain replica reproduces."""
    rows = list(run_isolated(b"", "generate", hash_seed, [astuple(config)],
                             child_module="replica.inprocess.workload", modes=("generate",)))
    if len(rows) != 1 or not isinstance(rows[0][0], bytes):
        raise IsolationError("the generator child answered no run log")
    return rows[0][0]


def _child_main() -> int:
    """``python -m replica.inprocess.workload``: the child of ``generate_isolated``."""
    _, seed, _, items = decode_request(sys.stdin.buffer.read(), modes=("generate",))
    check_child_hash_seed(seed)
    (config,) = items
    sys.stdout.buffer.write(encode_answer([(encode_run_log(generate_run(WorkloadConfig(*config))),)]))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
