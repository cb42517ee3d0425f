"""Managing canisters: the management canister, and installs applied to a state directly.

**The management canister** has the reserved id ``MANAGEMENT_CANISTER_ID = 2**64 - 1``
(``state_manager.messages``; the IC's ``aaaaa-aa``). It is no canister of any subnet's
routing table: *every* subnet accepts ingress for it, and the subnet a user sends it to
executes it (the IC's effective canister id, chosen by the endpoint). Its ingress waits in
``ReplicatedState.management_queue`` and is executed at the start of a round, before any
canister (``execute_management_ingress``); it answers in the ingress history at once:

* ``create_canister()`` → ``{"canister_id": id}``: an empty canister (no code) with the
  smallest id of this subnet's canister ranges that no canister has, never the reserved id;
  the caller becomes its controller.
* ``install_code({canister_id, mode, source, class_name, arg})`` → ``{"canister_id": id,
  "module_hash": SHA-256(source)}``. Controller only. ``mode``:

  - ``"install"``: the canister has no code; load ``class_name`` from ``source``, run its
    ``init(arg)`` if it has one;
  - ``"reinstall"``: the canister has code; its stable state and certified data are wiped
    and its log purged (its indices go on), then as ``install``;
  - ``"upgrade"``: the canister has code; ``self.stable``, certified data and the log are
    kept, and the new class's ``post_upgrade(arg)`` runs if it has one.

  The code is replaced only if everything succeeds: a module that does not load (see
  ``source_modules``), or an ``init``/``post_upgrade`` that traps, rejects the call with
  ``CANISTER_ERROR`` and the reason, and leaves the canister as it was. Open call contexts
  and callbacks are kept in every mode: callbacks resume by name in the new code.

* ``stop_canister({canister_id})``, ``start_canister({canister_id})`` → ``{"status":
  "running" | "stopping" | "stopped"}``; ``canister_status({canister_id})`` → ``{"status",
  "module_hash", "controller", "instructions_executed"}``. Controller only. The IC reports
  cycles and ``query_stats``; with no cycles here, the honest analogue is the total count of
  instructions executed for the canister on this subnet (updates, callbacks, installs; not
  queries, which are not replicated). It is part of the replicated state
  (``metadata.counters``, entered at the first metered instruction), as the answer of a
  replicated call must be; a migrated canister starts again from 0 on its new subnet.
* ``fetch_canister_logs({canister_id})`` → ``{"canister_log_records": [{"idx",
  "timestamp_nanos", "content"}, ...]}``, oldest first (``state_manager.canister_log``).
  Controller only (the IC's default log visibility). An update call here, so its answer is
  certified (the IC answers it only as a query).
* ``raw_rand`` is for canisters (``management_requests``); from a user it is rejected.

Moving a canister to another subnet (the steps of a migration; ``replica.testnet.migration``
runs them with the registry changes between):

* ``export_canister({canister_id})`` → ``{"snapshot": bytes, "snapshot_hash": SHA-256}``: the
  whole canister (``state_manager.canister_snapshot``). Controller only; the canister must be
  STOPPED with empty queues — nothing in flight that a snapshot would carry away — else the
  call is rejected with ``SYS_TRANSIENT`` (try again). The canister stays here, stopped.
* ``import_canister({snapshot, snapshot_hash})`` → ``{"canister_id"}``: the bytes must hash to
  ``snapshot_hash``, the caller must be the snapshot's controller, the routing table of this
  batch must map the canister to this subnet, and no canister with its id may exist here.
  It is installed exactly as exported (stopped): id, module, stable state, certified data, log.
* ``delete_canister({canister_id})``: controller only, STOPPED only; the canister is removed.

Rejects: ``CANISTER_ERROR`` for bad arguments, a caller that is not the controller, a wrong
mode, failed loads and snapshots that do not verify; ``DESTINATION_INVALID`` for a canister
not on this subnet; ``SYS_TRANSIENT`` for a canister not yet ready to move.

**Direct installs** (genesis states, tests): ``install_canister(state, id, cls, arg)``
adds a canister running a class known to the process (a "builtin" module: the state
records its ``module_name`` and ``registry.module_hash``), running ``cls.init(self, arg)``
if the class defines it (``init`` may write stable state and certified data, but neither
answer nor call). If ``init`` traps nothing is installed.

``stop_canister``: a RUNNING canister becomes STOPPING — it answers its open calls (its
callbacks still run) but new calls are rejected — and STOPPED once no call context is open
(at once if none is). ``start_canister`` makes it RUNNING again.
"""

