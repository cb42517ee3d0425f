"""Canister classes exercising one SDK rule each (used by the execution tests)."""

from __future__ import annotations

from replica.sdk import CallError, Canister, Trap, callback, query, update

from .harness import REMOTE


class Probe(Canister):
    VERSION = 1

    # -- answers ----------------------------------------------------------------------------

    @update
    def echo(self, arg):
        return arg

    @update
    def no_arg(self):
        return "no arg"

    @update
    def explicit_reply(self, arg):
        self.reply(("explicit", arg))
        return "ignored"

    @update
    def explicit_reject(self, arg):
        self.stable["rejected_but_kept"] = True
        self.reject(f"no thanks: {arg}")

    @update
    def answer_twice(self):
        self.stable["x"] = "written"
        self.reply(1)
        self.reply(2)

    @update
    def write_then_trap(self, arg):
        self.stable["x"] = arg
        self.certified_data = b"trapped"
        self.call(REMOTE, "m", on_reply=self.relay_reply, on_reject=self.relay_reject)
        raise ValueError("boom")

    @update
    def raise_trap(self):
        raise Trap("explicit trap")

    @update
    def unencodable(self):
        self.stable["x"] = "written"
        return 1.5

    @update
    def huge_int_reply(self):
        return 2**64

    @update
    def huge_int_stable(self):
        self.stable["x"] = -(2**63) - 1

    @update
    def huge_int_call_context(self):
        self.call(REMOTE, "m", on_reply=self.relay_reply, on_reject=self.relay_reject, context=2**64)

    @update
    def big_reply(self, size):
        return b"x" * size

    @update
    def set_certified(self, data):
        self.certified_data = data

    # -- calls ------------------------------------------------------------------------------

    @update
    def relay(self, arg):
        """Call ``arg["target"].m(arg["payload"])``; the answer comes from a callback."""
        self.stable["relay_started"] = True
        self.call(arg["target"], "m", arg.get("payload"), on_reply=self.relay_reply,
                  on_reject=self.relay_reject, context=("ctx", arg.get("payload")))
        return "ignored: calls were made"

    @update
    def relay_and_reply(self, target):
        self.call(target, "m", on_reply=self.relay_reply, on_reject=self.relay_reject)
        self.reply("early")

    @update
    def fan_out(self, arg):
        """``arg["count"]`` calls to ``arg["target"]``, resumed by the callback named ``arg["cb"]``;
        returns how many calls the queues accepted (CallError caught)."""
        made = 0
        for i in range(arg["count"]):
            try:
                self.call(arg["target"], "m", i, on_reply=arg["cb"], on_reject=self.relay_reject, context=i)
            except CallError as exc:
                self.stable["call_error"] = str(exc)
                break
            made += 1
        self.stable["made"] = made
        if arg.get("reply"):
            self.reply(made)

    @update
    def call_uncaught(self, arg):
        self.call(arg["target"], "m", arg.get("payload"), on_reply=self.relay_reply, on_reject=self.relay_reject)

    @update
    def call_with_closure(self, target):
        self.call(target, "m", on_reply=lambda value, context: None, on_reject=self.relay_reject)

    @update
    def call_with_bad_context(self, target):
        self.call(target, "m", on_reply=self.relay_reply, on_reject=self.relay_reject, context={"a": 1})

    @callback
    def relay_reply(self, value, context):
        self.stable["relayed"] = value
        self.reply(("relayed", value, context))

    @callback
    def relay_reject(self, reject, context):
        code, message = reject
        self.stable["relay_rejected"] = (code, message)
        self.reject(f"relay rejected ({code}): {message}")

    @callback
    def forget(self, value, context):
        self.stable[f"forgot/{context}"] = value

    @callback
    def count_replies(self, value, context):
        self.stable["replies"] = self.stable.get("replies", 0) + 1

    @callback
    def trap_in_callback(self, value, context):
        self.stable["callback_wrote"] = True
        self.call(REMOTE, "m", on_reply=self.relay_reply, on_reject=self.relay_reject)
        raise Trap("callback failed")

    @callback
    def reply_again(self, value, context):
        self.reply("second")

    @callback
    def chain(self, value, context):
        """Make one more call while ``context`` > 0, then reply."""
        if context > 0:
            self.call(REMOTE, "m", on_reply=self.chain, on_reject=self.relay_reject, context=context - 1)
        else:
            self.reply(("chain done", value))

    @update
    def start_chain(self, depth):
        self.call(REMOTE, "m", on_reply=self.chain, on_reject=self.relay_reject, context=depth)

    # -- queries ----------------------------------------------------------------------------

    @query
    def peek(self, key):
        return self.stable.get(key)

    @query
    def sneaky_write(self):
        self.stable["x"] = "written by a query"
        self.certified_data = b"query"
        return self.stable["x"]

    @query
    def query_call(self):
        try:
            self.call(REMOTE, "m", on_reply=self.relay_reply, on_reject=self.relay_reject)
        except CallError as exc:
            return f"refused: {exc}"
        return "called"

    @query
    def who(self):
        return (self.id, self.caller, self.time)

    @update
    def whoami(self):
        return (self.id, self.caller, self.time)


class Noop(Canister):
    """Replies to everything; counts nothing (the benchmark canister's shape)."""

    @update
    def m(self, arg):
        return arg


class Recorder(Canister):
    """Appends every argument it is called with to ``log`` (shows execution order)."""

    @update
    def m(self, arg):
        self.stable["log"] = self.stable.get("log", ()) + (arg,)
        return len(self.stable["log"])
