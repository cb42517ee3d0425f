"""Routing guarantees as a Hypothesis state machine over three simulated subnets.

The network is hostile (delays, stale and duplicated deliveries, drops, shuffled and partial
tick orders) and the limits are ``MINIMAL``, so queues fill up, streams back up and reject
signals flow. Traffic: ``Recorder`` canisters calling each other (and missing, stopped and
non-recorder canisters) on every subnet, and token transfers between ``Ledger`` canisters.

Checked after every step:

* exactly once / guaranteed replies: no callback answered twice, no request executed twice,
  a replied request was executed by its receiver, a rejected one never was;
* per-pair order: each receiver executes a sender's requests in increasing sequence order;
* the ledgers' supply invariant ``Σ balances ≤ S ≤ Σ (balances + escrow)``;
* streams and queues within ``MINIMAL``'s limits;
* no critical errors, no dropped or unroutable responses;
* the incrementally hashed committed state equals the state hashed from scratch.

At the end (``teardown``): run to quiescence — every request answered exactly once, ledger
supply exact with zero escrow — then past every ingress expiry plus retention: no call
contexts, callbacks, queues, stream messages or signals, and an empty ingress history.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from examples.ledger import BALANCE, ESCROW, Ledger, account_of
from message_routing.limits import MINIMAL
from replica.execution import ExecutionEnvironment, install_canister, start_canister, stop_canister
from replica.sdk import encode_value
from replica.inprocess.simulation import TICK_NS, NetworkKnobs, Simulation
from state_manager.canister_state import CanisterStatus
from state_manager.messages import Ingress, RejectCode
from state_manager.state_tree import build_state_trees

from .canisters import PENDING, REJECTED_BASE, REPLIED, Recorder, anomalies, received_calls, sent_calls

LIMITS = MINIMAL
A, B, C = "subnet-a", "subnet-b", "subnet-c"
SUBNETS = (A, B, C)
RANGES = {A: (0, 99), B: (100, 199), C: (200, 299)}

RECORDERS = (1, 2, 101, 102, 201)
LEDGERS = (10, 110, 210)
MISSING = (50, 150)          # inside a subnet's range, but not installed
UNROUTABLE = (1_000,)        # in no subnet's range
TARGETS = RECORDERS + LEDGERS + MISSING + UNROUTABLE
CANISTERS = RECORDERS + LEDGERS

USERS = tuple(bytes([i]) * 29 + b"\x02" for i in range(1, 4))
INITIAL_BALANCE = 1_000
SUPPLY = INITIAL_BALANCE * len(USERS) * len(LEDGERS)

#: Counters that must never move in an honest network with no migrations.
NEVER = ("critical_errors", "dropped_invalid_sender", "dropped_responses_without_callback",
         "dropped_responses_unroutable")

SECOND = 10**9
EXPIRY_OFFSETS = (-SECOND, 2 * SECOND, 5 * SECOND, 30 * SECOND, LIMITS.max_ingress_ttl_ns,
                  LIMITS.max_ingress_ttl_ns + 5 * SECOND, 10**6 * SECOND)

targets = st.tuples(st.sampled_from(TARGETS), st.sampled_from(("ping", "ping", "relay")), st.sampled_from(TARGETS))


class RoutingMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.sim: Simulation | None = None
        self.next_nonce = 0
        self.last_submit_time = 0
        # Subnets whose state was changed outside a round since their last commit (stop/start):
        # their committed hash no longer describes the current state until they step again.
        self.touched: set[str] = set()
        self.ledger_sums_seen: list[int] = []

    # -- setup ------------------------------------------------------------------------------

    @initialize(
        seed=st.integers(0, 2**32 - 1),
        max_delay=st.integers(0, 3),
        stale=st.sampled_from((0.0, 0.2, 0.5)),
        duplicate=st.sampled_from((0.0, 0.2, 0.5)),
        drop=st.sampled_from((0.0, 0.1, 0.3)),
        shuffle=st.booleans(),
    )
    def setup(self, seed, max_delay, stale, duplicate, drop, shuffle):
        knobs = NetworkKnobs(max_delay_ticks=max_delay, stale_probability=stale, duplicate_probability=duplicate,
                             drop_probability=drop, shuffle_tick_order=shuffle)
        self.sim = Simulation(RANGES, ExecutionEnvironment([Recorder, Ledger]), limits=LIMITS, knobs=knobs,
                              seed=seed, record_batches=False)
        for cid in RECORDERS:
            install_canister(self.sim.state_of(self.sim.subnet_of(cid)), cid, Recorder)
        balances = tuple((account_of(user), INITIAL_BALANCE) for user in USERS)
        for cid in LEDGERS:
            install_canister(self.sim.state_of(self.sim.subnet_of(cid)), cid, Ledger, {"balances": balances})

    # -- helpers ----------------------------------------------------------------------------

    def _canister(self, cid):
        return self.sim.state_of(self.sim.subnet_of(cid)).canisters.get(cid)

    def _submit(self, receiver: int, method: str, arg, source: bytes, expiry_offset: int) -> None:
        self.next_nonce += 1
        message_id = self.next_nonce.to_bytes(32, "big")
        expiry = max(0, self.sim.now + expiry_offset)
        self.sim.submit(Ingress(source, receiver, method, encode_value(arg), message_id, expiry))
        self.last_submit_time = self.sim.now

    def _tick(self, order) -> None:
        self.sim.tick(order)
        self.touched.difference_update(order)

    # -- traffic ----------------------------------------------------------------------------

    @rule(sender=st.sampled_from(RECORDERS), calls=st.lists(targets, min_size=1, max_size=5),
          expiry=st.sampled_from(EXPIRY_OFFSETS))
    def fire(self, sender, calls, expiry):
        self._submit(sender, "fire", tuple(calls), USERS[0], expiry)

    @rule(sender=st.sampled_from(RECORDERS), dst=st.sampled_from(RECORDERS + MISSING),
          count=st.integers(LIMITS.queue_capacity + 1, 3 * LIMITS.queue_capacity), relay=st.booleans())
    def burst_of_calls(self, sender, dst, count, relay):
        """More calls to one canister than its queues can take: some must be refused."""
        self._submit(sender, "fire", tuple((dst, "relay" if relay else "ping", sender) for _ in range(count)),
                     USERS[1], 30 * SECOND)

    @rule(receiver=st.sampled_from(RECORDERS), dst=st.sampled_from(TARGETS),
          count=st.integers(LIMITS.queue_capacity + 1, 2 * LIMITS.queue_capacity))
    def burst_of_ingress(self, receiver, dst, count):
        """More ingress for one canister than its ingress queue holds in one batch."""
        for _ in range(count):
            self._submit(receiver, "fire", ((dst, "ping", dst),), USERS[2], 30 * SECOND)

    @rule(user=st.sampled_from(USERS), ledger=st.sampled_from(LEDGERS),
          to_ledger=st.sampled_from(LEDGERS + LEDGERS + (RECORDERS[0],) + MISSING + UNROUTABLE),
          to=st.sampled_from(USERS), amount=st.sampled_from((1, 7, 100, 600, 5_000)),
          expiry=st.sampled_from(EXPIRY_OFFSETS))
    def transfer(self, user, ledger, to_ledger, to, amount, expiry):
        self._submit(ledger, "transfer", {"to_ledger": to_ledger, "to": account_of(to), "amount": amount}, user, expiry)

    # -- management (outside rounds, like a subnet admin would) ------------------------------

    @rule(cid=st.sampled_from(CANISTERS))
    def stop(self, cid):
        stop_canister(self.sim.state_of(self.sim.subnet_of(cid)), cid)
        self.touched.add(self.sim.subnet_of(cid))

    @rule(cid=st.sampled_from(CANISTERS))
    def start(self, cid):
        start_canister(self.sim.state_of(self.sim.subnet_of(cid)), cid)
        self.touched.add(self.sim.subnet_of(cid))

    # -- time -------------------------------------------------------------------------------

    @rule(order=st.permutations(SUBNETS))
    def tick(self, order):
        self._tick(order)

    @rule()
    def tick_with_the_simulations_order(self):
        order = sorted(SUBNETS)
        if self.sim.knobs.shuffle_tick_order:
            self.sim.rng.shuffle(order)
        self._tick(order)

    @rule(order=st.lists(st.sampled_from(SUBNETS), unique=True, max_size=2))
    def delay(self, order):
        """A tick in which only some subnets make progress (the others fall behind)."""
        self._tick(order)

    @rule(ticks=st.integers(2, 6))
    def run(self, ticks):
        for _ in range(ticks):
            self._tick(sorted(SUBNETS))

    # -- invariants -------------------------------------------------------------------------

    @invariant()
    def calls_are_answered_once_and_executed_at_most_once(self):
        if self.sim is not None:
            check_calls(self.sim, final=False)

    @invariant()
    def ledger_supply_is_conserved(self):
        if self.sim is not None:
            balances, escrow = ledger_totals(self.sim)
            assert balances <= SUPPLY <= balances + escrow, (balances, escrow)

    @invariant()
    def streams_and_queues_stay_within_limits(self):
        if self.sim is not None:
            check_limits(self.sim)

    @invariant()
    def nothing_is_dropped_or_critical(self):
        if self.sim is not None:
            for subnet in SUBNETS:
                counters = self.sim.state_of(subnet).metadata.counters
                assert all(counters[name] == 0 for name in NEVER), (subnet, dict(counters))

    @invariant()
    def incremental_hash_equals_hash_from_scratch(self):
        if self.sim is not None:
            check_hashes(self.sim, skip=self.touched)

    # -- the end ----------------------------------------------------------------------------

    def teardown(self):
        sim = self.sim
        if sim is None:
            return
        sim.run_until_quiescent(max_ticks=500)
        self.touched.clear()
        check_calls(sim, final=True)
        check_hashes(sim)
        for subnet in SUBNETS:  # every user call has its final answer
            statuses = sim.state_of(subnet).ingress_history.statuses.values()
            assert all(status.is_terminal for status in statuses), subnet
        balances, escrow = ledger_totals(sim)
        assert (balances, escrow) == (SUPPLY, 0)
        # Every status may live until its expiry (at most the TTL after the last batch
        # that could induct it) plus the retention period; after that nothing may remain.
        horizon = self.last_submit_time + TICK_NS + LIMITS.max_ingress_ttl_ns + LIMITS.ingress_history_retention_ns
        while sim.now <= horizon + 2 * TICK_NS:
            sim.tick()
        check_bounded(sim)
        check_hashes(sim)


# -- checks, shared by the machine's invariants and teardown ------------------------------------

def ledger_totals(sim: Simulation) -> tuple[int, int]:
    balances = escrow = 0
    for cid in LEDGERS:
        stable = sim.state_of(sim.subnet_of(cid)).canisters[cid].stable
        balances += sum(stable[key] for key in stable.irange(BALANCE, "balance0"))
        escrow += stable.get(ESCROW, 0)
    return balances, escrow


def check_calls(sim: Simulation, *, final: bool) -> None:
    recorders = {cid: sim.state_of(sim.subnet_of(cid)).canisters[cid].stable for cid in RECORDERS}
    sent = {cid: sent_calls(stable) for cid, stable in recorders.items()}
    received = {cid: received_calls(stable) for cid, stable in recorders.items()}
    for cid, stable in recorders.items():
        assert anomalies(stable) == {}, (cid, anomalies(stable))
        # per-pair order: execution numbers increase with the sender's sequence numbers
        by_caller: dict[int, list[tuple[int, int]]] = {}
        for (caller, seq), executed in received[cid].items():
            by_caller.setdefault(caller, []).append((seq, executed))
        for caller, entries in by_caller.items():
            executions = [executed for _, executed in sorted(entries)]
            assert executions == sorted(executions), (caller, cid, sorted(entries))
            # executed only what was sent
            for seq, _ in entries:
                assert (cid, seq) in sent[caller], f"{cid} executed ({caller}, {seq}) that was never sent"
    for caller, calls in sent.items():
        for (dst, seq), outcome in calls.items():
            executed = dst in received and (caller, seq) in received[dst]
            if outcome == REPLIED:
                assert dst in recorders and executed, f"{caller}->{dst} #{seq} replied but never executed"
            elif outcome >= REJECTED_BASE:
                assert not executed, f"{caller}->{dst} #{seq} was executed AND rejected"
                if dst in MISSING or dst in UNROUTABLE:
                    assert outcome == REJECTED_BASE + RejectCode.DESTINATION_INVALID, (caller, dst, seq, outcome)
            else:
                assert outcome == PENDING
                assert not final, f"{caller}->{dst} #{seq} never answered"


def check_limits(sim: Simulation) -> None:
    capacity = LIMITS.queue_capacity
    for subnet in SUBNETS:
        state = sim.state_of(subnet)
        for dst, stream in state.streams.items():
            assert len(stream.messages) <= LIMITS.max_stream_messages, (subnet, dst, len(stream.messages))
            assert stream.byte_size <= LIMITS.max_stream_bytes or len(stream.messages) == 1, (subnet, dst)
            assert stream.byte_size == sum(m.count_bytes() for m in stream.messages)
        for cid, canister in state.canisters.items():
            queues = canister.queues
            assert len(queues.ingress_queue) <= capacity, (cid, len(queues.ingress_queue))
            for kind, queue_map in (("input", queues.input_queues), ("output", queues.output_queues)):
                for remote, queue in queue_map.items():
                    assert len(queue) + queue.reserved_slots <= capacity, (cid, kind, remote, queue)
                    assert not queue.is_idle(), f"idle {kind} queue {cid}->{remote} left in the state"


def check_hashes(sim: Simulation, skip=()) -> None:
    for subnet in SUBNETS:
        recorded = sim.subnets[subnet]
        if subnet in skip or not recorded.hashes:
            continue
        height, full_hash, certified_root = recorded.hashes[-1]
        assert height == recorded.state.metadata.batch_number
        trees = build_state_trees(recorded.state)
        assert trees.full_hash == full_hash, f"{subnet}: incremental full hash differs at height {height}"
        assert trees.certified_root == certified_root, f"{subnet}: certified root differs at height {height}"


def check_bounded(sim: Simulation) -> None:
    for subnet in SUBNETS:
        state = sim.state_of(subnet)
        assert len(state.ingress_history) == 0, (subnet, list(state.ingress_history.statuses.items())[:3])
        assert subnet not in state.streams  # the loopback stream is dropped once idle
        for dst, stream in state.streams.items():
            assert not stream.messages and not stream.reject_signals, (subnet, dst, stream)
        for cid, canister in state.canisters.items():
            assert not canister.call_contexts and not canister.callbacks, cid
            queues = canister.queues
            assert not queues.ingress_queue.elements and not queues.input_queues and not queues.output_queues, (cid, queues)
            assert canister.status is not CanisterStatus.STOPPING, cid


RoutingMachine.TestCase.settings = settings(
    max_examples=75,
    stateful_step_count=50,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestRoutingInvariants = RoutingMachine.TestCase