from __future__ import annotations

from typing import Any, Mapping

from message_routing.limits import DEFAULT, Limits
from replica.ic.textual_ids import canister_text
from state_manager.canister_log import CanisterLog
from state_manager.canister_snapshot import CorruptSnapshot, decode_canister_snapshot, encode_canister_snapshot, snapshot_hash
from state_manager.canister_state import CanisterState, CanisterStatus
from state_manager.messages import MANAGEMENT_CANISTER_ID, Ingress, Reject, RejectCode, Reply, truncate_reject_message
from state_manager.replicated_state import ReplicatedState

from .call_contexts import answer_ingress
from .canister import MethodSpec
from .codec import EncodingError, decode_payload, encode_value
from .errors import InstallError, ManagementError, ModuleLoadError
from .message_execution import MessageUsage, instructions_counter
from .registry import check_canister_class, module_hash, module_name_of
from .runtime import finish_method, run_method
from .sandbox import InstructionLimitExceeded
from .source_modules import SourceModules, source_module_hash
from .system_api import SystemApi

__all__ = [
    "MANAGEMENT_CANISTER_ID", "INSTALL_MODES", "install_canister", "stop_canister", "start_canister",
    "create_canister", "install_code", "next_free_canister_id", "execute_management_ingress",
]

MAX_CANISTER_ID = 2**64 - 1
INSTALL_MODES = ("install", "reinstall", "upgrade")
_INSTALL_CODE_FIELDS = ("arg", "canister_id", "class_name", "mode", "source")


class _Rejected(Exception):
    """A management call answered with ``reject`` (internal to this module)."""

    def __init__(self, code: RejectCode, message: str) -> None:
        super().__init__(message)
        self.reject = Reject(code, truncate_reject_message(message))


class InstallUsage(MessageUsage):
    """What an install used (a ``MessageUsage`` of kind ``"install"``, for the same observers):
    the module body's instructions (as recorded when it was loaded, so the same on every
    replica whether or not the module was cached) plus the lifecycle method's, and the
    canister installed (None when the call failed before it named an existing canister)."""

    __slots__ = ("canister_id",)

    def __init__(self) -> None:
        super().__init__("install")
        self.canister_id: int | None = None


def _run_lifecycle(state: ReplicatedState, canister: CanisterState, cls: type, spec: MethodSpec | None,
                   arg: Any, caller: bytes | int, limits: Limits = DEFAULT,
                   usage: InstallUsage | None = None) -> str | None:
    """Run ``init``/``post_upgrade`` (if the class has it) with ``arg``; the trap message, or None.
    Its stable writes and certified data are kept only if it does not trap. A sandboxed
    class may use what the install limit leaves after the module body (``usage``)."""
    if spec is None:
        return None
    try:
        value = decode_payload(encode_value(arg))
    except EncodingError as exc:
        return f"{spec.name} argument cannot be encoded: {exc}"
    api = SystemApi(canister, caller, state.metadata.batch_time, limits,
                    answer_refusal=f"{spec.name} cannot answer", call_refusal=f"{spec.name} cannot make calls")
    spent = 0 if usage is None else usage.instructions
    log = canister.log
    ok, result = run_method(api, cls, spec, (value,) if spec.takes_arg else (), limits,
                            limits.max_instructions_per_install - spent)
    trap = finish_method(api, ok, result, None, return_is_reply=False)
    if usage is not None:
        usage.instructions += api.instructions
        usage.limit_exceeded = api.limit_exceeded
    if trap is None:
        return None
    canister.log = log  # a failed install leaves the canister as it was: no trap record either
    return trap.message


