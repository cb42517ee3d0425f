"""Bounded-wait calls as a Hypothesis state machine over three simulated subnets (issue 17).

Hostile network (delays, stale, duplicated and dropped deliveries, shuffled and partial tick
orders), tiny queues and streams (``MINIMAL``) and a bounded-wait byte budget small enough
that messages are shed. The execution budget is raised so that no canister's input backs up
(see ``callbacks_run_by_deadline_plus_one_round``). Traffic: ``BoundedRecorder`` canisters
calling each other with bounded-wait and guaranteed-response calls (short timeouts, padded
payloads), relays, and ``RetryingLedger`` transfers with bounded-wait calls.

The guarantee (``message_routing.timeouts``), checked after every step:

* at most one response: no callback has two responses waiting, none waits without its
  callback, and no callback runs twice (``double_answers``);
* by deadline + 1 round: after the first round of a subnet in which a callback is expired
  (``is_expired``), its one response (reply, reject or ``SYS_UNKNOWN``) is waiting or the
  callback has run;
* ledger supply: ``Σ balances ≤ S ≤ Σ (balances + escrow)``, with time-outs and shedding;
* no critical errors and no response dropped at execution;
* the incrementally hashed committed state equals the state hashed from scratch.

At the end: every call answered exactly once, each bounded-wait callback ran no later than
the first round of its subnet in which it was expired, every guaranteed-response call that
was executed was replied (never ``SYS_UNKNOWN``), and after retries the supply is exact
with zero escrow.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from examples.ledger import BALANCE, ESCROW, account_of
from message_routing.limits import MINIMAL
from replica.execution import ExecutionEnvironment, install_canister
from replica.sdk import encode_value
from replica.inprocess.simulation import NetworkKnobs, Simulation
from state_manager.deadlines import compute_call_deadline, is_expired
from state_manager.messages import Ingress, RejectCode, Response

from .test_routing_invariants import check_hashes
from .bounded_canisters import PENDING, REJECTED_BASE, REPLIED, BoundedRecorder, RetryingLedger, bounded_calls, received

LIMITS = MINIMAL.with_(bounded_wait_message_memory_capacity=600, max_messages_per_canister_per_round=100,
                       max_messages_per_round=1_000)
A, B, C = "subnet-a", "subnet-b", "subnet-c"
SUBNETS = (A, B, C)
RANGES = {A: (0, 99), B: (100, 199), C: (200, 299)}
RECORDERS = (1, 2, 101, 201)
LEDGERS = (10, 110, 210)
USERS = tuple(bytes([i]) * 29 + b"\x02" for i in range(1, 3))
INITIAL_BALANCE = 1_000
SUPPLY = INITIAL_BALANCE * len(USERS) * len(LEDGERS)
SECOND = 10**9
NEVER = ("critical_errors", "dropped_invalid_sender", "dropped_responses_without_callback",
         "dropped_responses_unroutable")

calls = st.tuples(st.sampled_from(RECORDERS), st.sampled_from(("ping", "ping", "relay")), st.sampled_from(RECORDERS),
                  st.sampled_from((None, 1, 2, 3, 10)), st.sampled_from((0, 0, 150)))


class BoundedWaitMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.sim: Simulation | None = None
        self.nonce = 0
        self.round_times: dict[str, list[int]] = {s: [] for s in SUBNETS}

    @initialize(seed=st.integers(0, 2**32 - 1), max_delay=st.integers(0, 3), stale=st.sampled_from((0.0, 0.3)),
                duplicate=st.sampled_from((0.0, 0.3)), drop=st.sampled_from((0.0, 0.2)), shuffle=st.booleans())
    def setup(self, seed, max_delay, stale, duplicate, drop, shuffle):
        knobs = NetworkKnobs(max_delay_ticks=max_delay, stale_probability=stale, duplicate_probability=duplicate,
                             drop_probability=drop, shuffle_tick_order=shuffle)
        self.sim = Simulation(RANGES, ExecutionEnvironment([BoundedRecorder, RetryingLedger]), limits=LIMITS,
                              knobs=knobs, seed=seed, record_batches=False)
        for cid in RECORDERS:
            install_canister(self.sim.state_of(self.sim.subnet_of(cid)), cid, BoundedRecorder)
        balances = tuple((account_of(user), INITIAL_BALANCE) for user in USERS)
        for cid in LEDGERS:
            install_canister(self.sim.state_of(self.sim.subnet_of(cid)), cid, RetryingLedger, {"balances": balances})

    def _submit(self, receiver, method, arg, user=USERS[0]) -> None:
        self.nonce += 1
        self.sim.submit(Ingress(user, receiver, method, encode_value(arg), self.nonce.to_bytes(32, "big"),
                                self.sim.now + 30 * SECOND))

    def _tick(self, order) -> None:
        self.sim.tick(order)
        for subnet in order:
            times = self.round_times[subnet]
            now = self.sim.state_of(subnet).metadata.batch_time
            if not times or times[-1] != now:
                times.append(now)

    # -- traffic and time ---------------------------------------------------------------------

    @rule(sender=st.sampled_from(RECORDERS), outgoing=st.lists(calls, min_size=1, max_size=6))
    def fire(self, sender, outgoing):
        self._submit(sender, "fire", tuple(outgoing))

    @rule(user=st.sampled_from(USERS), ledger=st.sampled_from(LEDGERS), to_ledger=st.sampled_from(LEDGERS),
          to=st.sampled_from(USERS), amount=st.sampled_from((1, 7, 100, 600)), timeout=st.sampled_from((1, 2, 5)))
    def transfer(self, user, ledger, to_ledger, to, amount, timeout):
        self._submit(ledger, "transfer_bounded",
                     {"to_ledger": to_ledger, "to": account_of(to), "amount": amount, "timeout": timeout}, user)

    @rule(ledger=st.sampled_from(LEDGERS))
    def retry(self, ledger):
        self._submit(ledger, "retry", None)

    @rule(order=st.permutations(SUBNETS))
    def tick(self, order):
        self._tick(order)

    @rule(order=st.lists(st.sampled_from(SUBNETS), unique=True, max_size=2))
    def delay(self, order):
        self._tick(order)

    @rule(ticks=st.integers(2, 6))
    def run(self, ticks):
        for _ in range(ticks):
            self._tick(sorted(SUBNETS))

    # -- invariants -----------------------------------------------------------------------------

    @invariant()
    def at_most_one_response_and_it_is_there_by_deadline_plus_one_round(self):
        if self.sim is not None:
            check_responses(self.sim)

    @invariant()
    def no_callback_runs_twice(self):
        if self.sim is not None:
            check_recorders(self.sim, self.round_times, final=False)

    @invariant()
    def ledger_supply_is_conserved(self):
        if self.sim is not None:
            balances, escrow = ledger_totals(self.sim)
            assert balances <= SUPPLY <= balances + escrow, (balances, escrow)

    @invariant()
    def nothing_critical_and_nothing_dropped_at_execution(self):
        if self.sim is not None:
            for subnet in SUBNETS:
                counters = self.sim.state_of(subnet).metadata.counters
                assert all(counters.get(name, 0) == 0 for name in NEVER), (subnet, dict(counters))

    @invariant()
    def incremental_hash_equals_hash_from_scratch(self):
        if self.sim is not None:  # shedding removes from the middle of queues: still the same hashes
            check_hashes(self.sim)

    def teardown(self):
        sim = self.sim
        if sim is None:
            return
        for _ in range(60):  # retries until every transfer is decided
            for ledger in LEDGERS:
                self._submit(ledger, "retry", None)
            for _ in range(5):
                self._tick(sorted(SUBNETS))
            if ledger_totals(sim)[1] == 0:
                break
        for _ in range(400):
            if sim.is_quiescent():
                break
            self._tick(sorted(SUBNETS))
        assert sim.is_quiescent()
        check_responses(sim)
        check_recorders(sim, self.round_times, final=True)
        assert ledger_totals(sim) == (SUPPLY, 0)
        for subnet in SUBNETS:
            for canister in sim.state_of(subnet).canisters.values():
                assert not canister.callbacks and not canister.call_contexts, canister


# -- checks -------------------------------------------------------------------------------------

def ledger_totals(sim: Simulation) -> tuple[int, int]:
    balances = escrow = 0
    for cid in LEDGERS:
        stable = sim.state_of(sim.subnet_of(cid)).canisters[cid].stable
        balances += sum(stable[key] for key in stable.irange(BALANCE, "balance0"))
        escrow += stable.get(ESCROW, 0)
    return balances, escrow


def check_responses(sim: Simulation) -> None:
    for subnet in SUBNETS:
        state = sim.state_of(subnet)
        now = state.metadata.batch_time
        for cid, canister in state.canisters.items():
            waiting: dict[int, int] = {}
            for queue in canister.queues.input_queues.values():
                for message in queue.elements:
                    if type(message) is Response and message.deadline:
                        waiting[message.originator_reply_callback] = waiting.get(message.originator_reply_callback, 0) + 1
            for callback_id, count in waiting.items():
                assert count == 1, f"{subnet}/{cid}: {count} responses wait for callback {callback_id}"
                assert callback_id in canister.callbacks, f"{subnet}/{cid}: a response waits without its callback"
            for callback in canister.callbacks.values():
                if is_expired(callback.deadline, now):
                    assert callback.callback_id in waiting, \
                        f"{subnet}/{cid}: callback {callback.callback_id} expired at {callback.deadline} s, no response at {now}"


def check_recorders(sim: Simulation, round_times: dict[str, list[int]], *, final: bool) -> None:
    for cid in RECORDERS:
        subnet = sim.subnet_of(cid)
        stable = sim.state_of(subnet).canisters[cid].stable
        for name in ("double_answers", "unknown_answers", "duplicate_receipts"):
            assert f"count/{name}" not in stable, (cid, name, stable.get(f"count/{name}"))
        for (dst, seq), (timeout, sent_at, outcome, answered_at) in bounded_calls(stable).items():
            executed = seq in {s for (caller, s) in received(sim.state_of(sim.subnet_of(dst)).canisters[dst].stable)
                               if caller == cid}
            if not timeout:  # guaranteed-response: exactly as before — never SYS_UNKNOWN
                assert outcome != REJECTED_BASE + RejectCode.SYS_UNKNOWN, (cid, dst, seq)
                if outcome == REPLIED:
                    assert executed, (cid, dst, seq)
            elif outcome == REPLIED:
                assert executed, f"{cid}->{dst} #{seq} replied but never executed"
            if outcome == PENDING:
                assert not final, f"{cid}->{dst} #{seq} never answered"
                continue
            if timeout and outcome != PENDING:
                deadline = compute_call_deadline(sent_at, timeout)
                first_expired_round = next((t for t in round_times[subnet] if is_expired(deadline, t)), None)
                assert first_expired_round is None or answered_at <= first_expired_round, \
                    f"{cid}->{dst} #{seq}: deadline {deadline} s, answered at {answered_at}"


BoundedWaitMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=50, deadline=None, derandomize=True, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
TestBoundedWait = BoundedWaitMachine.TestCase
