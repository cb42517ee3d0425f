"""Guestbook: a canister whose methods declare Candid types, so IC agents can call it.

* ``sign(name, message)`` stores a message and replies with ``record { id; total }``;
* ``entry(id)`` (query) replies with ``opt Entry``: the entry, or null;
* ``recent(limit)`` (query) replies with the newest ``limit`` entries, newest first;
* ``stats()`` (query) replies with a variant: ``fresh`` or ``signed`` with the count.

Arguments arrive decoded (``text`` → str, ``nat`` → int, ``opt`` → value or None, a record
→ a dict keyed by field name) and the return value is encoded at the result type.
``__get_candid_interface_tmp_hack`` answers the service description.
"""

from __future__ import annotations

from replica.sdk import Canister, Trap, query, update

__all__ = ["Guestbook"]


class Guestbook(Canister):
    VERSION = 1
    CANDID_TYPES = """
        type Entry = record { id : nat; name : text; message : text; time : nat64 };
    """

    @update(candid="(name : text, message : text) -> (record { id : nat; total : nat })")
    def sign(self, name, message):
        if not name or len(message) > 280:
            raise Trap("a name, and a message of at most 280 characters")
        count = self.stable.get("count", 0)
        self.stable[f"entry:{count}"] = (name, message, self.time)
        self.stable["count"] = count + 1
        return {"id": count, "total": count + 1}

    @query(candid="(id : nat) -> (opt Entry)")
    def entry(self, entry_id):
        stored = self.stable.get(f"entry:{entry_id}")
        if stored is None:
            return None
        name, message, time = stored
        return {"id": entry_id, "name": name, "message": message, "time": time}

    @query(candid="(limit : opt nat) -> (vec Entry)")
    def recent(self, limit):
        count = self.stable.get("count", 0)
        limit = 10 if limit is None else min(limit, 100)
        entries = []
        for entry_id in range(count - 1, max(count - limit, 0) - 1, -1):
            name, message, time = self.stable[f"entry:{entry_id}"]
            entries.append({"id": entry_id, "name": name, "message": message, "time": time})
        return entries

    @query(candid="() -> (variant { fresh; signed : nat })")
    def stats(self):
        count = self.stable.get("count", 0)
        return "fresh" if count == 0 else {"signed": count}
