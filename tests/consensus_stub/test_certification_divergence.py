"""Who signed which root: a diverged minority, and a stalled height (consensus_stub.agreement.divergence)."""

from __future__ import annotations

import dataclasses
import datetime

import pytest

from consensus_stub.agreement.certification import CertificationAggregator
from consensus_stub.agreement.divergence import ShareTally, group_shares
from consensus_stub.genesis import SubnetSpec, genesis_registry
from state_manager.certification import certified_height_witness, sign_certification_share
from state_manager.labeled_trie import build_from_sorted
from state_manager.state_tree import leaf

NOT_BEFORE = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)


def tree_of(tag: int, height: int):
    """A certified tree of ``height`` (its ``/metadata/height`` proves it), told apart by ``tag``."""
    return build_from_sorted([(b"metadata", build_from_sorted([(b"height", leaf(height))])), (b"tag", leaf(tag))])


#: Three roots of height 4; a share of another height signs the same tag's tree of that height.
ROOT, OTHER, THIRD = (tree_of(tag, 4).digest() for tag in (5, 6, 7))
TAGS = {ROOT: 5, OTHER: 6, THIRD: 7}


def short(root: bytes) -> str:
    return root[:4].hex() + "…"


@pytest.fixture(scope="module")
def dealt():
    return genesis_registry([SubnetSpec("alpha", 4, ((0, 999),))], b"divergence-test-seed-of-32-byte!",
                            not_before=NOT_BEFORE)


@pytest.fixture
def share(dealt):
    _, secrets = dealt

    def make(node: int, root: bytes = ROOT, height: int = 4):
        s = secrets[f"alpha-node-{node}"]
        tree = tree_of(TAGS[root], height)
        return sign_certification_share(height, tree.digest(), s.node_index, s.secret_share,
                                        certified_height_witness(tree))
    return make


def test_the_minority_share_is_reported_after_the_majority_certified(dealt, share):
    registry, _ = dealt
    aggregator = CertificationAggregator(registry.subnet("alpha", 1))
    assert aggregator.add(share(4, OTHER)) is None      # the diverged node signs first
    assert aggregator.add(share(1)) is None and aggregator.add(share(2)) is None
    certification = aggregator.add(share(3))
    assert certification is not None and certification.root == ROOT
    shares = aggregator.shares_at(4)
    assert [(r.root, r.node_ids) for r in shares.roots] == [
        (ROOT, ("alpha-node-1", "alpha-node-2", "alpha-node-3")), (OTHER, ("alpha-node-4",))]
    assert shares.disagree and shares.signers_of(OTHER) == ("alpha-node-4",)
    assert shares.describe() == \
        f"root {short(ROOT)}: alpha-node-1,alpha-node-2,alpha-node-3; root {short(OTHER)}: alpha-node-4"
    assert aggregator.stall(finalized_height=20, rounds=3) is None   # certified: no stall


def test_a_share_that_does_not_verify_is_not_reported(dealt, share):
    registry, _ = dealt
    aggregator = CertificationAggregator(registry.subnet("alpha", 1))
    forged = dataclasses.replace(share(3, OTHER), node_index=2)   # node 3's signature claimed by node 2
    aggregator.add(share(1))
    aggregator.add(forged)
    assert [(r.root, r.node_ids) for r in aggregator.shares_at(4).roots] == [(ROOT, ("alpha-node-1",))]


def test_disagreeing_shares_stall_certification_after_some_rounds(dealt, share):
    registry, _ = dealt
    aggregator = CertificationAggregator(registry.subnet("alpha", 1))
    for node, root in ((1, ROOT), (2, ROOT), (3, OTHER), (4, THIRD)):
        assert aggregator.add(share(node, root)) is None
        assert aggregator.add(share(node, root, height=5)) is None
    assert aggregator.stall(finalized_height=6, rounds=3) is None      # not enough rounds yet
    stall = aggregator.stall(finalized_height=7, rounds=3)
    assert stall is not None and stall.height == 4 and stall.reason == "shares disagree"
    roots = sorted([(ROOT, "alpha-node-1,alpha-node-2"), (OTHER, "alpha-node-3"), (THIRD, "alpha-node-4")],
                   key=lambda r: (-r[1].count(","), r[0]))   # most signers first, then by root bytes
    assert stall.describe() == ("certification stalled since 4: shares disagree ("
                                + "; ".join(f"root {short(root)}: {who}" for root, who in roots) + ")")
    assert stall.as_json()["shares"][0] == {"root": ROOT.hex(), "signers": ["alpha-node-1", "alpha-node-2"]}


def test_too_few_shares_is_another_reason(dealt, share):
    registry, _ = dealt
    aggregator = CertificationAggregator(registry.subnet("alpha", 1))
    aggregator.add(share(1))
    aggregator.add(share(2))
    stall = aggregator.stall(finalized_height=9, rounds=5)
    assert stall is not None and stall.reason == "too few shares (2 of 3)" and not stall.shares.disagree


def test_a_height_with_disagreeing_shares_is_named_before_a_lower_one_with_too_few(dealt, share):
    registry, _ = dealt
    aggregator = CertificationAggregator(registry.subnet("alpha", 1))
    aggregator.add(share(1, height=3))                     # lagging nodes left height 3 short
    aggregator.add(share(1, height=4))
    aggregator.add(share(3, OTHER, height=4))
    stall = aggregator.stall(finalized_height=10, rounds=3)
    assert stall.height == 4 and stall.reason == "shares disagree"


def test_a_later_certification_ends_the_stall(dealt, share):
    registry, _ = dealt
    aggregator = CertificationAggregator(registry.subnet("alpha", 1))
    aggregator.add(share(1))
    aggregator.add(share(2, OTHER))
    assert aggregator.stall(finalized_height=10, rounds=3).height == 4
    for node in (1, 2, 3):
        aggregator.add(share(node, height=6))
    assert aggregator.certified_height == 6 and aggregator.stall(finalized_height=10, rounds=3) is None


def test_the_tally_keeps_a_bounded_window_of_the_lowest_uncertified_heights(share):
    tally = ShareTally(keep=3)
    for height in (10, 3, 7, 5, 4):
        tally.add(share(1, height=height))
    assert [h for h in (3, 4, 5, 7, 10) if tally.shares(h)] == [3, 4, 5]
    tally.certified(9)
    tally.add(share(2, height=8))        # below the certified height, within keep: tallied (a late minority)
    tally.add(share(2, height=6))        # keep = 3 below 9: 6 and under are forgotten
    assert len(tally.shares(8)) == 1 and not tally.shares(6) and not tally.shares(5)
    assert tally.stalled_height(finalized_height=20, rounds=3) is None
    tally.add(share(1, height=12))
    assert tally.stalled_height(finalized_height=14, rounds=3) is None
    assert tally.stalled_height(finalized_height=15, rounds=3) == 12


def test_grouping_is_deterministic_and_names_unknown_indices(share):
    shares = [share(2, OTHER), share(1), share(3, OTHER)]
    a = group_shares(4, shares, ("n1", "n2", "n3"))
    b = group_shares(4, list(reversed(shares)), ("n1", "n2", "n3"))
    assert a == b and a.roots[0].node_ids == ("n2", "n3")
    assert group_shares(4, [share(4)], ("n1",)).roots[0].node_ids == ("#4",)
    assert a.with_signer(ROOT, "n9").signers_of(ROOT) == ("n1", "n9")
