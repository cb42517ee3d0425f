"""check_fetched_slice: what an honest replica's answer satisfies beyond verifying."""

from __future__ import annotations

import dataclasses

import pytest

from state_manager import certification as cm
from state_manager import certified_slice as cs
from state_manager import encoding
from state_manager import hash_tree as ht
from state_manager.hash_tree import Fork, Labeled, Pruned
from state_manager.streams import ExpectedIndices
from state_manager.tree_encoding import decode_tree, encode_tree
from tests.xnet.fixtures import P1, PeerSubnet, decode_slice
from xnet.fetched_slice import FetchedSliceRejected, check_fetched_slice
from xnet.slice_pool import SlicePool

EXPECTED = ExpectedIndices(message_index=3, signal_index=2)
OWN_END = 5


def check(data: bytes, witness_begin: int, msg_begin: int, pooled=None) -> None:
    check_fetched_slice(decode_slice(P1, data), witness_begin, msg_begin, EXPECTED, OWN_END, pooled)


def test_honest_answers_pass():
    snapshot = PeerSubnet(P1).commit(0, 8, signals_end=4)
    check(snapshot.slice(msg_begin=3), 3, 3)
    check(snapshot.slice(witness_begin=3, msg_begin=5), 3, 5)   # a continuation of pooled [3, 5)
    check(snapshot.header_only(msg_begin=8), 8, 8)              # nothing new but signals


@pytest.mark.parametrize("served, asked", [
    ((4, 4), (3, 3)),    # a gap: starts after what was asked for
    ((2, 2), (3, 3)),    # an overlap: starts before
    ((5, 5), (3, 5)),    # a continuation whose witness does not reach the pooled messages
])
def test_answers_to_another_request_are_refused(served, asked):
    snapshot = PeerSubnet(P1).commit(0, 8, signals_end=4)
    with pytest.raises(FetchedSliceRejected):
        check(snapshot.slice(witness_begin=served[0], msg_begin=served[1]), *asked)


@pytest.mark.parametrize("signals_end", [1, 6])
def test_signals_must_stay_between_the_expected_index_and_our_stream_end(signals_end):
    snapshot = PeerSubnet(P1).commit(0, 8, signals_end=signals_end)
    with pytest.raises(FetchedSliceRejected, match="signals_end"):
        check(snapshot.slice(msg_begin=3), 3, 3)


def test_an_older_certification_than_the_pooled_one_is_a_replay():
    peer = PeerSubnet(P1)
    old = peer.commit(0, 8, signals_end=4)
    new = peer.commit(0, 9, signals_end=4)
    pool = SlicePool("subnet-own", 1 << 20)
    assert pool.put(P1, new.slice(msg_begin=3), decode_slice(P1, new.slice(msg_begin=3)))
    with pytest.raises(FetchedSliceRejected, match="older"):
        check(old.slice(msg_begin=3), 3, 3, pool.get(P1))
    check(new.slice(msg_begin=3), 3, 3, pool.get(P1))


def _relabeled(data: bytes, height: int, prune_metadata: bool = False) -> bytes:
    """An honest slice whose certification claims ``height`` (same signature), as a single
    dishonest replica can serve it; optionally with ``/metadata`` pruned from the witness."""
    version, payload, witness, certification = encoding.decode(data)
    if prune_metadata:
        witness = encode_tree(_prune_metadata(decode_tree(witness, max_bytes=1 << 20, max_depth=256)))
    cert = cm.decode_certification(certification)
    relabeled = cm.encode_certification(cm.Certification(height, cert.root, cert.signature))
    return encoding.encode((version, payload, witness, relabeled))


def _prune_metadata(tree):
    if type(tree) is Fork:
        return Fork(_prune_metadata(tree.left), _prune_metadata(tree.right))
    if type(tree) is Labeled and tree.label == b"metadata":
        return Labeled(tree.label, Pruned(ht.reconstruct(tree.subtree)))
    return tree


@pytest.mark.parametrize("prune_metadata, error", [
    (False, cs.CertificationHeightMismatch),     # the witness reveals /metadata/height
    (True, cs.CertificationHeightMissing),       # it does not: nothing proves the claimed height
])
def test_a_relabeled_height_never_enters_the_pool_and_blocks_no_honest_continuation(prune_metadata, error):
    peer = PeerSubnet(P1)
    first = peer.commit(0, 6, signals_end=4)
    second = peer.commit(0, 9, signals_end=4)
    pool = SlicePool("subnet-own", 1 << 20)
    pooled = first.slice(msg_begin=3, msg_limit=2)                      # [3, 5) at height 1
    check(pooled, 3, 3)
    assert pool.put(P1, pooled, decode_slice(P1, pooled))
    honest = second.slice(witness_begin=3, msg_begin=5)                 # [5, 9) at height 2
    # A dishonest replica serves the honest continuation relabeled to height 2**63: refused
    # by the decoder with its own error, so it never reaches the pool (and the refresher
    # penalises the replica that served it).
    with pytest.raises(error, match="height"):
        decode_slice(P1, _relabeled(honest, 2**63, prune_metadata))
    assert pool.get(P1).certification_height == 1
    # Had it been pooled, every honest continuation would look older and its honest server
    # would be penalised instead:
    poisoned = dataclasses.replace(pool.get(P1), certification_height=2**63)
    with pytest.raises(FetchedSliceRejected, match="older"):
        check(honest, 3, 5, poisoned)
    # As it is, the honest continuation passes and is appended.
    check(honest, 3, 5, pool.get(P1))
    assert pool.put(P1, honest, decode_slice(P1, honest))
    merged = pool.get(P1)
    assert merged.certification_height == 2
    assert (merged.stream_slice.messages_begin, merged.stream_slice.messages_end) == (3, 9)
