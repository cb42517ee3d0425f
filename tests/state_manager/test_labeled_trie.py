"""LabeledTrie: layout golden vectors, incremental == from-scratch, persistence; its witnesses."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from state_manager import hash_tree as ht
from state_manager import labeled_trie as lt
from state_manager.errors import StateManagerError
from state_manager.hash_tree import ABSENT, UNKNOWN, Found, empty, fork, labeled, leaf, lookup_path, reconstruct
from state_manager.labeled_trie import LabeledTrie, build_from_sorted, pending_hashes
from state_manager.tree_encoding import encode_nested, tree_from_nested_arrays
from state_manager.trie_witness import PRUNED_VALUE, REVEAL, WitnessPlan, plan_paths, witness, witness_tree
from tests.state_manager.tree_strategies import (
    EMPTY,
    labels,
    leaf_values,
    model_paths,
    models,
    trie_from_model,
    value_tree,
)
from tests.state_manager.trie_reference import (
    encoding_bits,
    leaf_digest_plan,
    reference_digest,
    reference_hash_tree,
    trie_hash_tree as to_hash_tree,
)


def be(i: int) -> bytes:
    return i.to_bytes(8, "big")


def uncached_nodes(trie: LabeledTrie) -> int:
    """Nodes whose digest the next ``digest()`` must compute (cached nodes end the walk)."""
    count = 0
    stack = [] if trie.root is None else [trie.root]
    while stack:
        node = stack.pop()
        if node.cached_digest is not None:
            continue
        count += 1
        if isinstance(node, lt.TrieBranch):
            stack.extend((node.left, node.right))
        elif isinstance(node.value, LabeledTrie) and node.value.root is not None:
            stack.append(node.value.root)
    return count


# --------------------------------------------------------------------------- label encoding


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=6), st.binary(max_size=6))
def test_label_encoding_orders_like_bytes_and_crit_bit_is_first_difference(a, b):
    ea, eb = encoding_bits(a), encoding_bits(b)
    assert (ea < eb) == (a < b)
    for position in range(max(len(ea), len(eb)) + 3):
        assert lt._bit(a, position) == (int(ea[position]) if position < len(ea) else 0)
    if a != b:
        crit = lt._crit_bit(a, b)
        assert ea[:crit] == eb[:crit] and ea[crit] != eb[crit]


def test_prefix_labels_keep_their_order():
    trie = build_from_sorted([(b"", b"0"), (b"a", b"1"), (b"ab", b"2"), (b"b", b"3")])
    assert [label for label, _ in trie.items()] == [b"", b"a", b"ab", b"b"]
    assert to_hash_tree(trie) == fork(
        labeled(b"", leaf(b"0")),
        fork(fork(labeled(b"a", leaf(b"1")), labeled(b"ab", leaf(b"2"))), labeled(b"b", leaf(b"3"))),
    )


# --------------------------------------------------------------------------- golden layout


def test_golden_layout_of_the_spec_example():
    inner = build_from_sorted([(b"x", b"hello"), (b"y", b"world")])
    trie = build_from_sorted([(b"a", inner), (b"b", b"good"), (b"c", empty()), (b"d", b"morning")])
    # a/b/c differ from d first at bit 6 of the byte; then a splits from b/c.
    expected = fork(
        fork(
            labeled(b"a", fork(labeled(b"x", leaf(b"hello")), labeled(b"y", leaf(b"world")))),
            fork(labeled(b"b", leaf(b"good")), labeled(b"c", empty())),
        ),
        labeled(b"d", leaf(b"morning")),
    )
    assert to_hash_tree(trie) == expected
    assert trie.digest().hex() == "eb9e6cf9652db161dede2b044762f6aa0377f3ffff49e331ed61a5107f5327b5"
    assert reconstruct(expected) == trie.digest()


def test_golden_digest_of_stream_like_labels():
    trie = build_from_sorted([(be(i), b"m%d" % i) for i in range(10)])
    assert trie.digest().hex() == "80e85c6877159ac9f748d0f50f50dab3094fd3f6c031fbd9a744e7bd55c74d2f"


def test_empty_and_single_child():
    assert LabeledTrie.empty().digest() == ht.hash_empty()
    assert to_hash_tree(LabeledTrie.empty()) == empty()
    single = LabeledTrie.empty().insert(b"k", b"v")
    assert to_hash_tree(single) == labeled(b"k", leaf(b"v"))
    assert single.digest() == ht.hash_labeled(b"k", ht.hash_leaf(b"v"))
    assert single.remove(b"k").digest() == ht.hash_empty()
    assert len(single.remove(b"k")) == 0


# --------------------------------------------------------------------------- map semantics


def apply_ops(model: dict, trie: LabeledTrie, ops):
    for kind, label, value in ops:
        if kind == "remove":
            if label in model:
                del model[label]
                trie = trie.remove(label)
            else:
                with pytest.raises(lt.LabelNotFoundError):
                    trie.remove(label)
        else:
            model[label] = value
            trie = trie.insert(label, trie_from_model(value) if isinstance(value, dict) else value)
    return model, trie


ops_strategy = st.lists(
    st.tuples(
        st.sampled_from(["insert", "insert", "remove"]),
        labels,
        st.one_of(leaf_values, st.just(EMPTY), st.dictionaries(labels, leaf_values, max_size=3)),
    ),
    max_size=40,
)


@settings(max_examples=400, deadline=None)
@given(models, ops_strategy)
def test_incremental_digest_equals_from_scratch(model, ops):
    trie = trie_from_model(model)
    model = dict(model)
    model, trie = apply_ops(model, trie, ops)
    assert trie.digest() == reference_digest(model)
    assert to_hash_tree(trie) == reference_hash_tree(model)
    assert len(trie) == len(model)
    assert [label for label, _ in trie.items()] == sorted(model)
    for label in model:
        assert label in trie


@settings(max_examples=200, deadline=None)
@given(models, ops_strategy)
def test_digest_after_every_step_equals_from_scratch(model, ops):
    trie = trie_from_model(model)
    trie.digest()
    model = dict(model)
    for op in ops:
        model, trie = apply_ops(model, trie, [op])
        assert trie.digest() == reference_digest(model)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_shape_does_not_depend_on_insertion_order(data):
    model = data.draw(models)
    order = data.draw(st.permutations(range(len(model))))
    by_order = trie_from_model(model, list(order))
    bulk = build_from_sorted(
        (label, trie_from_model(v) if isinstance(v, dict) else v) for label, v in sorted(model.items())
    )
    assert to_hash_tree(by_order) == to_hash_tree(bulk) == reference_hash_tree(model)


@settings(max_examples=100, deadline=None)
@given(models, ops_strategy)
def test_old_versions_are_unchanged(model, ops):
    trie = trie_from_model(model)
    before_items = list(trie.items())
    before_digest = reference_digest(model)
    apply_ops(dict(model), trie, ops)
    assert list(trie.items()) == before_items
    assert trie.digest() == before_digest


def batch_changes(model: dict, ops) -> tuple[dict, list]:
    """``ops`` as ``update`` changes (removals of absent labels dropped) and the model after them."""
    model, changes = dict(model), []
    for kind, label, value in ops:
        if kind == "remove":
            if label in model:
                del model[label]
                changes.append((label, None))
        else:
            model[label] = value
            changes.append((label, trie_from_model(value) if isinstance(value, dict) else value))
    return model, changes


@settings(max_examples=400, deadline=None)
@given(models, ops_strategy, ops_strategy)
def test_update_equals_one_call_per_change_and_leaves_every_version_intact(model, ops, more_ops):
    base = trie_from_model(model)
    base_digest = reference_digest(model)
    base.digest()
    after, changes = batch_changes(model, ops)
    updated = base.update(changes)
    sequential = base
    for label, value in changes:
        sequential = sequential.remove(label) if value is None else sequential.insert(label, value)
    assert to_hash_tree(updated) == to_hash_tree(sequential) == reference_hash_tree(after)
    assert updated.digest() == reference_digest(after)
    assert len(updated) == len(after) and [k for k, _ in updated.items()] == sorted(after)
    if after:
        assert updated.first_label() == min(after) and updated.last_label() == max(after)
    # a second batch on the result, and another on the base, change neither earlier version
    final, more = batch_changes(after, more_ops)
    assert updated.update(more).digest() == reference_digest(final)
    other, other_changes = batch_changes(model, more_ops)
    assert base.update(other_changes).digest() == reference_digest(other)
    assert updated.digest() == reference_digest(after) and to_hash_tree(updated) == reference_hash_tree(after)
    assert base.digest() == base_digest and to_hash_tree(base) == reference_hash_tree(model)


def test_update_rejects_bad_changes_with_typed_errors():
    trie = LabeledTrie.empty().insert(b"a", b"1")
    with pytest.raises(lt.LabelNotFoundError):
        trie.update([(b"b", None)])
    with pytest.raises(lt.InvalidLabelError):
        trie.update([("b", b"2")])
    with pytest.raises(lt.InvalidValueError):
        trie.update([(b"b", 2)])
    assert list(trie.items()) == [(b"a", b"1")]


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(labels, leaf_values, max_size=30), labels, st.one_of(st.none(), labels))
def test_range_items(model, lo, hi):
    trie = trie_from_model(model)
    expected = [(k, model[k]) for k in sorted(model) if lo <= k and (hi is None or k < hi)]
    assert list(trie.range_items(lo, hi)) == expected
    assert list(trie.range_items()) == sorted(model.items())
    if model:
        assert trie.first_label() == min(model) and trie.last_label() == max(model)


def test_typed_getters_and_getitem():
    inner = build_from_sorted([(b"x", b"y")])
    trie = build_from_sorted([(b"a", b"1"), (b"ab", b"2"), (b"e", empty()), (b"t", inner)])
    assert trie.get_leaf(b"a") == b"1"
    assert trie.get_leaf(b"b") is None
    assert trie.get_leaf(b"t") is None and trie.get_leaf(b"e") is None
    assert trie.get_subtree(b"t") is inner
    assert trie.get_subtree(b"e") is LabeledTrie.empty()  # Empty hashes like the empty trie
    assert trie.get_subtree(b"a") is None and trie.get_subtree(b"b") is None
    with pytest.raises(lt.InvalidLabelError):
        trie.get_leaf("a")
    with pytest.raises(lt.InvalidLabelError):
        trie.get_subtree("t")
    assert trie[b"ab"] == b"2"
    with pytest.raises(lt.LabelNotFoundError):
        trie[b"abc"]
    with pytest.raises(KeyError):
        trie[b""]
    assert "a" not in trie


def test_invalid_arguments_raise_typed_errors():
    trie = LabeledTrie.empty()
    with pytest.raises(lt.InvalidLabelError):
        trie.insert("a", b"v")
    with pytest.raises(lt.InvalidValueError):
        trie.insert(b"a", "v")
    with pytest.raises(lt.InvalidValueError):
        trie.insert(b"a", {b"x": b"y"})
    with pytest.raises(lt.LabelNotFoundError):
        trie.remove(b"a")
    with pytest.raises(lt.UnsortedItemsError):
        build_from_sorted([(b"b", b""), (b"a", b"")])
    with pytest.raises(lt.UnsortedItemsError):
        build_from_sorted([(b"a", b""), (b"a", b"")])
    for name in lt.__all__:
        obj = getattr(lt, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, lt.LabeledTrieError) and issubclass(obj, StateManagerError)


# --------------------------------------------------------------------------- caching


def test_stream_gc_rehashes_only_new_paths():
    trie = build_from_sorted((be(i), b"m" * 32) for i in range(10_000))
    trie.digest()
    assert uncached_nodes(trie) == 0
    for i in range(100):
        trie = trie.remove(be(i))
    for i in range(10_000, 10_100):
        trie = trie.insert(be(i), b"m" * 32)
    # About 2 * 100 new leaves/branches plus the two spines, out of ~20,000 nodes.
    assert uncached_nodes(trie) <= 400
    assert trie.digest() == reference_digest({be(i): b"m" * 32 for i in range(100, 10_100)})


def test_one_insert_rehashes_one_path():
    trie = build_from_sorted((be(i * 7919 % 65536), b"") for i in sorted(range(4096), key=lambda i: i * 7919 % 65536))
    trie.digest()
    trie = trie.insert(be(123_456), b"x")
    assert uncached_nodes(trie) <= 2 * 14 + 2


def test_deep_tries_need_no_recursion():
    # Prefix labels make a crit-bit chain; nested tries make a deep value chain.
    chain = build_from_sorted((b"a" * k, b"") for k in range(3000))
    nested = LabeledTrie.empty().insert(b"v", b"bottom")
    for _ in range(3000):
        nested = LabeledTrie.empty().insert(b"n", nested)
    for trie in (chain, nested, chain.insert(b"z", nested)):
        tree = to_hash_tree(trie)
        assert reconstruct(tree) == trie.digest()
    assert lookup_path(to_hash_tree(nested), [b"n"] * 3000 + [b"v"]) == Found(leaf(b"bottom"))
    shorter = chain.remove(b"a" * 1500)
    assert shorter.digest() == build_from_sorted((b"a" * k, b"") for k in range(3000) if k != 1500).digest()
    small = build_from_sorted((b"a" * k, b"") for k in range(300))
    assert small.remove(b"a" * 150).digest() == reference_digest({b"a" * k: b"" for k in range(300) if k != 150})


# --------------------------------------------------------------------------- pending hashes


def test_pending_hashes_counts_uncached_nodes_and_new_leaf_values():
    trie = build_from_sorted((be(i), b"m") for i in range(100))
    assert pending_hashes(trie) == uncached_nodes(trie) + 100  # 199 nodes, 100 leaf values
    trie.digest()
    assert pending_hashes(trie) == 0
    nested = trie.insert(be(5), build_from_sorted([(b"x", b"y")]))
    assert pending_hashes(nested) == uncached_nodes(nested) + 1  # the new inner leaf's value


# --------------------------------------------------------------------------- witnesses (trie_witness)


def probe_paths(model):
    present = [path for path, _ in model_paths(model)]
    absent = [p[:-1] + (p[-1] + b"\x00",) for p in present] + [(b"\x10",), (b"\xff\xff\xff\xff",)]
    return present, absent


def model_lookup(model, path):
    node = model
    for label in path:
        if not isinstance(node, dict) or label not in node:
            return None
        node = node[label]
    return node


def _revealed(tree, path):
    """The node a witness holds at ``path`` (``None`` if its labels are not revealed)."""
    parent = lookup_path(tree, path[:-1]) if len(path) > 1 else Found(tree)
    if not isinstance(parent, Found):
        return None
    found = ht.find_label(path[-1], ht.flatten_forks(parent.tree))
    return found.tree if isinstance(found, Found) else None


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_witness_of_any_paths(data):
    model = data.draw(models)
    trie = trie_from_model(model)
    present, absent = probe_paths(model)
    chosen = data.draw(st.lists(st.sampled_from(present + absent), max_size=5))
    tree = witness_tree(trie, plan_paths(chosen))
    assert reconstruct(tree) == trie.digest()
    ht.validate_well_formed(tree)
    for path in chosen:
        value = model_lookup(model, path)
        result = lookup_path(tree, path)
        if value is None:
            assert result == ABSENT, path
        else:
            assert result == Found(value_tree(value)), path
    # Whatever is not chosen may be unknown, but never absent, and never wrong.
    for path in present:
        result = lookup_path(tree, path)
        assert result == UNKNOWN or (
            isinstance(result, Found) and reconstruct(result.tree) == reconstruct(value_tree(model_lookup(model, path)))
        )
    for path in absent:
        if model_lookup(model, path) is None:
            assert lookup_path(tree, path) in (ABSENT, UNKNOWN)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_witness_reveals_pruned_values(data):
    model = data.draw(models)
    trie = trie_from_model(model)
    leaves = [(path, value) for path, value in model_paths(model) if isinstance(value, bytes)]
    chosen = data.draw(st.lists(st.sampled_from(leaves), max_size=5, unique_by=lambda item: item[0])) if leaves else []
    tree = witness_tree(trie, leaf_digest_plan(path for path, _ in chosen))
    assert reconstruct(tree) == trie.digest()
    ht.validate_well_formed(tree)
    for path, value in chosen:
        assert _revealed(tree, path) == ht.pruned(ht.hash_leaf(value)), path
    # The witness never carries data: every leaf value is pruned to its digest.
    stack = [tree]
    while stack:
        node = stack.pop()
        assert not isinstance(node, ht.Leaf)
        stack += [node.left, node.right] if isinstance(node, ht.Fork) else [node.subtree] if isinstance(
            node, ht.Labeled) else []


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 300), st.data())
def test_a_range_witness_equals_the_one_listing_every_label(size, data):
    """The walker's shortcut for a subtree wholly inside the range (``covers``) builds what
    the plan listing each label of the range builds node by node."""
    trie = build_from_sorted((be(i), b"m%d" % i) for i in range(size))
    lo = data.draw(st.integers(0, size))
    hi = data.draw(st.integers(lo + 1, size + 2))  # plans hold non-empty ranges only
    by_range = witness(trie, WitnessPlan({}, be(lo), be(hi)))
    listed = {be(i): PRUNED_VALUE for i in range(lo, min(hi, size))}
    assert by_range == witness(trie, WitnessPlan(listed) if listed else WitnessPlan({}, be(lo), be(hi)))
    assert reconstruct(tree_from_nested_arrays(by_range)) == trie.digest()


def test_stream_slice_witness():
    messages = build_from_sorted((be(i), b"msg%d" % i) for i in range(1000))
    stream = build_from_sorted([(b"header", b"h"), (b"messages", messages)])
    state = LabeledTrie.empty().insert(b"streams", LabeledTrie.empty().insert(b"\x07", stream))
    plan = WitnessPlan({b"streams": WitnessPlan({b"\x07": WitnessPlan({
        b"header": PRUNED_VALUE, b"messages": WitnessPlan({}, be(100), be(110))})})})
    value = witness(state, plan)
    tree = tree_from_nested_arrays(value)
    assert reconstruct(tree) == state.digest()
    for i in range(100, 110):
        assert _revealed(tree, [b"streams", b"\x07", b"messages", be(i)]) == ht.pruned(ht.hash_leaf(b"msg%d" % i))
    assert _revealed(tree, [b"streams", b"\x07", b"messages", be(99)]) is None
    assert _revealed(tree, [b"streams", b"\x07", b"header"]) == ht.pruned(ht.hash_leaf(b"h"))
    # Small: 10 revealed messages plus O(log n) pruned siblings, not 1000 messages.
    assert len(encode_nested(value)) < 2000


def test_absence_proof_in_big_trie():
    trie = build_from_sorted((be(2 * i), b"") for i in range(1000))
    tree = witness_tree(trie, plan_paths([[be(501)]]))
    assert reconstruct(tree) == trie.digest()
    assert lookup_path(tree, [be(501)]) == ABSENT
    # The neighbours are revealed as adjacent labels with their values pruned.
    revealed = [node.label for node in ht.flatten_forks(tree) if isinstance(node, ht.Labeled)]
    assert revealed == [be(500), be(502)]
    assert lookup_path(tree, [be(500)]) == UNKNOWN
    assert lookup_path(tree, [be(503)]) == UNKNOWN


def test_witness_edge_cases():
    inner = build_from_sorted([(b"x", b"y")])
    trie = build_from_sorted([(b"a", b"1"), (b"b", b"2"), (b"t", inner)])
    assert witness_tree(trie, WitnessPlan()) == ht.pruned(trie.digest())
    assert witness_tree(trie, WitnessPlan({b"a": REVEAL, b"b": REVEAL, b"t": REVEAL})) == to_hash_tree(trie)
    assert witness(LabeledTrie.empty(), plan_paths([[b"x"]])) == (0,)
    # A path running through a leaf reveals the leaf, which proves the rest absent.
    assert lookup_path(witness_tree(trie, plan_paths([[b"a", b"deeper"]])), [b"a", b"deeper"]) == ABSENT
    # A prefix path reveals everything below it, whatever the order of the paths.
    assert plan_paths([[b"t", b"x"], [b"t"]]) == plan_paths([[b"t"], [b"t", b"x"]]) == WitnessPlan({b"t": REVEAL})
    # A pruned value of a subtree is its digest.
    assert _revealed(witness_tree(trie, WitnessPlan({b"t": PRUNED_VALUE})), [b"t"]) == ht.pruned(inner.digest())
    assert trie.label_before(b"b") == b"a" and trie.label_after(b"b") == b"t"
    assert trie.label_before(b"a") is None and trie.label_after(b"z") is None
