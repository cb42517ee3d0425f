"""``KeyOrderedDict``: a dict that always iterates in key order.

Reads and writes cost what a dict's do; the sorting is deferred to iteration. That suits the
maps that change on every message but are walked only when a commit hashes them or a
checkpoint writes them (queues by remote canister, ingress statuses by message id, call
contexts by id). A sorted container pays for the order on every write instead.

Iteration order never depends on the order of inserts, so a replica that reloaded its state
from a checkpoint walks these maps exactly like one that built them message by message.
"""

from __future__ import annotations

from typing import Any, Iterator

__all__ = ["KeyOrderedDict"]


class KeyOrderedDict(dict):
    """A dict whose iteration (``iter``, ``keys``, ``values``, ``items``, ``popitem``) is in
    key order. ``keys``/``values``/``items`` return lists, not views. Keys must be mutually
    comparable (ids, names, message ids)."""

    __slots__ = ()

    def __iter__(self) -> Iterator:
        return iter(sorted(dict.keys(self)))

    def __reversed__(self) -> Iterator:
        return iter(sorted(dict.keys(self), reverse=True))

    def keys(self) -> list:  # type: ignore[override]
        return sorted(dict.keys(self))

    def values(self) -> list:  # type: ignore[override]
        get = dict.__getitem__
        return [get(self, key) for key in sorted(dict.keys(self))]

    def items(self) -> list:  # type: ignore[override]
        get = dict.__getitem__
        return [(key, get(self, key)) for key in sorted(dict.keys(self))]

    # Without sorting, for what does not depend on order (sums, any, min):
    def unordered_values(self) -> Iterator:
        return iter(dict.values(self))

    def unordered_items(self) -> Iterator:
        return iter(dict.items(self))

    def popitem(self) -> tuple[Any, Any]:
        """Remove and return the entry with the largest key."""
        if not self:
            raise KeyError("popitem(): dictionary is empty")
        key = max(dict.keys(self))
        return key, self.pop(key)

    def copy(self) -> KeyOrderedDict:
        return type(self)(dict.items(self))

    def __reduce__(self):
        return (type(self), (dict(dict.items(self)),))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self.items())!r})"
