"""Two subnets (alpha, beta) with the example apps, over real gRPC on 127.0.0.1.

Canisters: ``PINGER`` (ping-pong) and ``LEDGER`` on each subnet. Users: alice banks on
alpha, bob on beta. ``drive`` submits cross-subnet pings and ledger transfers in both
directions; ``settled`` says when every call is answered and both streams are fully
acknowledged; ``check_invariants`` asserts exactly-once induction, guaranteed replies, the
apps' invariants and that the recorded run replays to the same hashes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from consensus_stub.genesis import SubnetSpec
from examples.ledger import Ledger, account_of
from examples.ping_pong import PingPong
from message_routing.batch import decode_batch
from message_routing.limits import DEFAULT
from message_routing.state_machine import execute_round
from replica.execution import ExecutionEnvironment, install_canister
from replica.client import identity_from_seed, sign_ingress
from replica.inprocess.local import LocalTestnet
from replica.node.replica_node import NodeConfig
from replica.inprocess.subnet import NodeHooks
from state_manager.ingress_history import IngressState
from state_manager.state_codec import decode_state
from state_manager.state_manager import StateManager

ALPHA, BETA = "alpha", "beta"
RANGES = {ALPHA: (0, 999), BETA: (1000, 1999)}
PINGER, LEDGER = 1, 2
INITIAL_BALANCE = 1_000_000
LIMITS = DEFAULT
CONFIG = NodeConfig(refresh_interval_s=0.03, fetch_timeout_s=0.5, max_response_bytes=1024 * 1024,
                    server_workers=3, max_parallel_fetches=2)
SEED = b"integration-test-genesis-seed-32b"


def canister(subnet: str, offset: int) -> int:
    return RANGES[subnet][0] + offset


USERS = {"alice": identity_from_seed(b"alice"), "bob": identity_from_seed(b"bob")}
HOME = {"alice": ALPHA, "bob": BETA}


def _setup(subnet: str, state) -> None:
    holders = tuple((account_of(USERS[u].principal.raw), INITIAL_BALANCE) for u in sorted(USERS) if HOME[u] == subnet)
    install_canister(state, canister(subnet, PINGER), PingPong)
    install_canister(state, canister(subnet, LEDGER), Ledger, {"balances": holders})


def make_testnet(nodes: int = 4, hooks: dict[str, NodeHooks] | None = None, config: NodeConfig = CONFIG,
                 **options) -> LocalTestnet:
    specs = [SubnetSpec(s, nodes, (RANGES[s],)) for s in (ALPHA, BETA)]
    env = ExecutionEnvironment([PingPong, Ledger])
    return LocalTestnet(specs, env, LIMITS, seed=SEED, setup=_setup, config=config, hooks=hooks, **options)


@dataclass
class Traffic:
    submitted: dict[str, list[bytes]] = field(default_factory=lambda: {ALPHA: [], BETA: []})
    pings: dict[str, int] = field(default_factory=lambda: {ALPHA: 0, BETA: 0})
    nonce: int = 0


def _submit(net: LocalTestnet, traffic: Traffic, user: str, receiver: int, method: str, arg) -> None:
    traffic.nonce += 1
    subnet = next(s for s, (lo, hi) in RANGES.items() if lo <= receiver <= hi)
    envelope = sign_ingress(USERS[user], receiver, method, arg, traffic.nonce, time.time_ns() + 120 * 10**9)
    ingress = net.subnets[subnet].submit(envelope)
    traffic.submitted[subnet].append(ingress.message_id)


def drive(net: LocalTestnet, *, rounds: int = 3, transfers: int = 3, traffic: Traffic | None = None) -> Traffic:
    """Cross-subnet calls in both directions: pings with ``rounds`` round trips and
    ``transfers`` ledger transfers per user (added to ``traffic`` if given)."""
    traffic = traffic or Traffic()
    for user, home in sorted(HOME.items()):
        other = BETA if home == ALPHA else ALPHA
        _submit(net, traffic, user, canister(home, PINGER), "ping",
                {"target": canister(other, PINGER), "rounds": rounds})
        traffic.pings[home] += rounds
        for amount in range(1, transfers + 1):
            to = "bob" if user == "alice" else "alice"
            _submit(net, traffic, user, canister(home, LEDGER), "transfer",
                    {"to_ledger": canister(other, LEDGER), "to": account_of(USERS[to].principal.raw), "amount": amount * 10})
    return traffic


def _streams(net: LocalTestnet, subnet: str) -> dict:
    return net.subnets[subnet].read(lambda s: {dst: (st.begin, st.end, st.signals_end, len(st.reject_signals))
                                               for dst, st in s.streams.items()})


def settled(net: LocalTestnet, traffic: Traffic) -> bool:
    """Every submitted call answered; both streams garbage-collected to their ends and
    acknowledged by the peer; no call context left open."""
    for subnet, ids in traffic.submitted.items():
        for mid in ids:
            status = net.subnets[subnet].ingress_status(mid)
            if status is None or status.state not in (IngressState.REPLIED, IngressState.REJECTED):
                return False
    for src, dst in ((ALPHA, BETA), (BETA, ALPHA)):
        ours = _streams(net, src).get(dst)
        theirs = _streams(net, dst).get(src)
        if ours is None or theirs is None:
            return False
        begin, end, _, rejects = ours
        if begin != end or rejects or theirs[2] != end:
            return False
    for subnet in (ALPHA, BETA):
        if net.subnets[subnet].read(lambda s: any(c.call_contexts or c.callbacks for c in s.canisters.values())):
            return False
    return True


def run_to_settlement(net: LocalTestnet, traffic: Traffic, timeout_s: float = 40.0) -> int:
    return net.run_until(lambda: settled(net, traffic), timeout_s=timeout_s)


def replay_matches(net: LocalTestnet, subnet: str) -> bool:
    """The recorded genesis + batches replay (fresh state, fresh state manager) to the
    recorded hashes at every height."""
    sub = net.subnets[subnet]
    recording = sub.recording
    state = decode_state(recording.genesis)
    manager = StateManager(state)
    registry = net.current_registry
    for data, (height, full_hash, root) in zip(recording.batches, recording.hashes):
        batch = decode_batch(data)
        state = execute_round(manager.take_tip(), batch, registry.topology(batch.registry_version),
                              net.environment, LIMITS)
        trees = manager.commit(state)
        if (trees.height, trees.full_hash, trees.certified_root) != (height, full_hash, root):
            return False
    return len(recording.batches) == sub.height


def check_invariants(net: LocalTestnet, traffic: Traffic) -> None:
    counters = {s: dict(net.subnets[s].read(lambda st: dict(st.metadata.counters))) for s in (ALPHA, BETA)}
    streams = {s: _streams(net, s) for s in (ALPHA, BETA)}
    for receiver, sender in ((ALPHA, BETA), (BETA, ALPHA)):
        c = counters[receiver]
        # exactly once: every message the sender ever put in its stream to us was inducted once
        assert c["xnet_messages_inducted"] == streams[sender][receiver][1], (receiver, c, streams)
        assert streams[receiver][sender][2] == streams[sender][receiver][1]
        for name in ("critical_errors", "dropped_invalid_sender", "dropped_responses_without_callback",
                     "dropped_responses_unroutable", "reject_signals_sent", "synthetic_rejects"):
            assert c[name] == 0, (receiver, name, c)
    # guaranteed replies: every call got exactly one answer, here a reply
    for subnet, ids in traffic.submitted.items():
        for mid in ids:
            assert net.subnets[subnet].ingress_status(mid).state is IngressState.REPLIED
    # ping-pong: every ping answered by exactly one pong, in both directions
    for home, other in ((ALPHA, BETA), (BETA, ALPHA)):
        mine = net.subnets[home].query(canister(home, PINGER), "stats")
        theirs = net.subnets[other].query(canister(other, PINGER), "stats")
        assert mine["pings_sent"] == mine["pongs_received"] == traffic.pings[home]
        assert theirs["pongs_sent"] == traffic.pings[home]
    # ledger: supply preserved, nothing left in escrow
    total = escrow = 0
    for subnet in (ALPHA, BETA):
        ledger = canister(subnet, LEDGER)
        total += sum(amount for _, amount in net.subnets[subnet].query(ledger, "accounts"))
        escrow += net.subnets[subnet].query(ledger, "escrow")
    assert (total, escrow) == (INITIAL_BALANCE * len(USERS), 0)
    for subnet in (ALPHA, BETA):
        assert replay_matches(net, subnet)
