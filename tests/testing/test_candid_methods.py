"""Methods that declare Candid types, called through the deterministic ``Testnet`` with
arguments built by ``replica.ic.candid`` (docs/architecture.md, *Candid methods*)."""

from __future__ import annotations

import pytest

from examples.guestbook import Guestbook
from replica.execution.canister import Canister, update, query, callback
from replica.execution.candid_methods import INTERFACE_METHOD
from replica.execution.errors import CanisterDefinitionError
from replica.ic import candid
from replica.testing import CallRejected, RawPayload, Testnet

from .apps import Greeter
from .candid_apps import Hoarder, Relay

NOTHING = RawPayload(candid.types("()").encode([]))


def _sig(cls: type, method: str) -> candid.Signature:
    return cls.__canister_methods__[method].candid


def _call(net: Testnet, canister: int, cls: type, method: str, *args, query_call: bool = False):
    sig = _sig(cls, method)
    payload = RawPayload(sig.arguments.encode(list(args)))
    reply = (net.query_call if query_call else net.update_call)(canister, method, payload)
    assert type(reply) is RawPayload
    return sig.results.decode(reply.data)


def _guestbook_session(net: Testnet) -> list:
    book = net.install(Guestbook)
    answers = [_call(net, book, Guestbook, "sign", "ann", "hello"), _call(net, book, Guestbook, "sign", "bo", "hi")]
    answers.append(_call(net, book, Guestbook, "recent", 5, query_call=True))
    answers.append(_call(net, book, Guestbook, "entry", 7, query_call=True))
    answers.append(_call(net, book, Guestbook, "stats", query_call=True))
    return answers


def test_a_sandboxed_canister_takes_candid_arguments_and_replies_in_candid():
    with Testnet(subnets=1, seed=1) as net:
        signed, second, recent, missing, stats = _guestbook_session(net)
        assert signed == [{"id": 0, "total": 1}] and second == [{"id": 1, "total": 2}]
        assert [(e["id"], e["name"], e["message"]) for e in recent[0]] == [(1, "bo", "hi"), (0, "ann", "hello")]
        assert missing == [None] and stats == [{"signed": 2}]


def test_a_wrong_argument_is_a_reject_naming_why_and_changes_nothing():
    with Testnet(subnets=1, seed=1) as net:
        book = net.install(Guestbook)
        for arg, why in [(RawPayload(candid.types("(nat, text)").encode([5, "x"])), "does not coerce to text"),
                         (RawPayload(b"DIDL\x00\x01\x71\x05abc"), "text of 5 bytes"),
                         ("a msgpack value", "does not begin with DIDL"),
                         (RawPayload(candid.types("(text)").encode(["only a name"])), "argument 1 (text) is missing")]:
            with pytest.raises(CallRejected) as refused:
                net.update_call(book, "sign", arg)
            assert refused.value.code == "CANISTER_ERROR" and why in refused.value.message
            assert "invalid argument for 'sign'" in refused.value.message
        assert _call(net, book, Guestbook, "stats", query_call=True) == [{"fresh": None}]


def test_wider_arguments_decode_by_the_subtyping_rules():
    with Testnet(subnets=1, seed=1) as net:
        book = net.install(Guestbook)
        extra = RawPayload(candid.types("(text, text, vec nat)").encode(["ann", "hello", [1, 2, 3]]))
        reply = net.update_call(book, "sign", extra)   # an extra argument is ignored
        assert _sig(Guestbook, "sign").results.decode(reply.data) == [{"id": 0, "total": 1}]
        assert _call(net, book, Guestbook, "recent", None, query_call=True)[0][0]["name"] == "ann"


def test_the_service_description_is_a_query():
    with Testnet(subnets=1, seed=1) as net:
        book = net.install(Guestbook)
        (text,) = candid.types("(text)").decode(net.query_call(book, INTERFACE_METHOD, NOTHING).data)
        assert text == Guestbook.__canister_candid_interface__
        assert "sign : (name : text, message : text) -> (record { id : nat; total : nat });" in text
        assert "type Entry = record { id : nat; name : text; message : text; time : nat64 };" in text
        greeter = net.install(Greeter)   # no Candid methods: no description
        with pytest.raises(CallRejected, match="no query method"):
            net.query_call(greeter, INTERFACE_METHOD, NOTHING)


def test_calls_between_canisters_stay_msgpack_and_a_callback_replies_in_candid():
    with Testnet(subnets=2, seed=2) as net:
        relay = net.install(Relay, subnet=net.subnets[0])
        greeter = net.install(Greeter, subnet=net.subnets[1])
        assert _call(net, relay, Relay, "relay", greeter, "cat") == ["relayed: hello, cat"]
        assert _call(net, relay, Relay, "pair", 21) == [42, "doubled"]
        assert _call(net, relay, Relay, "nothing", query_call=True) == []
        assert net.update_call(relay, "plain", 3) == {"msgpack": 3}          # undeclared: msgpack
        with pytest.raises(CallRejected, match="reply value cannot be encoded.*does not coerce|not a value of type text"):
            _call(net, relay, Relay, "wrong_result", 1)


def test_candid_calls_give_the_same_hashes_under_the_same_seed():
    def run() -> tuple[list, dict]:
        with Testnet(subnets=1, seed=5) as net:
            answers = _guestbook_session(net)
            return answers, {s: net.state_hash(s) for s in net.subnets}
    assert run() == run()


def test_declarations_are_checked_when_the_class_is_made():
    with pytest.raises(CanisterDefinitionError, match="takes 1 argument.*declares 2"):
        class Arity(Canister):
            @update(candid="(nat, nat) -> ()")
            def add(self, a):
                return None
    with pytest.raises(CanisterDefinitionError, match="unknown type Missing"):
        class Unknown(Canister):
            @query(candid="(Missing) -> ()")
            def peek(self, a):
                return None
    with pytest.raises(CanisterDefinitionError, match="CANDID_TYPES"):
        class BadTypes(Canister):
            CANDID_TYPES = "type = nat;"
    with pytest.raises(CanisterDefinitionError, match="callback"):
        callback(candid="(nat) -> ()")
    with pytest.raises(CanisterDefinitionError, match="func references are not supported"):
        class Reference(Canister):
            @update(candid="(func () -> ()) -> ()")
            def take(self, f):
                return None


@pytest.mark.parametrize("method", ["cyclic", "shared"])
def test_a_reply_no_encoder_can_finish_is_a_reject_and_the_canister_answers_on(method):
    """Encoding a canister's reply is bounded (depth and work): a cyclic value or one shared
    2**40 times over traps the message with the same reject on every run, and nothing stops."""
    messages = set()
    for _ in range(2):
        with Testnet(subnets=1, seed=1) as net:
            hoarder = net.install(Hoarder)
            with pytest.raises(CallRejected) as trapped:
                _call(net, hoarder, Hoarder, method)
            assert trapped.value.code == "CANISTER_ERROR" and "Candid result" in trapped.value.message
            messages.add(trapped.value.message)
            assert _call(net, hoarder, Hoarder, "small", query_call=True) == [[[], [[]]]]
    assert len(messages) == 1, messages
