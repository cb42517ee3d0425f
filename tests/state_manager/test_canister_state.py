"""``IdMap``: the call-context and callback maps remember writes and list entries in id order."""

from __future__ import annotations

import copy
import pickle

import pytest

from state_manager.canister_state import IdMap


def test_sorted_items_are_in_id_order_whatever_the_insertion_order():
    ids = IdMap()
    for key in (5, 1, 9, 3):
        ids[key] = f"v{key}"
    del ids[9]
    assert ids.sorted_items() == [(1, "v1"), (3, "v3"), (5, "v5")]


@pytest.mark.parametrize("write", [
    lambda m: m.__setitem__(7, "x"),
    lambda m: m.__delitem__(1),
    lambda m: m.pop(1),
    lambda m: m.pop(99, None),
    lambda m: m.popitem(),
    lambda m: m.clear(),
    lambda m: m.setdefault(8, "y"),
    lambda m: m.update({9: "z"}),
    lambda m: m.__ior__({10: "w"}),
])
def test_every_write_marks_the_map_dirty(write):
    ids = IdMap({1: "a", 2: "b"})
    ids.dirty = False
    write(ids)
    assert ids.dirty


def test_reads_leave_it_clean_and_copies_keep_the_type():
    ids = IdMap({2: "b", 1: "a"})
    ids.dirty = False
    assert ids.get(1) == "a" and 2 in ids and len(ids) == 2 and ids.sorted_items()[0] == (1, "a")
    assert not ids.dirty
    for clone in (ids.copy(), copy.deepcopy(ids), pickle.loads(pickle.dumps(ids))):
        assert type(clone) is IdMap and clone == ids
