"""Treasury: pays grants from its account on a ledger to accounts on any ledger.

A multi-canister, cross-subnet app built on ``examples.ledger``: the treasury holds tokens
in its own account (``"canister/<treasury id>"``) on its ``ledger``; ``pay`` asks that ledger
to ``transfer`` to an account on ``to_ledger``, which may live on another subnet. The ledger
escrows the amount until the receiving ledger credits it (see ``examples.ledger``), so a
failed payout — an unknown ledger, a full queue — comes back as a reject with the tokens
refunded, and the treasury counts it as failed. Three canisters take part in every payout:

    user ──pay──► Treasury ──transfer──► Ledger A ──credit──► Ledger B
         ◄─reply─          ◄──reply────           ◄──reply──

* ``init({"ledger": id, "owner": user id})``; only ``owner`` may ``pay``;
* ``pay({"to_ledger", "to", "amount"})`` → the treasury's balance after the payout (deferred);
* ``report()`` (query) → ``{"paid", "payouts", "failed", "in_flight"}``.

Invariant (tested with ``replica.testing``): once no payout is in flight, the treasury's
balance is its funding minus ``paid``, and the ledgers' total supply never changes.
"""

from __future__ import annotations

from replica.sdk import Canister, CallError, Trap, callback, query, update

__all__ = ["Treasury"]


class Treasury(Canister):
    VERSION = 1

    def init(self, arg):
        if not (isinstance(arg, dict) and type(arg.get("ledger")) is int and type(arg.get("owner")) is bytes):
            raise Trap('init takes {"ledger": canister id, "owner": user id}')
        self.stable["ledger"] = arg["ledger"]
        self.stable["owner"] = arg["owner"]
        for key in ("paid", "payouts", "failed", "in_flight"):
            self.stable[key] = 0

    def _bump(self, key: str, delta: int) -> None:
        self.stable[key] = self.stable[key] + delta

    @update
    def pay(self, arg):
        if self.caller != self.stable["owner"]:
            self.reject("only the treasury's owner may pay")
            return None
        if not (isinstance(arg, dict) and sorted(arg) == ["amount", "to", "to_ledger"]
                and type(arg["to_ledger"]) is int and type(arg["to"]) is str
                and type(arg["amount"]) is int and arg["amount"] > 0):
            self.reject('pay takes {"to_ledger": canister id, "to": account, "amount": positive int}')
            return None
        try:
            self.call(self.stable["ledger"], "transfer", dict(arg), on_reply=self.paid, on_reject=self.failed,
                      context=arg["amount"])
        except CallError as exc:
            self.reject(f"payout not sent: {exc}")
            return None
        self._bump("in_flight", 1)
        return None

    @callback
    def paid(self, balance, amount):
        self._bump("in_flight", -1)
        self._bump("paid", amount)
        self._bump("payouts", 1)
        self.reply(balance)

    @callback
    def failed(self, reject, amount):
        self._bump("in_flight", -1)
        self._bump("failed", 1)
        code, message = reject
        self.reject(f"payout of {amount} failed: {message}")

    @query
    def report(self):
        return {key: self.stable[key] for key in ("paid", "payouts", "failed", "in_flight")}
