"""Determinism with bounded-wait calls: a recorded run with time-outs, ``SYS_UNKNOWN`` and
shedding replays from its encoded genesis and batches (batch encoding version 2) to the same
hashes at every height, also after a restart from an encoded checkpoint (state encoding
version 3) in the middle."""

from __future__ import annotations

import pytest

from examples.ledger import account_of
from message_routing.batch import decode_batch, encode_batch
from message_routing.state_machine import execute_round
from replica.execution import ExecutionEnvironment, install_canister
from replica.sdk import encode_value
from replica.inprocess.simulation import NetworkKnobs, Simulation
from state_manager.encoding import decode
from state_manager.messages import Ingress
from state_manager.state_codec import decode_state, encode_state
from state_manager.state_manager import StateManager

from .bounded_canisters import BoundedRecorder, RetryingLedger
from .test_bounded_wait import LEDGERS, LIMITS, RANGES, RECORDERS, USERS


def environment() -> ExecutionEnvironment:
    return ExecutionEnvironment([BoundedRecorder, RetryingLedger])


@pytest.fixture(scope="module")
def recorded() -> Simulation:
    sim = Simulation(RANGES, environment(), limits=LIMITS, seed=7,
                     knobs=NetworkKnobs(max_delay_ticks=2, stale_probability=0.2, duplicate_probability=0.2))
    for cid in RECORDERS:
        install_canister(sim.state_of(sim.subnet_of(cid)), cid, BoundedRecorder)
    for cid in LEDGERS:
        install_canister(sim.state_of(sim.subnet_of(cid)), cid, RetryingLedger,
                         {"balances": tuple((account_of(u), 1_000) for u in USERS)})
    ids = iter(range(1, 10**6))

    def submit(receiver, method, arg):
        sim.submit(Ingress(USERS[0], receiver, method, encode_value(arg), next(ids).to_bytes(32, "big"),
                           sim.now + 30 * 10**9))
    for tick in range(30):
        sender = RECORDERS[tick % len(RECORDERS)]
        targets = tuple((RECORDERS[(tick + k) % len(RECORDERS)], ("ping", "relay")[k % 2], RECORDERS[k % len(RECORDERS)],
                         (1, 2, None, 3)[k % 4], (0, 150)[k % 2]) for k in range(5))
        submit(sender, "fire", targets)
        ledger = LEDGERS[tick % len(LEDGERS)]
        submit(ledger, "transfer_bounded", {"to_ledger": LEDGERS[(tick + 1) % len(LEDGERS)],
                                            "to": account_of(USERS[1]), "amount": 5, "timeout": 1 + tick % 3})
        sim.tick()
    for _ in range(20):
        sim.tick()
    return sim


def test_the_run_has_bounded_wait_traffic(recorded):
    totals: dict[str, int] = {}
    for subnet in recorded.subnets:
        for name, value in recorded.state_of(subnet).metadata.counters.items():
            totals[name] = totals.get(name, 0) + value
    for name in ("bounded_wait_callbacks_expired", "bounded_wait_messages_shed", "bounded_wait_late_responses_dropped"):
        assert totals.get(name, 0) > 0, (name, totals)
    versions = {decode(encode_batch(b))[0] for sim in recorded.subnets.values() for b in sim.batches}
    assert versions == {1, 2}  # batches with and without bounded-wait messages


def _replay(state, batches):
    manager = StateManager(state)
    topology = state.metadata.network_topology
    env = environment()
    hashes = []
    for batch in batches:
        state = execute_round(manager.take_tip(), batch, topology, env, LIMITS)
        trees = manager.commit(state)
        hashes.append((trees.height, trees.full_hash, trees.certified_root))
    return state, hashes


def test_replay_and_restart_give_the_recorded_hashes(recorded):
    for subnet, sim in recorded.subnets.items():
        batches = [decode_batch(encode_batch(b)) for b in sim.batches]
        final, hashes = _replay(decode_state(sim.genesis), batches)
        assert hashes == sim.hashes, subnet
        assert encode_state(final) == encode_state(sim.state)
        middle = len(batches) // 2
        state, _ = _replay(decode_state(sim.genesis), batches[:middle])
        checkpoint = encode_state(state)
        _, rest = _replay(decode_state(checkpoint), batches[middle:])
        assert rest == sim.hashes[middle:], subnet


def test_the_audits_shuffled_restart_reads_bounded_wait_checkpoints(recorded):
    """The audit's ``shuffle`` perturbation refills a checkpoint's containers in another order:
    a state encoded at the bounded-wait version must come back as the same state."""
    import random

    from replica.audit.shuffle import shuffled_state
    from state_manager.state_codec import state_uses_deadlines
    from state_manager.state_tree import build_state_trees

    checked = 0
    for sim in recorded.subnets.values():
        state = decode_state(sim.genesis)
        manager = StateManager(state)
        for batch in sim.batches:
            state = execute_round(manager.take_tip(), batch, state.metadata.network_topology, environment(), LIMITS)
            manager.commit(state)
            if state_uses_deadlines(state):
                data = encode_state(state)
                again = shuffled_state(data, random.Random(checked))
                assert build_state_trees(again).full_hash == build_state_trees(decode_state(data)).full_hash
                checked += 1
    assert checked > 0