def install_canister(
    state: ReplicatedState, canister_id: int, cls: type, init_arg: Any = None, *, controller: bytes = b""
) -> CanisterState:
    """Install ``cls`` as canister ``canister_id`` of this subnet and run its ``init``."""
    check_canister_class(cls)
    if type(canister_id) is not int or not 0 <= canister_id <= MAX_CANISTER_ID:
        raise InstallError(f"a canister id is an int in [0, 2**64), not {canister_id!r}")
    if canister_id == MANAGEMENT_CANISTER_ID:
        raise InstallError(f"canister id {canister_text(canister_id)} is reserved for the management canister")
    if canister_id in state.canisters:
        raise InstallError(f"canister {canister_text(canister_id)} already exists")
    if state.routing_table.lookup(canister_id) != state.own_subnet_id:
        raise InstallError(f"canister {canister_text(canister_id)} is outside the ranges of subnet "
                           f"{state.own_subnet_id}")
    if type(controller) is not bytes:
        raise InstallError("a controller is a user id (bytes)")
    canister = CanisterState(canister_id, module_name_of(cls), module_hash(cls), controller=controller)
    trap = _run_lifecycle(state, canister, cls, cls.__canister_init__, init_arg, controller)
    if trap is not None:
        raise InstallError(trap)
    state.add_canister(canister)
    return canister


# -- the management canister ------------------------------------------------------------------

def next_free_canister_id(state: ReplicatedState) -> int | None:
    """The smallest id in this subnet's canister ranges (latest topology) that no canister
    of the state has, that is on no migration trace and that is not the management
    canister's; None if there is none."""
    canisters = state.canisters
    migrations = state.metadata.network_topology.canister_migrations
    for canister_range in state.routing_table.ranges_of(state.own_subnet_id):
        candidate = canister_range.start
        # Ids in use inside the range, in order: the first gap is the answer.
        for used in canisters.irange(canister_range.start, canister_range.end):
            if used != candidate:
                break
            candidate += 1
        # An id on a migration trace belongs to a canister on its way here: never hand it out.
        while candidate <= canister_range.end and (candidate in canisters or migrations.trace(candidate)):
            candidate += 1
        if candidate == MANAGEMENT_CANISTER_ID:
            continue  # the range ends at the reserved id and is otherwise full
        if candidate <= canister_range.end:
            return candidate
    return None


def create_canister(state: ReplicatedState, controller: bytes) -> CanisterState:
    """An empty canister controlled by ``controller`` (``ManagementError`` if no id is free)."""
    canister_id = next_free_canister_id(state)
    if canister_id is None:
        raise ManagementError(f"subnet {state.own_subnet_id} has no free canister id")
    canister = CanisterState(canister_id, "", b"", controller=controller)
    state.add_canister(canister)
    return canister


def _set_module(canister: CanisterState, class_name: str, digest: bytes, source: str) -> None:
    canister.module_name = class_name
    canister.module_hash = digest
    canister.module_source = source
    canister.dirty = True


def _wipe(canister: CanisterState) -> tuple[list[tuple[str, Any]], bytes, CanisterLog]:
    """Empty the stable state and certified data (through the tracked map) and purge the
    log's records; what they held."""
    stable = canister.stable
    saved = list(stable.items())
    for key, _ in saved:
        del stable[key]
    certified = canister.certified_data
    canister.certified_data = b""
    log = canister.log
    canister.log = log.purged()
    return saved, certified, log


def _restore(canister: CanisterState, saved: list[tuple[str, Any]], certified: bytes, log: CanisterLog) -> None:
    stable = canister.stable
    for key in list(stable.keys()):
        del stable[key]
    for key, value in saved:
        stable[key] = value
    canister.certified_data = certified
    canister.log = log


