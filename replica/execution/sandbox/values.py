"""Values canister code sees that must not differ between replicas or outlive a message.

* ``scrub``: text with object addresses removed (``<function f at 0x7f..>`` → ``<function f>``);
* ``check_int_digits``: int ↔ decimal text bounded by this module, not by the host's setting;
* ``Range``: canister code's ``range`` — iterated natively by ``for`` loops, but a consumer
  that walks it inside a builtin pays for every item (``__iter__`` charges per chunk);
* ``FrozenClass``: the metaclass of canister classes — no attribute changes once the class
  body ran, a default ``repr`` without an address, and only immutable class-level values;
* ``check_shared``: module-level and class-level values must be immutable (a list there
  would keep state between messages in one process but not across a restart);
* ``ModuleProxy``: what ``import math`` gives canister code (the allowed names only).
"""

from __future__ import annotations

import __future__
import enum
import re
from types import BuiltinFunctionType, FunctionType, MethodType
from typing import Any, Callable, Iterator

from ..errors import ModuleLoadError
from .meter import SandboxFault
from .ordered_set import OrderedFrozenSet

__all__ = [
    "scrub", "check_int_digits", "Range", "FrozenClass", "check_shared", "ModuleProxy", "HostLimitExceeded",
    "SharedStateError", "MAX_INT_DIGITS_BITS", "RANGE_CHUNK",
]

#: Loaded canister modules are named ``canister_<hash>`` (``source_modules``).
CANISTER_MODULE_PREFIX = "canister_"
_ADDRESS = re.compile(r" (?:at|@) 0x[0-9a-fA-F]+")
#: Integers converted to or from decimal text have at most this many bits (about 4,200
#: digits, below CPython's default limit of 4,300 digits, so the host's limit never decides).
MAX_INT_DIGITS_BITS = 14_000
#: A ``range`` walked inside a builtin is charged this many items at a time.
RANGE_CHUNK = 4096


