"""Which Python class runs a canister: module names, module hashes and the registry.

A canister's state records ``module_name`` (``"package.module:Class"``) and ``module_hash``
(certified under ``/canister/<id>/module_hash``). The hash is computed from the name and the
class's declared ``VERSION`` only — never from memory addresses or source files — so every
replica derives the same hash for the same code release.
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Mapping, Union

from state_manager.canister_state import CanisterState
from state_manager.encoding import encode

from .canister import Canister
from .errors import CanisterDefinitionError

__all__ = ["CanisterRegistry", "module_name_of", "module_hash", "as_registry", "check_canister_class", "RegistryLike"]

_DOMAIN = "replica-canister-module"


def module_name_of(cls: type) -> str:
    """``"<module>:<qualified class name>"``, e.g. ``"examples.counter:Counter"``."""
    return f"{cls.__module__}:{cls.__qualname__}"


def module_hash(cls: type) -> bytes:
    """``SHA-256(encode(("replica-canister-module", module_name_of(cls), cls.VERSION)))``."""
    return hashlib.sha256(encode((_DOMAIN, module_name_of(cls), cls.VERSION))).digest()


def check_canister_class(cls: object) -> type[Canister]:
    if not (isinstance(cls, type) and issubclass(cls, Canister)) or cls is Canister:
        raise CanisterDefinitionError(f"{cls!r} is not a Canister subclass")
    return cls


class CanisterRegistry:
    """An immutable map ``module name → (class, module hash)``.

    Built from classes (keyed by ``module_name_of``) or from an explicit name → class map.
    """

    __slots__ = ("_entries",)

    def __init__(self, classes: Union[Iterable[type[Canister]], Mapping[str, type[Canister]]] = ()) -> None:
        if isinstance(classes, Mapping):
            pairs = [(name, classes[name]) for name in sorted(classes)]
        else:
            pairs = [(module_name_of(cls), cls) for cls in classes]
        entries: dict[str, tuple[type[Canister], bytes]] = {}
        for name, cls in pairs:
            check_canister_class(cls)
            if type(name) is not str:
                raise CanisterDefinitionError(f"module names are text, not {name!r}")
            if name in entries and entries[name][0] is not cls:
                raise CanisterDefinitionError(f"two classes registered as {name!r}")
            entries[name] = (cls, module_hash(cls))
        self._entries = entries

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._entries))

    def __contains__(self, module_name: object) -> bool:
        return module_name in self._entries

    def class_of(self, module_name: str) -> type[Canister] | None:
        entry = self._entries.get(module_name)
        return None if entry is None else entry[0]

    def resolve(self, canister: CanisterState) -> type[Canister] | None:
        """The class to run ``canister`` with: registered under its ``module_name`` and with
        the ``module_hash`` it was installed with; None otherwise (the code is unavailable)."""
        entry = self._entries.get(canister.module_name)
        if entry is None or entry[1] != canister.module_hash:
            return None
        return entry[0]

    def __repr__(self) -> str:
        return f"CanisterRegistry({list(self.names())!r})"


RegistryLike = Union[CanisterRegistry, Iterable[type[Canister]], Mapping[str, type[Canister]]]


def as_registry(classes: RegistryLike) -> CanisterRegistry:
    """``classes`` as a ``CanisterRegistry`` (a registry is returned as is)."""
    return classes if isinstance(classes, CanisterRegistry) else CanisterRegistry(classes)
