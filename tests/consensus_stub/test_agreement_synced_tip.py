"""A node that starts from a state-synced tip: ``AgreementNode.from_synced_tip``.

It holds no block at or below its tip; it continues only with blocks that chain from the
tip's hash, serves no catch-up below it, and joins a live subnet's rounds.
"""

from __future__ import annotations

import dataclasses
from collections import deque

import pytest

from consensus_stub.agreement import protocol as p
from consensus_stub.agreement.messages import (
    CatchUp, CertificationShareGossip, NotarizationShare, Proposal, Status, decode_message, encode_message,
)
from consensus_stub.agreement.signing import compute_notarization_message, compute_proposal_message
from consensus_stub.agreement.simulation import MS, Crash, Schedule, Simulation, stub_propose, stub_validate
from consensus_stub.block import block_hash
from consensus_stub.block_maker import block_maker_for
from state_manager.certification import certified_height_witness, sign_certification_share
from state_manager.labeled_trie import build_from_sorted
from state_manager.state_tree import leaf

from .agreement_fixtures import SEC, T0, dealt

N1, N2, N3, N4 = (f"alpha-node-{i}" for i in range(1, 5))
H = 5   # the synced height in the hand-driven tests


@pytest.fixture(scope="module")
def sim():
    """Ten heights finalized by a simulated subnet."""
    _, _, subnet, signers, verifier = dealt()
    sim = Simulation(subnet, signers, verifier, Schedule(seed=5))
    assert sim.run_until_finalized(10, T0 + 60 * SEC)
    return sim


def synced(node_id: str, sim: Simulation, height: int = H, digest: bytes | None = None, **kwargs) -> p.AgreementNode:
    _, _, subnet, signers, verifier = dealt()
    config = p.AgreementConfig(subnet, node_id, **kwargs.pop("config", {}))
    return p.AgreementNode.from_synced_tip(
        config, height=height, block_hash=sim.chain[height] if digest is None else digest,
        propose=kwargs.pop("propose", stub_propose),
        validate=kwargs.pop("validate", stub_validate), sign=signers[node_id], verifier=verifier,
        now=sim.now, **kwargs)


def finalized(outputs) -> list[p.Finalized]:
    return [o for o in outputs if isinstance(o, p.Finalized)]


def catch_up_for(sim: Simulation, status: Status) -> CatchUp:
    (reply,) = [o.message for o in sim.nodes[N1].on_message(status, sim.now)
                if isinstance(o, p.Send) and isinstance(o.message, CatchUp)]
    return reply


def test_a_synced_node_finalizes_a_catch_up_that_chains_from_its_tip(sim):
    node = synced(N2, sim)
    assert (node.finalized_height, node.finalized_hash) == (H, sim.chain[H])
    assert node.status() == Status(N2, H, H)
    assert node.finalized_block(H) is None
    catch_up = catch_up_for(sim, node.status())
    assert catch_up.blocks[0].height == H + 1
    out = finalized(node.on_message(catch_up, sim.now))
    assert [f.height for f in out] == list(range(H + 1, sim.nodes[N1].finalized_height + 1))
    assert [f.block_hash for f in out] == [sim.chain[f.height] for f in out]
    assert out[0].block.parent_hash == sim.chain[H] and out[-1].proof
    assert node.finalized_block(H + 1) == (sim.blocks[H + 1], sim.chain[H + 1])
    assert node.counters == {}
    # a catch-up from further down (a peer answering a Status of 0) is cut at the tip: the same
    other = synced(N3, sim)
    out = finalized(other.on_message(catch_up_for(sim, Status(N3, 0, 0)), sim.now))
    assert [f.height for f in out][0] == H + 1 and other.finalized_hash == node.finalized_hash


def test_catch_ups_that_do_not_continue_the_synced_tip_are_refused_and_counted(sim):
    good = catch_up_for(sim, Status(N2, H, H))
    wrong_tip = synced(N2, sim, digest=sim.chain[H - 1])          # the tip's hash is not the block's
    assert finalized(wrong_tip.on_message(good, sim.now)) == []
    assert wrong_tip.counters == {"catch_up_broken_chain": 1}
    assert wrong_tip.finalized_height == H
    gap = synced(N2, sim)
    assert finalized(gap.on_message(CatchUp(good.blocks[2:], good.signatures), sim.now)) == []
    assert gap.counters == {"catch_up_gap": 1}
    unproven = synced(N2, sim)
    assert finalized(unproven.on_message(dataclasses.replace(good, signatures=good.signatures[:2]), sim.now)) == []
    assert unproven.counters == {"catch_up_not_finalized": 1}
    below = synced(N2, sim)                                        # all at or below the tip: ignored
    old = catch_up_for(sim, Status(N2, 0, 0))
    assert finalized(below.on_message(CatchUp(old.blocks[:H], old.signatures), sim.now)) == []
    assert below.finalized_height == H


