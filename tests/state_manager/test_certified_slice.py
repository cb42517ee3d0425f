"""Certified stream slices: round trips, limits, and one test per decoding error.

The sending subnet ``REMOTE`` certifies its state tree with a real 3-of-4 threshold BLS key;
the receiving subnet ``OWN`` decodes the slice of ``/streams/OWN`` with ``REMOTE``'s public
key. Adversarial slices are built by hand from the same trees and must fail with their own
``SliceDecodeError`` subclass.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, replace
from typing import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from state_manager import certification as cm
from state_manager import certified_slice as cs
from state_manager import encoding
from state_manager import hash_tree as ht
from state_manager import bls
from state_manager.codec import encode_header_leaf, encode_message_leaf
from state_manager.hash_tree import Empty, Fork, HashTree, Labeled, Leaf, Pruned
from state_manager.labeled_trie import LabeledTrie, build_from_sorted
from state_manager.messages import Reject, RejectCode, Reply, Request, Response
from state_manager.streams import RejectReason, RejectSignal, StreamHeader, StreamSlice
from state_manager.tree_encoding import decode_tree, encode_tree
from tests.state_manager.trie_reference import leaf_digest_witness

OWN = "subnet-own"
REMOTE = "subnet-remote"
OTHER = "subnet-other"
REGISTRY_VERSION = 7
HEIGHT = 10

STREAMS, HEADER, MESSAGES = b"streams", b"header", b"messages"


def idx(i: int) -> bytes:
    return cs.message_label(i)


def message(i: int, size: int = 20):
    if i % 3 == 2:
        return Response(7, 9, i, Reject(RejectCode.CANISTER_ERROR, "no") if i % 2 else Reply(b"r" * size))
    return Request(sender=100 + i, receiver=200, method_name="ping", method_payload=bytes([i % 256]) * size,
                   sender_reply_callback=i)


OWN_HEADER = StreamHeader(begin=5, end=15, signals_end=3, reject_signals=(RejectSignal(1, RejectReason.QUEUE_FULL),))
OWN_MESSAGES = {i: message(i, size=10 + 7 * i) for i in range(5, 15)}
OTHER_HEADER = StreamHeader(begin=0, end=4, signals_end=0)
OTHER_MESSAGES = {i: message(i) for i in range(4)}


# --------------------------------------------------------------------------- tree helpers


def stream_trie(header, messages: dict) -> LabeledTrie:
    """``{header, messages}``; header/message values may be objects (encoded) or raw bytes,
    message keys indices (8-byte labels) or raw labels."""
    header_leaf = header if isinstance(header, bytes) else encode_header_leaf(header)
    items = []
    for key, value in messages.items():
        label = key if isinstance(key, bytes) else idx(key)
        items.append((label, value if isinstance(value, bytes) else encode_message_leaf(value)))
    children = [(HEADER, header_leaf)]
    if items:
        children.append((MESSAGES, build_from_sorted(sorted(items))))
    return build_from_sorted(children)


def certified_tree(streams: dict, time: int = 1_000, height: int = HEIGHT) -> LabeledTrie:
    """A certified tree with ``/streams/<dst>`` for each entry ``dst -> (header, messages)``
    next to the other top-level labels slices never reveal."""
    stream_items = sorted((dst.encode(), stream_trie(h, m)) for dst, (h, m) in streams.items())
    return build_from_sorted([
        (b"canister", build_from_sorted([(idx(1), build_from_sorted([(b"certified_data", b"cd")]))])),
        (b"metadata", build_from_sorted([(b"height", cs.height_leaf(height))])),
        (b"request_status", Empty()),
        (STREAMS, build_from_sorted(stream_items)),
        (b"subnet", build_from_sorted([(REMOTE.encode(), build_from_sorted([(b"public_key", b"pk")]))])),
        (b"time", time.to_bytes(8, "big")),
    ])


def default_streams() -> dict:
    return {OWN: (OWN_HEADER, OWN_MESSAGES), OTHER: (OTHER_HEADER, OTHER_MESSAGES)}


def certify(tree: LabeledTrie, deal: bls.ThresholdKeys, height: int = HEIGHT) -> cm.Certification:
    """Real threshold certification: nodes 2, 3, 4 sign shares, which are aggregated."""
    root = tree.digest()
    shares = [cm.sign_certification_share(height, root, i, deal.secret_share(i)) for i in (2, 3, 4)]
    key_shares = {i: deal.public_key_share(i) for i in range(1, deal.n + 1)}
    return cm.aggregate_certification(shares, deal.t, deal.public_key, key_shares)


def group(nodes: list) -> HashTree:
    """Right-leaning forks over ``nodes`` (the payload fork layout is free)."""
    tree = nodes[-1]
    for node in reversed(nodes[:-1]):
        tree = Fork(node, tree)
    return tree


def join(payload: HashTree, witness_tree: HashTree, certification: bytes | cm.Certification) -> bytes:
    if isinstance(certification, cm.Certification):
        certification = cm.encode_certification(certification)
    return encoding.encode((cs.SLICE_VERSION, encode_tree(payload), encode_tree(witness_tree), certification))


def split(data: bytes) -> tuple[HashTree, HashTree, bytes]:
    version, payload, witness_bytes, certification = encoding.decode(data)
    return (decode_tree(payload, max_bytes=1 << 24, max_depth=1000),
            decode_tree(witness_bytes, max_bytes=1 << 24, max_depth=1000), certification)


def hand_made(tree: LabeledTrie, payload_labels: list, witness_labels: list, dst: str = OWN) -> tuple[HashTree, HashTree]:
    """A payload with the given message labels of ``/streams/<dst>`` and a witness revealing
    ``/metadata/height``, the header and ``witness_labels`` as pruned leaves — no encoder
    checks involved."""
    stream = tree[STREAMS][dst.encode()]
    header_leaf = stream[HEADER]
    children = [Labeled(HEADER, Leaf(header_leaf))]
    if payload_labels:
        messages = stream[MESSAGES]
        children.append(Labeled(MESSAGES, group([Labeled(l, Leaf(messages[l])) for l in payload_labels])))
    payload = Labeled(STREAMS, Labeled(dst.encode(), group(children)))
    paths = [(b"metadata", b"height"), (STREAMS, dst.encode(), HEADER)] + [(STREAMS, dst.encode(), MESSAGES, l) for l in witness_labels]
    return payload, leaf_digest_witness(tree, paths)


# --------------------------------------------------------------------------- fixtures


@dataclass
class World:
    deal: bls.ThresholdKeys
    foreign: bls.ThresholdKeys
    tree: LabeledTrie
    cert: cm.Certification
    keys: dict

    def public_key_for(self, subnet: str, version: int):
        return self.keys.get((subnet, version))

    def encode(self, witness_begin=5, msg_begin=5, msg_limit=100, byte_limit=1 << 20, subnet=OWN, tree=None, cert=None):
        return cs.encode_certified_stream_slice(
            tree or self.tree, cert or self.cert, subnet, witness_begin, msg_begin, msg_limit, byte_limit)

    def decode(self, data, own=OWN, remote=REMOTE, version=REGISTRY_VERSION, **bounds) -> cs.CertifiedSlice:
        return cs.decode_certified_stream_slice(own, remote, self.public_key_for, version, data, **bounds)


@pytest.fixture(scope="module")
def world() -> World:
    deal = bls.deal_threshold_keys(4, bls.threshold_for(4), b"\x5a" * 32)
    foreign = bls.deal_threshold_keys(4, bls.threshold_for(4), b"\xa5" * 32)
    tree = certified_tree(default_streams())
    keys = {(REMOTE, REGISTRY_VERSION): deal.public_key, (OTHER, REGISTRY_VERSION): foreign.public_key}
    return World(deal, foreign, tree, certify(tree, deal), keys)


# --------------------------------------------------------------------------- round trips


def test_full_slice_round_trip(world):
    data = world.encode()
    result = world.decode(data)
    expected = StreamSlice(OWN_HEADER, 5, tuple(OWN_MESSAGES[i] for i in range(5, 15)))
    assert result.stream_slice == expected
    assert result.certification == world.cert
    assert (result.witness_begin, result.witness_end) == (5, 15)
    assert cs.decode_valid_certified_stream_slice(data) == expected
    assert cs.certified_slice_byte_size(data) == len(data)
    # Deterministic bytes.
    assert world.encode() == data


def test_payload_and_witness_layout(world):
    data = world.encode(witness_begin=6, msg_begin=8, msg_limit=3)
    payload, witness_tree, certification = split(data)
    assert certification == cm.encode_certification(world.cert)
    # Payload: only labeled/fork/leaf nodes, exactly the header and messages [8, 11).
    found = ht.lookup_path(payload, [STREAMS, OWN.encode(), HEADER])
    assert found == ht.Found(Leaf(encode_header_leaf(OWN_HEADER)))
    labels = [node.label for node in ht.flatten_forks(ht.lookup_path(payload, [STREAMS, OWN.encode(), MESSAGES]).tree)]
    assert labels == [idx(8), idx(9), idx(10)]
    # Witness: reconstructs alone, carries no leaf, reveals the header and [6, 11) as pruned leaves.
    assert ht.reconstruct(witness_tree) == world.tree.digest()
    stack = [witness_tree]
    while stack:
        node = stack.pop()
        assert type(node) is not Leaf
        stack.extend([node.left, node.right] if type(node) is Fork else [node.subtree] if type(node) is Labeled else [])
    messages = ht.lookup_path(witness_tree, [STREAMS, OWN.encode(), MESSAGES]).tree
    revealed = [node.label for node in ht.flatten_forks(messages) if type(node) is Labeled]
    assert revealed == [idx(i) for i in range(6, 11)]
    for i in range(6, 11):
        position = ht.find_label(idx(i), ht.flatten_forks(messages)).tree
        assert position == Pruned(ht.hash_leaf(encode_message_leaf(OWN_MESSAGES[i])))
    # Nothing of the other stream or the other top-level labels is revealed.
    assert ht.lookup_path(witness_tree, [STREAMS, OTHER.encode()]) == ht.UNKNOWN
    assert ht.lookup_path(witness_tree, [b"time"]) == ht.UNKNOWN


def test_witness_begin_below_msg_begin(world):
    result = world.decode(world.encode(witness_begin=6, msg_begin=9, msg_limit=2))
    assert result.stream_slice.messages_begin == 9
    assert result.stream_slice.messages == (OWN_MESSAGES[9], OWN_MESSAGES[10])
    assert (result.witness_begin, result.witness_end) == (6, 11)


@pytest.mark.parametrize(
    "witness_begin, msg_begin, msg_limit, witness_range",
    [
        (5, 5, 0, (15, 15)),  # msg_limit 0: header only, nothing revealed
        (6, 9, 0, (6, 9)),  # header only, but [6, 9) is proven for the pool
        (15, 15, 10, (15, 15)),  # msg_begin == end
        (7, 15, 10, (7, 15)),
    ],
)
def test_header_only_slices(world, witness_begin, msg_begin, msg_limit, witness_range):
    data = world.encode(witness_begin=witness_begin, msg_begin=msg_begin, msg_limit=msg_limit)
    payload, _, _ = split(data)
    assert ht.lookup_path(payload, [STREAMS, OWN.encode(), MESSAGES]) == ht.ABSENT
    result = world.decode(data)
    assert result.stream_slice == StreamSlice(OWN_HEADER, OWN_HEADER.end, ())
    assert (result.witness_begin, result.witness_end) == witness_range
    assert cs.decode_valid_certified_stream_slice(data) == result.stream_slice


def test_empty_stream_gives_header_only_slice(world):
    header = StreamHeader(begin=3, end=3, signals_end=9)
    tree = certified_tree({OWN: (header, {})})
    cert = certify(tree, world.deal)
    result = world.decode(world.encode(witness_begin=3, msg_begin=3, tree=tree, cert=cert))
    assert result.stream_slice == StreamSlice(header, 3, ())


def leaf_len(i: int) -> int:
    return len(encode_message_leaf(OWN_MESSAGES[i]))


@pytest.mark.parametrize(
    "msg_limit, byte_limit, expected_end",
    [
        (3, 1 << 20, 8),  # message count limit
        (100, leaf_len(5) + leaf_len(6), 7),  # byte limit exactly fits two leaves
        (100, leaf_len(5) + leaf_len(6) - 1, 6),
        (100, 1, 6),  # the first message is always included
        (100, 0, 6),
        (1, 0, 6),
        (100, 1 << 20, 15),
    ],
)
def test_limits(world, msg_limit, byte_limit, expected_end):
    result = world.decode(world.encode(msg_limit=msg_limit, byte_limit=byte_limit))
    assert result.stream_slice.messages_begin == 5
    assert result.stream_slice.messages_end == expected_end
    assert result.stream_slice.messages == tuple(OWN_MESSAGES[i] for i in range(5, expected_end))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_limits_property(world, data):
    """Messages = the longest prefix of [msg_begin, end) within msg_limit and byte_limit, but
    at least one when msg_limit >= 1 and a message exists."""
    msg_begin = data.draw(st.integers(5, 15))
    witness_begin = data.draw(st.integers(5, msg_begin))
    msg_limit = data.draw(st.integers(0, 12))
    byte_limit = data.draw(st.integers(0, 400))
    result = world.decode(world.encode(witness_begin, msg_begin, msg_limit, byte_limit))
    expected, used = [], 0
    for i in range(msg_begin, 15):
        if len(expected) == msg_limit or (expected and used + leaf_len(i) > byte_limit):
            break
        expected.append(OWN_MESSAGES[i])
        used += leaf_len(i)
    assert result.stream_slice.messages == tuple(expected)
    if expected:
        assert result.stream_slice.messages_begin == msg_begin
        assert (result.witness_begin, result.witness_end) == (witness_begin, msg_begin + len(expected))


# --------------------------------------------------------------------------- encoder errors


def test_encoder_errors(world):
    with pytest.raises(cs.NoStream):
        world.encode(subnet="subnet-unknown")
    bare = build_from_sorted([(b"metadata", build_from_sorted([(b"height", cs.height_leaf(HEIGHT))])), (b"time", b"t")])
    with pytest.raises(cs.NoStream):
        cs.encode_certified_stream_slice(bare, certify(bare, world.deal), OWN, 0, 0, 1, 1)
    # Without /metadata/height nothing would authenticate the certified height: no slice.
    heightless = build_from_sorted([(STREAMS, certified_tree(default_streams()).get_subtree(STREAMS)), (b"time", b"t")])
    with pytest.raises(cs.CertificationTreeMismatch, match="no /metadata/height"):
        cs.encode_certified_stream_slice(heightless, certify(heightless, world.deal), OWN, 0, 0, 1, 1)
    # A tree of another height than the certification claims.
    with pytest.raises(cs.CertificationTreeMismatch):
        world.encode(cert=certify(world.tree, world.deal, height=HEIGHT + 1))
    for wb, mb in [(4, 5), (6, 5), (5, 16), (16, 16)]:
        with pytest.raises(cs.IndexOutOfRange):
            world.encode(witness_begin=wb, msg_begin=mb)
    for bad in [-1, True, 2**64, "5", None]:
        with pytest.raises(cs.InvalidSliceRequest):
            world.encode(msg_limit=bad)
    other = certified_tree(default_streams(), time=2_000)
    with pytest.raises(cs.CertificationTreeMismatch):
        world.encode(cert=certify(other, world.deal))
    # A stream with a hole in its messages is not a certified stream.
    holed = certified_tree({OWN: (OWN_HEADER, {i: m for i, m in OWN_MESSAGES.items() if i != 9})})
    with pytest.raises(cs.MalformedCertifiedTree):
        world.encode(tree=holed, cert=certify(holed, world.deal))
    for error in (cs.NoStream, cs.IndexOutOfRange, cs.InvalidSliceRequest, cs.CertificationTreeMismatch,
                  cs.MalformedCertifiedTree):
        assert issubclass(error, cs.SliceEncodeError) and not issubclass(error, cs.SliceDecodeError)


# --------------------------------------------------------------------------- adversarial slices
#
# Each case builds bytes (and optional decode arguments) from the world and names the one
# error class the decoder must raise.


@dataclass(frozen=True)
class Case:
    build: Callable[[World], tuple[bytes, dict]]
    error: type


def _with(payload=None, witness_tree=None, certification=None):
    def build(w: World):
        p, wt, c = split(w.encode())
        return join(payload(w, p) if payload else p, witness_tree(w, wt) if witness_tree else wt,
                    certification(w, c) if certification else c), {}
    return build


def _hand_made(streams: dict, payload_labels, witness_labels, dst=OWN):
    def build(w: World):
        tree = certified_tree(streams)
        return join(*hand_made(tree, payload_labels, witness_labels, dst), certify(tree, w.deal)), {}
    return build


def _raw(data: bytes, **kwargs):
    return lambda w: (data, kwargs)


def _tamper_message(w, payload):
    messages = ht.lookup_path(payload, [STREAMS, OWN.encode(), MESSAGES]).tree
    nodes = ht.flatten_forks(messages)
    nodes[1] = Labeled(nodes[1].label, Leaf(encode_message_leaf(message(99))))
    return Labeled(STREAMS, Labeled(OWN.encode(), Fork(Labeled(HEADER, Leaf(encode_header_leaf(OWN_HEADER))),
                                                       Labeled(MESSAGES, group(nodes)))))


def _map_witness_positions(witness_tree: HashTree, change) -> HashTree:
    """Apply ``change(label, pruned)`` to every revealed message position of the witness."""
    def walk(node, under_messages):
        if type(node) is Fork:
            return Fork(walk(node.left, under_messages), walk(node.right, under_messages))
        if type(node) is Labeled:
            if under_messages and type(node.subtree) is Pruned:
                return Labeled(node.label, change(node.label, node.subtree))
            return Labeled(node.label, walk(node.subtree, node.label == MESSAGES))
        return node
    return walk(witness_tree, False)


def _map_top_pruned(witness_tree: HashTree, change) -> HashTree:
    """Apply ``change`` to the rightmost node of the witness's top-level fork group: the
    pruned ``Labeled("time", Leaf(time))`` (``time`` is the largest top-level label)."""
    if type(witness_tree) is Fork:
        return Fork(witness_tree.left, _map_top_pruned(witness_tree.right, change))
    if type(witness_tree) is not Pruned:
        raise ValueError("expected the pruned time subtree")
    return change(witness_tree)


def _flip(digest: bytes) -> bytes:
    return bytes([digest[0] ^ 1]) + digest[1:]


def _tampered_message_with_matching_witness(w):
    payload, witness_tree, c = split(w.encode())
    payload = _tamper_message(w, payload)
    new_leaf = encode_message_leaf(message(99))
    witness_tree = _map_witness_positions(
        witness_tree, lambda label, p: Pruned(ht.hash_leaf(new_leaf)) if label == idx(6) else p)
    return join(payload, witness_tree, c), {}


def _witness_of_other_subtree(w):
    payload, _, c = split(w.encode(msg_limit=0))  # small enough for the witness to hold
    return join(payload, leaf_digest_witness(w.tree, [(b"time",)]), c), {}


def _witness_of_other_stream(w):
    payload, _, c = split(w.encode())
    _, other_witness, _ = split(w.encode(witness_begin=0, msg_begin=0, subnet=OTHER))
    return join(payload, other_witness, c), {}


def _witness_with_only_header(w):
    payload, _, c = split(w.encode(msg_limit=2))  # small enough for the witness to hold
    _, header_only_witness, _ = split(w.encode(msg_limit=0))
    return join(payload, header_only_witness, c), {}


def _position_supplied_twice(w):
    payload, _, c = split(w.encode(msg_limit=3))
    # Witness reveals message 6 whole (as a Leaf), the others as pruned leaves.
    revealed = leaf_digest_witness(w.tree, [(STREAMS, OWN.encode(), HEADER)] +
                                   [(STREAMS, OWN.encode(), MESSAGES, idx(i)) for i in (5, 6, 7)])
    message_6 = w.tree[STREAMS][OWN.encode()][MESSAGES][idx(6)]
    def walk(node):
        if type(node) is Fork:
            return Fork(walk(node.left), walk(node.right))
        if type(node) is Labeled:
            return Labeled(idx(6), Leaf(message_6)) if node.label == idx(6) else Labeled(node.label, walk(node.subtree))
        return node
    return join(payload, walk(revealed), c), {}


def _witness_with_time_leaf(w):
    payload, witness_tree, c = split(w.encode())
    time_leaf = w.tree[b"time"]
    seen = []
    _map_top_pruned(witness_tree, lambda p: seen.append(p) or p)
    assert seen == [Pruned(ht.hash_labeled(b"time", ht.hash_leaf(time_leaf)))]
    return join(payload, _map_top_pruned(witness_tree, lambda p: Labeled(b"time", Leaf(time_leaf))), c), {}


def _unsorted_payload(w):
    payload, witness_tree, c = split(w.encode())
    nodes = ht.flatten_forks(ht.lookup_path(payload, [STREAMS, OWN.encode(), MESSAGES]).tree)
    nodes[2], nodes[3] = nodes[3], nodes[2]
    return join(_replace_messages(nodes), witness_tree, c), {}


def _duplicate_payload(w):
    payload, witness_tree, c = split(w.encode())
    nodes = ht.flatten_forks(ht.lookup_path(payload, [STREAMS, OWN.encode(), MESSAGES]).tree)
    nodes.insert(3, nodes[2])
    return join(_replace_messages(nodes), witness_tree, c), {}


def _replace_messages(nodes) -> HashTree:
    return Labeled(STREAMS, Labeled(OWN.encode(), Fork(Labeled(HEADER, Leaf(encode_header_leaf(OWN_HEADER))),
                                                       Labeled(MESSAGES, group(nodes)))))


def _deep_payload(w):
    """Only too deep: every node is one a payload may hold (an ``Empty`` would be refused as
    soon as it is parsed, before the depth is known), and the witness is large enough for
    that many payload nodes (it is never looked at: the payload is refused first)."""
    payload, witness_tree, c = split(w.encode())
    deep = payload
    for i in range(cs.DEFAULT_MAX_TREE_DEPTH + 5):
        deep = Fork(deep, Labeled(b"z%d" % i, Leaf(b"")))
    return join(deep, Fork(witness_tree, Labeled(b"pad", Leaf(bytes(50 * 300)))), c), {}


def _certification_of(tree_maker, deal_of=lambda w: w.deal, height=HEIGHT):
    """The honest payload and witness with a (validly signed) certification of another tree."""
    def build(w):
        payload, witness_tree, _ = split(w.encode())
        tree = tree_maker()
        return join(payload, witness_tree, certify(tree, deal_of(w), height)), {}
    return build


def _signature(signature: bytes):
    def build(w):
        payload, witness_tree, _ = split(w.encode())
        raw = encoding.encode((cm.CERTIFICATION_VERSION, w.cert.height, w.cert.root, signature))
        return join(payload, witness_tree, raw), {}
    return build


def _payload_with(make_stream_children=None, make_root=None):
    """Replace the payload (built from the honest payload's header and messages)."""
    def build(w):
        payload, witness_tree, c = split(w.encode())
        header = Labeled(HEADER, Leaf(encode_header_leaf(OWN_HEADER)))
        messages = ht.find_label(MESSAGES, ht.flatten_forks(ht.lookup_path(payload, [STREAMS, OWN.encode()]).tree))
        messages = Labeled(MESSAGES, messages.tree)
        if make_root is not None:
            new = make_root(header, messages)
        else:
            new = Labeled(STREAMS, Labeled(OWN.encode(), make_stream_children(header, messages)))
        return join(new, witness_tree, c), {}
    return build


def _bad_key(w):
    data = w.encode()
    w2 = replace(w, keys={(REMOTE, REGISTRY_VERSION): b"\x00" * 48})
    return data, {"public_key_for": w2.public_key_for}


def _outer(fields):
    def build(w):
        p, wt, c = encoding.decode(w.encode())[1:]
        return encoding.encode(tuple(fields(p, wt, c))), {}
    return build


def _bin16_payload(w):
    _, p, wt, c = encoding.decode(w.encode(msg_limit=0))
    # bin16 header for a payload shorter than 256 bytes is a longer form than needed.
    raw = b"\x94" + bytes([cs.SLICE_VERSION]) + b"\xc5" + len(p).to_bytes(2, "big") + p + encoding.encode(wt) + encoding.encode(c)
    return raw, {}


def _array16_envelope(w):
    raw = w.encode()
    return b"\xdc\x00\x04" + raw[1:], {}


def _non_canonical_payload(w):
    _, p, wt, c = encoding.decode(w.encode())
    return encoding.encode((cs.SLICE_VERSION, p + b"\x91\x00", wt, c)), {}


def _non_canonical_witness(w):
    _, p, wt, c = encoding.decode(w.encode())
    return encoding.encode((cs.SLICE_VERSION, p, wt[:-1], c)), {}


def _malformed_witness(w):
    payload, witness_tree, c = split(w.encode())
    # A label larger than 'streams' before it in the witness root group.
    return join(payload, Fork(Labeled(b"zzz", Pruned(b"\x00" * 32)), witness_tree), c), {}


def _relabeled(height: int, prune_metadata: bool = False):
    """The honest slice with its certification's height relabeled (same signature)."""
    def build(w):
        payload, witness_tree, _ = split(w.encode())
        if prune_metadata:
            witness_tree = _prune_top_label(witness_tree, b"metadata")
        raw = encoding.encode((cm.CERTIFICATION_VERSION, height, w.cert.root, w.cert.signature))
        return join(payload, witness_tree, raw), {}
    return build


def _prune_top_label(tree: HashTree, label: bytes) -> HashTree:
    """``tree`` with the subtree under top-level ``label`` pruned to its digest."""
    if type(tree) is Fork:
        return Fork(_prune_top_label(tree.left, label), _prune_top_label(tree.right, label))
    if type(tree) is Labeled and tree.label == label:
        return Labeled(label, Pruned(ht.reconstruct(tree.subtree)))
    return tree


def balanced(nodes: list) -> HashTree:
    level = list(nodes)
    while len(level) > 1:
        level = [Fork(*level[i:i + 2]) if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)]
    return level[0]


