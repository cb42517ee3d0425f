"""The canonical state tree: layout, and incremental hashing equal to from-scratch hashing."""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings, strategies as st

from message_routing.limits import DEFAULT
from state_manager.canister_state import CanisterState, CanisterStatus, IngressOrigin
from state_manager.encoding import decode, encode
from state_manager.hash_tree import Found, lookup_path
from state_manager.ingress_history import IngressState, IngressStatus
from state_manager.ic_encoding import uleb128
from state_manager.state_tree import StateTreeBuilder, build_state_trees, canister_label, index_label, leaf
from state_manager.streams import RejectReason, Stream
from tests.builders import A, B, C, ingress, reply, request, state
from tests.state_manager.trie_reference import trie_hash_tree


def test_certified_layout_holds_the_specified_paths():
    s = state(A, canisters=[1])
    s.metadata.batch_number, s.metadata.batch_time = 7, 123
    s.streams[B] = Stream(begin=4, messages=[request(1, 100)], signals_end=2)
    s.ingress_history.set(bytes(32), IngressStatus(IngressState.REPLIED, 1, b"u", 5, 9, reply=b"yes"))
    tree = trie_hash_tree(build_state_trees(s).certified)

    def found(*path):
        result = lookup_path(tree, [p.encode() if isinstance(p, str) else p for p in path])
        assert isinstance(result, Found), path
        return result.tree.value

    assert found("time") == uleb128(123)
    assert found("metadata", "height") == leaf(7)
    assert found("request_status", bytes(32), "status") == b"replied"
    assert found("request_status", bytes(32), "reply") == b"yes"
    found("streams", B, "header")
    found("streams", B, "messages", index_label(4))
    assert found("canister", canister_label(1), "module_hash") == b"\x00" * 32
    # (/subnet and /canister_ranges: tests/ic/test_certified_state_tree.py, with real keys)


def test_loopback_stream_is_not_certified_but_is_in_the_full_state():
    s = state(A, canisters=[1])
    s.streams[A] = Stream(messages=[request(1, 1)])
    trees = build_state_trees(s)
    assert b"subnet-a" not in trees.certified.get_subtree(b"streams")
    assert trees.full.get_subtree(b"loopback") is not None


def test_a_garbage_collected_stream_front_does_not_rehash_the_rest():
    s = state(A)
    s.streams[B] = Stream(messages=[request(1, 100, callback=i, payload=b"x" * 10) for i in range(2000)])
    builder = StateTreeBuilder()
    first = builder.update(s)
    messages_before = first.certified.get_subtree(b"streams").get_subtree(b"subnet-b").get_subtree(b"messages")
    s.streams[B].discard_messages_before(100)
    for i in range(100):
        s.streams[B].push(request(1, 100, callback=5000 + i))
    second = builder.update(s)
    messages_after = second.certified.get_subtree(b"streams").get_subtree(b"subnet-b").get_subtree(b"messages")
    # untouched message leaves are the very same objects, shared between the two heights
    assert messages_after.get_leaf(index_label(1000)) is messages_before.get_leaf(index_label(1000))
    assert second.full_hash == build_state_trees(s).full_hash
    assert first.full_hash == first.full.digest() != second.full_hash


def _mutations():
    """Random operations on a small state, each a function of (state, data)."""
    return st.lists(st.tuples(st.sampled_from(range(14)), st.integers(0, 10**6)), min_size=1, max_size=25)


