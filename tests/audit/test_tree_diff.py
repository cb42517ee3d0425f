"""Tree diffs descend only where digests differ and report the smallest differing paths."""

from __future__ import annotations

from replica.audit.tree_diff import describe_value, diff_tries, render_path
from state_manager.ic_encoding import uleb128
from state_manager.labeled_trie import build_from_sorted
from state_manager.state_tree import canister_label, index_label, leaf


def _tree(value: int, extra: bool = False):
    canister = build_from_sorted([
        (b"meta", leaf(("m", 1))),
        (b"stable", build_from_sorted([(b"order", leaf(("a", "b") if value else ("b", "a"))), (b"value", leaf(value))])),
    ])
    history = [((1000).to_bytes(8, "big") + bytes([i]) * 32, leaf((2, i))) for i in range(20)]
    if extra:
        history.append(((2000).to_bytes(8, "big") + b"\xff" * 32, leaf((0, 99))))
    return build_from_sorted([
        (b"canister_state", build_from_sorted([(index_label(7), canister)])),
        (b"ingress_history", build_from_sorted(history)),
    ])


def test_equal_trees_have_no_diff():
    assert diff_tries(_tree(1), _tree(1)).equal


def test_differing_leaves_with_decoded_values():
    diff = diff_tries(_tree(1), _tree(0))
    assert [(d.text, d.left, d.right) for d in diff.paths] == [
        ("/canister_state/7/stable/order", ["a", "b"], ["b", "a"]),
        ("/canister_state/7/stable/value", 1, 0),
    ]


def test_child_on_one_side_only():
    diff = diff_tries(_tree(1, extra=True), _tree(1))
    assert [(d.text, d.left, d.right) for d in diff.paths] == [("/ingress_history/0x" + "ff" * 32 + "@2000", [0, 99], None)]


def test_limit_counts_the_rest():
    diff = diff_tries(_tree(1, extra=True), _tree(0), limit=1)
    assert len(diff.paths) == 1 and diff.more == 2


def test_rendering():
    assert render_path((b"certified", b"streams", b"subnet-b", b"messages", index_label(3))) == \
        "/certified/streams/subnet-b/messages/3"
    assert render_path((b"\x00\x01",)) == "/0x0001"
    assert describe_value(build_from_sorted([(b"a", leaf(1))])) == {"subtree_children": 1}
    assert describe_value(leaf(b"\x01\x02")) == "0x0102"


def test_the_ic_paths_of_the_certified_tree_are_shown_in_their_encodings():
    def certified(time, status, data):
        return build_from_sorted([(b"certified", build_from_sorted([
            (b"canister", build_from_sorted([(canister_label(7), build_from_sorted([(b"certified_data", data)]))])),
            (b"request_status", build_from_sorted([(b"\x01" * 32, build_from_sorted([(b"status", status)]))])),
            (b"time", uleb128(time)),
        ]))])

    diff = diff_tries(certified(1000, b"processing", b"\x01"), certified(2000, b"replied", b"\x02"))
    assert [(d.text, d.left, d.right) for d in diff.paths] == [
        ("/certified/canister/7/certified_data", "0x01", "0x02"),
        ("/certified/request_status/0x" + "01" * 32 + "/status", "processing", "replied"),
        ("/certified/time", 1000, 2000),
    ]
