"""Bounded-wait calls through the SDK on one subnet (issue 17): ``timeout_s``, the callee's
``self.deadline``, and the caller's callback resolved exactly once — by a reply, or by
``SYS_UNKNOWN`` when the deadline passes first."""

from __future__ import annotations

from replica.sdk import ApiUsageError, Canister, RejectCode, callback, update
from state_manager.deadlines import SECOND_NS
from state_manager.encoding import decode

from .harness import SingleSubnet


class Caller(Canister):
    VERSION = 1

    @update
    def go(self, arg):
        target, method, timeout = arg
        self.call(target, method, None, on_reply=self.done, on_reject=self.failed, timeout_s=timeout)
        self.stable["sent_at"] = self.time

    @update
    def bad_timeout(self, timeout):
        try:
            self.call(self.id, "slow", None, on_reply=self.done, on_reject=self.failed, timeout_s=timeout)
        except ApiUsageError as exc:
            return str(exc)
        self.reply("accepted")

    @callback
    def done(self, value, context):
        self.stable["answers"] = self.stable.get("answers", ()) + (("reply", value, self.deadline, self.time),)

    @callback
    def failed(self, reject, context):
        self.stable["answers"] = self.stable.get("answers", ()) + (("reject", reject[0], self.deadline, self.time),)


class Callee(Canister):
    VERSION = 1

    @update
    def deadline_of_call(self):
        return self.deadline

    @update
    def slow(self):
        """Never answers within the caller's deadline: it calls a long chain of itself."""
        self.call(self.id, "slow", None, on_reply=self.ignore, on_reject=self.ignore)

    @callback
    def ignore(self, value, context):
        pass


def subnet():
    net = SingleSubnet([Caller, Callee])
    from replica.execution import install_canister
    install_canister(net.state, 1, Caller)
    install_canister(net.state, 2, Callee)
    return net


def answers(net):
    return net.state.canisters[1].stable.get("answers", ())


def test_callee_sees_the_deadline_and_the_caller_gets_the_reply():
    net = subnet()
    net.submit(1, "go", (2, "deadline_of_call", 7))
    for _ in range(4):
        net.round()
    sent_at = net.state.canisters[1].stable["sent_at"]
    deadline = (sent_at // SECOND_NS + 7) * SECOND_NS
    assert answers(net) == (("reply", deadline, deadline, answers(net)[0][3]),)


def test_guaranteed_calls_have_deadline_zero():
    net = subnet()
    net.submit(1, "go", (2, "deadline_of_call", None))
    for _ in range(4):
        net.round()
    assert answers(net)[0][:3] == ("reply", 0, 0)


def test_an_unanswered_call_resolves_with_sys_unknown_by_its_deadline_plus_one_round():
    net = subnet()
    net.submit(1, "go", (2, "slow", 3))
    net.round()
    deadline = next(iter(net.state.canisters[1].callbacks.values())).deadline * SECOND_NS
    while net.state.metadata.batch_time < deadline + SECOND_NS:  # the first round in which it is expired
        net.round()
    assert answers(net) == (("reject", int(RejectCode.SYS_UNKNOWN), deadline, answers(net)[0][3]),)
    assert answers(net)[0][3] <= deadline + SECOND_NS  # invoked by deadline + 1 round (1 s rounds)
    for _ in range(5):
        net.round()
    assert len(answers(net)) == 1  # the reply that never comes cannot add a second answer
    assert not net.state.canisters[1].callbacks


def test_timeouts_must_be_whole_seconds_of_at_least_one():
    net = subnet()
    for timeout in (0, -5, "3", True, None, 1):
        mid = net.submit(1, "bad_timeout", timeout)
        net.round()
        reply = decode(net.state.ingress_history.get(mid).reply)
        if timeout in (None, 1) and timeout is not True:
            assert reply == "accepted"
        else:
            assert "whole number of seconds" in reply, timeout
