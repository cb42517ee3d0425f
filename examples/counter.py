"""Counter: the smallest useful canister.

* ``increment(by)`` adds ``by`` (default 1) and replies with the new value;
* ``get()`` (query) replies with the current value;
* ``init(start)`` optionally sets the starting value.
"""

from __future__ import annotations

from replica.sdk import Canister, Trap, query, update

__all__ = ["Counter"]


class Counter(Canister):
    VERSION = 1

    def init(self, start):
        start = 0 if start is None else start
        if type(start) is not int:
            raise Trap("the start value must be an int")
        self.stable["value"] = start

    @update
    def increment(self, by):
        by = 1 if by is None else by
        if type(by) is not int:
            raise Trap("increment takes an int")
        value = self.stable.get("value", 0) + by
        self.stable["value"] = value
        return value

    @query
    def get(self):
        return self.stable.get("value", 0)
