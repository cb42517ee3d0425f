"""The state of one canister: status, queues, call contexts, callbacks, stable state and log."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Union

from .canister_log import EMPTY_LOG, CanisterLog
from .key_ordered import KeyOrderedDict
from .messages import CanisterId
from .queues import CanisterQueues
from .stable_map import StableMap

__all__ = [
    "CanisterStatus", "IngressOrigin", "CanisterOrigin", "CallOrigin", "CallContext", "Callback",
    "CanisterState",
]


class CanisterStatus(enum.IntEnum):
    RUNNING = 0
    STOPPING = 1
    STOPPED = 2


@dataclass(frozen=True, slots=True)
class IngressOrigin:
    """The call came from a user: answer it in the ingress history under ``message_id``."""

    message_id: bytes
    source: bytes


@dataclass(frozen=True, slots=True)
class CanisterOrigin:
    """The call came from ``canister``; answer it with a response to ``callback_id``, which
    carries the request's ``deadline`` (0: a guaranteed-response call)."""

    canister: CanisterId
    callback_id: int
    deadline: int = 0


CallOrigin = Union[IngressOrigin, CanisterOrigin]


@dataclass(frozen=True, slots=True)
class CallContext:
    """One incoming call being handled: stays open until answered and all its calls returned.

    ``outstanding_callbacks`` counts this context's callbacks still waiting for a response,
    so deciding whether the context can close needs no scan over all callbacks.
    """

    call_context_id: int
    origin: CallOrigin
    method_name: str
    responded: bool = False
    outstanding_callbacks: int = 0

    # Direct constructors: dataclasses.replace costs several times more, on every call and callback.
    def with_outstanding(self, outstanding_callbacks: int) -> CallContext:
        return CallContext(self.call_context_id, self.origin, self.method_name, self.responded, outstanding_callbacks)

    def as_responded(self) -> CallContext:
        return CallContext(self.call_context_id, self.origin, self.method_name, True, self.outstanding_callbacks)


@dataclass(frozen=True, slots=True)
class Callback:
    """An outstanding outgoing call: which canister method resumes with the reply or reject.

    ``on_reply``/``on_reject`` name methods of the canister's class and ``context`` is a
    stable value handed to them, so callbacks (unlike Python closures) are part of the
    hashable, checkpointable state. ``deadline`` is the call's (0: guaranteed response).
    """

    callback_id: int
    call_context_id: int
    respondent: CanisterId
    on_reply: str
    on_reject: str
    context: object = None
    deadline: int = 0


class IdMap(KeyOrderedDict):
    """Call contexts or callbacks by id, iterated in id order: remembers it was written to
    (for incremental state hashing)."""

    __slots__ = ("dirty",)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.dirty = True

    def __setitem__(self, key, value) -> None:
        self.dirty = True
        super().__setitem__(key, value)

    def __delitem__(self, key) -> None:
        self.dirty = True
        super().__delitem__(key)

    def pop(self, key, *default):
        self.dirty = True
        return super().pop(key, *default)

    def popitem(self):
        self.dirty = True
        return super().popitem()

    def clear(self) -> None:
        self.dirty = True
        super().clear()

    def setdefault(self, key, default=None):
        self.dirty = True
        return super().setdefault(key, default)

    def update(self, *args, **kwargs) -> None:
        self.dirty = True
        super().update(*args, **kwargs)

    def __ior__(self, other):
        self.dirty = True
        return super().__ior__(other)


