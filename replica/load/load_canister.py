"""The canister ``replica load`` installs: it relays a user's call to another canister and
checks, on the receiving side, that no call arrives twice.

``relay({"target": id, "pad": n, "timeout_s": t})`` calls ``echo`` on ``target`` with a fresh
sequence number of this canister and ``n`` bytes of padding — a bounded-wait call with a
``t``-second timeout if ``t`` is given, else a guaranteed-response call — and answers the user
once the echo comes back (or rejects with the reject it got, ``SYS_UNKNOWN`` included). ``echo`` answers at once. Each canister keeps, per caller, the
highest sequence number it has echoed: requests from one canister to another are inducted in
send order, so a number not above it is a call delivered twice (or out of order) and is
counted in ``violations``. A request that never arrives (rejected on the way, with a reject
the caller sees) leaves a gap, which is allowed; the callback counts rejects by code (the
user sees ``CANISTER_REJECT`` with the original code in the message). ``stats`` reports the counters, so the load
generator can compare what canisters saw with what users were told.

The module is installed from its source, like any user canister; it imports only the SDK.
"""

from __future__ import annotations

from replica.sdk import Canister, callback, query, update

__all__ = ["LoadCanister"]

MAX_PAD = 64 * 1024
#: The reject codes a callback can see (SYS_FATAL … CANISTER_ERROR, and SYS_UNKNOWN).
_REJECT_CODES = (1, 2, 3, 4, 5, 6)


class LoadCanister(Canister):
    def _bump(self, key: str, by: int = 1) -> int:
        value = self.stable.get(key, 0) + by
        self.stable[key] = value
        return value

    @update
    def relay(self, arg):
        if not isinstance(arg, dict) or type(arg.get("target")) is not int:
            self.reject('relay takes {"target": canister id, "pad": bytes of padding}')
            return None
        pad = arg.get("pad", 0)
        if type(pad) is not int or not 0 <= pad <= MAX_PAD:
            self.reject(f"pad must be an int in [0, {MAX_PAD}]")
            return None
        timeout_s = arg.get("timeout_s")
        if timeout_s is not None and (type(timeout_s) is not int or timeout_s < 1):
            self.reject("timeout_s must be an int >= 1 (or absent: a guaranteed-response call)")
            return None
        sequence = self._bump("relayed")
        self.call(arg["target"], "echo", {"sequence": sequence, "pad": b"\0" * pad},
                  on_reply=self.on_echo, on_reject=self.on_echo_rejected, context=sequence, timeout_s=timeout_s)
        return None   # answered by the callback

    @update
    def echo(self, arg):
        caller = self.caller
        if not isinstance(arg, dict) or type(arg.get("sequence")) is not int or not isinstance(caller, int):
            self.reject("echo takes {sequence, pad} from a canister")
            return None
        key = f"last/{caller}"
        if arg["sequence"] <= self.stable.get(key, 0):
            self._bump("violations")
        else:
            self.stable[key] = arg["sequence"]
        self._bump("echoed")
        return arg["sequence"]

    @callback
    def on_echo(self, sequence, context):
        self._bump("replied")
        if sequence != context:
            self._bump("violations")
            self.reject(f"echo of call {context} answered {sequence}")
        else:
            self.reply(sequence)

    @callback
    def on_echo_rejected(self, reject, context):
        code, message = reject
        self._bump("rejected")
        self._bump(f"rejected/{code}")
        self.reject(f"relay {context} was rejected (code {code}): {message}")

    @query
    def stats(self):
        counts = {key: self.stable.get(key, 0) for key in ("relayed", "echoed", "replied", "rejected", "violations")}
        counts["rejected_by_code"] = {code: self.stable[f"rejected/{code}"] for code in _REJECT_CODES
                                      if f"rejected/{code}" in self.stable}
        return counts
