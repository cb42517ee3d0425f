"""The agreement state machine, one rule at a time, driven by hand (no network)."""

from __future__ import annotations

import ast
import dataclasses
import pathlib

import pytest

from consensus_stub.agreement import protocol as p
from consensus_stub.agreement.messages import (
    CatchUp, CertificationShareGossip, FinalizationShare, IngressGossip, NotarizationShare, Proposal, Status,
)
from consensus_stub.agreement.signing import (
    compute_finalization_message, compute_notarization_message, compute_proposal_message,
)
from consensus_stub.agreement.simulation import Schedule, Simulation
from consensus_stub.block import GENESIS_PARENT_HASH, Block, block_hash
from consensus_stub.notary import BlockNotYetValid, WrongMaker
from state_manager.certification import certified_height_witness, sign_certification_share, verify_certification
from state_manager.messages import Ingress

from ..test_architecture import FORBIDDEN_CALLS, FORBIDDEN_MODULES, ROOT, _imports
from .agreement_fixtures import SEC, T0, dealt, make_node

N1, N2, N3, N4 = (f"alpha-node-{i}" for i in range(1, 5))
T = SEC   # the default round timeout


def propose(maker: str, height: int = 1, rank: int = 0, parent: bytes = GENESIS_PARENT_HASH, time: int = T0) -> Proposal:
    block = Block(height, parent, time, 1, (), (), maker, rank)
    return Proposal(block, dealt()[3][maker](compute_proposal_message(block_hash(block))))


def nshare(signer: str, proposal: Proposal) -> NotarizationShare:
    height, digest = proposal.block.height, block_hash(proposal.block)
    return NotarizationShare(height, digest, signer, dealt()[3][signer](compute_notarization_message(height, digest)))


def fshare(signer: str, proposal: Proposal) -> FinalizationShare:
    height, digest = proposal.block.height, block_hash(proposal.block)
    return FinalizationShare(height, digest, signer, dealt()[3][signer](compute_finalization_message(height, digest)))


def own(outputs, kind):
    """The artifacts of ``kind`` this node newly signed among ``outputs``: each is persisted,
    then broadcast right after (re-sent artifacts are broadcast only)."""
    signed = []
    for index, output in enumerate(outputs):
        if isinstance(output, p.Persist) and isinstance(output.message, kind):
            assert outputs[index + 1] == p.Broadcast(output.message)
            signed.append(output.message)
    return signed


def finalized(outputs):
    return [o for o in outputs if isinstance(o, p.Finalized)]


# -- the two steps ---------------------------------------------------------------------------

def test_a_block_is_notarized_then_finalized_by_a_quorum():
    node = make_node(N4)
    assert node.config.quorum == 3 and p.compute_quorum(7) == 5 and p.compute_quorum(1) == 1
    p0 = propose(N1)
    out = node.on_message(p0, T0)
    assert [s.block_hash for s in own(out, NotarizationShare)] == [block_hash(p0.block)]
    assert own(out, FinalizationShare) == []          # step two waits for a notarization
    assert own(node.on_message(nshare(N1, p0), T0), FinalizationShare) == []
    out = node.on_message(nshare(N2, p0), T0)         # 3 of 4 with our own: notarized
    assert [s.height for s in own(out, FinalizationShare)] == [1]
    assert node.notarized_height == 1 and node.finalized_height == 0
    assert finalized(node.on_message(fshare(N1, p0), T0)) == []
    (done,) = finalized(node.on_message(fshare(N2, p0), T0))
    assert (done.block, done.block_hash) == (p0.block, block_hash(p0.block))
    assert [s for s, _ in done.proof] == [N1, N2, N4]
    assert node.finalized_height == 1 and node.status() == Status(N4, 1, 1)