class CanisterState:
    """One canister. Writes mark it ``dirty`` (scalars via properties, call contexts and
    callbacks via tracked maps, queues and stable state via their own records), so a commit
    rehashes only canisters that changed; whoever replaces the module sets ``dirty`` itself.

    The module is one of three kinds:

    * builtin: ``module_name`` is ``"package.module:Class"``, a class the process knows, and
      ``module_hash`` derives from the name and the class's ``VERSION``; ``module_source`` is "";
    * source: ``module_source`` is the module's Python source, ``module_name`` the class in it
      and ``module_hash = SHA-256(module_source as UTF-8)`` — the code lives in the state;
    * none yet (created, nothing installed): all three are empty.
    """

    __slots__ = (
        "canister_id", "module_name", "module_hash", "_status", "_certified_data", "queues",
        "call_contexts", "callbacks", "next_call_context_id", "next_callback_id", "stable",
        "controller", "module_source", "_log", "dirty",
    )

    def __init__(
        self,
        canister_id: CanisterId,
        module_name: str,
        module_hash: bytes,
        *,
        status: CanisterStatus = CanisterStatus.RUNNING,
        controller: bytes = b"",
        module_source: str = "",
    ) -> None:
        self.canister_id = canister_id
        self.module_name = module_name
        self.module_hash = module_hash
        self.module_source = module_source
        self._status = status
        self.controller = controller
        self._certified_data = b""
        self.queues = CanisterQueues()
        self.call_contexts = IdMap()  # id -> CallContext
        self.callbacks = IdMap()      # id -> Callback
        self.next_call_context_id = 0
        self.next_callback_id = 0
        self.stable = StableMap()
        self._log = EMPTY_LOG
        self.dirty = True

    @property
    def status(self) -> CanisterStatus:
        return self._status

    @status.setter
    def status(self, status: CanisterStatus) -> None:
        self._status = status
        self.dirty = True

    @property
    def certified_data(self) -> bytes:
        return self._certified_data

    @certified_data.setter
    def certified_data(self, data: bytes) -> None:
        self._certified_data = data
        self.dirty = True

    @property
    def log(self) -> CanisterLog:
        """The canister's log (``canister_log``): replicated and in the full state hash, not
        certified; kept across upgrades, purged on reinstall, carried by a migration."""
        return self._log

    @log.setter
    def log(self, log: CanisterLog) -> None:
        self._log = log
        self.dirty = True

    def is_dirty(self) -> bool:
        return self.dirty or self.call_contexts.dirty or self.callbacks.dirty or self.queues.dirty or self.stable.has_changes()

    def mark_clean(self) -> None:
        """Called by the state tree once it has hashed this canister (stable keys are taken
        separately, see ``StableMap.take_changed_keys``)."""
        self.dirty = self.call_contexts.dirty = self.callbacks.dirty = self.queues.dirty = False

    def new_call_context(self, origin: CallOrigin, method_name: str) -> CallContext:
        context = CallContext(self.next_call_context_id, origin, method_name)
        self.call_contexts[context.call_context_id] = context
        self.next_call_context_id += 1
        return context

    def register_callback(
        self, call_context_id: int, respondent: CanisterId, on_reply: str, on_reject: str, context: object,
        deadline: int = 0,
    ) -> Callback:
        """Record an outgoing call of the (open) call context ``call_context_id``."""
        call_context = self.call_contexts[call_context_id]
        callback = Callback(self.next_callback_id, call_context_id, respondent, on_reply, on_reject, context, deadline)
        self.callbacks[callback.callback_id] = callback
        self.call_contexts[call_context_id] = call_context.with_outstanding(call_context.outstanding_callbacks + 1)
        self.next_callback_id += 1
        return callback

    def take_callback(self, callback_id: int) -> Callback | None:
        """Remove and return the callback ``callback_id`` (None if unknown); its call
        context then waits for one callback fewer."""
        callback = self.callbacks.pop(callback_id, None)
        if callback is not None:
            call_context = self.call_contexts.get(callback.call_context_id)
            if call_context is not None:
                self.call_contexts[callback.call_context_id] = call_context.with_outstanding(
                    call_context.outstanding_callbacks - 1)
        return callback

    def outstanding_calls(self, call_context_id: int) -> int:
        call_context = self.call_contexts.get(call_context_id)
        return 0 if call_context is None else call_context.outstanding_callbacks

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CanisterState):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__slots__ if name != "dirty")

    def __repr__(self) -> str:
        return f"CanisterState(id={self.canister_id}, module={self.module_name!r}, status={self.status.name})"