def _witness_plus(extra: Callable[[], HashTree]):
    """The honest slice with ``extra()`` forked next to its witness, decoded with no extra
    positions allowed (the honest witness then uses its whole budget but for the slack)."""
    def build(w):
        payload, witness_tree, c = split(w.encode())
        return join(payload, Fork(witness_tree, extra()), c), {"max_extra_positions": 0}
    return build


def _tree_with(header=OWN_HEADER, messages=None):
    return {OWN: (header, OWN_MESSAGES if messages is None else messages)}


def _garbage_leaf_messages():
    messages = dict(OWN_MESSAGES)
    messages[7] = b"\x92\x01\xc0"  # [1, nil]: not a message
    return messages


def _short_label_messages():
    messages = {idx(i): encode_message_leaf(m) for i, m in OWN_MESSAGES.items()}
    messages[idx(5)[:7]] = encode_message_leaf(message(1))
    return messages


CASES: dict[str, Case] = {
    # step 1
    "too large": Case(lambda w: (w.encode(), {"max_bytes": 100}), cs.SliceTooLarge),
    "garbage bytes": Case(_raw(b"\xc1 this is not a slice"), cs.MalformedSlice),
    "not bytes": Case(_raw("a string"), cs.MalformedSlice),
    "truncated": Case(lambda w: (w.encode()[:-3], {}), cs.MalformedSlice),
    "not an array": Case(_raw(encoding.encode({"a": 1})), cs.MalformedSlice),
    "field not bin": Case(_outer(lambda p, wt, c: (cs.SLICE_VERSION, p, wt, 5)), cs.MalformedSlice),
    "non-canonical envelope (array16)": Case(_array16_envelope, cs.NonCanonicalSlice),
    "non-canonical envelope (bin16)": Case(_bin16_payload, cs.NonCanonicalSlice),
    "unsupported version": Case(_outer(lambda p, wt, c: (3, p, wt, c)), cs.UnsupportedSliceVersion),
    "version 1 (the project's own BLS variant)": Case(_outer(lambda p, wt, c: (1, p, wt, c)), cs.UnsupportedSliceVersion),
    "five fields": Case(_outer(lambda p, wt, c: (cs.SLICE_VERSION, p, wt, c, b"")), cs.SliceFieldCount),
    "trailing bytes": Case(lambda w: (w.encode() + b"\x00", {}), cs.SliceTrailingBytes),
    "nesting deeper than the bound": Case(_deep_payload, cs.TreeTooDeep),
    "depth bound below an honest witness": Case(lambda w: (w.encode(), {"max_depth": 6}), cs.TreeTooDeep),
    # step 2
    "payload not canonical": Case(_non_canonical_payload, cs.PayloadNotCanonical),
    "pruned in payload": Case(_payload_with(lambda h, m: Fork(h, Labeled(MESSAGES, Pruned(b"\x01" * 32)))),
                              cs.PrunedInPayload),
    "empty in payload": Case(_payload_with(lambda h, m: Fork(h, Labeled(MESSAGES, Empty()))), cs.EmptyInPayload),
    "unsorted payload labels": Case(_unsorted_payload, cs.PayloadUnsortedLabels),
    "duplicate payload labels": Case(_duplicate_payload, cs.PayloadDuplicateLabel),
    "payload without header": Case(_payload_with(lambda h, m: m), cs.PayloadLayoutError),
    "payload with extra child": Case(
        _payload_with(lambda h, m: group([h, m, Labeled(b"signals", Leaf(b"x"))])), cs.PayloadLayoutError),
    "payload header is a subtree": Case(
        _payload_with(lambda h, m: Fork(Labeled(HEADER, Labeled(b"x", Leaf(b"y"))), m)), cs.PayloadLayoutError),
    "payload message is a subtree": Case(
        _payload_with(lambda h, m: Fork(h, Labeled(MESSAGES, Labeled(idx(5), Labeled(b"x", Leaf(b"y")))))),
        cs.PayloadLayoutError),
    "payload with two streams": Case(_payload_with(make_root=lambda h, m: Labeled(STREAMS, Fork(
        Labeled(b"a", h), Labeled(OWN.encode(), Fork(h, m))))), cs.PayloadLayoutError),
    "payload larger than its witness can reveal": Case(_payload_with(make_root=lambda h, m: Labeled(STREAMS, Fork(
        Labeled(b"a", Fork(h, m)), Labeled(OWN.encode(), Fork(h, m))))), cs.PayloadExceedsWitness),
    "payload outside /streams": Case(_payload_with(make_root=lambda h, m: Labeled(b"time", Leaf(b"x"))),
                                     cs.PayloadLayoutError),
    "slice addressed to another subnet": Case(lambda w: (w.encode(), {"own": OTHER}), cs.SliceForAnotherSubnet),
    "another subnet's slice": Case(lambda w: (w.encode(witness_begin=0, msg_begin=0, subnet=OTHER), {}),
                                   cs.SliceForAnotherSubnet),
    # step 3
    "witness not canonical": Case(_non_canonical_witness, cs.WitnessNotCanonical),
    "witness not well-formed": Case(_malformed_witness, cs.MalformedWitness),
    "witness proving another subtree": Case(_witness_of_other_subtree, cs.WitnessMismatch),
    "witness proving another subnet's stream": Case(_witness_of_other_stream, cs.WitnessMismatch),
    "witness without the messages": Case(_witness_with_only_header, cs.WitnessMismatch),
    "tampered message bytes": Case(_with(payload=_tamper_message), cs.PrunedDigestMismatch),
    "pruned digest at a position does not match": Case(
        _with(witness_tree=lambda w, wt: _map_witness_positions(
            wt, lambda label, p: Pruned(_flip(p.digest)) if label == idx(9) else p)), cs.PrunedDigestMismatch),
    "position supplied twice": Case(_position_supplied_twice, cs.PositionSuppliedTwice),
    "witness carries a leaf": Case(_witness_with_time_leaf, cs.WitnessContainsLeaf),
    "witness with more nodes than the payload can need": Case(
        _witness_plus(lambda: balanced([Empty()] * 4_000)), cs.WitnessTooManyNodes),
    "witness with more positions than the payload can need": Case(
        _witness_plus(lambda: group([Labeled(b"p%03d" % i, Pruned(b"\x07" * 32)) for i in range(50)])),
        cs.WitnessTooManyPositions),
    "witness with more pruned nodes than the payload can need": Case(
        _witness_plus(lambda: balanced([Pruned(b"\x07" * 32)] * 2_048)), cs.WitnessTooManyPruned),
    # step 4
    "malformed certification bytes": Case(_with(certification=lambda w, c: c[:-1]), cs.MalformedSliceCertification),
    "tampered message with matching witness digest": Case(_tampered_message_with_matching_witness, cs.RootMismatch),
    "pruned sibling digest does not match": Case(
        _with(witness_tree=lambda w, wt: _map_top_pruned(wt, lambda p: Pruned(_flip(p.digest)))), cs.RootMismatch),
    "valid signature over a different root": Case(
        _certification_of(lambda: certified_tree(default_streams(), time=2_000)), cs.RootMismatch),
    "valid certification of a different height": Case(
        _certification_of(lambda: certified_tree(default_streams(), height=HEIGHT + 1), height=HEIGHT + 1),
        cs.RootMismatch),
    "relabeled certification height": Case(_relabeled(2**63), cs.CertificationHeightMismatch),
    # the signature covers the root only: a witness that hides the height proves none
    "relabeled height, /metadata pruned from the witness": Case(
        _relabeled(HEIGHT + 1, prune_metadata=True), cs.CertificationHeightMissing),
    "honest height, /metadata pruned from the witness": Case(
        _relabeled(HEIGHT, prune_metadata=True), cs.CertificationHeightMissing),
    # step 5
    "unknown subnet key": Case(lambda w: (w.encode(), {"remote": "subnet-unknown"}), cs.UnknownSubnetKey),
    "unknown registry version": Case(lambda w: (w.encode(), {"version": REGISTRY_VERSION + 1}),
                                     cs.UnknownSubnetKey),
    "invalid subnet key in the registry": Case(_bad_key, cs.InvalidSubnetKey),
    "signature by another subnet's key": Case(
        lambda w: (w.encode(cert=certify(w.tree, w.foreign)), {}), cs.InvalidCertificationSignature),
    "slice of another subnet verified with its key": Case(
        lambda w: (w.encode(cert=certify(w.tree, w.deal)), {"remote": OTHER}), cs.InvalidCertificationSignature),
    "empty certification signature": Case(_signature(b""), cs.EmptyCertificationSignature),
    "all-zero certification signature": Case(_signature(b"\x00" * 48), cs.EmptyCertificationSignature),
    "identity signature": Case(_signature(b"\xc0" + b"\x00" * 47), cs.IdentityCertificationSignature),
    "malformed signature": Case(_signature(b"\x8f" + b"\x11" * 47), cs.MalformedCertificationSignature),
    # step 6
    "malformed header": Case(_hand_made(_tree_with(header=b"\x92\x01\x93\x01\x02\x03"), [], []), cs.MalformedHeader),
    "header begin above end": Case(_hand_made(_tree_with(header=StreamHeader(9, 5, 0), messages={}), [], []),
                                   cs.InvalidHeaderBounds),
    "reject signals not increasing": Case(_hand_made(_tree_with(header=StreamHeader(5, 15, 9, (
        RejectSignal(4, RejectReason.QUEUE_FULL), RejectSignal(4, RejectReason.QUEUE_FULL)))), [], []),
        cs.InvalidRejectSignals),
    "reject signal at signals_end": Case(_hand_made(_tree_with(header=StreamHeader(5, 15, 4, (
        RejectSignal(4, RejectReason.QUEUE_FULL),))), [], []), cs.InvalidRejectSignals),
    # step 7
    "message index not 8 bytes": Case(
        _hand_made(_tree_with(messages=_short_label_messages()), [idx(5)[:7], idx(5)], [idx(5)[:7], idx(5)]),
        cs.MalformedMessageIndex),
    "non-consecutive message indices": Case(
        _hand_made(_tree_with(), [idx(5), idx(6), idx(8)], [idx(5), idx(6), idx(8)]), cs.NonConsecutiveMessages),
    "message outside header range": Case(
        _hand_made(_tree_with(messages={**OWN_MESSAGES, 15: message(15)}), [idx(14), idx(15)], [idx(14), idx(15)]),
        cs.MessageOutsideHeaderRange),
    "message below header range": Case(
        _hand_made(_tree_with(messages={4: message(4), **OWN_MESSAGES}), [idx(4), idx(5)], [idx(4), idx(5)]),
        cs.MessageOutsideHeaderRange),
    "malformed message": Case(
        _hand_made(_tree_with(messages=_garbage_leaf_messages()), [idx(6), idx(7)], [idx(6), idx(7)]),
        cs.MalformedMessage),
}


