"""Ping-pong: sequential round trips between two canisters (usually on different subnets).

``ping({"target": id, "rounds": n})`` sends ``pong`` to ``target``; each reply resumes
``on_pong``, which sends the next ping until ``n`` round trips are done, then answers the
original caller with the counts. All round trips run in the one call context of ``ping``,
which stays open (deferred reply) until the last callback replies.

Stable state: ``pings_sent``, ``pongs_received`` (this canister as pinger) and
``pongs_sent`` (this canister as target).
"""

from __future__ import annotations

from replica.sdk import Canister, callback, query, update

__all__ = ["PingPong"]


class PingPong(Canister):
    VERSION = 1

    def _count(self, key: str) -> int:
        value = self.stable.get(key, 0) + 1
        self.stable[key] = value
        return value

    def _counts(self) -> dict:
        return {key: self.stable.get(key, 0) for key in ("pings_sent", "pongs_received", "pongs_sent")}

    def _send_ping(self, target: int, number: int, rounds: int) -> None:
        self.call(target, "pong", number, on_reply=self.on_pong, on_reject=self.on_ping_failed,
                  context=(target, number, rounds))
        self._count("pings_sent")

    @update
    def ping(self, arg):
        if not isinstance(arg, dict) or type(arg.get("target")) is not int or type(arg.get("rounds")) is not int:
            self.reject('ping takes {"target": canister id, "rounds": int}')
            return None
        if arg["rounds"] <= 0:
            return self._counts()
        self._send_ping(arg["target"], 1, arg["rounds"])
        return None  # deferred: answered by on_pong once every round trip is done

    @update
    def pong(self, number):
        self._count("pongs_sent")
        return number

    @callback
    def on_pong(self, number, context):
        target, sent, rounds = context
        self._count("pongs_received")
        if number != sent:
            self.reject(f"pong {number} answered ping {sent}")
        elif sent < rounds:
            self._send_ping(target, sent + 1, rounds)
        else:
            self.reply(self._counts())

    @callback
    def on_ping_failed(self, reject, context):
        code, message = reject
        _, sent, _ = context
        self.reject(f"ping {sent} failed (code {code}): {message}")

    @query
    def stats(self):
        return self._counts()