def install_code(
    state: ReplicatedState, modules: SourceModules, caller: bytes, canister_id: int, mode: str, source: str,
    class_name: str, arg: Any = None, *, limits: Limits = DEFAULT, usage: InstallUsage | None = None,
) -> CanisterState:
    """``install_code`` (module docstring) by ``caller``; raises ``InstallError`` (a
    ``ModuleLoadError`` for a module that does not load) and leaves the state unchanged.
    The module body and ``init``/``post_upgrade`` together may use
    ``limits.max_instructions_per_install`` instructions; ``usage`` receives what they used."""
    usage = InstallUsage() if usage is None else usage
    canister = state.canisters.get(canister_id)
    if canister is None:
        raise ManagementError(f"canister {canister_text(canister_id)} not found on subnet {state.own_subnet_id}")
    usage.canister_id = canister_id
    if mode not in INSTALL_MODES:
        raise InstallError(f"mode is one of {', '.join(INSTALL_MODES)}, not {mode!r}")
    if caller != canister.controller or not canister.controller:
        raise InstallError(f"only the controller of canister {canister_text(canister_id)} may install code on it")
    empty = not canister.module_hash
    if mode == "install" and not empty:
        raise InstallError(f"canister {canister_text(canister_id)} has code already: use mode reinstall or upgrade")
    if mode != "install" and empty:
        raise InstallError(f"canister {canister_text(canister_id)} has no code: use mode install")
    if type(source) is not str or type(class_name) is not str:
        raise InstallError("source and class_name are text")
    digest = source_module_hash(source)
    cls = modules.load(source, class_name, digest, limits)
    module_instructions = modules.module_instructions(digest)
    if module_instructions > limits.max_instructions_per_install:
        # Cached from a load under a larger limit: refuse it as a fresh load would.
        usage.limit_exceeded = True
        raise ModuleLoadError(f"the module {InstructionLimitExceeded.description} while it ran")
    usage.instructions += module_instructions
    if mode == "upgrade":
        trap = _run_lifecycle(state, canister, cls, cls.__canister_post_upgrade__, arg, caller, limits, usage)
        if trap is not None:
            raise InstallError(trap)  # its stable writes were rolled back
        _set_module(canister, class_name, digest, source)
        return canister
    saved, certified, log = _wipe(canister)
    trap = _run_lifecycle(state, canister, cls, cls.__canister_init__, arg, caller, limits, usage)
    if trap is not None:
        _restore(canister, saved, certified, log)
        raise InstallError(trap)
    _set_module(canister, class_name, digest, source)
    return canister


def _install_code_arguments(value: Any) -> tuple[int, str, str, str, Any]:
    if not isinstance(value, Mapping) or tuple(sorted(value)) != _INSTALL_CODE_FIELDS:
        raise _Rejected(RejectCode.CANISTER_ERROR,
                        "install_code takes {canister_id, mode, source, class_name, arg}")
    canister_id = value["canister_id"]
    if type(canister_id) is not int or not 0 <= canister_id <= MAX_CANISTER_ID:
        raise _Rejected(RejectCode.CANISTER_ERROR, f"install_code: canister_id is a u64, not {canister_id!r}")
    for field in ("mode", "source", "class_name"):
        if type(value[field]) is not str:
            raise _Rejected(RejectCode.CANISTER_ERROR, f"install_code: {field} is text")
    return canister_id, value["mode"], value["source"], value["class_name"], value["arg"]


def _management_answer(state: ReplicatedState, ingress: Ingress, modules: SourceModules, limits: Limits,
                       usage: InstallUsage) -> Reply:
    method = ingress.method_name
    try:
        arg = decode_payload(ingress.method_payload)
    except EncodingError as exc:
        raise _Rejected(RejectCode.CANISTER_ERROR, f"{method}: invalid argument: {exc}") from None
    if method == "create_canister":
        if arg not in (None, {}):
            raise _Rejected(RejectCode.CANISTER_ERROR, "create_canister takes no argument")
        try:
            canister = create_canister(state, ingress.source)
        except ManagementError as exc:
            raise _Rejected(RejectCode.CANISTER_ERROR, f"create_canister: {exc}") from None
        return Reply(encode_value({"canister_id": canister.canister_id}))
    if method == "install_code":
        canister_id, mode, source, class_name, install_arg = _install_code_arguments(arg)
        try:
            canister = install_code(state, modules, ingress.source, canister_id, mode, source, class_name, install_arg,
                                    limits=limits, usage=usage)
        except ManagementError as exc:
            raise _Rejected(RejectCode.DESTINATION_INVALID, f"install_code: {exc}") from None
        except ModuleLoadError as exc:
            raise _Rejected(RejectCode.CANISTER_ERROR,
                            f"install_code: canister {canister_text(canister_id)}: {exc}") from None
        except InstallError as exc:
            raise _Rejected(RejectCode.CANISTER_ERROR, f"install_code: {exc}") from None
        return Reply(encode_value({"canister_id": canister.canister_id, "module_hash": canister.module_hash}))
    if method in _CANISTER_METHODS:
        return Reply(encode_value(_CANISTER_METHODS[method](state, ingress.source, _canister_id_argument(method, arg))))
    if method == "import_canister":
        return Reply(encode_value(_import_canister(state, ingress.source, arg)))
    if method == "raw_rand":
        raise _Rejected(RejectCode.CANISTER_ERROR, "raw_rand can be called only by canisters")
    raise _Rejected(RejectCode.CANISTER_ERROR, f"the management canister has no method {method!r}")


