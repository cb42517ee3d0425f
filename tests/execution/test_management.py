"""Install, stop and start."""

from __future__ import annotations

import pytest

from replica.ic.textual_ids import canister_text
from replica.execution import ExecutionEnvironment, install_canister, start_canister, stop_canister
from replica.execution.errors import InstallError, ManagementError
from replica.execution.registry import module_hash, module_name_of
from replica.sdk import Canister, Trap, update
from state_manager.canister_state import CanisterStatus
from state_manager.ingress_history import IngressState
from state_manager.messages import Reject, RejectCode

from .apps import Probe
from .harness import REMOTE, answer, deliver_request, new_state, reply_value, run, status, submit, take_output

ENV = ExecutionEnvironment([Probe])


class WithInit(Canister):
    def init(self, arg):
        self.stable["arg"] = tuple(arg.items()) if isinstance(arg, dict) else arg  # maps arrive key-sorted
        self.stable["installer"] = self.caller
        self.certified_data = b"init"
        if arg == "trap":
            raise Trap("init refused")
        if arg == "reply":
            self.reply(1)

    @update
    def get(self):
        return self.stable["arg"]


def test_install_records_the_module_and_runs_init_with_the_canonical_argument():
    s = new_state()
    canister = install_canister(s, 7, WithInit, {"b": [1, 2], "a": None}, controller=b"admin")
    assert s.canisters[7] is canister
    assert (canister.module_name, canister.module_hash) == (module_name_of(WithInit), module_hash(WithInit))
    assert canister.stable["arg"] == (("a", None), ("b", (1, 2)))
    assert canister.controller == b"admin" and canister.stable["installer"] == b"admin"
    assert canister.certified_data == b"init"


def test_install_fails_cleanly():
    s = new_state()
    for args, text in [
        ((7, WithInit, "trap"), f"Canister {canister_text(7)} trapped: init refused"),
        ((7, WithInit, "reply"), "init cannot answer"),
        ((7, WithInit, 1.5), "cannot be encoded"),
        ((150, WithInit), "outside the ranges"),
        ((-1, WithInit), "canister id"),
    ]:
        with pytest.raises(InstallError, match=text):
            install_canister(s, *args)
    assert not s.canisters
    install_canister(s, 7, WithInit)
    with pytest.raises(InstallError, match="already exists"):
        install_canister(s, 7, WithInit)
    with pytest.raises(TypeError):
        install_canister(s, 8, object)


def test_stop_without_open_calls_stops_at_once_and_start_resumes():
    s = new_state()
    install_canister(s, 1, Probe)
    assert stop_canister(s, 1) is CanisterStatus.STOPPED
    assert ENV.run_query(s, 1, "peek", "x") == Reject(RejectCode.CANISTER_ERROR, f"Canister {canister_text(1)} is stopped")
    assert start_canister(s, 1) is CanisterStatus.RUNNING
    mid = submit(s, 1, "echo", 1)
    run(ENV, s)
    assert reply_value(s, mid) == 1
    with pytest.raises(ManagementError):
        stop_canister(s, 2)


def test_stopping_canister_finishes_open_calls_rejects_new_ones_then_stops():
    s = new_state()
    install_canister(s, 1, Probe)
    open_call = submit(s, 1, "relay", {"target": REMOTE})
    run(ENV, s)
    (request,) = take_output(s, 1, REMOTE)
    queued = submit(s, 1, "echo", "late", n=1)  # inducted before the stop
    deliver_request(s, REMOTE, 1, "echo", "late", callback=3)

    assert stop_canister(s, 1) is CanisterStatus.STOPPING
    run(ENV, s)
    assert status(s, queued).state is IngressState.REJECTED
    assert status(s, queued).reject_message == f"Canister {canister_text(1)} is stopping"
    (response,) = take_output(s, 1, REMOTE)
    assert response.response_payload == Reject(RejectCode.CANISTER_ERROR, f"Canister {canister_text(1)} is stopping")
    assert s.canisters[1].status is CanisterStatus.STOPPING

    answer(s, request, "done")
    run(ENV, s)
    assert reply_value(s, open_call)[1] == "done"  # callbacks still run while stopping
    assert s.canisters[1].status is CanisterStatus.STOPPED and not s.canisters[1].call_contexts
