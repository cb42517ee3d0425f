"""A BAD EXAMPLE: a canister whose behaviour depends on Python's string hash seed.

``record(words)`` iterates over a Python ``set`` of strings and writes the iteration order
into stable state. Set order follows ``hash(str)``, which Python randomizes per process
(``PYTHONHASHSEED``), so two replicas executing the same message store different values and
their state hashes diverge. Determinism audits use this canister to show that they catch
such a bug and point at the differing path (``stable/order``). Never write canisters like
this: iterate over sorted data instead.
"""

from __future__ import annotations

from replica.sdk import Canister, query, update

__all__ = ["SetOrder", "DEFAULT_WORDS"]

DEFAULT_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliett")


class SetOrder(Canister):
    VERSION = 1

    @update
    def record(self, words):
        words = DEFAULT_WORDS if words is None else words
        order = tuple(set(words))  # DELIBERATELY nondeterministic: depends on the hash seed
        self.stable["order"] = order
        return order

    @query
    def order(self):
        return self.stable.get("order", ())
