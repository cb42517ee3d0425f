"""The execution layer's exceptions: what canisters see and what operators see.

Canister code sees ``Trap`` (raise it to abort a message), ``CallError`` (a call the system
refused; catchable) and ``ApiUsageError`` (the SDK used wrongly; traps unless caught).
Operators see ``ExecutionError`` and its subclasses (bad canister classes, failed installs),
a ``ReplicaError``; ``Trap`` and ``CallError`` stay apart: canister code raises them.
"""

from __future__ import annotations

from replica.errors import ReplicaError

__all__ = [
    "Trap", "ApiUsageError", "CallError", "ExecutionError", "CanisterDefinitionError",
    "InstallError", "ManagementError", "ModuleLoadError",
]


class Trap(Exception):
    """Abort the current message: its state changes and calls are dropped, and its caller
    is rejected with ``CANISTER_ERROR``. Any uncaught exception traps; this one says so."""


class ApiUsageError(Trap):
    """The canister used the SDK wrongly (answered twice, bad argument types, …)."""


class CallError(Exception):
    """An outgoing call could not be queued (queue full, payload too large, or calls are
    not allowed in this kind of method). Nothing was sent; the canister may recover."""


class ExecutionError(ReplicaError):
    """Base of the errors the execution layer raises to its operators."""


class CanisterDefinitionError(ExecutionError, TypeError):
    """A ``Canister`` subclass that breaks the SDK's rules (found when the class is made)."""


class InstallError(ExecutionError):
    """A canister could not be installed (bad id, already present, or ``init`` trapped)."""


class ManagementError(ExecutionError):
    """A management operation on a canister that does not exist."""


class ModuleLoadError(InstallError):
    """A canister module given as source cannot be loaded: it does not compile, raises at
    import, or lacks the named ``Canister`` subclass. The text names the cause only in terms
    of the source (so every replica rejects the install with the same message)."""