class HostLimitExceeded(SandboxFault):
    """CPython's own recursion or memory limit was hit (their thresholds depend on the host)."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.description = f"{what}: a limit of the host was reached"


class SharedStateError(ModuleLoadError, TypeError):
    """A module-level or class-level value that is not immutable."""


def scrub(text: str) -> str:
    """``text`` without object addresses (`` at 0x…`` and `` @ 0x…``)."""
    return _ADDRESS.sub("", text) if "0x" in text else text


def check_int_digits(value: int) -> None:
    if value.bit_length() > MAX_INT_DIGITS_BITS:
        raise ValueError(f"integers of more than {MAX_INT_DIGITS_BITS} bits have no decimal text here")


class Range:
    """``range`` for canister code (module docstring). Iterating it outside a ``for`` loop
    charges ``RANGE_CHUNK`` items at a time through ``Range.meter`` (set per module)."""

    __slots__ = ("_sandbox_range", "_sandbox_charge")

    def __init__(self, *args: Any) -> None:
        raise TypeError("ranges are made by range()")

    @classmethod
    def make(cls, inner: range, charge: Callable[[int], None]) -> "Range":
        made = object.__new__(cls)
        made._sandbox_range = inner
        made._sandbox_charge = charge
        return made

    def __iter__(self) -> Iterator[int]:
        inner, charge = self._sandbox_range, self._sandbox_charge
        for start in range(0, len(inner), RANGE_CHUNK):
            part = inner[start:start + RANGE_CHUNK]
            charge(len(part))
            yield from part

    def __reversed__(self) -> Iterator[int]:
        return iter(Range.make(self._sandbox_range[::-1], self._sandbox_charge))

    def __len__(self) -> int:
        return len(self._sandbox_range)

    def __getitem__(self, index: Any) -> Any:
        item = self._sandbox_range[index]
        return Range.make(item, self._sandbox_charge) if isinstance(item, range) else item

    def __contains__(self, item: object) -> bool:
        if item.__class__ is not int and item.__class__ is not bool:
            self._sandbox_charge(len(self._sandbox_range))
        return item in self._sandbox_range

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Range) and self._sandbox_range == other._sandbox_range

    def __hash__(self) -> int:
        return self._sandbox_range.__hash__()

    def __repr__(self) -> str:
        return repr(self._sandbox_range)

    def __bool__(self) -> bool:
        return bool(self._sandbox_range)

    @property
    def start(self) -> int:
        return self._sandbox_range.start

    @property
    def stop(self) -> int:
        return self._sandbox_range.stop

    @property
    def step(self) -> int:
        return self._sandbox_range.step

    def index(self, value: Any) -> int:
        if value.__class__ is not int:
            self._sandbox_charge(len(self._sandbox_range))
        return self._sandbox_range.index(value)

    def count(self, value: Any) -> int:
        if value.__class__ is not int:
            self._sandbox_charge(len(self._sandbox_range))
        return self._sandbox_range.count(value)


Range.__name__ = Range.__qualname__ = "range"


class ModuleProxy:
    """A read-only module for canister code: only the names it was given."""

    __slots__ = ("_sandbox_name", "_sandbox_names")

    def __init__(self, name: str, names: dict[str, Any]) -> None:
        object.__setattr__(self, "_sandbox_name", name)
        object.__setattr__(self, "_sandbox_names", dict(names))

    def __getattr__(self, name: str) -> Any:
        try:
            return self._sandbox_names[name]
        except KeyError:
            raise AttributeError(f"module {self._sandbox_name!r} has no attribute {name!r} here") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError(f"module {self._sandbox_name!r} is read-only")

    def __repr__(self) -> str:
        return f"<module {self._sandbox_name!r}>"


_IMMUTABLE_SCALARS = (type(None), bool, int, float, complex, str, bytes, range, Range, slice,
                      type(Ellipsis), type(NotImplemented), ModuleProxy, BuiltinFunctionType, __future__._Feature)


def _plain_repr(self: Any) -> str:
    return f"<{type(self).__qualname__} object>"


def check_shared(value: Any, where: str, depth: int = 0) -> None:
    """Raise ``SharedStateError`` unless ``value`` is immutable all the way down (module docstring)."""
    if depth > 32:
        raise SharedStateError(f"{where} is nested too deeply to be checked")
    if isinstance(value, _IMMUTABLE_SCALARS) or isinstance(value, enum.Enum):
        return
    kind = type(value)
    if kind in (tuple, frozenset, OrderedFrozenSet):
        for item in value:
            check_shared(item, where, depth + 1)
        return
    if isinstance(value, type):
        if getattr(value, "__module__", "").startswith(CANISTER_MODULE_PREFIX) and not isinstance(value, FrozenClass):
            raise SharedStateError(f"{where} is a class that is not frozen")
        return
    if kind is FunctionType:
        if not value.__module__.startswith(CANISTER_MODULE_PREFIX):
            return  # the SDK's or the sandbox's own function
        for default in (*(value.__defaults__ or ()), *(value.__kwdefaults__ or {}).values()):
            check_shared(default, f"{where} (a default argument)", depth + 1)
        for cell in value.__closure__ or ():
            try:
                contents = cell.cell_contents
            except ValueError:
                continue  # an empty cell
            check_shared(contents, f"{where} (a variable it closes over)", depth + 1)
        return
    if kind in (staticmethod, classmethod):
        check_shared(value.__func__, where, depth + 1)
        return
    if kind is property:
        for part in (value.fget, value.fset, value.fdel):
            if part is not None:
                check_shared(part, where, depth + 1)
        return
    if kind is MethodType:
        check_shared(value.__self__, where, depth + 1)
        check_shared(value.__func__, where, depth + 1)
        return
    raise SharedStateError(f"{where} is a {kind.__name__}, which is mutable: it would keep state between "
                           f"messages in one process but not across restarts (state lives in self.stable)")


class FrozenClass(type):
    """The metaclass of canister classes (module docstring)."""

    def __new__(mcls, name: str, bases: tuple, namespace: dict, **kwargs: Any) -> "FrozenClass":
        if "__repr__" not in namespace and all(getattr(b, "__repr__", None) is object.__repr__ for b in bases or (object,)):
            namespace["__repr__"] = _plain_repr
        for key, value in namespace.items():
            if not (key.startswith("__") and key.endswith("__")) or key == "__slots__":
                check_shared(value, f"the class-level value {name}.{key}")
        return super().__new__(mcls, name, bases, namespace, **kwargs)

    def __init__(cls, name: str, bases: tuple, namespace: dict, **kwargs: Any) -> None:
        super().__init__(name, bases, namespace, **kwargs)
        type.__setattr__(cls, "__sandbox_frozen__", True)

    def __setattr__(cls, name: str, value: Any) -> None:
        if cls.__dict__.get("__sandbox_frozen__"):
            raise TypeError(f"class {cls.__qualname__} is frozen: classes outlive the message")
        type.__setattr__(cls, name, value)

    def __delattr__(cls, name: str) -> None:
        if cls.__dict__.get("__sandbox_frozen__"):
            raise TypeError(f"class {cls.__qualname__} is frozen: classes outlive the message")
        type.__delattr__(cls, name)

    def __repr__(cls) -> str:
        return f"<class {cls.__qualname__!r}>"