def test_a_synced_node_serves_no_catch_up_below_its_tip(sim):
    node = synced(N2, sim)
    sends = [o for o in node.on_message(Status(N3, 2, 2), sim.now) if isinstance(o, p.Send)]
    assert sends == [] and node.counters == {"catch_up_not_retained": 1}
    node.on_message(catch_up_for(sim, node.status()), sim.now)
    top = node.finalized_height
    (reply,) = [o.message for o in node.on_message(Status(N3, H, H), sim.now) if isinstance(o, p.Send)]
    assert isinstance(reply, CatchUp) and [b.height for b in reply.blocks] == list(range(H + 1, top + 1))
    assert node.counters == {"catch_up_not_retained": 1}


def test_the_block_context_above_a_synced_tip_has_no_parent_block(sim):
    seen = []

    def validate(block, context, now):
        seen.append(context)

    node = synced(N2, sim, validate=validate)
    maker = block_maker_for(node.config.subnet, H + 1, 0)
    block = dataclasses.replace(sim.blocks[H + 1], maker=maker, rank=0, time=sim.now)
    node.on_message(Proposal(block, dealt()[3][maker](compute_proposal_message(block_hash(block)))), sim.now)
    node.on_timer(sim.now + 10 * SEC)
    context = seen[-1]
    assert (context.height, context.parent_hash, context.parent, context.unfinalized) == (H + 1, sim.chain[H], None, ())
    assert context.tip == p.ChainTip(H, sim.chain[H])
    # the maker of rank 0 at H + 1 proposes on the tip's hash
    proposals = []
    maker_node = synced(maker, sim, propose=lambda c, now: proposals.append(c) or stub_propose(c, now))
    maker_node.start(sim.now)
    assert proposals and proposals[0].parent is None and proposals[0].parent_hash == sim.chain[H]


def test_pruning_above_a_synced_tip_keeps_the_retained_tail(sim):
    node = synced(N2, sim, config={"retained_heights": 2})
    node.on_message(catch_up_for(sim, node.status()), sim.now)
    top = node.finalized_height
    assert top >= H + 3
    assert [h for h in range(H - 1, top + 1) if node.finalized_block(h) is not None] == [top - 1, top]


def test_own_artifacts_at_or_below_the_tip_are_dropped_and_shares_of_the_synced_height_ignored(sim):
    _, secrets, _, signers, _ = dealt()
    digest = sim.chain[H]
    old = NotarizationShare(H, digest, N2, signers[N2](compute_notarization_message(H, digest)))
    future = NotarizationShare(H + 1, sim.chain[H + 1], N2,
                               signers[N2](compute_notarization_message(H + 1, sim.chain[H + 1])))
    node = synced(N2, sim, own_artifacts=[old, future])
    resent = [o.message for o in node.start(sim.now) if isinstance(o, p.Broadcast)]
    assert old not in resent and future in resent
    for height in (H, H + 1):
        tree = build_from_sorted([(b"metadata", build_from_sorted([(b"height", leaf(height))]))])
        outputs = []
        for n in (N1, N2, N3):
            share = sign_certification_share(height, tree.digest(), secrets[n].node_index, secrets[n].secret_share,
                                             certified_height_witness(tree))
            outputs += node.on_message(CertificationShareGossip(share), sim.now)
        certified = [o.certification.height for o in outputs if isinstance(o, p.Certified)]
        assert certified == ([] if height == H else [H + 1])