def _decode_case(world: World, case: Case):
    data, kwargs = case.build(world)
    kwargs = dict(kwargs)
    public_key_for = kwargs.pop("public_key_for", world.public_key_for)
    own = kwargs.pop("own", OWN)
    remote = kwargs.pop("remote", REMOTE)
    version = kwargs.pop("version", REGISTRY_VERSION)
    return cs.decode_certified_stream_slice(own, remote, public_key_for, version, data, **kwargs)


@pytest.mark.parametrize("name", sorted(CASES))
def test_adversarial_slice_rejected_with_its_own_error(world, name):
    case = CASES[name]
    result = None
    with pytest.raises(cs.SliceDecodeError) as info:
        result = _decode_case(world, case)
    assert result is None
    assert type(info.value) is case.error, f"{name}: got {type(info.value).__name__}: {info.value}"


def test_every_decode_error_has_a_case():
    errors = {
        obj for _, obj in inspect.getmembers(cs, inspect.isclass)
        if issubclass(obj, cs.SliceDecodeError) and obj not in (cs.SliceDecodeError, cs.WitnessOverBudget)
    }
    assert errors == {case.error for case in CASES.values()}
    names = {error.__name__ for error in errors}
    assert len(names) == len(errors) and names <= set(cs.__all__)


def test_hand_made_builder_makes_valid_slices(world):
    """The adversarial step-6/7 cases differ from a valid slice only in the tested defect."""
    tree = certified_tree(_tree_with())
    data = join(*hand_made(tree, [idx(6), idx(7)], [idx(5), idx(6), idx(7)]), certify(tree, world.deal))
    result = world.decode(data)
    assert result.stream_slice == StreamSlice(OWN_HEADER, 6, (OWN_MESSAGES[6], OWN_MESSAGES[7]))
    assert (result.witness_begin, result.witness_end) == (5, 8)


