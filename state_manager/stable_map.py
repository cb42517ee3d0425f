"""``StableMap``: a canister's persistent state, ordered and journaled.

Keys are text; values are immutable canonical values (None, bool, int, str, bytes and tuples
of those), so nothing can change behind the map's back. The map keeps

* a journal, so the execution layer can roll back a trapped message's writes, and
* the set of keys changed since the state was last committed, so hashing is incremental.
"""

from __future__ import annotations

from typing import Any, Iterator

from mypy_extensions import mypyc_attr
from sortedcontainers import SortedDict

from .encoding import MAX_INT, MIN_INT, PLAIN_SCALARS
from .errors import StateManagerError

__all__ = ["StableMap", "StableValueError", "check_stable_value"]

_ABSENT = object()


@mypyc_attr(native_class=False)  # an ordinary class when compiled (see setup.py)
class StableValueError(StateManagerError, TypeError):
    """A key or value the stable state cannot hold deterministically."""


def check_stable_value(value: Any, depth: int = 0) -> None:
    """Stable values (and callback contexts) become state-tree leaves: only what has a
    canonical encoding, integers included (64-bit, what msgpack can hold)."""
    if type(value) not in PLAIN_SCALARS:  # tuples, subclasses of the scalars, the rest
        if isinstance(value, tuple) and depth < 32:
            for item in value:
                check_stable_value(item, depth + 1)
            return
        if not isinstance(value, (bool, int, str, bytes)):
            raise StableValueError(
                f"stable state holds None, bool, int, str, bytes and tuples of them, not {type(value).__name__}")
    if isinstance(value, int) and not MIN_INT <= value <= MAX_INT:
        raise StableValueError(f"stable integers are 64-bit ({MIN_INT}..{MAX_INT}); this one is not")


class StableMap:
    __slots__ = ("_data", "_journal", "_changed")

    def __init__(self, items: dict[str, Any] | None = None) -> None:
        self._data = SortedDict()
        self._journal: list[tuple[str, Any]] | None = None
        self._changed: set[str] = set()
        for key, value in (items or {}).items():
            self[key] = value

    # -- mapping API -------------------------------------------------------------------------

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def items(self):
        return self._data.items()

    def keys(self):
        return self._data.keys()

    def irange(self, minimum: str | None = None, maximum: str | None = None):
        return self._data.irange(minimum, maximum)

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise StableValueError(f"stable keys are str, not {type(key).__name__}")
        check_stable_value(value)
        self._record(key)
        self._data[key] = value

    def __delitem__(self, key: str) -> None:
        if key not in self._data:
            raise KeyError(key)
        self._record(key)
        del self._data[key]

    def pop(self, key: str, default: Any = _ABSENT) -> Any:
        if key in self._data:
            value = self._data[key]
            del self[key]
            return value
        if default is _ABSENT:
            raise KeyError(key)
        return default

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StableMap) and self._data == other._data

    def __repr__(self) -> str:
        return f"StableMap({dict(self._data)!r})"

    # -- journal (per-message rollback) ------------------------------------------------------

    def _record(self, key: str) -> None:
        self._changed.add(key)
        if self._journal is not None:
            self._journal.append((key, self._data.get(key, _ABSENT)))

    def begin_transaction(self) -> None:
        self._journal = []

    def commit_transaction(self) -> None:
        self._journal = None

    def rollback_transaction(self) -> None:
        """Undo every write since ``begin_transaction`` (newest first)."""
        journal: list[tuple[str, Any]] = self._journal or []
        self._journal = None
        for position in range(len(journal) - 1, -1, -1):  # not reversed(): mypyc fails to compile it here
            key, old = journal[position]
            if old is _ABSENT:
                self._data.pop(key, None)
            else:
                self._data[key] = old

    # -- change tracking (incremental hashing) -----------------------------------------------

    def has_changes(self) -> bool:
        return bool(self._changed)

    def take_changed_keys(self) -> list[str]:
        """Keys written since the last call, sorted; resets the record."""
        changed, self._changed = sorted(self._changed), set()
        return changed

    def copy(self) -> "StableMap":
        clone = StableMap()
        clone._data = self._data.copy()
        clone._changed = set(self._changed)
        return clone
