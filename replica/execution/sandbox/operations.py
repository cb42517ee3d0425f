"""``Sandbox``: the meter plus the operations instrumented canister code calls.

Each operation whose work or allocation grows with its operands charges by size *before*
it runs (the rates are in ``meter``): sequence ``+``/``*``, big-integer ``*``/``**``/``<<``,
``%`` and f-string formatting (widths are bounded, no addresses come out), slicing, ``*x``
unpacking, and the methods of ``metering.SIZED_METHODS`` on built-in types. Everything else
is the plain Python operation.
"""

from __future__ import annotations

import operator
import re
import sys
from types import BuiltinFunctionType, FunctionType, MethodType, ModuleType
from typing import Any

from .meter import BYTES_PER_INSTRUCTION, Meter, SandboxFault
from .ordered_set import OrderedFrozenSet, OrderedSet
from .values import FrozenClass, HostLimitExceeded, ModuleProxy, Range, check_int_digits, scrub

__all__ = ["Sandbox", "MAX_FORMAT_WIDTH"]

#: Widths and precisions in format specs and ``%`` formats are at most this.
MAX_FORMAT_WIDTH = 10_000
_TEXT = (str, bytes, bytearray)
_SEQUENCES = (str, bytes, bytearray, list, tuple)
_NUMBERS = (int, float, bool, complex)
_PLAIN = (str, int, float, bool, type(None), bytes)
_SPEC_NUMBERS = re.compile(r"\d+")
_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")
_DICT_VIEWS = (type({}.keys()), type({}.items()))
_SHORT_INT = 10**18
_GENERATOR = type(_ for _ in ())
#: Methods charged as a copy of their receiver (``Sandbox.method``).
_COPYING = frozenset({"copy", "split", "rsplit", "splitlines", "upper", "lower", "casefold", "title", "capitalize",
                      "swapcase", "translate", "partition", "rpartition", "strip", "lstrip", "rstrip"})


def _item_bytes(value: Any) -> int:
    return 1 if isinstance(value, _TEXT) else 8


def _words(value: int) -> int:
    return value.bit_length() // 64 + 1


class OrderedView:
    """A dict's ``keys()``/``items()`` view whose set operations give ``OrderedSet``s."""

    __slots__ = ("_sandbox_view",)

    def __init__(self, view: Any) -> None:
        self._sandbox_view = view

    def __iter__(self) -> Any:
        return iter(self._sandbox_view)

    def __len__(self) -> int:
        return len(self._sandbox_view)

    def __contains__(self, item: object) -> bool:
        return item in self._sandbox_view

    def __reversed__(self) -> Any:
        return reversed(self._sandbox_view)

    def __repr__(self) -> str:
        return repr(self._sandbox_view)

    def __eq__(self, other: object) -> bool:
        return self._sandbox_view == (other._sandbox_view if isinstance(other, OrderedView) else other)

    __hash__ = None  # type: ignore[assignment]

    def __and__(self, other: Any) -> OrderedSet:
        return OrderedSet(self._sandbox_view).intersection(other)

    def __or__(self, other: Any) -> OrderedSet:
        return OrderedSet(self._sandbox_view).union(other)

    def __sub__(self, other: Any) -> OrderedSet:
        return OrderedSet(self._sandbox_view).difference(other)

    def __xor__(self, other: Any) -> OrderedSet:
        return OrderedSet(self._sandbox_view).symmetric_difference(other)

    def __rand__(self, other: Any) -> OrderedSet:
        return OrderedSet(other).intersection(self._sandbox_view)

    def __ror__(self, other: Any) -> OrderedSet:
        return OrderedSet(other).union(self._sandbox_view)

    def __rsub__(self, other: Any) -> OrderedSet:
        return OrderedSet(other).difference(self._sandbox_view)

    def __rxor__(self, other: Any) -> OrderedSet:
        return OrderedSet(other).symmetric_difference(self._sandbox_view)

    def isdisjoint(self, other: Any) -> bool:
        return self._sandbox_view.isdisjoint(other)


def _check_spec(spec: str) -> None:
    for number in _SPEC_NUMBERS.findall(spec):
        if len(number) > 5 or int(number) > MAX_FORMAT_WIDTH:
            raise ValueError(f"format widths and precisions are at most {MAX_FORMAT_WIDTH}")


