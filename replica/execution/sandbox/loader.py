"""Loading a canister module into the sandbox: check, instrument, compile, run, verify.

``load_sandboxed(source, name, file_name, instruction_limit, memory_limit)``:

1. parse (a ``SyntaxError`` is reported with its line);
2. ``subset.check_module``: the first construct outside the subset, by line;
3. ``metering.instrument`` and compile;
4. run the module body with its own ``Sandbox`` as meter and ``safe_builtins`` as builtins,
   metered with ``instruction_limit`` (an install's limit covers this and ``init``);
5. every module-level value must be immutable (``values.check_shared``).

Each failure raises ``ModuleLoadError`` with a text that depends on the source only. The
result keeps the instructions the module body used: an install is charged them whether or
not this process had the module cached, so the count is the same on every replica.
"""

from __future__ import annotations

import ast
import builtins
import types
from dataclasses import dataclass

from ..errors import ModuleLoadError
from .meter import SandboxFault
from .metering import CONSUMERS, INT, LEN, METER, PROXIED, STR, TYPE, instrument, real_type
from .operations import Sandbox
from .safe_builtins import REAL_TYPES, make_builtins
from .subset import check_module
from .values import SharedStateError, check_shared, scrub

__all__ = ["LoadedModule", "load_sandboxed", "describe_exception"]


@dataclass(frozen=True)
class LoadedModule:
    module: types.ModuleType
    sandbox: Sandbox
    #: Instructions the module body used when it ran.
    instructions: int


def describe_exception(exc: BaseException) -> str:
    """``"<type>: <text>"`` of an exception canister code raised, without addresses. Its
    text may run canister code (``__str__``): call this while the meter still runs."""
    try:
        text = scrub(str(exc))
    except SandboxFault:
        raise
    except Exception as failure:  # noqa: BLE001 - reported in the description itself
        return f"{type(exc).__name__} (its text failed: {type(failure).__name__})"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def load_sandboxed(source: str, name: str, file_name: str, instruction_limit: int, memory_limit: int) -> LoadedModule:
    """The loaded module (module docstring); ``ModuleLoadError`` if it cannot be."""
    try:
        tree = ast.parse(source, file_name)
    except (SyntaxError, ValueError) as exc:  # ValueError: NUL bytes in the source
        raise ModuleLoadError(f"the module does not compile: {type(exc).__name__}: {exc}") from None
    check_module(tree)
    code = compile(instrument(tree), file_name, "exec", dont_inherit=True)
    sandbox = Sandbox()
    module = types.ModuleType(name)
    namespace = module.__dict__
    namespace["__builtins__"] = make_builtins(sandbox)
    namespace[METER] = sandbox
    namespace[INT] = int
    namespace[STR] = str
    namespace[LEN] = len
    namespace[TYPE] = type
    for builtin in PROXIED:
        namespace[real_type(builtin)] = REAL_TYPES[builtin]
    for builtin in CONSUMERS:
        namespace[real_type(builtin)] = getattr(builtins, builtin)
    sandbox.begin(instruction_limit, memory_limit)
    try:
        exec(code, namespace)
    except SandboxFault as fault:
        raise ModuleLoadError(f"the module {fault.description} while it ran") from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - canister code's failure, reported as its text
        try:
            text = describe_exception(exc)
        except SandboxFault as fault:
            text = fault.description
        raise ModuleLoadError(f"the module raised at import: {text}") from None
    finally:
        fault = sandbox.exhausted()
        used = sandbox.end()
    if fault is not None:
        raise ModuleLoadError(f"the module {fault.description} while it ran")
    for key in sorted(namespace):
        if key.startswith("__") and key.endswith("__"):
            continue
        try:
            check_shared(namespace[key], f"the module-level value {key!r}")
        except SharedStateError as exc:
            raise ModuleLoadError(str(exc)) from None
    return LoadedModule(module, sandbox, used)
