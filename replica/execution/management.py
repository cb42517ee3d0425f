"""Managing canisters on a subnet's state: install, stop and start.

* ``install_canister`` adds a canister running ``cls``: it records the module name and hash,
  then runs ``cls.init(self, arg)`` if the class defines it (``init`` may write stable state
  and certified data, but neither answer nor call). If ``init`` traps nothing is installed.
* ``stop_canister``: a RUNNING canister becomes STOPPING — it answers its open calls (its
  callbacks still run) but new calls are rejected — and STOPPED once no call context is
  open (at once if none is). ``start_canister`` makes it RUNNING again.
"""

from __future__ import annotations

from typing import Any

from state_manager.canister_state import CanisterState, CanisterStatus
from state_manager.replicated_state import ReplicatedState

from .codec import EncodingError, decode_payload, encode_value
from .errors import InstallError, ManagementError
from .registry import check_canister_class, module_hash, module_name_of
from .runtime import finish_method, run_method
from .system_api import SystemApi

__all__ = ["install_canister", "stop_canister", "start_canister"]

MAX_CANISTER_ID = 2**64 - 1


def install_canister(
    state: ReplicatedState, canister_id: int, cls: type, init_arg: Any = None, *, controller: bytes = b""
) -> CanisterState:
    """Install ``cls`` as canister ``canister_id`` of this subnet and run its ``init``."""
    check_canister_class(cls)
    if type(canister_id) is not int or not 0 <= canister_id <= MAX_CANISTER_ID:
        raise InstallError(f"a canister id is an int in [0, 2**64), not {canister_id!r}")
    if canister_id in state.canisters:
        raise InstallError(f"canister {canister_id} already exists")
    if state.routing_table.lookup(canister_id) != state.own_subnet_id:
        raise InstallError(f"canister {canister_id} is outside the ranges of subnet {state.own_subnet_id}")
    if type(controller) is not bytes:
        raise InstallError("a controller is a user id (bytes)")
    canister = CanisterState(canister_id, module_name_of(cls), module_hash(cls), controller=controller)
    init = cls.__canister_init__
    if init is not None:
        try:
            arg = decode_payload(encode_value(init_arg))
        except EncodingError as exc:
            raise InstallError(f"init argument cannot be encoded: {exc}") from None
        api = SystemApi(canister, controller, state.metadata.batch_time, None,
                        answer_refusal="init cannot answer", call_refusal="init cannot make calls")
        ok, result = run_method(api, cls, init, (arg,) if init.takes_arg else ())
        trap = finish_method(api, ok, result, None, return_is_reply=False)
        if trap is not None:
            raise InstallError(trap.message)
    state.add_canister(canister)
    return canister


def _canister(state: ReplicatedState, canister_id: int) -> CanisterState:
    canister = state.canisters.get(canister_id)
    if canister is None:
        raise ManagementError(f"canister {canister_id} not found")
    return canister


def stop_canister(state: ReplicatedState, canister_id: int) -> CanisterStatus:
    """RUNNING → STOPPING (→ STOPPED when no call context is open); returns the new status."""
    canister = _canister(state, canister_id)
    if canister.status is CanisterStatus.RUNNING:
        canister.status = CanisterStatus.STOPPING
    if canister.status is CanisterStatus.STOPPING and not canister.call_contexts:
        canister.status = CanisterStatus.STOPPED
    return canister.status


def start_canister(state: ReplicatedState, canister_id: int) -> CanisterStatus:
    """Any status → RUNNING; returns it."""
    canister = _canister(state, canister_id)
    canister.status = CanisterStatus.RUNNING
    return canister.status