class Sandbox(Meter):
    """One loaded module's meter and operations (``metering`` emits the calls)."""

    __slots__ = ("stable_sizes", "log")
    frozen_class = FrozenClass

    def __init__(self) -> None:
        super().__init__()
        #: Where ``print`` writes while a message runs (its ``SystemApi.log``; set and
        #: cleared by ``runtime``); None outside a message: the module's body prints nothing.
        self.log: Any = None
        #: canister id → (its StableMap, its stable size in encoded bytes, its entry count):
        #: a cache outside the replicated state, checked by identity and count before use.
        self.stable_sizes: dict[int, tuple[Any, int, int]] = {}

    # -- size charges ----------------------------------------------------------------------------

    def sized(self, value: Any) -> Any:
        """``value`` for a consumer that walks all of it: charged one instruction per item;
        a ``range`` is charged its length and handed over as the built-in range."""
        kind = value.__class__
        # The exact built-in types first, without ``isinstance`` (the hot callers hand
        # over generators, lists, tuples and dicts); the same charges as the general path.
        if kind is _GENERATOR:
            return value   # lazy: its items are charged by the code that makes them
        if kind is list or kind is tuple or kind is dict:
            left = self.left - len(value) - 1
        elif kind is str or kind is bytes:
            left = self.left - len(value) // BYTES_PER_INSTRUCTION - 1
        else:
            return self._sized(value, kind)
        self.left = left
        if left < 0:
            self.out()
        return value

    def _sized(self, value: Any, kind: type) -> Any:
        if kind is Range:
            self.charge(len(value._sandbox_range))
            return value._sandbox_range
        if kind is OrderedView:
            value = value._sandbox_view
        if isinstance(value, _TEXT):
            self.charge(len(value) // BYTES_PER_INSTRUCTION + 1)
        elif isinstance(value, (list, tuple, dict, OrderedSet, OrderedFrozenSet, frozenset, set)) or kind in _DICT_VIEWS:
            self.charge(len(value) + 1)
        return value

    def upfront(self, value: Any, per_iteration: int) -> bool:
        """Charge all of a loop's iterations now if ``value`` is an immutable sized iterable
        and they fit in what is left (``metering``'s two-version loops); else ``False``."""
        kind = value.__class__
        if kind is Range or kind is tuple or kind is str or kind is bytes or kind is OrderedFrozenSet:
            cost = len(value) * per_iteration
            if cost <= self.left:
                self.left -= cost
                return True
        return False

    def loop(self, value: Any) -> Any:
        """A loop's iterable (each iteration is charged by the loop itself)."""
        kind = value.__class__
        if kind is Range:
            return value._sandbox_range
        if kind is OrderedView:
            return value._sandbox_view
        return value

    def _sequence_bytes(self, length: int, sample: Any) -> None:
        kind = sample.__class__
        nbytes = length if kind is str or kind is bytes or kind is bytearray else 8 * length
        self.allocate(nbytes, (nbytes >> 4) + 1)

    # -- operators -------------------------------------------------------------------------------

    def add(self, a: Any, b: Any) -> Any:
        kind = a.__class__
        if (kind is str or kind is bytes) and b.__class__ is kind:
            size = len(a) + len(b)   # the common case, charged inline (as ``allocate`` would)
            memory = self.memory_left - size
            self.memory_left = memory
            left = self.left - (size >> 4)
            self.left = left
            if memory < 0 or left < 0:
                self.allocate(0, 0)
                self.out()
            return a + b
        if kind in _NUMBERS and b.__class__ in _NUMBERS:
            return a + b
        if isinstance(a, _SEQUENCES) and isinstance(b, _SEQUENCES):
            self._sequence_bytes(len(a) + len(b), a)
        return a + b

    def iadd(self, a: Any, b: Any) -> Any:
        if a.__class__ in _NUMBERS and b.__class__ in _NUMBERS:
            return a + b
        if isinstance(a, _SEQUENCES):
            b = self.sized(b)
            grown = len(b) if hasattr(b, "__len__") else 0
            self._sequence_bytes(grown + (0 if a.__class__ in (list, bytearray) else len(a)), a)
        return operator.iadd(a, b)

    def mul(self, a: Any, b: Any) -> Any:
        ka, kb = a.__class__, b.__class__
        if ka is int and kb is int:
            words_a, words_b = _words(a), _words(b)
            if words_a > 1 and words_b > 1:
                self.allocate(8 * (words_a + words_b), words_a * words_b)
            return a * b
        if ka in _NUMBERS and kb in _NUMBERS:
            return a * b
        if isinstance(a, _SEQUENCES) and kb in (int, bool):
            self._sequence_bytes(len(a) * max(b, 0), a)
        elif isinstance(b, _SEQUENCES) and ka in (int, bool):
            self._sequence_bytes(len(b) * max(a, 0), b)
        return a * b

    imul = mul

    def lshift(self, a: Any, b: Any) -> Any:
        if a.__class__ in (int, bool) and b.__class__ in (int, bool) and a and b > 0:
            bits = a.bit_length() + b
            self.allocate(bits // 8, bits // 64 + 1)
        return a << b

    ilshift = lshift

    def pow(self, a: Any, b: Any, modulus: Any = None) -> Any:
        if a.__class__ in (int, bool) and b.__class__ in (int, bool):
            if modulus is not None:
                if modulus.__class__ in (int, bool):
                    words = _words(modulus)
                    self.charge(b.bit_length() * words * words + 1)
                return pow(a, b, modulus)
            if b > 1 and a not in (0, 1, -1):
                bits = a.bit_length() * b
                words = bits // 64 + 1
                self.allocate(bits // 8, words * words // 4 + words)
            return a ** b
        return a ** b if modulus is None else pow(a, b, modulus)

    ipow = pow

    def mod(self, a: Any, b: Any) -> Any:
        if a.__class__ in _NUMBERS:
            return a % b
        if isinstance(a, (str, bytes, bytearray)):
            return self._percent(a, b)
        return a % b

    imod = mod

    def _percent(self, template: Any, args: Any) -> Any:
        text = template.decode("latin-1") if not isinstance(template, str) else template
        for match in _PERCENT_SPEC.finditer(text):
            for part in match.groups():
                if part == "*":
                    raise ValueError("'*' widths are not supported in % formats")
                if part is not None and (len(part) > 5 or int(part) > MAX_FORMAT_WIDTH):
                    raise ValueError(f"format widths and precisions are at most {MAX_FORMAT_WIDTH}")
        for value in (args if isinstance(args, tuple) else (args,)):
            if value.__class__ is int:
                check_int_digits(value)
        self.charge(len(template) // BYTES_PER_INSTRUCTION + 1)
        result = template % args
        self.allocate(len(result), len(result) // BYTES_PER_INSTRUCTION)
        return scrub(result) if isinstance(result, str) else result

    # -- text ------------------------------------------------------------------------------------

    def format(self, value: Any, conversion: int, spec: str) -> Any:
        """One f-string field: ``!s``/``!r``/``!a`` (115/114/97) then the spec, without
        addresses. A short int, a float or a str without conversion or spec comes back as
        it is (the f-string formats it natively: no address, at most 19 digits)."""
        kind = value.__class__
        if conversion == -1 and not spec and (kind is str or kind is float or (
                kind is int and -_SHORT_INT < value < _SHORT_INT)):
            return value
        if kind is int:
            check_int_digits(value)
        if spec:
            _check_spec(spec)
        if conversion == 114:
            value = repr(value)
        elif conversion == 97:
            value = ascii(value)
        elif conversion == 115:
            value = str(value)
        result = format(value, spec)
        self.allocate(len(result), len(result) // BYTES_PER_INSTRUCTION)
        return result if kind in _PLAIN else scrub(result)   # the field's own type, before !r

    def getslice(self, value: Any, lower: Any, upper: Any, step: Any) -> Any:
        part = slice(lower, upper, step)
        if isinstance(value, _SEQUENCES):
            self._sequence_bytes(len(range(*part.indices(len(value)))), value)
        return value[part]

    # -- methods -------------------------------------------------------------------------------

    def view(self, receiver: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        """``receiver.keys()`` / ``receiver.items()``; a dict's view comes back ordered."""
        result = getattr(receiver, name)(*args, **kwargs)
        return OrderedView(result) if result.__class__ in _DICT_VIEWS else result

    def method(self, receiver: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        """``receiver.name(*args, **kwargs)``, charged first if ``receiver`` is a built-in
        sequence, mapping or set and the method's work grows with sizes."""
        kind = receiver.__class__
        if (kind is str or kind is bytes) and name in _COPYING:
            # The hottest case inline, charged as ``_charge_method`` charges it (a copy of
            # the receiver's bytes): one method call less.
            nbytes = len(receiver)
            memory = self.memory_left - nbytes
            self.memory_left = memory
            left = self.left - (nbytes >> 4) - 1
            self.left = left
            if memory < 0 or left < 0:
                self.allocate(0, 0)
                self.out()
            return getattr(receiver, name)(*args, **kwargs)
        if isinstance(receiver, (str, bytes, bytearray, list, tuple, dict, OrderedSet, OrderedFrozenSet, int)):
            args = self._charge_method(receiver, name, args)
        elif isinstance(receiver, type) and hasattr(receiver, "_sandbox_call"):   # a builtin name's proxy
            real = receiver._sandbox_type   # ``str.join(sep, items)``: the unbound form
            if args and isinstance(args[0], real):
                return self.method(args[0], name, *args[1:], **kwargs)
            if args:
                args = (self.sized(args[0]), *args[1:])   # ``dict.fromkeys(items)``
        return getattr(receiver, name)(*args, **kwargs)

    def _charge_method(self, receiver: Any, name: str, args: tuple) -> tuple:
        if receiver.__class__ is int:
            if name == "to_bytes" and args and args[0].__class__ is int:
                self.allocate(max(args[0], 0), args[0] // BYTES_PER_INSTRUCTION + 1)
            return args
        size = len(receiver)
        if name == "join" and args:
            items = list(self.sized(args[0]))
            total = sum(len(item) if isinstance(item, _TEXT) else 0 for item in items)
            self.allocate(total + len(receiver) * len(items), (total + len(receiver) * len(items)) // BYTES_PER_INSTRUCTION + len(items))
            return (items, *args[1:])
        if name in ("ljust", "rjust", "center", "zfill") and args and args[0].__class__ is int:
            self._sequence_bytes(max(args[0], size), receiver)
        elif name == "replace" and len(args) >= 2 and isinstance(args[0], _TEXT) and isinstance(args[1], _TEXT):
            growth = max(len(args[1]) - len(args[0]), 0) * (size // max(len(args[0]), 1) + 1)
            self._sequence_bytes(size + growth, receiver)
        elif name == "expandtabs":
            tabsize = args[0] if args and args[0].__class__ is int else 8
            self._sequence_bytes(size * max(tabsize, 1), receiver)
        elif name in ("extend", "update", "fromkeys") and args:
            first = self.sized(args[0])
            grown = len(first) if hasattr(first, "__len__") else 0
            self._sequence_bytes(grown, receiver)
            return (first, *args[1:])
        elif name == "sort":
            self.charge(size * max(size.bit_length(), 1) + 1)
        elif name in _COPYING:
            self._sequence_bytes(size, receiver)
        elif name in ("encode", "decode", "hex"):
            self._sequence_bytes(4 * size if name == "encode" else 2 * size, receiver)
        else:  # count, index, find, rfind, insert, remove, startswith, endswith, fromhex: a scan
            self.charge(size // (BYTES_PER_INSTRUCTION if isinstance(receiver, _TEXT) else 1) + 1)
        return args

    # -- sets, attributes, handlers --------------------------------------------------------------

    def base(self, value: Any) -> Any:
        """A class statement's base: a builtin name's proxy stands for its real type."""
        return getattr(value, "_sandbox_type", value) if isinstance(value, type) else value

    def ordered_set(self, items: Any) -> OrderedSet:
        return OrderedSet(items)

    def setattr(self, target: Any, name: str, value: Any) -> None:
        _refuse_shared(target, name)
        setattr(target, name, value)

    def delattr(self, target: Any, name: str) -> None:
        _refuse_shared(target, name)
        delattr(target, name)

    def caught(self, depth: int) -> None:
        """First statement of every ``except`` handler: the frames between the ``try`` and
        the raise are gone; a limit of the host (its stack, its memory) is never caught."""
        self.depth = depth
        exception = sys.exc_info()[1]
        if isinstance(exception, (RecursionError, MemoryError)):
            self.left = -1
            self.fault = HostLimitExceeded(type(exception).__name__)
            raise self.fault
        if self.left < 0:
            self.out()
        if exception is not None:
            self.scrub_exception(exception)

    def scrub_exception(self, exception: Any) -> None:
        """Take addresses out of an exception's text arguments before canister code reads
        them (CPython writes an object's ``repr`` into some messages: ``[].index(x)``)."""
        if isinstance(exception, BaseException):
            args = exception.args
            if any(type(arg) is str and "0x" in arg for arg in args):
                exception.args = tuple(scrub(arg) if type(arg) is str else arg for arg in args)


def _refuse_shared(target: Any, name: str) -> None:
    if isinstance(target, (type, FunctionType, BuiltinFunctionType, MethodType, ModuleType, ModuleProxy)):
        raise TypeError(f"cannot set or delete attribute {name!r} of {type(target).__name__} objects: "
                        f"they outlive the message (state lives in self.stable)")


def is_fault(exception: BaseException) -> bool:
    return isinstance(exception, SandboxFault)
