"""``KeyOrderedDict`` iterates in key order whatever the insert order; ``IdMap`` (call
contexts, callbacks) also remembers it was written to."""

from __future__ import annotations

import copy
import pickle

import pytest
from hypothesis import given, strategies as st

from state_manager.canister_state import IdMap
from state_manager.key_ordered import KeyOrderedDict


@given(st.lists(st.tuples(st.integers(-50, 50), st.booleans())))
def test_iteration_is_in_key_order_whatever_the_history(ops):
    ordered, plain = KeyOrderedDict(), {}
    for key, insert in ops:
        if insert:
            ordered[key] = plain[key] = -key
        else:
            ordered.pop(key, None)
            plain.pop(key, None)
    keys = sorted(plain)
    assert list(ordered) == ordered.keys() == keys
    assert ordered.values() == [plain[k] for k in keys]
    assert ordered.items() == [(k, plain[k]) for k in keys]
    assert list(reversed(ordered)) == keys[::-1]
    assert sorted(ordered.unordered_values()) == sorted(plain.values())
    assert sorted(ordered.unordered_items()) == sorted(plain.items())
    assert dict(ordered) == plain and ordered == plain


def test_popitem_takes_the_largest_key_and_copies_keep_the_type():
    ordered = KeyOrderedDict({b"b": 2, b"c": 3, b"a": 1})
    for clone in (ordered.copy(), copy.deepcopy(ordered), pickle.loads(pickle.dumps(ordered))):
        assert type(clone) is KeyOrderedDict and clone.items() == ordered.items()
    assert ordered.popitem() == (b"c", 3)
    assert repr(ordered) == "KeyOrderedDict({b'a': 1, b'b': 2})"
    ordered.clear()
    with pytest.raises(KeyError):
        ordered.popitem()


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
def test_every_write_marks_an_id_map_dirty(write):
    ids = IdMap({1: "a", 2: "b"})
    ids.dirty = False
    write(ids)
    assert ids.dirty


def test_reads_leave_an_id_map_clean_and_copies_keep_its_type():
    ids = IdMap({2: "b", 1: "a"})
    ids.dirty = False
    assert ids.get(1) == "a" and 2 in ids and len(ids) == 2 and ids.items() == [(1, "a"), (2, "b")]
    assert not ids.dirty
    for clone in (ids.copy(), copy.deepcopy(ids), pickle.loads(pickle.dumps(ids))):
        assert type(clone) is IdMap and clone == ids