def test_bad_synced_tips_are_refused(sim):
    with pytest.raises(p.AgreementConfigError):
        synced(N2, sim, height=H, digest=b"short")
    _, _, subnet, signers, verifier = dealt()
    config = p.AgreementConfig(subnet, N2)
    common = dict(propose=stub_propose, validate=stub_validate, sign=signers[N2], verifier=verifier, now=sim.now)
    with pytest.raises(p.AgreementConfigError):
        p.AgreementNode.from_synced_tip(config, height=0, block_hash=bytes(32), **common)
    with pytest.raises(p.AgreementConfigError):
        p.AgreementNode.from_synced_tip(config, height=True, block_hash=bytes(32), **common)
    with pytest.raises(p.AgreementConfigError, match="not both"):
        p.AgreementNode(config, synced_tip=(H, sim.chain[H]),
                        finalized=[p.Finalized(sim.blocks[1], sim.chain[1], ((N1, b"x"),))], **common)


def test_a_synced_node_joins_a_live_subnet_whose_peers_no_longer_hold_its_blocks():
    """Node 4 is down from the start; the others finalize past their retention. Node 4 from
    genesis gets nothing (state sync needed); started from a synced tip they still retain the
    blocks above, it catches up, then takes part in the rounds (and makes blocks at its rank)."""
    _, _, subnet, signers, verifier = dealt()
    retained = 4
    sim = Simulation(subnet, signers, verifier, Schedule(seed=11, crashes=(Crash(N4, T0),)),
                     retained_heights=retained)
    assert sim.run_until_finalized(12, T0 + 120 * SEC)
    peers = {n: sim.nodes[n] for n in (N1, N2, N3)}
    config = p.AgreementConfig(subnet, N4, retained_heights=retained)
    common = dict(propose=stub_propose, validate=stub_validate, sign=signers[N4], verifier=verifier, now=sim.now)
    from_genesis = p.AgreementNode(config, **common)
    nodes = {**peers, N4: from_genesis}
    chains, now = run(nodes, sim.now, until=lambda: False, seconds=5)
    assert chains[N4] == {} and from_genesis.finalized_height == 0
    assert peers[N1].counters.get("catch_up_not_retained", 0) >= 1
    tip = min(node.finalized_height for node in peers.values())
    sync_height = tip - 2     # a checkpoint the peers still retain the blocks above
    known = {**{h: d for h, d in sim.chain.items()}, **{h: d for h, (_, d) in chains[N1].items()}}

    joined = p.AgreementNode.from_synced_tip(config, height=sync_height, block_hash=known[sync_height],
                                             **{**common, "now": now})
    nodes = {**peers, N4: joined}
    target = tip + 8
    chains, _ = run(nodes, now, until=lambda: min(n.finalized_height for n in nodes.values()) >= target,
                 seconds=120)
    assert min(n.finalized_height for n in nodes.values()) >= target
    mine = chains[N4]
    assert min(mine) == sync_height + 1
    assert mine[sync_height + 1][0].parent_hash == known[sync_height]
    known.update({h: d for h, (_, d) in chains[N1].items()})
    assert all(digest == known[height] for height, (_, digest) in mine.items())
    assert any(block.maker == N4 for block, _ in mine.values() if block.height > tip)


def run(nodes: dict[str, p.AgreementNode], now: int, *, until, seconds: int) -> tuple[dict[str, dict[int, tuple]], int]:
    """Drive ``nodes`` in virtual time from ``now``: every message arrives at once, through the
    codec; timers fire at their ``wakeup_at`` (10 ms steps); ``N4`` is started first. Returns
    each node's finalized blocks (height -> (block, hash)) and the time reached."""
    queue: deque = deque()
    chains: dict[str, dict[int, tuple]] = {n: {} for n in nodes}

    def apply(node_id: str, outputs: list) -> None:
        for output in outputs:
            if isinstance(output, p.Send):
                queue.append((output.to, encode_message(output.message)))
            elif isinstance(output, p.Broadcast):
                data = encode_message(output.message)
                queue.extend((peer, data) for peer in nodes if peer != node_id)
            elif isinstance(output, p.Finalized):
                assert output.height not in chains[node_id]
                previous = chains[node_id].get(output.height - 1)
                if previous is not None:
                    assert output.block.parent_hash == previous[1]
                chains[node_id][output.height] = (output.block, output.block_hash)

    apply(N4, nodes[N4].start(now))
    end = now + seconds * SEC
    while now < end and not until():
        while queue and not until():   # with no delays and no pacing, rounds never pause
            receiver, data = queue.popleft()
            apply(receiver, nodes[receiver].on_message(decode_message(data), now))
        for node_id, node in nodes.items():
            if now >= node.wakeup_at:
                apply(node_id, node.on_timer(now))
        now += 10 * MS
    return chains, now
