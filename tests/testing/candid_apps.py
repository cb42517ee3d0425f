"""Canisters with Candid methods for ``test_candid_methods`` (installed from this source)."""

from __future__ import annotations

from replica.sdk import Canister, callback, query, update


class Relay(Canister):
    """A Candid front for a msgpack canister: the call between canisters stays msgpack, and
    the callback's ``reply`` answers the Candid call in Candid."""

    VERSION = 1

    @update(candid="(target : nat, name : text) -> (text)")
    def relay(self, target, name):
        self.call(target, "greet", name, on_reply=self.got, on_reject=self.failed)

    @callback
    def got(self, reply, context):
        self.reply(f"relayed: {reply}")

    @callback
    def failed(self, reject, context):
        self.reject(str(reject))

    @update(candid="(nat) -> (nat, text)")
    def pair(self, n):
        return n * 2, "doubled"

    @update(candid="(nat) -> (text)")
    def wrong_result(self, n):
        return n   # not text: the reply cannot be encoded, the message traps

    @query(candid="() -> ()")
    def nothing(self):
        return None

    @update
    def plain(self, value):
        return {"msgpack": value}


class Hoarder(Canister):
    """Replies no Candid encoder may spend without bound on: a cyclic value and a value shared
    2**40 times over (canister code is untrusted input)."""

    VERSION = 1
    CANDID_TYPES = "type Tree = vec Tree;"

    @update(candid="() -> (Tree)")
    def cyclic(self):
        tree = []
        tree.append(tree)
        return tree

    @update(candid="() -> (Tree)")
    def shared(self):
        tree = []
        for _ in range(40):
            tree = [tree, tree]
        return tree

    @query(candid="() -> (Tree)")
    def small(self):
        return [[], [[]]]