def test_checks_run_in_order(world):
    """A slice with several defects fails on the earliest check."""
    payload, witness_tree, _ = split(world.encode())
    tampered = _tamper_message(world, payload)
    foreign_cert = certify(world.tree, world.foreign)
    # Addressed elsewhere (step 2) beats a tampered message (3) and a foreign signature (5).
    data = join(tampered, witness_tree, foreign_cert)
    with pytest.raises(cs.SliceForAnotherSubnet):
        world.decode(data, own=OTHER)
    with pytest.raises(cs.PrunedDigestMismatch):
        world.decode(data)
    # The root (4) is checked before the signature (5).
    with pytest.raises(cs.RootMismatch):
        world.decode(join(payload, witness_tree, certify(certified_tree(default_streams(), time=5), world.foreign)))


def test_decode_valid_skips_verification_but_stays_total(world):
    # Foreign signature and another destination: not checked here (already agreed in a block).
    data = world.encode(cert=certify(world.tree, world.foreign))
    assert cs.decode_valid_certified_stream_slice(data).messages_end == 15
    for name in ["garbage bytes", "trailing bytes", "unsorted payload labels", "malformed message",
                 "non-consecutive message indices", "nesting deeper than the bound"]:
        case = CASES[name]
        raw, _ = case.build(world)
        with pytest.raises(case.error):
            cs.decode_valid_certified_stream_slice(raw)


