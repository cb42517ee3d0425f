"""Ledger: named accounts with token balances, and transfers between ledgers.

A demo, not a secure token: ``transfer_local`` moves tokens between any two named accounts
of this ledger without authorization; ``transfer`` moves tokens FROM THE CALLER's account
(``account_of(caller)``) to an account on another ledger, and ``credit`` trusts any
canister caller (users cannot call it).

Cross-ledger transfers keep the total supply invariant with an escrow:

1. ``transfer`` debits the payer and adds the amount to this ledger's ``escrow``, then calls
   ``credit({"to", "amount"})`` on the receiving ledger;
2. the receiving ledger adds the amount to ``to`` (or rejects, changing nothing);
3. on the reply the escrow is burnt; on a reject it is refunded to the payer.

With S the initial supply over all ledgers, at every moment
``Σ balances ≤ S ≤ Σ (balances + escrow)``, and once no transfer is in flight
``Σ balances = S`` with every escrow 0. Guaranteed responses make step 3 always happen.
"""

from __future__ import annotations

from replica.sdk import CallError, Canister, Trap, callback, query, update

__all__ = ["Ledger", "account_of", "MAX_AMOUNT"]

BALANCE = "balance/"
_BALANCE_END = "balance0"  # '0' follows '/': every "balance/…" key sorts in [BALANCE, _BALANCE_END)
ESCROW = "escrow"
#: Amounts and the total supply stay below 2**64 (what the state encodings hold).
MAX_AMOUNT = 2**64 - 1


def account_of(caller: bytes | int) -> str:
    """The account a caller pays from: a user's id in hex, or ``"canister/<id>"``."""
    if isinstance(caller, bytes):
        return caller.hex()
    return f"canister/{caller}"


def _is_amount(value: object) -> bool:
    return type(value) is int and 0 < value <= MAX_AMOUNT


def _fields(arg: object, **types: type) -> tuple | None:
    """``arg``'s values for the given keys if it is a map with exactly those typed fields."""
    if not isinstance(arg, dict) or sorted(arg) != sorted(types):
        return None
    values = tuple(arg[key] for key in types)
    if any(type(value) is not expected for value, expected in zip(values, types.values())):
        return None
    return values


class Ledger(Canister):
    VERSION = 1

    def init(self, arg):
        balances = () if arg is None else arg.get("balances", ()) if isinstance(arg, dict) else None
        if not isinstance(balances, tuple):
            raise Trap('init takes {"balances": ((account, amount), ...)}')
        total = 0
        for entry in balances:
            if not (isinstance(entry, tuple) and len(entry) == 2 and type(entry[0]) is str
                    and type(entry[1]) is int and entry[1] >= 0):
                raise Trap(f"bad balance entry {entry!r}")
            account, amount = entry
            if BALANCE + account in self.stable:
                raise Trap(f"account {account!r} listed twice")
            self.stable[BALANCE + account] = amount
            total += amount
        if total > MAX_AMOUNT:
            raise Trap("total supply exceeds 2**64 - 1")
        self.stable[ESCROW] = 0

    # -- helpers ----------------------------------------------------------------------------

    def _balance(self, account: str) -> int:
        return self.stable.get(BALANCE + account, 0)

    def _add(self, account: str, delta: int) -> int:
        balance = self._balance(account) + delta
        if balance:
            self.stable[BALANCE + account] = balance
        else:
            self.stable.pop(BALANCE + account, None)  # empty accounts take no state
        return balance

    # -- updates ----------------------------------------------------------------------------

    @update
    def transfer_local(self, arg):
        """``{"from", "to", "amount"}`` → the payer's new balance."""
        fields = _fields(arg, **{"from": str, "to": str, "amount": int})
        if fields is None or not _is_amount(fields[2]):
            self.reject('transfer_local takes {"from": text, "to": text, "amount": positive int}')
            return None
        payer, payee, amount = fields
        if self._balance(payer) < amount:
            self.reject(f"insufficient funds in {payer!r}")
            return None
        balance = self._add(payer, -amount)
        self._add(payee, amount)
        return balance

    @update
    def transfer(self, arg):
        """``{"to_ledger", "to", "amount"}`` from the caller's account; deferred reply with
        the payer's balance once the receiving ledger credited the amount."""
        fields = _fields(arg, to_ledger=int, to=str, amount=int)
        if fields is None or not _is_amount(fields[2]):
            self.reject('transfer takes {"to_ledger": canister id, "to": text, "amount": positive int}')
            return None
        to_ledger, payee, amount = fields
        payer = account_of(self.caller)
        if self._balance(payer) < amount:
            self.reject(f"insufficient funds in {payer!r}")
            return None
        try:
            self.call(to_ledger, "credit", {"to": payee, "amount": amount},
                      on_reply=self.transfer_done, on_reject=self.transfer_failed, context=(payer, amount))
        except CallError as exc:
            self.reject(f"transfer not sent: {exc}")
            return None
        self._add(payer, -amount)
        self.stable[ESCROW] = self.stable[ESCROW] + amount
        return None

    @callback
    def transfer_done(self, _reply, context):
        payer, amount = context
        self.stable[ESCROW] = self.stable[ESCROW] - amount  # the tokens now live on the other ledger
        self.reply(self._balance(payer))

    @callback
    def transfer_failed(self, reject, context):
        payer, amount = context
        self.stable[ESCROW] = self.stable[ESCROW] - amount
        self._add(payer, amount)
        self.reject(f"transfer failed: {reject[1]}")

    @update
    def credit(self, arg):
        """``{"to", "amount"}`` from another ledger: add ``amount`` to ``to``."""
        if not isinstance(self.caller, int):
            self.reject("credit is called by ledgers only")
            return None
        fields = _fields(arg, to=str, amount=int)
        if fields is None or not _is_amount(fields[1]):
            self.reject('credit takes {"to": text, "amount": positive int}')
            return None
        payee, amount = fields
        if self._balance(payee) + amount > MAX_AMOUNT:
            self.reject("balance would overflow")
            return None
        return self._add(payee, amount)

    # -- queries ----------------------------------------------------------------------------

    @query
    def balance(self, account):
        if type(account) is not str:
            raise Trap("balance takes an account name")
        return self._balance(account)

    @query
    def escrow(self):
        return self.stable.get(ESCROW, 0)

    @query
    def supply(self):
        """Σ balances + escrow of this ledger."""
        stable = self.stable
        return sum(stable[key] for key in stable.irange(BALANCE, _BALANCE_END)) + stable.get(ESCROW, 0)

    @query
    def accounts(self):
        """``((account, balance), ...)`` in account order."""
        stable = self.stable
        return tuple((key[len(BALANCE):], stable[key]) for key in stable.irange(BALANCE, _BALANCE_END))
