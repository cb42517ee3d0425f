"""Canisters for the tests of ``replica.testing`` (installed from this module's source)."""

from __future__ import annotations

from replica.sdk import Canister, Trap, callback, query, update


class Greeter(Canister):
    VERSION = 1

    @update
    def greet(self, name):
        self.stable["greeted"] = self.stable.get("greeted", 0) + 1
        return f"hello, {name}"

    @update
    def ask(self, other):
        self.call(other, "greet", "friend", on_reply=self.got, on_reject=self.failed)

    @callback
    def got(self, reply, context):
        self.reply(reply)

    @callback
    def failed(self, reject, context):
        code, message = reject
        self.reject(f"{code}: {message}")

    @query
    def greeted(self):
        return self.stable.get("greeted", 0)


class GreeterV2(Greeter):
    VERSION = 2

    def post_upgrade(self, arg):
        self.stable["upgraded_with"] = arg

    @update
    def greet(self, name):
        self.stable["greeted"] = self.stable.get("greeted", 0) + 1
        return f"hi, {name}"

    @query
    def upgraded_with(self):
        return self.stable.get("upgraded_with")


class Probe(Canister):
    """Reports what the system API shows it: time, caller; traps on request."""

    VERSION = 1

    def init(self, arg):
        self.stable["init_arg"] = arg

    @update
    def now(self):
        return self.time

    @update
    def whoami(self):
        return self.caller

    @update
    def fail(self, reason):
        self.stable["touched"] = True   # rolled back by the trap
        raise Trap(reason)

    @query
    def init_arg(self):
        return self.stable.get("init_arg")

    @query
    def touched(self):
        return self.stable.get("touched", False)

    @query
    def refuse(self):
        raise Trap("no")