def test_decode_limits_are_checked(world):
    with pytest.raises(cs.InvalidDecodeLimits):
        world.decode(world.encode(), max_depth=0)
    with pytest.raises(cs.InvalidDecodeLimits):
        cs.decode_valid_certified_stream_slice(world.encode(), max_bytes=True)


# --------------------------------------------------------------------------- fuzz


@pytest.fixture(scope="module")
def small_slice(world) -> bytes:
    return world.encode(witness_begin=6, msg_begin=7, msg_limit=2)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255), st.sampled_from("xid")),
                      min_size=1, max_size=4))
def test_mutated_slices_fail_only_with_slice_decode_errors(world, small_slice, edits):
    data = bytearray(small_slice)
    for position, value, kind in edits:
        position %= len(data) + 1
        if kind == "x" and position < len(data):
            data[position] ^= value or 1
        elif kind == "i":
            data.insert(position, value)
        elif position < len(data):
            del data[position]
    for decode in (world.decode, cs.decode_valid_certified_stream_slice):
        try:
            decode(bytes(data))
        except cs.SliceDecodeError:
            pass


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(st.binary(max_size=200), st.builds(lambda tail: b"\x94" + bytes([cs.SLICE_VERSION]) + tail, st.binary(max_size=200))))
def test_arbitrary_bytes_fail_with_slice_decode_errors(world, data):
    with pytest.raises(cs.SliceDecodeError):
        world.decode(data)
    with pytest.raises(cs.SliceDecodeError):
        cs.decode_valid_certified_stream_slice(data)


