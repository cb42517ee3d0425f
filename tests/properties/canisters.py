"""Test canisters for the property tests: a ``Recorder`` that logs what it sends and receives.

A recorder is both a caller and a callee:

* ``fire(targets)`` (ingress): answers the user at once, then calls each ``(dst, method,
  next)`` of ``targets`` in order. Every call to ``dst`` gets the next sequence number of
  the pair (this canister, ``dst``); a call the system refuses (``CallError``) gets none.
* ``ping({"seq", "next"})``: records the receipt and replies ``("pong", seq)``.
* ``relay({"seq", "next"})``: records the receipt, calls ``ping`` on ``next`` and replies
  ``("relayed", seq)`` once that call is answered (or at once if it cannot be sent), so
  relays keep call contexts open across rounds and subnets.

Stable layout (fixed-width numbers so keys sort numerically):

* ``seq/<dst>``                next sequence number to ``dst``
* ``out/<dst>/<seq>``          0 while unanswered, 1 after a reply, ``10 + code`` after a reject
* ``in/<caller>/<seq>``        the execution number at which the request ran here
* ``last/<caller>``            the highest sequence number executed from ``caller``
* ``count/<name>``             anomalies seen by the canister itself (must stay absent):
  ``double_answers``, ``unknown_answers``, ``duplicate_receipts``, ``order_violations``,
  ``mismatched_replies``; and ``count/call_errors`` (legitimate back-pressure)
"""

from __future__ import annotations

from replica.sdk import CallError, Canister, callback, query, update

__all__ = ["Recorder", "PENDING", "REPLIED", "REJECTED_BASE", "out_key", "in_key", "ANOMALIES",
           "sent_calls", "received_calls", "anomalies"]

PENDING = 0
REPLIED = 1
REJECTED_BASE = 10

ANOMALIES = ("double_answers", "unknown_answers", "duplicate_receipts", "order_violations", "mismatched_replies")


def out_key(dst: int, seq: int) -> str:
    return f"out/{dst:020d}/{seq:010d}"


def in_key(caller: int, seq: int) -> str:
    return f"in/{caller:020d}/{seq:010d}"


def _parse(key: str) -> tuple[int, int]:
    _, peer, seq = key.split("/")
    return int(peer), int(seq)


def sent_calls(stable) -> dict[tuple[int, int], int]:
    """``(dst, seq) -> outcome`` of every call this recorder sent (read from its stable map)."""
    return {_parse(k): stable[k] for k in stable.irange("out/", "out0")}


def received_calls(stable) -> dict[tuple[int, int], int]:
    """``(caller, seq) -> execution number`` of every request this recorder executed."""
    return {_parse(k): stable[k] for k in stable.irange("in/", "in0")}


def anomalies(stable) -> dict[str, int]:
    return {name: stable[f"count/{name}"] for name in ANOMALIES if f"count/{name}" in stable}


class Recorder(Canister):
    VERSION = 1

    # -- bookkeeping ------------------------------------------------------------------------

    def _bump(self, name: str) -> None:
        key = f"count/{name}"
        self.stable[key] = self.stable.get(key, 0) + 1

    def _send(self, dst: int, method: str, nxt: int, upstream) -> bool:
        seq_key = f"seq/{dst}"
        seq = self.stable.get(seq_key, 0)
        try:
            self.call(dst, method, {"seq": seq, "next": nxt}, on_reply=self.answered, on_reject=self.refused,
                      context=(dst, seq, upstream))
        except CallError:
            self._bump("call_errors")
            return False
        self.stable[seq_key] = seq + 1
        self.stable[out_key(dst, seq)] = PENDING
        return True

    def _settle(self, dst: int, seq: int, outcome: int) -> None:
        key = out_key(dst, seq)
        previous = self.stable.get(key)
        if previous is None:
            self._bump("unknown_answers")
        elif previous != PENDING:
            self._bump("double_answers")
        else:
            self.stable[key] = outcome

    def _receive(self, arg) -> int:
        caller = self.caller
        seq = arg["seq"]
        key = in_key(caller, seq)
        if key in self.stable:
            self._bump("duplicate_receipts")
        last_key = f"last/{caller}"
        if seq <= self.stable.get(last_key, -1):
            self._bump("order_violations")
        self.stable[last_key] = seq
        executed = self.stable.get("executed", 0)
        self.stable["executed"] = executed + 1
        self.stable[key] = executed
        return seq

    # -- entry points -----------------------------------------------------------------------

    @update
    def fire(self, targets):
        self.reply(len(targets))
        for dst, method, nxt in targets:
            self._send(dst, method, nxt, None)

    @update
    def ping(self, arg):
        return ("pong", self._receive(arg))

    @update
    def relay(self, arg):
        seq = self._receive(arg)
        if not self._send(arg["next"], "ping", arg["next"], seq):
            return ("relayed", seq)  # nothing sent: the return value is the reply
        return None  # deferred: answered by the callback

    @callback
    def answered(self, value, context):
        dst, seq, upstream = context
        self._settle(dst, seq, REPLIED)
        if not (isinstance(value, tuple) and len(value) == 2 and value[1] == seq):
            self._bump("mismatched_replies")
        if upstream is not None:
            self.reply(("relayed", upstream))

    @callback
    def refused(self, reject, context):
        dst, seq, upstream = context
        code, _message = reject
        self._settle(dst, seq, REJECTED_BASE + code)
        if upstream is not None:
            self.reply(("relayed", upstream))

    @query
    def executed(self):
        return self.stable.get("executed", 0)
