"""Canister modules given as Python source: hashing, loading, and the per-process cache.

A user's canister travels as source text in ``install_code`` and is kept in the replicated
state (``CanisterState.module_source``); its ``module_hash`` is ``SHA-256(source as UTF-8)``.
Every replica — live node, restarted node, audit replica — gets its class from that text:

    module = sandbox.load_sandboxed(source, "canister_<first 16 hex digits of the hash>", ...)
    class  = module.<class_name>        (a ``Canister`` subclass, dotted names allowed)

``load_sandboxed`` checks the source against the allowed subset, instruments it with
instruction charges and runs it with restricted builtins (``replica.execution.sandbox``).

Compiling and executing the same text gives the same class on every replica, so a load is
done once per module hash and process and cached here, *outside* the replicated state (the
cache belongs to an ``ExecutionEnvironment``). A load that fails — a syntax error, an
exception at import, no such class, not a ``Canister`` subclass — raises ``ModuleLoadError``
whose text depends on the source only (file name and line, never an address), so the
install that tried it is rejected with the same message on every replica. Failures are not
cached: loading is a pure function of the text and they only happen at install time.

The sandbox makes canister code deterministic and metered; it is not a security boundary
(see the README).
"""

from __future__ import annotations

import hashlib
import types

from message_routing.limits import DEFAULT, Limits

from .canister import Canister
from .errors import ModuleLoadError
from .sandbox import LoadedModule, load_sandboxed

__all__ = ["source_module_hash", "SourceModules", "MAX_SOURCE_BYTES"]

#: A module's source is at most this large (its install message is bounded more tightly by
#: the ingress size limit; this bound holds for states built by hand too).
MAX_SOURCE_BYTES = 4 * 1024 * 1024


def source_module_hash(source: str) -> bytes:
    """``SHA-256(source.encode("utf-8"))``: the module hash of a source canister."""
    return hashlib.sha256(source.encode("utf-8")).digest()


def _module_name(digest: bytes) -> str:
    return f"canister_{digest.hex()[:16]}"


def _execute(source: str, digest: bytes, limits: Limits) -> LoadedModule:
    """Load ``source`` into the sandbox as a fresh module named after its hash."""
    if type(source) is not str:
        raise ModuleLoadError(f"a module's source is text, not {type(source).__name__}")
    if len(source.encode("utf-8")) > MAX_SOURCE_BYTES:
        raise ModuleLoadError(f"the module's source exceeds {MAX_SOURCE_BYTES} bytes")
    return load_sandboxed(source, _module_name(digest), f"<canister module {digest.hex()}>",
                          limits.max_instructions_per_install, limits.max_message_memory_bytes)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _find_class(module: types.ModuleType, class_name: object) -> type[Canister]:
    if type(class_name) is not str or not class_name or not all(p.isidentifier() for p in class_name.split(".")):
        raise ModuleLoadError(f"a class name is a (dotted) Python identifier, not {class_name!r}")
    target: object = module
    for part in class_name.split("."):
        try:
            target = getattr(target, part)
        except Exception as exc:  # noqa: BLE001 - includes a module __getattr__ that raises
            raise ModuleLoadError(f"the module defines no class {class_name!r} ({_describe(exc)})") from None
    if not (isinstance(target, type) and issubclass(target, Canister)) or target is Canister:
        raise ModuleLoadError(f"{class_name!r} is not a Canister subclass")
    return target


class SourceModules:
    """Loaded source modules by module hash, and their canister classes by ``(hash, class name)``."""

    __slots__ = ("_modules", "_classes")

    def __init__(self) -> None:
        self._modules: dict[bytes, LoadedModule] = {}
        self._classes: dict[tuple[bytes, str], type[Canister]] = {}

    def load(self, source: str, class_name: str, digest: bytes | None = None, limits: Limits = DEFAULT) -> type[Canister]:
        """The class ``class_name`` of the module ``source`` (``ModuleLoadError`` if it cannot
        be loaded). ``digest`` is ``source_module_hash(source)`` when the caller has it;
        ``limits`` bound the module body's instructions and memory."""
        if digest is None:
            digest = source_module_hash(source)
        key = (digest, class_name)
        cls = self._classes.get(key)
        if cls is not None:
            return cls
        loaded = self._modules.get(digest)
        if loaded is None:
            loaded = _execute(source, digest, limits)
            self._modules[digest] = loaded
        cls = _find_class(loaded.module, class_name)
        self._classes[key] = cls
        return cls

    def module_instructions(self, digest: bytes) -> int:
        """The instructions the body of the loaded module ``digest`` used (0 if not loaded)."""
        loaded = self._modules.get(digest)
        return 0 if loaded is None else loaded.instructions

    def __len__(self) -> int:
        return len(self._modules)