# --------------------------------------------------------------------------- restrict and append


def newer_world_tree():
    """The next state of REMOTE: messages 5..14 unchanged, 15..17 added, new signals."""
    header = replace(OWN_HEADER, end=18, signals_end=4)
    messages = dict(OWN_MESSAGES) | {i: message(i, size=3 * i) for i in range(15, 18)}
    return certified_tree({OWN: (header, messages), OTHER: (OTHER_HEADER, OTHER_MESSAGES)}, height=HEIGHT + 1), header


@pytest.fixture(scope="module")
def newer(world):
    tree, header = newer_world_tree()
    return tree, certify(tree, world.deal, height=HEIGHT + 1), header


@pytest.mark.parametrize("msg_begin, msg_end", [(5, 15), (5, 6), (7, 10), (14, 15), (9, 9), (5, 5), (15, 15)])
def test_restricted_slice_decodes_with_the_same_witness(world, msg_begin, msg_end):
    data = world.encode(witness_begin=5, msg_begin=5)
    restricted = cs.restrict_certified_slice(data, msg_begin, msg_end)
    result = world.decode(restricted)
    if msg_begin == msg_end:
        assert result.stream_slice == StreamSlice(OWN_HEADER, OWN_HEADER.end, ())
        assert (result.witness_begin, result.witness_end) == (5, 15)
    else:
        messages = tuple(OWN_MESSAGES[i] for i in range(msg_begin, msg_end))
        assert result.stream_slice == StreamSlice(OWN_HEADER, msg_begin, messages)
        assert (result.witness_begin, result.witness_end) == (5, msg_end)
    assert result.certification == world.cert
    assert split(restricted)[1:] == split(data)[1:]  # witness and certification untouched
    # The encoder's own cut gives the very same payload.
    if msg_begin < msg_end:
        cut = world.encode(witness_begin=5, msg_begin=msg_begin, msg_limit=msg_end - msg_begin)
        assert split(restricted)[0] == split(cut)[0]


