"""Canisters that log and draw randomness (installed from this module's source)."""

from __future__ import annotations

from replica.sdk import MANAGEMENT_CANISTER_ID, Canister, Trap, callback, query, update


class Diary(Canister):
    """Logs what it is told; ``fail`` logs, then traps; ``draw`` asks ``raw_rand`` ``n`` times
    and keeps every answer in ``self.stable["draws"]`` (and logs it)."""

    VERSION = 1

    def init(self, arg):
        self.log(f"init {arg}")

    def post_upgrade(self, arg):
        self.log(f"upgraded {arg}")

    @update
    def write(self, text):
        self.log(text)
        return len(text)

    @update
    def write_many(self, texts):
        for text in texts:
            self.log(text)
        return len(texts)

    @update
    def fail(self, text):
        self.log(text)
        self.stable["failed"] = True
        raise Trap(f"refused {text}")

    @update
    def draw(self, n):
        for _ in range(n):
            self.call(MANAGEMENT_CANISTER_ID, "raw_rand", None, on_reply=self.drawn, on_reject=self.not_drawn)

    @update
    def ask_management(self, method):
        self.call(MANAGEMENT_CANISTER_ID, method, None, on_reply=self.drawn, on_reject=self.not_drawn)

    @callback
    def drawn(self, value, context):
        self.stable["draws"] = self.stable.get("draws", ()) + (value,)
        self.log(f"drew {value.hex()}")
        if len(self.stable["draws"]) == 1:
            self.reply(value)

    @callback
    def not_drawn(self, reject, context):
        code, message = reject
        self.reject(f"{code}: {message}")

    @query
    def draws(self):
        return self.stable.get("draws", ())


class Diary2(Diary):
    VERSION = 2
