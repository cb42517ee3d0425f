"""The round's instruction budget, traps of builtin classes, and the shipped canisters in the
sandbox."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from examples import counter, ledger, nondeterministic, ping_pong, treasury
from message_routing.limits import DEFAULT
from replica.ic.textual_ids import canister_text
from replica.execution import ExecutionEnvironment, install_canister
from replica.execution.management import install_code
from replica.execution.sandbox import load_sandboxed
from replica.sdk import Canister, update
from replica.load import load_canister
from state_manager.canister_state import CanisterState
from state_manager.ingress_history import IngressState

from .harness import USER, new_state, run, status, submit

HEAVY = '''
from replica.sdk import Canister, update


class Heavy(Canister):
    @update
    def work(self, n):
        total = 0
        for i in range(n):
            total += i
        self.stable["calls"] = self.stable.get("calls", 0) + 1
        return total
'''


def _heavy_subnet(canisters: tuple[int, ...]):
    env = ExecutionEnvironment()
    state = new_state()
    for cid in canisters:
        state.add_canister(CanisterState(cid, "", b"", controller=USER))
        install_code(state, env.modules, USER, cid, "install", HEAVY, "Heavy")
    return env, state


def _calls(state, cid: int) -> int:
    return state.canisters[cid].stable.get("calls", 0)


def test_a_round_stops_starting_messages_once_its_instructions_are_spent():
    env, state = _heavy_subnet((1,))
    for n in range(10):
        submit(state, 1, "work", 10_000, n=n)
    # One message uses about 60,000 instructions: a budget of 100,000 starts two a round
    # (the second starts within the budget and runs to its end).
    limits = DEFAULT.with_(max_instructions_per_round=100_000)
    done = []
    for _ in range(5):
        run(env, state, limits)
        done.append(_calls(state, 1))
    assert done == [2, 4, 6, 8, 10]


def test_the_instruction_budget_is_shared_fairly_by_the_rotation():
    env, state = _heavy_subnet((1, 2, 3))
    for cid in (1, 2, 3):
        for n in range(6):
            submit(state, cid, "work", 10_000, n=cid * 100 + n)
    limits = DEFAULT.with_(max_instructions_per_round=100_000)
    for height in range(3):
        state.metadata.batch_number = height
        run(env, state, limits)
    # Each round serves two messages, starting one canister further along each time.
    assert [_calls(state, cid) for cid in (1, 2, 3)] == [2, 2, 2]


def test_a_message_over_its_own_limit_ends_the_round_budget_too():
    env, state = _heavy_subnet((1,))
    first = submit(state, 1, "work", 10**9, n=1)
    second = submit(state, 1, "work", 1, n=2)
    limits = DEFAULT.with_(max_instructions_per_message=50_000, max_instructions_per_round=50_000)
    run(env, state, limits)
    assert status(state, first).reject_message == f"Canister {canister_text(1)} exceeded the instruction limit for single message execution"
    assert status(state, second).state is IngressState.RECEIVED   # not started this round
    run(env, state, limits)
    assert status(state, second).state is IngressState.REPLIED


class Exits(Canister):
    @update
    def leave(self, arg):
        raise SystemExit(3)


def test_a_builtin_class_raising_system_exit_traps():
    env = ExecutionEnvironment([Exits])
    state = new_state()
    install_canister(state, 1, Exits)
    mid = submit(state, 1, "leave", None)
    run(env, state)
    assert status(state, mid).reject_message == f"Canister {canister_text(1)} trapped: SystemExit: 3"


@pytest.mark.parametrize("module, class_name", [
    (counter, "Counter"), (ledger, "Ledger"), (ping_pong, "PingPong"), (treasury, "Treasury"),
    (nondeterministic, "SetOrder"), (load_canister, "LoadCanister"),
])
def test_the_shipped_canisters_are_in_the_subset(module, class_name):
    source = Path(inspect.getfile(module)).read_text()
    loaded = load_sandboxed(source, "canister_shipped", "<shipped>", 10**8, 2**30)
    assert issubclass(getattr(loaded.module, class_name), Canister)


BLOB = '''
from replica.sdk import Canister, update


class Blob(Canister):
    @update
    def put(self, arg):
        key, size = arg
        self.stable[key] = "x" * size
        return len(self.stable)
'''


def test_the_stable_limit_holds_for_a_replica_that_never_saw_the_state_grow():
    """A fresh environment (a restarted replica) has no cached size: it measures the state
    when a message grows it, and decides as the replica that cached it all along."""
    limits = DEFAULT.with_(max_stable_state_bytes=3000)
    env = ExecutionEnvironment()
    state = new_state()
    state.add_canister(CanisterState(1, "", b"", controller=USER))
    install_code(state, env.modules, USER, 1, "install", BLOB, "Blob")
    first = submit(state, 1, "put", ("a", 1000), n=1)
    run(env, state, limits)
    assert status(state, first).state is IngressState.REPLIED
    fresh = ExecutionEnvironment()
    for env_now, n in ((fresh, 2), (env, 3)):
        mid = submit(state, 1, "put", ("b", 2500), n=n)
        run(env_now, state, limits)
        assert "exceeds the limit of 3000 bytes" in status(state, mid).reject_message
    fits = submit(state, 1, "put", ("b", 1900), n=4)
    run(fresh, state, limits)
    assert status(state, fits).state is IngressState.REPLIED


SLOW_BODY = '''
from replica.sdk import Canister, update

TABLE = tuple(i * i for i in range(20000))


class Slow(Canister):
    @update
    def size(self):
        return len(TABLE)
'''


def test_an_install_refuses_a_module_body_over_its_limit_whether_or_not_it_is_cached():
    small = DEFAULT.with_(max_instructions_per_install=50_000)

    def install(env, state, cid, limits):
        state.add_canister(CanisterState(cid, "", b"", controller=USER))
        try:
            install_code(state, env.modules, USER, cid, "install", SLOW_BODY, "Slow", limits=limits)
            return "installed"
        except Exception as exc:  # noqa: BLE001 - the refusal's text is what is compared
            return str(exc)

    cached_env, cached_state = ExecutionEnvironment(), new_state()
    assert install(cached_env, cached_state, 1, DEFAULT) == "installed"   # now cached
    fresh = install(ExecutionEnvironment(), new_state(), 2, small)
    assert fresh == "the module exceeded the instruction limit for single message execution while it ran"
    assert install(cached_env, cached_state, 2, small) == fresh