def test_restricting_to_the_whole_range_is_the_identity(world):
    data = world.encode(witness_begin=6, msg_begin=8, msg_limit=4)
    assert cs.restrict_certified_slice(data, 8, 12) == data
    header_only = world.encode(witness_begin=6, msg_begin=9, msg_limit=0)
    assert cs.restrict_certified_slice(header_only, 3, 3) == header_only


@pytest.mark.parametrize("msg_begin, msg_end", [(6, 11), (4, 8), (9, 8), (8, 16), (-1, 3), (True, 9), (0, 2**64)])
def test_restricting_outside_the_messages_is_rejected(world, msg_begin, msg_end):
    data = world.encode(witness_begin=6, msg_begin=7, msg_limit=8)  # messages [7, 15)
    with pytest.raises(cs.InvalidSliceRange):
        cs.restrict_certified_slice(data, msg_begin, msg_end)


def test_restricting_a_header_only_slice_to_messages_is_rejected(world):
    with pytest.raises(cs.InvalidSliceRange):
        cs.restrict_certified_slice(world.encode(msg_limit=0), 5, 6)


def test_restricting_garbage_raises_decode_errors(world):
    with pytest.raises(cs.SliceDecodeError):
        cs.restrict_certified_slice(b"\x94\x02\xc4\x00", 0, 0)
    with pytest.raises(cs.NonConsecutiveMessages):
        tree = certified_tree(_tree_with())
        cs.restrict_certified_slice(join(*hand_made(tree, [idx(6), idx(8)], [idx(6), idx(8)]),
                                         certify(tree, world.deal)), 6, 6)