def test_rank_r_waits_r_timeouts_and_a_lower_rank_is_still_signed():
    node = make_node(N4)
    p1 = propose(N2, rank=1)
    assert own(node.on_message(p1, T0 + T // 2), NotarizationShare) == []   # rank 1: not before T
    assert node.wakeup_at == T0 + T
    assert len(own(node.on_timer(T0 + T), NotarizationShare)) == 1
    p0 = propose(N1, rank=0)
    assert len(own(node.on_message(p0, T0 + T + 1), NotarizationShare)) == 1  # lower rank: signed too
    # both notarized: the node signed two blocks at height 1, so it never finalization-signs it
    out = []
    for signer in (N1, N2):
        out += node.on_message(nshare(signer, p0), T0 + T + 2) + node.on_message(nshare(signer, p1), T0 + T + 2)
    assert node.notarized_height == 1 and own(out, FinalizationShare) == []
    # others finalize p0; the node follows their finalization
    out = [o for s in (N1, N2, N3) for o in node.on_message(fshare(s, p0), T0 + T + 3)]
    assert [f.block_hash for f in finalized(out)] == [block_hash(p0.block)]


def test_a_higher_rank_is_not_signed_after_a_lower_one():
    node = make_node(N4)
    node.on_message(propose(N1, rank=0), T0)
    assert own(node.on_message(propose(N2, rank=1), T0 + 5 * T), NotarizationShare) == []


def test_the_maker_of_rank_r_proposes_after_r_timeouts_unless_a_lower_rank_block_is_there():
    node = make_node(N4)                       # rank 3 at height 1
    assert node.wakeup_at == T0 + 3 * T
    assert own(node.on_timer(T0 + 3 * T - 1), Proposal) == []
    (mine,) = own(node.on_timer(T0 + 3 * T), Proposal)
    assert (mine.block.height, mine.block.rank, mine.block.maker, mine.block.time) == (1, 3, N4, T0 + 3 * T)
    quiet = make_node(N4)
    quiet.on_message(propose(N1, rank=0), T0)  # valid (we signed it): no need for our block
    assert own(quiet.on_timer(T0 + 3 * T), Proposal) == []


def test_the_block_interval_paces_every_rank():
    node = make_node(N1, config={"block_interval_ns": T // 10})     # rank 0 at height 1
    assert own(node.start(T0), Proposal) == [] and node.wakeup_at == T0 + T // 10
    (mine,) = own(node.on_timer(T0 + T // 10), Proposal)
    assert mine.block.time == T0 + T // 10
    fallback = make_node(N2, config={"block_interval_ns": T // 10})  # rank 1
    assert own(fallback.on_timer(T0 + T), Proposal) == []
    assert len(own(fallback.on_timer(T0 + T + T // 10), Proposal)) == 1


def test_a_node_resends_its_own_artifacts_and_the_proposals_it_signed():
    node = make_node(N4)
    p0 = propose(N1)
    signed = own(node.on_message(p0, T0), NotarizationShare)
    node.on_message(propose(N2, rank=1), T0)              # seen, not signed
    resent = [o.message for o in node.on_timer(node.wakeup_at) if isinstance(o, p.Broadcast)]
    assert resent == [Status(N4, 0, 0), *signed, p0]
    # once p0 is notarized, its notarization goes along: every share we hold, not only ours
    others = [nshare(N1, p0), nshare(N2, p0)]
    final = own(node.on_message(others[0], T0) + node.on_message(others[1], T0), FinalizationShare)
    resent = [o.message for o in node.on_timer(node.wakeup_at) if isinstance(o, p.Broadcast)]
    assert resent[0] == Status(N4, 0, 1)
    assert all(message in resent for message in [*signed, *final, *others, p0])
    assert len(resent) == len(set(map(repr, resent)))          # nothing twice


def test_makers_not_heard_from_lately_are_not_waited_for():
    window = T // 2
    node = make_node(N4, config={"absent_after_ns": window})           # rank 3 at height 1
    node.on_message(Status(N3, 0, 0), T0 + window - 1)                # N3 (rank 2) is alive
    assert own(node.on_timer(T0 + window), Proposal) == []            # N1, N2 absent: wait 1 rank, not 3
    assert node.wakeup_at == T0 + T - 1                               # when N3 would turn absent
    node.on_message(Status(N3, 0, 0), T0 + T - 2)
    assert own(node.on_timer(T0 + T - 1), Proposal) == []
    (mine,) = own(node.on_timer(T0 + T), Proposal)
    assert (mine.block.rank, mine.block.time) == (3, T0 + T)
    lonely = make_node(N4, config={"absent_after_ns": window})
    (mine,) = own(lonely.on_timer(T0 + window), Proposal)             # nobody heard from: no wait
    assert mine.block.time == T0 + window
    patient = make_node(N4, config={"absent_after_ns": 0})             # 0: always r timeouts
    assert own(patient.on_timer(T0 + 3 * T - 1), Proposal) == []
    assert len(own(patient.on_timer(T0 + 3 * T), Proposal)) == 1
    # the notary side: a rank-1 block is signed at once when the rank-0 maker is absent
    late = propose(N2, rank=1, time=T0 + window)
    signer = make_node(N3, config={"absent_after_ns": window})
    assert len(own(signer.on_message(late, T0 + window), NotarizationShare)) == 1
    waiting = make_node(N3, config={"absent_after_ns": window})
    waiting.on_message(Status(N1, 0, 0), T0 + window - 1)
    assert own(waiting.on_message(late, T0 + window), NotarizationShare) == []


def test_a_refused_proposal_is_reported_and_not_signed():
    def validate(block, context, now):
        if block.rank == 0:
            raise WrongMaker("refused by the test")
    node = make_node(N4, validate=validate)
    out = node.on_message(propose(N1), T0)
    assert own(out, NotarizationShare) == []
    (refused,) = [o for o in out if isinstance(o, p.Refused)]
    assert refused.height == 1 and "WrongMaker" in refused.reason
    node.on_message(propose(N2, rank=1), T0)
    assert len(own(node.on_timer(T0 + T), NotarizationShare)) == 1  # the fallback is signed


def test_a_transient_refusal_is_asked_again():
    ready = []

    def validate(block, context, now):
        if not ready:
            raise BlockNotYetValid("registry version not here yet")
    node = make_node(N4, validate=validate)
    out = node.on_message(propose(N1), T0)
    assert own(out, NotarizationShare) == [] and not [o for o in out if isinstance(o, p.Refused)]
    ready.append(True)
    assert len(own(node.on_timer(node.wakeup_at), NotarizationShare)) == 1


def test_the_validator_sees_the_parent_and_the_unfinalized_ancestors():
    seen = []
    node = make_node(N4, validate=lambda block, context, now: seen.append(context))
    p0 = propose(N1)
    node.on_message(p0, T0)
    for signer in (N1, N2):
        node.on_message(nshare(signer, p0), T0)     # notarized, not finalized
    child = propose(N2, height=2, parent=block_hash(p0.block), time=T0 + 1)
    node.on_message(child, T0 + 1)
    context = seen[-1]
    assert (context.height, context.parent, context.unfinalized) == (2, p0.block, (p0.block,))
    assert context.tip == p.ChainTip(0, GENESIS_PARENT_HASH)


def test_a_second_notarized_block_at_a_height_is_still_learned():
    """Found by the adversarial schedules: two blocks notarized at height 1, each node seeing
    one first. A node must learn of the other too, or it can never sign the children built
    on it, and the subnet stalls."""
    node = make_node(N4)
    p0, p1 = propose(N1), propose(N2, rank=1)
    node.on_message(p0, T0)
    node.on_message(p1, T0)
    for signer in (N1, N2):
        node.on_message(nshare(signer, p0), T0 + T)
    assert node.notarized_height == 1            # p0 notarized: the round is now height 2
    child = propose(N2, height=2, parent=block_hash(p1.block), time=T0 + T)   # rank 0 at height 2, on p1
    assert own(node.on_message(child, T0 + T), NotarizationShare) == []       # p1 is not notarized (yet)
    out = [o for signer in (N1, N2, N3) for o in node.on_message(nshare(signer, p1), T0 + T)]
    (share,) = own(out, NotarizationShare)
    assert share.block_hash == block_hash(child.block)


def test_forged_and_foreign_artifacts_are_dropped_and_counted():
    node = make_node(N4)
    p0 = propose(N1)
    node.on_message(p0, T0)
    forged = dataclasses.replace(nshare(N1, p0), signer=N2)            # N1's signature, N2's name
    node.on_message(forged, T0)
    node.on_message(dataclasses.replace(nshare(N1, propose(N2, rank=1)), signer=N4), T0)  # claims to be us
    node.on_message(dataclasses.replace(nshare(N1, p0), signer="mallory"), T0)
    node.on_message(Proposal(propose(N1, rank=1).block, p0.signature), T0)  # not node 1's rank
    bad_signature = propose(N2, rank=1)
    node.on_message(Proposal(bad_signature.block, p0.signature), T0)
    node.on_message(nshare(N1, propose(N1, height=40)), T0)           # far ahead
    assert node.counters == {
        "notarization_bad_signature": 2, "notarization_not_a_member": 1, "proposal_wrong_maker": 1,
        "proposal_bad_signature": 1, "notarization_too_far_ahead": 1}
    assert node.notarized_height == 0


# -- catch-up ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def chain():
    """Ten heights finalized by a simulated subnet; node 1's view of them."""
    _, _, subnet, signers, verifier = dealt()
    sim = Simulation(subnet, signers, verifier, Schedule(seed=5))
    assert sim.run_until_finalized(10, T0 + 60 * SEC)
    return sim


def test_a_node_behind_is_answered_with_a_verified_catch_up(chain):
    ahead = chain.nodes[N1]
    fresh = make_node(N2, now=chain.now)
    (reply,) = [o for o in ahead.on_message(fresh.status(), chain.now) if isinstance(o, p.Send)]
    assert reply.to == N2 and isinstance(reply.message, CatchUp)
    out = fresh.on_message(reply.message, chain.now)
    got = [f.block_hash for f in finalized(out)]
    assert got == chain.finalized_chain(N1)[: len(got)] and len(got) == ahead.finalized_height
    assert finalized(out)[-1].proof and not finalized(out)[0].proof


def test_a_catch_up_must_chain_onto_our_tip_and_carry_a_quorum(chain):
    ahead = chain.nodes[N1]
    (reply,) = [o for o in ahead.on_message(Status(N2, 0, 0), chain.now) if isinstance(o, p.Send)]
    good = reply.message
    blocks = list(good.blocks)
    broken = blocks[:3] + [dataclasses.replace(blocks[3], time=blocks[3].time + 1)] + blocks[4:]
    notarization_sigs = tuple(
        (s, dealt()[3][s](compute_notarization_message(good.last.height, block_hash(good.last))))
        for s in (N1, N2, N3))
    cases = {
        "catch_up_not_finalized": dataclasses.replace(good, signatures=good.signatures[:2]),
        "catch_up_broken_chain": CatchUp(tuple(broken), good.signatures),
        "catch_up_gap": CatchUp(tuple(blocks[2:]), good.signatures),
    }
    for reason, catch_up in cases.items():
        fresh = make_node(N2, now=chain.now)
        assert finalized(fresh.on_message(catch_up, chain.now)) == []
        assert fresh.counters == {reason: 1}
    fresh = make_node(N2, now=chain.now)   # notarization signatures never finalize (domain separation)
    assert finalized(fresh.on_message(dataclasses.replace(good, signatures=notarization_sigs), chain.now)) == []


def test_a_node_far_behind_gets_everything_in_bounded_chunks_and_applies_them_in_any_order(chain):
    """One ``Status`` brings every missing block (chunks of at most the sender's limit: one
    round trip however far behind); chunks that overtake each other wait for their turn."""
    ahead = chain.nodes[N1]
    fresh = make_node(N2, now=chain.now)
    ahead.config, original = dataclasses.replace(ahead.config, max_catch_up_blocks=4), ahead.config
    try:
        replies = [o.message for o in ahead.on_message(fresh.status(), chain.now)
                   if isinstance(o, p.Send) and isinstance(o.message, CatchUp)]
        assert len(replies) > 1 and all(len(r.blocks) <= 4 for r in replies)
        assert [r.blocks[0].height for r in replies] == list(range(1, ahead.finalized_height + 1, 4))
        finalized = []
        for reply in reversed(replies):   # the worst order: the last chunk first
            out = fresh.on_message(reply, chain.now)
            finalized += [o.height for o in out if isinstance(o, p.Finalized)]
        assert fresh.finalized_height == ahead.finalized_height
        assert finalized == list(range(1, ahead.finalized_height + 1))   # each height once, in order
    finally:
        ahead.config = original


# -- restarts -------------------------------------------------------------------------------

def test_a_restarted_node_keeps_its_votes():
    node = make_node(N4)
    p0 = propose(N1)
    out = node.on_message(p0, T0)
    for signer in (N1, N2):
        out += node.on_message(nshare(signer, p0), T0)
    persisted = [o.message for o in out if isinstance(o, p.Persist)]
    assert [type(m) for m in persisted] == [NotarizationShare, FinalizationShare]
    restarted = make_node(N4, now=T0 + 10 * T, finalized=(), own_artifacts=persisted)
    start = restarted.start(T0 + 10 * T)
    assert [o.message for o in start if isinstance(o, p.Broadcast)][1:] == persisted   # sent again
    # it finalization-signed height 1: no other block there gets its notarization share
    restarted.on_message(propose(N2, rank=1), T0 + 10 * T)
    assert own(restarted.on_timer(T0 + 11 * T), NotarizationShare) == []


def test_a_restarted_node_that_signed_two_blocks_does_not_finalize_and_a_maker_does_not_propose_again():
    maker = make_node(N1)
    started = maker.start(T0)
    (mine,) = own(started, Proposal)
    signed = own(started, NotarizationShare)   # a maker signs its own block like any other
    assert [s.block_hash for s in signed] == [block_hash(mine.block)]
    restarted = make_node(N1, now=T0 + 1, finalized=(), own_artifacts=[mine, *signed])
    start = restarted.start(T0 + 1)
    assert [o for o in start if isinstance(o, p.Persist)] == []        # nothing new signed
    assert [o.message for o in start if isinstance(o, p.Broadcast)][1:] == [mine, *signed]
    p1 = propose(N2, rank=1)
    out = restarted.on_message(p1, T0 + 2 * T)
    assert own(out, NotarizationShare) == []      # rank 1 after our rank 0: no
    voter = make_node(N4, now=T0, own_artifacts=[nshare(N4, p1)])   # signed p1, rank unknown at restore
    out = voter.on_message(mine, T0 + 1)
    assert len(own(out, NotarizationShare)) == 1  # rank 0 improves on rank 1
    for signer in (N1, N2):
        out += voter.on_message(nshare(signer, mine), T0 + 1)
    assert voter.notarized_height == 1 and own(out, FinalizationShare) == []


def test_restoring_needs_a_chained_tail_with_the_proof_of_its_last_block(chain):
    entries = [p.Finalized(chain.blocks[h], chain.chain[h]) for h in (1, 2, 3)]
    with pytest.raises(p.AgreementConfigError, match="proof"):
        make_node(N2, finalized=entries)
    proof = chain.disks[N1].finalized[-1].proof
    with pytest.raises(p.AgreementConfigError, match="chain"):
        make_node(N2, finalized=[entries[0], dataclasses.replace(entries[2], proof=proof)])
    restored = make_node(N2, finalized=[*entries[:2], dataclasses.replace(entries[2], proof=proof)])
    assert (restored.finalized_height, restored.finalized_hash) == (3, chain.chain[3])
    assert restored.finalized_block(1) == (chain.blocks[1], chain.chain[1])


def test_only_retained_heights_are_served():
    _, _, subnet, signers, verifier = dealt()
    sim = Simulation(subnet, signers, verifier, Schedule(seed=9), retained_heights=3)
    assert sim.run_until_finalized(10, T0 + 60 * SEC)
    ahead = sim.nodes[N1]
    assert ahead.finalized_block(1) is None and ahead.finalized_block(ahead.finalized_height) is not None
    assert [o for o in ahead.on_message(Status(N2, 0, 0), sim.now) if isinstance(o, p.Send)] == []
    assert ahead.counters["catch_up_not_retained"] == 1   # a node this far behind needs state sync
    recent = ahead.finalized_height - 1
    sends = [o.message for o in ahead.on_message(Status(N2, recent, recent), sim.now) if isinstance(o, p.Send)]
    (catch_up,) = [m for m in sends if isinstance(m, CatchUp)]
    assert [b.height for b in catch_up.blocks] == [ahead.finalized_height]
    # and the notarized blocks above, which the peer can take once it caught up
    assert {m.block.height for m in sends if isinstance(m, Proposal)} <= {ahead.finalized_height + 1}


# -- ingress, certification shares, configuration -----------------------------------------------

def test_ingress_is_gossiped_and_handed_to_the_shell():
    node = make_node(N4)
    ingress = (Ingress(b"user", 5, "m", b"", b"\x01" * 32, T0 + 60 * SEC),)
    assert node.submit_ingress(ingress, T0) == [p.Broadcast(IngressGossip(ingress))]
    assert node.submit_ingress((), T0) == []
    assert node.on_message(IngressGossip(ingress), T0) == [p.IngressReceived(ingress)]


def _certified_tree(height: int):
    from state_manager.labeled_trie import build_from_sorted
    from state_manager.ic_encoding import uleb128
    from state_manager.state_tree import leaf

    return build_from_sorted([(b"metadata", build_from_sorted([(b"height", leaf(height))])), (b"time", uleb128(1))])


def test_certification_shares_are_exchanged_and_aggregated_once():
    _, secrets, subnet, _, _ = dealt()
    node = make_node(N4)
    tree = _certified_tree(7)
    root, witness = tree.digest(), certified_height_witness(tree)
    shares = {n: sign_certification_share(7, root, secrets[n].node_index, secrets[n].secret_share, witness)
              for n in (N1, N2, N3, N4)}
    out = node.submit_certification_share(shares[N4], T0)
    assert out == [p.Broadcast(CertificationShareGossip(shares[N4]))]
    assert node.on_message(CertificationShareGossip(shares[N1]), T0) == []
    (certified,) = [o for o in node.on_message(CertificationShareGossip(shares[N2]), T0) if isinstance(o, p.Certified)]
    verify_certification(certified.certification, subnet.public_key)
    assert certified.certification.height == 7
    assert node.on_message(CertificationShareGossip(shares[N3]), T0) == []   # once per height


def test_relabeled_shares_never_combine():
    """The signature covers the root only: honest shares of height 7 relabeled to height 9 (or
    sent without their height witness) are refused before they count, so they can never
    combine into a certification of height 9 that verifies."""
    _, secrets, _, _, _ = dealt()
    node = make_node(N4)
    tree = _certified_tree(7)
    root, witness = tree.digest(), certified_height_witness(tree)
    other_witness = certified_height_witness(_certified_tree(9))
    for n in (N1, N2, N3, N4):
        share = sign_certification_share(7, root, secrets[n].node_index, secrets[n].secret_share, witness)
        for forged in (dataclasses.replace(share, height=9),                                # relabeled
                       dataclasses.replace(share, height=9, height_witness=other_witness),  # another tree's proof
                       dataclasses.replace(share, height_witness=b""),                      # no proof
                       dataclasses.replace(share, height_witness=b"\x92\x01")):            # garbage
            assert not [o for o in node.on_message(CertificationShareGossip(forged), T0) if isinstance(o, p.Certified)]
    assert node.counters["certification share without a height proof"] == 16
    assert node.certification_shares(9).roots == ()   # not even tallied


def test_bad_configurations_are_refused():
    _, _, subnet, _, _ = dealt()
    with pytest.raises(p.AgreementConfigError):
        p.AgreementConfig(subnet, "mallory")
    with pytest.raises(p.AgreementConfigError):
        p.AgreementConfig(subnet, N1, round_timeout_ns=0)
    with pytest.raises(p.AgreementConfigError):
        p.AgreementConfig(subnet, N1, max_catch_up_blocks=1000)


def test_the_protocol_core_is_pure():
    """No clocks, sockets, threads, randomness, identity/hash-seed builtins or asserts in the package."""
    violations = []
    for path in sorted(pathlib.Path(ROOT, "consensus_stub", "agreement").glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        violations += [f"{path.name} imports {name}" for _, name in _imports(tree)
                       if name.split(".")[0] in FORBIDDEN_MODULES]
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
                violations.append(f"{path.name}:{node.lineno} calls {node.func.id}()")
            if isinstance(node, ast.Assert):
                violations.append(f"{path.name}:{node.lineno} uses assert")
    assert violations == []
