"""Crafted witnesses and payloads are refused at the first node beyond what a slice with that
payload can need (``witness_budget``), while the parser is still running — so the rest of
the input is never parsed and no tree is ever walked or built — and honest witnesses always
fit the budget (the derivation in ``witness_budget``, checked with the actual path lengths)."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from state_manager import certified_slice as cs
from state_manager.certified_slice import bounded_parse as bp
from state_manager import encoding
from state_manager import hash_tree as ht
from state_manager import tree_encoding as te
from state_manager.encoding import packb
from state_manager.tree_encoding import TAG_EMPTY, TAG_FORK, TAG_LABELED, TAG_LEAF, TAG_PRUNED
from tests.state_manager.test_certified_slice import (  # noqa: F401 - world is a fixture
    OTHER_HEADER, OTHER_MESSAGES, OWN, StreamHeader, certified_tree, certify, idx, message, world,
)

PRUNED = (TAG_PRUNED, b"\x07" * 32)
EXTRA = 100  # max_extra_positions for the bombs: budget 3 * (0 + 100 + 2) + 12 * 256 = 3,378 nodes


def balanced(nodes: list) -> tuple:
    level = list(nodes)
    while len(level) > 1:
        level = [(TAG_FORK, level[i], level[i + 1]) if i + 1 < len(level) else level[i]
                 for i in range(0, len(level), 2)]
    return level[0]


def chain(depth: int, make) -> tuple:
    node = PRUNED
    for _ in range(depth):
        node = make(node)
    return node


def node_count(tree: tuple) -> int:
    count, stack = 0, [tree]
    while stack:
        node = stack.pop()
        count += 1
        stack.extend(child for child in node[1:] if type(child) is tuple)
    return count


@pytest.fixture
def parsed(monkeypatch):
    """How many nodes each parse handed to its hook, and whether it returned a tree (only
    then do the walks over the tree run)."""
    seen = {"payload": 0, "witness": 0, "payload parsed": False, "witness parsed": False}
    original = bp.parse_nodes

    def parse_nodes(data, hook, not_canonical):
        kind = "payload" if not_canonical is cs.PayloadNotCanonical else "witness"

        def counting(node):
            seen[kind] += 1
            return hook(node)

        value = original(data, counting, not_canonical)
        seen[f"{kind} parsed"] = True
        return value

    monkeypatch.setattr(bp, "parse_nodes", parse_nodes)
    return seen


def parts(world, **request) -> tuple[bytes, bytes, bytes]:
    _, payload, witness, certification = encoding.decode(world.encode(**request))
    return payload, witness, certification


WITNESS_BOMBS = {
    "pruned, wide": (lambda: balanced([PRUNED] * 20_000), cs.WitnessTooManyPruned),
    "pruned, deep": (lambda: balanced([chain(200, lambda n: (TAG_FORK, PRUNED, n))] * 100), cs.WitnessTooManyPruned),
    "labeled, deep": (lambda: balanced([chain(200, lambda n: (TAG_LABELED, b"x", n))] * 100), cs.WitnessTooManyNodes),
    "empty, wide": (lambda: balanced([(TAG_EMPTY,)] * 20_000), cs.WitnessTooManyNodes),
    "leaves, wide": (lambda: balanced([(TAG_LABELED, idx(i), (TAG_LEAF, b"")) for i in range(10_000)]),
                     cs.WitnessTooManyNodes),
    "positions, wide": (lambda: balanced([(TAG_LABELED, idx(i), PRUNED) for i in range(10_000)]),
                        cs.WitnessTooManyPositions),
}


@pytest.mark.parametrize("name", sorted(WITNESS_BOMBS))
def test_witness_bombs_are_refused_while_parsing(world, parsed, name):
    make, error = WITNESS_BOMBS[name]
    payload, witness, certification = parts(world, msg_limit=0)  # header-only: the smallest budget
    honest = msgpack.unpackb(witness, use_list=False)
    bomb = (TAG_FORK, honest, make())
    data = encoding.encode_unchecked((cs.SLICE_VERSION, payload, packb(bomb), certification))
    with pytest.raises(error):
        world.decode(data, max_extra_positions=EXTRA)
    budget = cs.witness_budget(0, EXTRA, cs.DEFAULT_MAX_TREE_DEPTH)
    assert parsed["payload parsed"] and not parsed["witness parsed"]
    assert parsed["witness"] <= budget.nodes + 1 < node_count(bomb) // 5


def test_duplicated_honest_witnesses_are_refused_while_parsing(world, parsed):
    payload, witness, certification = parts(world)
    honest = msgpack.unpackb(witness, use_list=False)
    bomb = balanced([honest] * 2_000)
    with pytest.raises(cs.WitnessOverBudget):
        world.decode(encoding.encode_unchecked((cs.SLICE_VERSION, payload, packb(bomb), certification)))
    assert not parsed["witness parsed"] and parsed["witness"] < node_count(bomb) // 5


@pytest.mark.parametrize("bomb, error", [
    (balanced([(TAG_EMPTY,)] * 20_000), cs.EmptyInPayload),
    (balanced([PRUNED] * 20_000), cs.PrunedInPayload),
    ((TAG_LABELED, b"streams", (TAG_LABELED, OWN.encode(), balanced(
        [(TAG_LABELED, idx(i), (TAG_LEAF, b"")) for i in range(20_000)]))), cs.PayloadExceedsWitness),
    (balanced([(TAG_FORK, (TAG_LABELED, b"", (TAG_LEAF, b"")), (TAG_LABELED, b"", (TAG_LEAF, b"")))] * 10_000),
     cs.PayloadExceedsWitness),
])
def test_payload_bombs_are_refused_while_parsing(world, parsed, bomb, error):
    _, witness, certification = parts(world)
    with pytest.raises(error):
        world.decode(encoding.encode_unchecked((cs.SLICE_VERSION, packb(bomb), witness, certification)))
    assert not parsed["payload parsed"] and parsed["witness"] == 0
    assert parsed["payload"] <= len(witness) // 16 + 9 < node_count(bomb) // 5


def test_deeper_nesting_than_the_parser_allows_is_refused_before_any_hook(world, parsed):
    payload, _, certification = parts(world)
    witness = b"\x93\x01" * 2_000 + b"\x91\x00"
    with pytest.raises(cs.TreeTooDeep):
        world.decode(encoding.encode_unchecked((cs.SLICE_VERSION, payload, witness, certification)))
    assert parsed["witness"] == 0


# --------------------------------------------------------------------------- honest witnesses fit


def counts(witness: bytes) -> tuple[int, int, int, int]:
    """``(positions, bare pruned, nodes, depth)`` of an encoded witness."""
    positions = bare = nodes = depth = 0
    stack = [(msgpack.unpackb(witness, use_list=False), 1)]
    while stack:
        node, level = stack.pop()
        nodes, depth = nodes + 1, max(depth, level)
        if node[0] == TAG_FORK:
            bare += (node[1][0] == TAG_PRUNED) + (node[2][0] == TAG_PRUNED)
            stack += [(node[1], level + 1), (node[2], level + 1)]
        elif node[0] == TAG_LABELED:
            positions += node[2][0] == TAG_PRUNED
            stack.append((node[2], level + 1))
    return positions, bare, nodes, depth


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_honest_witnesses_fit_the_budget_with_their_own_depth(world, data):
    """The derivation of ``witness_budget`` holds with ``D`` = the witness's actual depth, for
    streams of any length and start (deep and shallow tries), many sibling streams, and any
    request; and the slice decodes with exactly its extra positions allowed."""
    begin = data.draw(st.sampled_from([0, 5, 2**20 - 7, 2**63 - 3000]), "begin")
    length = data.draw(st.integers(1, 2_000), "length")
    siblings = data.draw(st.integers(0, 40), "sibling streams")
    header = StreamHeader(begin, begin + length, 0)
    streams = {OWN: (header, {begin + i: message(i, size=4) for i in range(length)})}
    streams.update({f"subnet-{i:03d}": (OTHER_HEADER, OTHER_MESSAGES) for i in range(siblings)})
    tree = certified_tree(streams)
    cert = certify(tree, world.deal)
    witness_begin = data.draw(st.integers(begin, begin + length), "witness_begin")
    msg_begin = data.draw(st.integers(witness_begin, begin + length), "msg_begin")
    msg_limit = data.draw(st.integers(0, length), "msg_limit")
    slice_data = world.encode(witness_begin, msg_begin, msg_limit, tree=tree, cert=cert)
    _, _, witness, _ = encoding.decode(slice_data)
    k = len(world.decode(slice_data, max_extra_positions=msg_begin - witness_begin).stream_slice.messages)
    positions, bare, nodes, depth = counts(witness)
    extra = msg_begin - witness_begin
    assert positions <= k + extra + 2
    exact = cs.witness_budget(k, extra, depth)
    assert bare <= exact.pruned and nodes <= exact.nodes, (positions, bare, nodes, depth)
    if extra:
        with pytest.raises(cs.WitnessTooManyPositions):
            world.decode(slice_data, max_extra_positions=extra - 1)


def test_restricted_and_appended_slices_stay_within_the_default_budget(world):
    data = world.encode(witness_begin=5, msg_begin=5)
    cut = cs.restrict_certified_slice(data, 12, 15)  # 7 positions beyond the payload's 3 messages
    assert world.decode(cut, max_extra_positions=7).stream_slice.messages_begin == 12
    with pytest.raises(cs.WitnessTooManyPositions):
        world.decode(cut, max_extra_positions=6)


# --------------------------------------------------------------------------- the parse is the tree decoder's


def _parse(data: bytes):
    """The slice decoder's tree parse (node checks while parsing, canonical form after)."""
    value = bp.parse_nodes(data, lambda node: (te.node_tag(node), node)[1], cs.WitnessNotCanonical)
    if te.encode_nested(value) != data:
        raise cs.WitnessNotCanonical("not canonical")
    return te.tree_from_nested_arrays(value)


def _decode_tree(data: bytes):
    return te.decode_tree(data, max_bytes=1 << 20, max_depth=1000)


TREE = te.encode_tree(ht.fork(ht.labeled(b"a", ht.leaf(b"x" * 40)),
                              ht.fork(ht.pruned(bytes(32)), ht.labeled(b"b" * 300, ht.empty()))))


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 255), st.binary(max_size=40))
def test_the_parse_accepts_exactly_what_the_tree_decoder_accepts(position, byte, noise):
    mutated = bytearray(TREE)
    mutated[position % len(TREE)] = byte
    for data in (TREE, bytes(mutated), TREE + noise, noise, TREE[: position % len(TREE)]):
        try:
            expected = _decode_tree(data)
        except te.TreeDecodeError:
            expected = None
        try:
            got = _parse(data)
        except cs.SliceDecodeError:
            got = None
        assert (got is None) == (expected is None), data.hex()
        assert got is None or ht.trees_equal(got, expected)