# -- status, moving and deleting ------------------------------------------------------------------

_STATUS_NAMES = {CanisterStatus.RUNNING: "running", CanisterStatus.STOPPING: "stopping",
                 CanisterStatus.STOPPED: "stopped"}


def _canister_id_argument(method: str, arg: Any) -> int:
    if not isinstance(arg, Mapping) or tuple(arg) != ("canister_id",):
        raise _Rejected(RejectCode.CANISTER_ERROR, f"{method} takes {{canister_id}}")
    canister_id = arg["canister_id"]
    if type(canister_id) is not int or not 0 <= canister_id <= MAX_CANISTER_ID:
        raise _Rejected(RejectCode.CANISTER_ERROR, f"{method}: canister_id is a u64, not {canister_id!r}")
    return canister_id


def _controlled(state: ReplicatedState, caller: bytes, canister_id: int, method: str) -> CanisterState:
    canister = state.canisters.get(canister_id)
    if canister is None:
        raise _Rejected(RejectCode.DESTINATION_INVALID,
                        f"{method}: canister {canister_text(canister_id)} is not on this subnet")
    if caller != canister.controller:
        raise _Rejected(RejectCode.CANISTER_ERROR,
                        f"{method}: only the controller of canister {canister_text(canister_id)} may")
    return canister


def _status_answer(canister: CanisterState) -> dict:
    return {"status": _STATUS_NAMES[canister.status], "module_hash": canister.module_hash,
            "controller": canister.controller}


def _status(state: ReplicatedState, caller: bytes, canister_id: int) -> dict:
    """``_status_answer`` and ``instructions_executed``: the instructions executed for the
    canister on this subnet (``instructions_counter``; 0 for a builtin canister)."""
    canister = _controlled(state, caller, canister_id, "canister_status")
    return {**_status_answer(canister),
            "instructions_executed": state.metadata.counters.get(instructions_counter(canister_id), 0)}


def _stop(state: ReplicatedState, caller: bytes, canister_id: int) -> dict:
    stop_canister(state, _controlled(state, caller, canister_id, "stop_canister").canister_id)
    return _status_answer(state.canisters[canister_id])


def _start(state: ReplicatedState, caller: bytes, canister_id: int) -> dict:
    start_canister(state, _controlled(state, caller, canister_id, "start_canister").canister_id)
    return _status_answer(state.canisters[canister_id])




def _fetch_logs(state: ReplicatedState, caller: bytes, canister_id: int) -> dict:
    """The canister's log records, oldest first, as the IC's ``fetch_canister_logs`` answers
    them (its default visibility: the controller only)."""
    log = _controlled(state, caller, canister_id, "fetch_canister_logs").log
    return {"canister_log_records": [
        {"idx": r.index, "timestamp_nanos": r.timestamp_nanos, "content": r.content} for r in log.records]}


def _export(state: ReplicatedState, caller: bytes, canister_id: int) -> dict:
    canister = _controlled(state, caller, canister_id, "export_canister")
    if canister.status is not CanisterStatus.STOPPED:
        raise _Rejected(RejectCode.SYS_TRANSIENT,
                        f"export_canister: canister {canister_text(canister_id)} is {_STATUS_NAMES[canister.status]}; "
                        f"stop it first")
    if not _queues_empty(canister):
        raise _Rejected(RejectCode.SYS_TRANSIENT,
                        f"export_canister: canister {canister_text(canister_id)} still has messages queued; try again")
    snapshot = encode_canister_snapshot(canister)
    return {"snapshot": snapshot, "snapshot_hash": snapshot_hash(snapshot)}


