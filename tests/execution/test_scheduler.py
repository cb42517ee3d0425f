"""The scheduler: message budgets, fairness across canisters, round-robin across queues."""

from __future__ import annotations

from message_routing.limits import DEFAULT
from replica.execution import ExecutionEnvironment, install_canister
from replica.execution.scheduler import canister_schedule
from state_manager.ingress_history import IngressState

from .apps import Recorder
from .harness import deliver_request, new_state, run, status, submit

ENV = ExecutionEnvironment([Recorder])


def recorders(*ids):
    s = new_state()
    for cid in ids:
        install_canister(s, cid, Recorder)
    return s


def log(s, cid):
    return s.canisters[cid].stable.get("log", ())


def test_per_canister_budget_is_respected():
    limits = DEFAULT.with_(max_messages_per_canister_per_round=3)
    s = recorders(1)
    for n in range(10):
        submit(s, 1, "m", n, n=n)
    for executed in (3, 6, 9, 10):
        run(ENV, s, limits)
        assert log(s, 1) == tuple(range(executed))


def test_subnet_budget_is_respected_and_split_in_schedule_order():
    limits = DEFAULT.with_(max_messages_per_canister_per_round=3, max_messages_per_round=5)
    s = recorders(1, 2, 3)
    for cid in (1, 2, 3):
        for n in range(3):
            submit(s, cid, "m", n, n=cid * 10 + n)
    s.metadata.batch_number = 1  # rotation: start at index 1 → canisters 2, 3, 1
    run(ENV, s, limits)
    assert [len(log(s, cid)) for cid in (1, 2, 3)] == [0, 3, 2]


def test_schedule_rotates_with_the_batch_number():
    s = recorders(1, 2, 3)
    for cid in (1, 2, 3):
        submit(s, cid, "m", 0, n=cid)
    orders = []
    for height in range(4):
        s.metadata.batch_number = height
        orders.append(canister_schedule(s))
    assert orders == [[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 2, 3]]


def test_a_flooded_canister_does_not_starve_another():
    # The whole subnet budget fits one canister's share: only the rotation keeps 2 served.
    limits = DEFAULT.with_(queue_capacity=1000, max_messages_per_canister_per_round=10, max_messages_per_round=10)
    s = recorders(1, 2)
    for n in range(500):
        deliver_request(s, 100, 1, "m", n, callback=n, limits=limits)
    mid = submit(s, 2, "m", "small", n=1)
    s.metadata.batch_number = 0
    run(ENV, s, limits)
    assert len(log(s, 1)) == 10 and status(s, mid).state is IngressState.RECEIVED
    s.metadata.batch_number = 1  # canister 2 now heads the line; 1 gets the rest of the budget
    run(ENV, s, limits)
    assert status(s, mid).state is IngressState.REPLIED
    assert len(log(s, 1)) == 19 and log(s, 2) == ("small",)


def test_round_robin_over_ingress_and_input_queues_with_a_persistent_cursor():
    limits = DEFAULT.with_(max_messages_per_canister_per_round=2)
    s = recorders(1)
    submit(s, 1, "m", "i0", n=0)
    submit(s, 1, "m", "i1", n=1)
    deliver_request(s, 100, 1, "m", "a0", callback=0)
    deliver_request(s, 100, 1, "m", "a1", callback=1)
    deliver_request(s, 101, 1, "m", "b0", callback=0)
    run(ENV, s, limits)
    assert log(s, 1) == ("a0", "b0") and s.canisters[1].queues.input_schedule == 101
    run(ENV, s, limits)
    assert log(s, 1) == ("a0", "b0", "i0", "a1") and s.canisters[1].queues.input_schedule == 100
    run(ENV, s, limits)
    assert log(s, 1) == ("a0", "b0", "i0", "a1", "i1") and s.canisters[1].queues.input_schedule is None


def _scenario():
    limits = DEFAULT.with_(max_messages_per_canister_per_round=2, max_messages_per_round=5)
    s = recorders(1, 2, 3)
    for cid in (1, 2, 3):
        for n in range(4):
            submit(s, cid, "m", (cid, n), n=cid * 100 + n)
            deliver_request(s, 100 + n, cid, "m", ("req", cid, n), callback=n)
    for height in range(1, 6):
        s.metadata.batch_number = height
        run(ENV, s, limits)
    return s


def test_same_state_and_inputs_give_the_same_state():
    first, second = _scenario(), _scenario()
    assert first == second
    assert sum(len(log(first, cid)) for cid in (1, 2, 3)) == 24