def test_append_continues_the_pooled_messages(world):
    pooled = world.encode(witness_begin=5, msg_begin=5, msg_limit=3)  # [5, 8)
    newer = world.encode(witness_begin=5, msg_begin=8, msg_limit=4)  # [8, 12), witness [5, 12)
    merged = cs.append_certified_slice(pooled, newer)
    result = world.decode(merged)
    assert result.stream_slice == StreamSlice(OWN_HEADER, 5, tuple(OWN_MESSAGES[i] for i in range(5, 12)))
    assert (result.witness_begin, result.witness_end) == (5, 12)
    assert merged == world.encode(witness_begin=5, msg_begin=5, msg_limit=7)


def test_append_takes_the_newer_header_and_certification(world, newer):
    tree, cert, header = newer
    pooled = world.encode(witness_begin=5, msg_begin=6, msg_limit=3)  # [6, 9) at HEIGHT
    fresh = world.encode(witness_begin=6, msg_begin=9, msg_limit=100, tree=tree, cert=cert)  # [9, 18) at HEIGHT + 1
    result = world.decode(cs.append_certified_slice(pooled, fresh))
    assert result.certification == cert
    assert result.stream_slice.header == header
    assert result.stream_slice.messages_begin == 6 and result.stream_slice.messages_end == 18
    assert cs.decode_valid_certified_stream_slice(cs.append_certified_slice(pooled, fresh)) == result.stream_slice


def test_append_of_a_header_only_refresh_recertifies_the_pooled_messages(world, newer):
    tree, cert, header = newer
    pooled = world.encode(witness_begin=5, msg_begin=5, msg_limit=4)  # [5, 9)
    refresh = world.encode(witness_begin=5, msg_begin=9, msg_limit=0, tree=tree, cert=cert)
    result = world.decode(cs.append_certified_slice(pooled, refresh))
    assert result.stream_slice == StreamSlice(header, 5, tuple(OWN_MESSAGES[i] for i in range(5, 9)))
    assert result.certification == cert


def test_append_to_a_header_only_pooled_slice_is_the_newer_slice(world):
    newer = world.encode(witness_begin=7, msg_begin=7, msg_limit=2)
    assert cs.append_certified_slice(world.encode(msg_limit=0), newer) == newer


def test_append_rejects_a_pooled_message_the_newer_state_does_not_hold(world):
    """Same key, another history: message 6 differs, so the digests cannot match."""
    forged = dict(OWN_MESSAGES) | {6: message(6, size=99)}
    tree = certified_tree({OWN: (OWN_HEADER, forged), OTHER: (OTHER_HEADER, OTHER_MESSAGES)})
    pooled = world.encode(witness_begin=5, msg_begin=5, msg_limit=3, tree=tree, cert=certify(tree, world.deal))
    newer = world.encode(witness_begin=5, msg_begin=8, msg_limit=2)
    world.decode(pooled)  # each slice alone is valid
    with pytest.raises(cs.PooledMessageMismatch):
        cs.append_certified_slice(pooled, newer)


@pytest.mark.parametrize(
    "pooled_args, newer_args, error",
    [
        ((5, 5, 3), (6, 8, 2), cs.WitnessDoesNotCover),  # newer witness starts above the pooled begin
        ((5, 5, 3), (5, 9, 2), cs.SlicesNotContiguous),  # gap
        ((5, 5, 3), (5, 7, 2), cs.SlicesNotContiguous),  # overlap
    ],
)
def test_append_rejects_slices_that_do_not_continue(world, pooled_args, newer_args, error):
    pooled = world.encode(*pooled_args)
    newer = world.encode(*newer_args)
    with pytest.raises(error):
        cs.append_certified_slice(pooled, newer)


def test_append_rejects_pooled_messages_outside_the_newer_header(world):
    header = replace(OWN_HEADER, begin=7)  # the newer state garbage-collected 5 and 6
    tree = certified_tree({OWN: (header, {i: OWN_MESSAGES[i] for i in range(7, 15)})})
    newer = world.encode(witness_begin=7, msg_begin=8, msg_limit=2, tree=tree, cert=certify(tree, world.deal))
    with pytest.raises(cs.WitnessDoesNotCover):
        cs.append_certified_slice(world.encode(5, 5, 3), newer)


def test_append_rejects_another_stream(world):
    tree = certified_tree({OWN: (OWN_HEADER, OWN_MESSAGES), OTHER: (OTHER_HEADER, OTHER_MESSAGES)})
    other = world.encode(witness_begin=0, msg_begin=0, subnet=OTHER, tree=tree)
    with pytest.raises(cs.DifferentStreams):
        cs.append_certified_slice(world.encode(5, 5, 3), other)


def test_edit_errors_are_not_decode_errors():
    for error in (cs.InvalidSliceRange, cs.DifferentStreams, cs.SlicesNotContiguous, cs.WitnessDoesNotCover,
                  cs.PooledMessageMismatch):
        assert issubclass(error, cs.SliceEditError) and not issubclass(error, cs.SliceDecodeError)