def _queues_empty(canister: CanisterState) -> bool:
    """No message waits in any queue of ``canister`` and no response slot is reserved."""
    queues = canister.queues
    return not queues.ingress_queue.elements and all(
        not queue.elements and not queue.reserved_slots
        for table in (queues.input_queues, queues.output_queues) for queue in table.values())


def _delete(state: ReplicatedState, caller: bytes, canister_id: int) -> dict:
    canister = _controlled(state, caller, canister_id, "delete_canister")
    if canister.status is not CanisterStatus.STOPPED:
        raise _Rejected(RejectCode.CANISTER_ERROR,
                        f"delete_canister: canister {canister_text(canister_id)} is not stopped")
    del state.canisters[canister_id]
    state.metadata.counters.pop(instructions_counter(canister_id), None)
    return {"canister_id": canister_id}


_CANISTER_METHODS = {"stop_canister": _stop, "start_canister": _start, "canister_status": _status,
                     "export_canister": _export, "delete_canister": _delete, "fetch_canister_logs": _fetch_logs}


def _import_canister(state: ReplicatedState, caller: bytes, arg: Any) -> dict:
    if not isinstance(arg, Mapping) or tuple(sorted(arg)) != ("snapshot", "snapshot_hash"):
        raise _Rejected(RejectCode.CANISTER_ERROR, "import_canister takes {snapshot, snapshot_hash}")
    snapshot, expected = arg["snapshot"], arg["snapshot_hash"]
    if not isinstance(snapshot, bytes) or not isinstance(expected, bytes):
        raise _Rejected(RejectCode.CANISTER_ERROR, "import_canister: snapshot and snapshot_hash are bytes")
    if snapshot_hash(snapshot) != expected:
        raise _Rejected(RejectCode.CANISTER_ERROR, "import_canister: the snapshot does not hash to snapshot_hash")
    try:
        canister = decode_canister_snapshot(snapshot)
    except CorruptSnapshot as exc:
        raise _Rejected(RejectCode.CANISTER_ERROR, f"import_canister: {exc}") from None
    canister_id = canister.canister_id
    if caller != canister.controller:
        raise _Rejected(RejectCode.CANISTER_ERROR,
                        f"import_canister: only the controller of canister {canister_text(canister_id)} may")
    if state.routing_table.lookup(canister_id) != state.own_subnet_id:
        raise _Rejected(RejectCode.DESTINATION_INVALID,
                        f"import_canister: the routing table does not map canister {canister_text(canister_id)} "
                        f"to this subnet (yet)")
    if canister_id in state.canisters:
        raise _Rejected(RejectCode.CANISTER_ERROR,
                        f"import_canister: canister {canister_text(canister_id)} already exists here")
    if canister.status is not CanisterStatus.STOPPED or canister.call_contexts or not _queues_empty(canister):
        raise _Rejected(RejectCode.CANISTER_ERROR, "import_canister: a snapshot holds a stopped canister, nothing in flight")
    state.add_canister(canister)
    return {"canister_id": canister_id}


def execute_management_ingress(state: ReplicatedState, ingress: Ingress, modules: SourceModules,
                               limits: Limits = DEFAULT) -> InstallUsage:
    """Execute one user call to the management canister; its answer goes into the ingress
    history. Returns what it used (an install's instructions; 0 for the other methods)."""
    usage = InstallUsage()
    try:
        answer: Reply | Reject = _management_answer(state, ingress, modules, limits, usage)
    except _Rejected as rejected:
        answer = rejected.reject
    answer_ingress(state, ingress.message_id, MANAGEMENT_CANISTER_ID, ingress.source, answer)
    if usage.instructions and usage.canister_id in state.canisters:
        state.metadata.count(instructions_counter(usage.canister_id), usage.instructions)
    return usage


# -- stop and start -----------------------------------------------------------------------------

def _canister(state: ReplicatedState, canister_id: int) -> CanisterState:
    canister = state.canisters.get(canister_id)
    if canister is None:
        raise ManagementError(f"canister {canister_text(canister_id)} not found")
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

