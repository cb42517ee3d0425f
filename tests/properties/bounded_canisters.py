"""Test canisters for bounded-wait calls (issue 17).

``BoundedRecorder`` makes bounded-wait and guaranteed-response calls and records, per call,
its timeout, when it was sent and when and how its callback ran:

* ``sent/<dst>/<seq>``  ``(timeout_s or 0, time sent)``
* ``out/<dst>/<seq>``   0 while unanswered, 1 after a reply, ``10 + code`` after a reject
* ``at/<dst>/<seq>``    the time its callback ran
* ``count/double_answers``, ``count/unknown_answers``, ``count/duplicate_receipts`` (must
  stay absent), ``count/call_errors`` (legitimate back-pressure)

``RetryingLedger`` transfers between ledgers with bounded-wait calls and keeps the supply
exact although a ``SYS_UNKNOWN`` answer leaves open whether the credit happened: every
transfer has an id; the receiving ledger's ``credit_once`` decides each id once and for
all (credited or refused, remembered), so the sender retries with the same id until it
hears that decision, and refunds only on "refused".
"""

from __future__ import annotations

from examples.ledger import ESCROW, Ledger, account_of
from replica.sdk import CallError, Canister, RejectCode, callback, update

__all__ = ["BoundedRecorder", "RetryingLedger", "PENDING", "REPLIED", "REJECTED_BASE"]

PENDING = 0
REPLIED = 1
REJECTED_BASE = 10


def _key(prefix: str, peer: int, seq: int) -> str:
    return f"{prefix}/{peer:020d}/{seq:010d}"


class BoundedRecorder(Canister):
    VERSION = 1

    def _bump(self, name: str) -> None:
        key = f"count/{name}"
        self.stable[key] = self.stable.get(key, 0) + 1

    @update
    def fire(self, targets):
        """``((dst, method, next, timeout_s or None, pad bytes), ...)``: one call each."""
        self.reply(len(targets))
        for dst, method, nxt, timeout, pad in targets:
            seq = self.stable.get(f"seq/{dst}", 0)
            try:
                self.call(dst, method, {"seq": seq, "next": nxt, "timeout": timeout, "pad": b"p" * pad},
                          on_reply=self.answered, on_reject=self.refused, context=(dst, seq), timeout_s=timeout)
            except CallError:
                self._bump("call_errors")
                continue
            self.stable[f"seq/{dst}"] = seq + 1
            self.stable[_key("sent", dst, seq)] = (timeout or 0, self.time)
            self.stable[_key("out", dst, seq)] = PENDING

    def _receive(self, arg) -> int:
        key = _key("in", self.caller, arg["seq"])
        if key in self.stable:
            self._bump("duplicate_receipts")
        self.stable[key] = self.time
        return arg["seq"]

    @update
    def ping(self, arg):
        return ("pong", self._receive(arg))

    @update
    def relay(self, arg):
        """Receive, then ping ``next`` with the same kind of call; reply once that is answered."""
        seq = self._receive(arg)
        relayed = self.stable.get("relay_seq", 0)  # its own numbering: relays of several callers interleave
        self.stable["relay_seq"] = relayed + 1
        try:
            self.call(arg["next"], "ping", {"seq": -1 - relayed, "next": 0, "timeout": None, "pad": b""},
                      on_reply=self.relayed, on_reject=self.relayed, context=seq, timeout_s=arg["timeout"])
        except CallError:
            return ("relayed", seq)
        return None

    @callback
    def relayed(self, value, context):
        self.reply(("relayed", context))

    def _settle(self, context, outcome: int) -> None:
        dst, seq = context
        key = _key("out", dst, seq)
        previous = self.stable.get(key)
        if previous is None:
            self._bump("unknown_answers")
        elif previous != PENDING:
            self._bump("double_answers")
        else:
            self.stable[key] = outcome
            self.stable[_key("at", dst, seq)] = self.time

    @callback
    def answered(self, value, context):
        self._settle(context, REPLIED)

    @callback
    def refused(self, reject, context):
        self._settle(context, REJECTED_BASE + reject[0])