def _apply(s, op, n):
    c = s.canisters
    cid = (1, 2, 3)[n % 3]
    canister = c.get(cid)
    if op == 0 and canister:
        canister.stable[f"k{n % 17}"] = n
    elif op == 1 and canister and len(canister.stable):
        key = list(canister.stable.keys())[n % len(canister.stable)]
        del canister.stable[key]
    elif op == 2 and canister:
        if canister.queues.can_push_output_request(100 + n % 3, DEFAULT.queue_capacity):
            canister.queues.push_output_request(request(cid, 100 + n % 3, n), DEFAULT.queue_capacity)
    elif op == 3 and canister and canister.queues.output_queues:
        remote = list(canister.queues.output_queues)[n % len(canister.queues.output_queues)]
        if canister.queues.output_queues[remote].elements:
            s.stream_to(B if n % 2 else C).push(canister.queues.pop_output(remote))
    elif op == 4:
        stream = s.streams.get(B)
        if stream is not None and stream.messages:
            stream.discard_messages_before(stream.begin + 1 + n % len(stream.messages))
    elif op == 5:
        s.stream_to(B).push_reject_signal(RejectReason.QUEUE_FULL) if n % 2 else s.stream_to(B).push_accept_signal()
    elif op == 6:
        s.ingress_history.set((n % 50).to_bytes(32, "big"), IngressStatus(IngressState(n % 5), cid, b"u", n, n + 5))
    elif op == 7:
        s.ingress_history.prune(n, 3)
    elif op == 8 and canister:
        canister.status = CanisterStatus(n % 3)
    elif op == 9 and canister:
        ctx = canister.new_call_context(IngressOrigin(bytes(32), b"u"), "m")
        if n % 2:
            canister.register_callback(ctx.call_context_id, 100, "a", "b", (n,))
    elif op == 10 and canister and canister.callbacks:
        canister.take_callback(list(canister.callbacks)[0])
    elif op == 12 and canister and canister.call_contexts:
        # closed contexts leave the map, possibly in the round that opened them
        ids = sorted(canister.call_contexts)
        if n % 2:
            del canister.call_contexts[ids[n % len(ids)]]
        else:
            canister.call_contexts[ids[n % len(ids)]] = canister.call_contexts[ids[n % len(ids)]].as_responded()
    elif op == 13 and canister:
        # the certified subtree alone changes: /canister/<id>/certified_data, controllers
        if n % 2:
            canister.certified_data = n.to_bytes(4, "big")
        else:
            canister.controller = bytes([n % 256]) * 3
            canister.dirty = True
    elif op == 11:
        if canister is not None and n % 4 == 0:
            del c[cid]
        elif canister is None:
            s.add_canister(CanisterState(cid, "tests:Noop", b"\x01" * 32))
        elif canister:
            canister.queues.push_ingress(ingress(cid, n))
    s.metadata.batch_number += 1
    s.metadata.batch_time += 1


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_mutations(), min_size=1, max_size=6))
def test_incremental_root_equals_from_scratch_root(rounds):
    s = state(A, canisters=[1, 2, 3])
    builder = StateTreeBuilder()
    builder.update(s)
    for ops in rounds:
        for op, n in ops:
            _apply(s, op, n)
        before = copy.deepcopy(s)
        incremental = builder.update(s)
        scratch = build_state_trees(s)
        assert incremental.certified_root == scratch.certified_root
        assert incremental.full_hash == scratch.full_hash
        assert s == before  # hashing reads the state, it does not change it


def _leaves(trie, path=()):
    stack = [(path, trie)]
    while stack:
        prefix, node = stack.pop()
        for label, value in node.items():
            if isinstance(value, bytes):
                yield prefix + (label,), value
            elif hasattr(value, "items"):
                stack.append((prefix + (label,), value))


#: Top labels of the certified tree whose leaves are the IC's encodings, not msgpack.
_IC_PATHS = {b"time", b"request_status", b"canister", b"subnet", b"canister_ranges"}


def _is_ic_leaf(path) -> bool:
    inner = path[1:] if path[0] == b"certified" else path
    return inner[0] in _IC_PATHS


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutations())
def test_every_leaf_is_the_canonical_encoding_of_its_value(ops):
    """``leaf`` skips ``encode``'s value walk: the checking decoder must accept every msgpack
    leaf of both trees (all but the IC's paths of the certified tree), and re-encoding what it
    decodes must give the leaf back."""
    s = state(A, canisters=[1, 2, 3])
    for op, n in ops:
        _apply(s, op, n)
    trees = build_state_trees(s)
    count = 0
    for tree in (trees.certified, trees.full):
        for path, data in _leaves(tree):
            if _is_ic_leaf(path):
                continue
            assert encode(decode(data)) == data
            count += 1
    assert count > 5
