"""A ``Subnet`` decides its heights with the agreement protocol on a deterministic in-process
network (``consensus_stub.agreement.network``), also under adversarial schedules.

Under seeded random delays, reordering, duplicates (and, separately, losses, partitions and
crashes) with up to ``f`` nodes offline, the subnet keeps finalizing, every node computes the
same hashes, every call submitted is executed, and no height is ever final with two blocks —
checked on every ``AgreementNode``'s own finalized chain as well as by the subnet on every
``Finalized`` output. The same seed gives the same blocks and hashes.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consensus_stub.agreement.simulation import MS, Crash, Partition, Schedule
from consensus_stub.genesis import SubnetSpec
from message_routing.limits import DEFAULT
from replica.client.envelope import sign_request
from replica.client.identity import Ed25519Identity
from replica.execution.codec import encode_value
from replica.execution import ExecutionEnvironment
from replica.node.replica_node import NodeConfig, RegistryHolder
from replica.testing.clock import ManualClock
from replica.testing.genesis_cache import dealt_genesis
from replica.inprocess.subnet import SEC, AgreementTiming
from replica.inprocess.subnet import NoBlockFinalized, Subnet
from state_manager.ingress_history import IngressState
from state_manager.messages import MANAGEMENT_CANISTER_ID
from state_manager.replicated_state import ReplicatedState
from state_manager.state_codec import encode_state

pytestmark = pytest.mark.timeout(300)

SUBNET = "alpha"
SEED = b"replica.inprocess.subnet agreement tests, 32+ bytes"
USER = Ed25519Identity.from_seed(b"subnet agreement tests")


def make_subnet(nodes: int = 4, *, schedule: Schedule | None = None, offline=(), clock: ManualClock | None = None,
                timing: AgreementTiming = AgreementTiming()) -> tuple[Subnet, ManualClock]:
    registry, secrets = dealt_genesis((SubnetSpec(SUBNET, nodes, ((0, 1_000_000),)),), SEED)
    clock = clock or ManualClock()
    state = ReplicatedState(SUBNET, registry.topology(registry.latest_version))
    state.metadata.batch_time = clock()
    subnet = Subnet(SUBNET, RegistryHolder(registry), list(secrets.values()), encode_state(state),
                    ExecutionEnvironment(), DEFAULT, config=NodeConfig(keep_heights=3), clock=clock,
                    agreement_schedule=schedule, agreement_timing=timing)
    subnet.offline.update(offline)
    return subnet, clock


def node_ids(nodes: int) -> list[str]:
    return [f"{SUBNET}-node-{i}" for i in range(1, nodes + 1)]


def submit_create(subnet: Subnet, clock: ManualClock, nonce: int) -> bytes:
    signed = sign_request(USER, MANAGEMENT_CANISTER_ID, "create_canister", encode_value(None), nonce=nonce,
                          expiry=clock() + DEFAULT.max_ingress_ttl_ns)
    assert subnet.submit(signed.envelope).message_id == signed.message_id
    return signed.message_id


def check_one_chain(subnet: Subnet, *, all_caught_up: bool = True) -> None:
    """Every running AgreementNode's retained finalized chain is the subnet's chain (and, on
    a network that loses nothing, reaches its tip)."""
    for node_id, node in subnet.agreement.nodes.items():
        if node is None:
            continue
        if all_caught_up:
            assert node.finalized_height == subnet.height, node_id
        for height in range(1, subnet.height + 1):
            entry = node.finalized_block(height)
            if entry is not None:
                assert entry[1] == subnet.block_store.hash_at(height), (node_id, height)


def check_same_hashes(subnet: Subnet) -> None:
    roots = {(n.state_manager.latest.certified_root, n.state_manager.latest.full_hash) for n in subnet.nodes.values()}
    assert len(roots) == 1
    last = subnet.recording.hashes[-1]
    assert (last[2], last[1]) in roots


def run(subnet: Subnet, clock: ManualClock, heights: int, *, calls: bool = True) -> list[bytes]:
    """``heights`` steps, one call submitted before each; then steps until every call is answered."""
    submitted = []
    for i in range(heights):
        if calls:
            submitted.append(submit_create(subnet, clock, i))
        before = subnet.height
        subnet.step(certify=False)
        assert subnet.height > before
        check_one_chain(subnet)
        clock.advance(SEC)
    for _ in range(10):
        if all(_answered(subnet, m) for m in submitted):
            break
        subnet.step(certify=False)
    assert all(_answered(subnet, m) for m in submitted)
    check_same_hashes(subnet)
    return submitted


def _answered(subnet: Subnet, message_id: bytes) -> bool:
    status = subnet.ingress_status(message_id)
    return status is not None and status.state == IngressState.REPLIED


# -- the calm network ---------------------------------------------------------------------

def test_one_height_per_step_stamped_with_the_subnet_clock():
    subnet, clock = make_subnet()
    run(subnet, clock, 4)
    assert subnet.fallback_heights == 0 and subnet.refusals == {}
    heights = subnet.height
    assert heights == 4   # each step finalized exactly its height: the next was never proposed early
    # block time is the subnet's clock, never agreement time
    for height in range(1, heights + 1):
        assert subnet.block_store.block(height).time == subnet.block_store.block(1).time + (height - 1) * SEC
    # every node verified its peers' signatures (each once per process: the memo)
    assert subnet.agreement.messages_delivered > 0 and subnet._verifier.checks > 0


def test_a_down_rank_0_maker_leads_to_the_rank_1_block_without_waiting_in_wall_time():
    subnet, clock = make_subnet(offline=["alpha-node-1"])   # the rank-0 maker of heights 1, 5, 9
    started = time.monotonic()
    run(subnet, clock, 9)
    assert time.monotonic() - started < 30
    made_by = [subnet.block_store.block(h).maker for h in range(1, 10)]
    assert "alpha-node-1" not in made_by
    assert subnet.block_store.block(1).rank == 1 and subnet.block_store.block(5).rank == 1
    assert subnet.fallback_heights >= 2
    assert subnet.refusals == {}


def test_an_invalid_proposal_is_refused_and_the_next_rank_takes_over():
    subnet, clock = make_subnet()
    liar = subnet.nodes["alpha-node-1"]
    honest = liar.make_block

    def make_bad_block(tip, now, rank, registry_version):
        import dataclasses
        return dataclasses.replace(honest(tip, now, rank, registry_version), time=1)   # before its parent

    liar.make_block = make_bad_block
    run(subnet, clock, 2)
    assert subnet.block_store.block(1).maker == "alpha-node-2"
    assert subnet.refusals["TimeRegresses"] == 3   # each of the three other nodes, once
    assert subnet.fallback_heights == 1


def test_no_quorum_stalls_and_a_node_back_online_resumes():
    subnet, clock = make_subnet()
    run(subnet, clock, 2)
    subnet.offline.update({"alpha-node-2", "alpha-node-3"})
    message = submit_create(subnet, clock, 100)
    for _ in range(3):
        with pytest.raises(NoBlockFinalized):
            subnet.step()
    subnet.offline.discard("alpha-node-3")
    for _ in range(5):
        subnet.step()
        if _answered(subnet, message):
            break
    assert _answered(subnet, message)
    check_same_hashes(subnet)
    check_one_chain(subnet)


def test_a_restart_on_the_block_log_continues_the_chain(tmp_path):
    registry, secrets = dealt_genesis((SubnetSpec(SUBNET, 4, ((0, 1_000_000),)),), SEED)
    clock = ManualClock()
    state = ReplicatedState(SUBNET, registry.topology(registry.latest_version))
    state.metadata.batch_time = clock()
    genesis = encode_state(state)

    def open_subnet() -> Subnet:
        return Subnet(SUBNET, RegistryHolder(registry), list(secrets.values()), genesis, ExecutionEnvironment(),
                      DEFAULT, config=NodeConfig(keep_heights=3), clock=clock, block_log=tmp_path / "alpha.blocks")

    first = open_subnet()
    run(first, clock, 3)
    tip = (first.height, first.recording.hashes[-1])
    first.stop()
    again = open_subnet()
    assert (again.height, again.recording.hashes[-1]) == tip
    run(again, clock, 2)
    assert again.height == tip[0] + 2
    again.stop()


# -- adversarial schedules ----------------------------------------------------------------

@st.composite
def calm_adversary(draw, nodes: int):
    """Random delays (so reordering) and duplicates, with up to f nodes offline."""
    f = (nodes - 1) // 3
    low = draw(st.integers(0, 20)) * MS
    schedule = Schedule(seed=draw(st.integers(0, 2**64 - 1)), min_delay_ns=low,
                        max_delay_ns=low + draw(st.integers(0, 80)) * MS,
                        duplicate_per_mille=draw(st.sampled_from([0, 0, 100, 300])))
    offline = draw(st.lists(st.sampled_from(node_ids(nodes)), max_size=f, unique=True))
    return schedule, offline


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calm_adversary(4), st.integers(2, 6))
def test_four_nodes_finalize_under_delays_and_reordering_with_one_offline(adversary, heights):
    schedule, offline = adversary
    subnet, clock = make_subnet(4, schedule=schedule, offline=offline)
    run(subnet, clock, heights)
    assert subnet.refusals == {}


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calm_adversary(7), st.integers(2, 4))
def test_seven_nodes_finalize_under_delays_and_reordering_with_two_offline(adversary, heights):
    schedule, offline = adversary
    subnet, clock = make_subnet(7, schedule=schedule, offline=offline)
    run(subnet, clock, heights)


@st.composite
def hostile_network(draw):
    """Losses, a partition and a crash with restart on top of delays (n = 4)."""
    nodes = node_ids(4)
    start = draw(st.integers(0, 4_000)) * MS
    split = draw(st.integers(1, 3))
    order = draw(st.permutations(nodes))
    partition = Partition(start, start + draw(st.integers(100, 3_000)) * MS, (tuple(order[:split]), tuple(order[split:])))
    crashes = ()
    if draw(st.booleans()):
        at = draw(st.integers(0, 6_000)) * MS
        crashes = (Crash(draw(st.sampled_from(nodes)), at, at + draw(st.integers(1, 3_000)) * MS),)
    return Schedule(seed=draw(st.integers(0, 2**64 - 1)), min_delay_ns=1 * MS, max_delay_ns=draw(st.integers(1, 60)) * MS,
                    duplicate_per_mille=draw(st.sampled_from([0, 100])), drop_per_mille=draw(st.sampled_from([0, 20, 100])),
                    partitions=(partition,) if draw(st.booleans()) else (), crashes=crashes)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_network(), st.integers(3, 6))
def test_losses_partitions_and_crashes_never_finalize_two_blocks_at_a_height(schedule, heights):
    """Safety always (the subnet checks every node's Finalized outputs; each node's chain is
    checked here); a step may stall while a partition holds a quorum apart, never for good."""
    subnet, clock = make_subnet(4, schedule=schedule)
    for i in range(heights):
        submit_create(subnet, clock, i)
        for _ in range(3):
            try:
                subnet.step(certify=False)
                break
            except NoBlockFinalized:
                continue
        else:
            pytest.fail(f"no progress in 3 steps at height {subnet.height + 1}")
        check_one_chain(subnet, all_caught_up=False)
        clock.advance(SEC)
    check_same_hashes(subnet)


def test_the_same_seed_gives_the_same_blocks_and_hashes():
    schedule = Schedule(seed=7, min_delay_ns=0, max_delay_ns=40 * MS, duplicate_per_mille=200)

    def one_run():
        subnet, clock = make_subnet(4, schedule=schedule, offline=["alpha-node-2"])
        run(subnet, clock, 5)
        return ([subnet.block_store.hash_at(h) for h in range(1, subnet.height + 1)], subnet.recording.hashes,
                subnet.agreement.messages_sent, subnet.agreement.now)

    assert one_run() == one_run()
