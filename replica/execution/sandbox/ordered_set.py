"""Sets whose iteration order is insertion order, never the hash seed's.

A built-in ``set`` of strings iterates in an order that follows ``hash(str)``, which Python
randomizes per process: two replicas running the same canister code would see different
orders. Canister code gets these types instead, under the names ``set`` and ``frozenset``
and for set displays and set comprehensions (``replica.execution.sandbox.metering``).

``OrderedSet`` keeps its elements as the keys of a ``dict`` (insertion-ordered since Python
3.7). Every operation that builds a new set keeps a rule that depends on the operands'
orders only: ``a | b`` is a's elements then b's new ones, ``a & b``, ``a - b`` and
``a ^ b`` keep a's order (then b's for ``^``); ``pop()`` removes the newest element.
Equality and subset tests are the built-in set's.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

__all__ = ["OrderedSet", "OrderedFrozenSet"]


class _SetBase:
    __slots__ = ("_sandbox_items",)  # "_sandbox_" names are refused in canister code

    def __init__(self, iterable: Iterable[Any] = ()) -> None:
        self._sandbox_items = dict.fromkeys(iterable)

    @classmethod
    def _sandbox_from(cls, items: dict) -> Any:
        made = cls.__new__(cls)
        made._sandbox_items = items
        return made

    # -- reading -----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._sandbox_items)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._sandbox_items)

    def __reversed__(self) -> Iterator[Any]:
        return reversed(self._sandbox_items)

    def __contains__(self, item: object) -> bool:
        return item in self._sandbox_items

    def __repr__(self) -> str:
        name = "set" if type(self) is OrderedSet else "frozenset"
        if not self._sandbox_items:
            return f"{name}()"
        body = ", ".join(repr(item) for item in self._sandbox_items)
        return "{" + body + "}" if name == "set" else "frozenset({" + body + "})"

    # -- comparisons (order-free, as for the built-in sets) -----------------------------------

    def _sandbox_keys(self, other: object) -> Any:
        if isinstance(other, _SetBase):
            return other._sandbox_items.keys()
        if isinstance(other, (set, frozenset)):
            return other
        return None

    def __eq__(self, other: object) -> bool:
        keys = self._sandbox_keys(other)
        return NotImplemented if keys is None else self._sandbox_items.keys() == keys

    def __ne__(self, other: object) -> bool:
        keys = self._sandbox_keys(other)
        return NotImplemented if keys is None else self._sandbox_items.keys() != keys

    def __le__(self, other: object) -> bool:
        keys = self._sandbox_keys(other)
        return NotImplemented if keys is None else self._sandbox_items.keys() <= keys

    def __lt__(self, other: object) -> bool:
        keys = self._sandbox_keys(other)
        return NotImplemented if keys is None else self._sandbox_items.keys() < keys

    def __ge__(self, other: object) -> bool:
        keys = self._sandbox_keys(other)
        return NotImplemented if keys is None else self._sandbox_items.keys() >= keys

    def __gt__(self, other: object) -> bool:
        keys = self._sandbox_keys(other)
        return NotImplemented if keys is None else self._sandbox_items.keys() > keys

    def issubset(self, other: Iterable[Any]) -> bool:
        return self <= OrderedFrozenSet(other)

    def issuperset(self, other: Iterable[Any]) -> bool:
        return all(item in self._sandbox_items for item in other)

    def isdisjoint(self, other: Iterable[Any]) -> bool:
        return not any(item in self._sandbox_items for item in other)

    # -- new sets (order rules in the module docstring) ---------------------------------------

    def union(self, *others: Iterable[Any]) -> Any:
        items = dict(self._sandbox_items)
        for other in others:
            items.update(dict.fromkeys(other))
        return self._sandbox_from(items)

    def intersection(self, *others: Iterable[Any]) -> Any:
        items = self._sandbox_items
        for other in others:
            keep = other._sandbox_items if isinstance(other, _SetBase) else dict.fromkeys(other)
            items = {item: None for item in items if item in keep}
        return self._sandbox_from(dict(items))

    def difference(self, *others: Iterable[Any]) -> Any:
        items = self._sandbox_items
        for other in others:
            drop = other._sandbox_items if isinstance(other, _SetBase) else dict.fromkeys(other)
            items = {item: None for item in items if item not in drop}
        return self._sandbox_from(dict(items))

    def symmetric_difference(self, other: Iterable[Any]) -> Any:
        theirs = other._sandbox_items if isinstance(other, _SetBase) else dict.fromkeys(other)
        items = {item: None for item in self._sandbox_items if item not in theirs}
        items.update((item, None) for item in theirs if item not in self._sandbox_items)
        return self._sandbox_from(items)

    def copy(self) -> Any:
        return self._sandbox_from(dict(self._sandbox_items))

    def _sandbox_operand(self, other: object) -> bool:
        return isinstance(other, (_SetBase, set, frozenset))

    def __or__(self, other: Any) -> Any:
        return self.union(other) if self._sandbox_operand(other) else NotImplemented

    def __and__(self, other: Any) -> Any:
        return self.intersection(other) if self._sandbox_operand(other) else NotImplemented

    def __sub__(self, other: Any) -> Any:
        return self.difference(other) if self._sandbox_operand(other) else NotImplemented

    def __xor__(self, other: Any) -> Any:
        return self.symmetric_difference(other) if self._sandbox_operand(other) else NotImplemented

    def __ror__(self, other: Any) -> Any:
        return self._sandbox_from(dict.fromkeys(other)).union(self) if self._sandbox_operand(other) else NotImplemented

    def __rand__(self, other: Any) -> Any:
        return self._sandbox_from(dict.fromkeys(other)).intersection(self) if self._sandbox_operand(other) else NotImplemented

    def __rsub__(self, other: Any) -> Any:
        return self._sandbox_from(dict.fromkeys(other)).difference(self) if self._sandbox_operand(other) else NotImplemented

    def __rxor__(self, other: Any) -> Any:
        return self._sandbox_from(dict.fromkeys(other)).symmetric_difference(self) if self._sandbox_operand(other) else NotImplemented


class OrderedFrozenSet(_SetBase):
    """An immutable, hashable, insertion-ordered set (canister code's ``frozenset``)."""

    __slots__ = ()

    def __hash__(self) -> int:
        # Order-free like frozenset's: equal sets (in any order) hash alike.
        return frozenset(self._sandbox_items).__hash__()


class OrderedSet(_SetBase):
    """A mutable insertion-ordered set (canister code's ``set``)."""

    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]  # mutable, like set

    def add(self, item: Any) -> None:
        self._sandbox_items[item] = None

    def discard(self, item: Any) -> None:
        self._sandbox_items.pop(item, None)

    def remove(self, item: Any) -> None:
        del self._sandbox_items[item]

    def pop(self) -> Any:
        """Remove and return the newest element (``KeyError`` if empty)."""
        if not self._sandbox_items:
            raise KeyError("pop from an empty set")
        return self._sandbox_items.popitem()[0]

    def clear(self) -> None:
        self._sandbox_items.clear()

    def update(self, *others: Iterable[Any]) -> None:
        for other in others:
            self._sandbox_items.update(dict.fromkeys(other))

    def intersection_update(self, *others: Iterable[Any]) -> None:
        self._sandbox_items = self.intersection(*others)._sandbox_items

    def difference_update(self, *others: Iterable[Any]) -> None:
        self._sandbox_items = self.difference(*others)._sandbox_items

    def symmetric_difference_update(self, other: Iterable[Any]) -> None:
        self._sandbox_items = self.symmetric_difference(other)._sandbox_items

    def __ior__(self, other: Any) -> Any:
        if not self._sandbox_operand(other):
            return NotImplemented
        self.update(other)
        return self

    def __iand__(self, other: Any) -> Any:
        if not self._sandbox_operand(other):
            return NotImplemented
        self.intersection_update(other)
        return self

    def __isub__(self, other: Any) -> Any:
        if not self._sandbox_operand(other):
            return NotImplemented
        self.difference_update(other)
        return self

    def __ixor__(self, other: Any) -> Any:
        if not self._sandbox_operand(other):
            return NotImplemented
        self.symmetric_difference_update(other)
        return self