def bounded_calls(stable) -> dict[tuple[int, int], tuple[int, int, int, int | None]]:
    """``(dst, seq) -> (timeout_s or 0, sent at, outcome, answered at or None)``."""
    out = {}
    for key in stable.irange("sent/", "sent0"):
        _, dst, seq = key.split("/")
        timeout, sent_at = stable[key]
        rest = key[len("sent/"):]
        out[(int(dst), int(seq))] = (timeout, sent_at, stable[f"out/{rest}"], stable.get(f"at/{rest}"))
    return out


def received(stable) -> dict[tuple[int, int], int]:
    """``(caller, seq) -> time executed`` of every request this recorder executed."""
    out = {}
    for key in stable.irange("in/", "in0"):
        _, caller, seq = key.split("/")
        out[(int(caller), int(seq))] = stable[key]
    return out


REFUSED = "refused"


class RetryingLedger(Ledger):
    """A ``Ledger`` whose cross-ledger transfers are bounded-wait calls (module docstring)."""

    VERSION = 1

    @update
    def transfer_bounded(self, arg):
        """``{"to_ledger", "to", "amount", "timeout"}``: debit now, credit until decided."""
        to_ledger, payee, amount, timeout = arg["to_ledger"], arg["to"], arg["amount"], arg["timeout"]
        payer = account_of(self.caller)
        if self._balance(payer) < amount:
            return "insufficient funds"
        tid = self.stable.get("next_tid", 0)
        self.stable["next_tid"] = tid + 1
        self._add(payer, -amount)
        self.stable[ESCROW] = self.stable[ESCROW] + amount
        self.stable[f"pending/{tid:010d}"] = (to_ledger, payee, amount, payer, timeout, False)
        self._attempt(tid)
        self.reply(tid)
        return None

    def _attempt(self, tid: int) -> None:
        key = f"pending/{tid:010d}"
        to_ledger, payee, amount, payer, timeout, _ = self.stable[key]
        try:
            self.call(to_ledger, "credit_once", {"id": (self.id, tid), "to": payee, "amount": amount},
                      on_reply=self.credited, on_reject=self.not_credited, context=tid, timeout_s=timeout)
        except CallError:
            self.stable[key] = (to_ledger, payee, amount, payer, timeout, False)  # retried by `retry`
            return
        self.stable[key] = (to_ledger, payee, amount, payer, timeout, True)

    @update
    def retry(self):
        """Send again every undecided transfer that has no attempt in flight."""
        for key in list(self.stable.irange("pending/", "pending0")):
            if not self.stable[key][5]:
                self._attempt(int(key[len("pending/"):]))
        self.reply(None)

    @callback
    def credited(self, _value, tid):
        key = f"pending/{tid:010d}"
        if key in self.stable:  # the first decision counts; later attempts' answers repeat it
            self.stable[ESCROW] = self.stable[ESCROW] - self.stable[key][2]
            del self.stable[key]

    @callback
    def not_credited(self, reject, tid):
        key = f"pending/{tid:010d}"
        if key not in self.stable:
            return
        code, message = reject
        if code == RejectCode.CANISTER_REJECT and message.startswith(REFUSED):
            to_ledger, payee, amount, payer, timeout, _ = self.stable[key]
            self.stable[ESCROW] = self.stable[ESCROW] - amount
            self._add(payer, amount)
            del self.stable[key]
            return
        # SYS_UNKNOWN, a timed-out or shed request, a full queue...: undecided, try again,
        # with twice the timeout (a timeout too short for a round trip would never decide).
        to_ledger, payee, amount, payer, timeout, inflight = self.stable[key]
        self.stable[key] = (to_ledger, payee, amount, payer, min(2 * timeout, 300), inflight)
        self._attempt(tid)

    @update
    def credit_once(self, arg):
        """Decide transfer ``id`` once: credit it, or refuse it for good; repeat the decision."""
        if not isinstance(self.caller, int):
            self.reject(REFUSED + ": credit_once is called by ledgers only")
            return None
        ledger, tid = arg["id"]
        key = f"decided/{ledger:020d}/{tid:010d}"
        decision = self.stable.get(key)
        if decision is None:
            payee, amount = arg["to"], arg["amount"]
            ok = type(amount) is int and amount > 0 and self._balance(payee) + amount < 2**64
            decision = 1 if ok else 2
            self.stable[key] = decision
            if ok:
                self._add(payee, amount)
        if decision == 2:
            self.reject(REFUSED)
            return None
        return "credited"
