"""The builtins and modules canister code gets: no host access, charged by size.

``make_builtins(sandbox)`` returns the ``__builtins__`` of one loaded module. It holds no
name that reaches the host (``open``, ``__import__`` of anything but ``subset.ALLOWED_MODULES``,
``exec``, ``id``, ``hash``, ...). The builtins whose work grows with their arguments charge
``sandbox`` by size before they run (``list``, ``tuple``, ``sorted`` — ``n * ceil(log2 n)`` —,
``sum``, ``min``, ``max``, ``bytes(n)``, ``bytearray(n)``, ``pow``, ``int`` ↔ ``str``, ...);
``set``/``frozenset`` are the ordered sets; ``type`` takes one argument and never returns a
metaclass; ``str``/``repr``/``ascii``/``format`` never show an address; ``range`` is
``values.Range``.
"""

from __future__ import annotations

import builtins
import functools
import hashlib
import math
import string
from typing import Any

from state_manager.messages import MANAGEMENT_CANISTER_ID, RejectCode

from .. import codec
from ..canister import Canister, callback, query, update
from ..errors import ApiUsageError, CallError, Trap
from . import subset
from .meter import BYTES_PER_INSTRUCTION
from .operations import Sandbox, _check_spec
from .ordered_set import OrderedFrozenSet, OrderedSet
from .values import ModuleProxy, Range, check_int_digits, scrub

__all__ = ["make_builtins", "REAL_TYPES"]

_PASSED = (
    "abs", "bool", "callable", "chr", "classmethod", "dict", "divmod", "float", "hasattr", "isinstance",
    "issubclass", "len", "next", "ord", "property", "round", "slice", "staticmethod", "None", "True", "False",
    "NotImplemented", "Ellipsis", "Exception", "ArithmeticError", "AssertionError", "AttributeError",
    "IndexError", "KeyError", "LookupError", "NameError", "NotImplementedError", "OverflowError",
    "RuntimeError", "StopIteration", "TypeError", "UnicodeError", "UnicodeDecodeError", "UnicodeEncodeError",
    "ValueError", "ZeroDivisionError", "__build_class__",
)
_PLAIN = (str, int, float, bool, type(None), bytes)
_SHORT_INT = 10**18
_GENERATOR = type(_ for _ in ())
#: The real type behind each proxied builtin name (``isinstance`` and ``type(x) is`` tests
#: with these names run on the real types: ``metering``).
REAL_TYPES = {"list": list, "tuple": tuple, "dict": dict, "set": OrderedSet, "frozenset": OrderedFrozenSet,
              "bytes": bytes, "bytearray": bytearray, "int": int, "str": str, "range": Range}


def _text(value: Any, convert: Any, sandbox: Sandbox) -> str:
    if value.__class__ is int:
        check_int_digits(value)
    result = convert(value)
    sandbox.charge(len(result) // BYTES_PER_INSTRUCTION + 1)
    return result if value.__class__ in _PLAIN else scrub(result)


def _hash_module(sandbox: Sandbox) -> ModuleProxy:
    class Hash:
        """A hashlib object whose ``update`` is charged by the size of its input."""

        __slots__ = ("_sandbox_hash",)

        def __init__(self, inner: Any) -> None:
            self._sandbox_hash = inner

        def update(self, data: Any) -> None:
            sandbox.charge(len(data) // BYTES_PER_INSTRUCTION + 1)
            self._sandbox_hash.update(data)

        def digest(self) -> bytes:
            return self._sandbox_hash.digest()

        def hexdigest(self) -> str:
            return self._sandbox_hash.hexdigest()

        def copy(self) -> "Hash":
            return Hash(self._sandbox_hash.copy())

        @property
        def name(self) -> str:
            return self._sandbox_hash.name

        @property
        def digest_size(self) -> int:
            return self._sandbox_hash.digest_size

        def __repr__(self) -> str:
            return f"<{self._sandbox_hash.name} hash object>"

    def constructor(name: str) -> Any:
        make = getattr(hashlib, name)

        def new(data: Any = b"") -> Hash:
            sandbox.charge(len(data) // BYTES_PER_INSTRUCTION + 1)
            return Hash(make(data))
        new.__name__ = new.__qualname__ = name
        return new

    return ModuleProxy("hashlib", {name: constructor(name) for name in subset.ALLOWED_MODULES["hashlib"]})


def _math_module(sandbox: Sandbox) -> ModuleProxy:
    names = {name: getattr(math, name) for name in subset.ALLOWED_MODULES["math"]}

    def big(n: Any) -> int:
        return max(n, 0) if n.__class__ is int else 0

    def factorial(n: Any) -> int:
        bits = big(n) * max(big(n).bit_length(), 1)
        sandbox.allocate(bits // 8, (bits // 64 + 1) * max(big(n).bit_length(), 1))
        return math.factorial(n)

    def comb(n: Any, k: Any) -> int:
        bits = big(n) * max(big(n).bit_length(), 1)
        sandbox.allocate(bits // 8, (bits // 64 + 1) * max(big(n).bit_length(), 1))
        return math.comb(n, k)

    def perm(n: Any, k: Any = None) -> int:
        bits = big(n) * max(big(n).bit_length(), 1)
        sandbox.allocate(bits // 8, (bits // 64 + 1) * max(big(n).bit_length(), 1))
        return math.perm(n, k)

    def prod(iterable: Any, *, start: Any = 1) -> Any:
        result = start
        for item in sandbox.sized(iterable):
            result = sandbox.mul(result, item)
        return result

    def isqrt(n: Any) -> int:
        words = big(n).bit_length() // 64 + 1
        sandbox.charge(words * words + 1)
        return math.isqrt(n)

    def fsum(iterable: Any) -> float:
        return math.fsum(sandbox.sized(iterable))

    names.update(factorial=factorial, comb=comb, perm=perm, prod=prod, isqrt=isqrt, fsum=fsum)
    return ModuleProxy("math", names)


def _sdk_module(sandbox: Sandbox) -> ModuleProxy:
    """``replica.sdk`` as canister code imports it (the SDK's names, taken from where they
    are defined: the sandbox is below the SDK module)."""
    names = {"Canister": Canister, "update": update, "query": query, "callback": callback, "CallError": CallError,
             "Trap": Trap, "ApiUsageError": ApiUsageError, "RejectCode": RejectCode,
             "MANAGEMENT_CANISTER_ID": MANAGEMENT_CANISTER_ID}

    def encode_value(value: Any) -> bytes:
        data = codec.encode_value(value)
        sandbox.allocate(len(data), len(data) // BYTES_PER_INSTRUCTION + 1)
        return data

    def decode_payload(payload: Any) -> Any:
        sandbox.charge(len(payload) // BYTES_PER_INSTRUCTION + 1)
        return codec.decode_payload(payload)

    names.update(encode_value=encode_value, decode_payload=decode_payload)
    return ModuleProxy("replica.sdk", names)


def _modules(sandbox: Sandbox) -> dict[str, ModuleProxy]:
    return {
        "__future__": ModuleProxy("__future__", {"annotations": __import__("__future__").annotations}),
        "replica.sdk": _sdk_module(sandbox),
        "math": _math_module(sandbox),
        "hashlib": _hash_module(sandbox),
        "functools": ModuleProxy("functools", {"reduce": functools.reduce, "cmp_to_key": functools.cmp_to_key}),
        "string": ModuleProxy("string", {name: getattr(string, name) for name in subset.ALLOWED_MODULES["string"]}),
    }


def make_builtins(sandbox: Sandbox) -> dict[str, Any]:
    """The ``__builtins__`` of one loaded module, charging ``sandbox`` (module docstring)."""
    table: dict[str, Any] = {name: getattr(builtins, name) for name in _PASSED}
    modules = _modules(sandbox)
    sized = sandbox.sized

    def import_(name: str, globals_: Any = None, locals_: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        if level or name not in modules:
            raise ImportError(f"import of {name!r} is not allowed")
        return modules[name]

    def range_(*args: Any) -> Range:
        return Range.make(builtins.range(*args), sandbox.charge)

    # A generator is handed over as it is (``sized`` charges nothing for it: its items are
    # charged as they are made), without the call.
    def list_(iterable: Any = ()) -> list:
        return list(iterable if iterable.__class__ is _GENERATOR else sized(iterable))

    def tuple_(iterable: Any = ()) -> tuple:
        return tuple(iterable if iterable.__class__ is _GENERATOR else sized(iterable))

    def dict_(*args: Any, **kwargs: Any) -> dict:
        return dict(*(sized(a) for a in args), **kwargs)

    def set_(iterable: Any = ()) -> OrderedSet:
        return OrderedSet(sized(iterable))

    def frozenset_(iterable: Any = ()) -> OrderedFrozenSet:
        return OrderedFrozenSet(sized(iterable))

    def sorted_(iterable: Any, *, key: Any = None, reverse: bool = False) -> list:
        kind = iterable.__class__
        if kind is list or kind is tuple or kind is dict:
            # Charged as below (``sized``, then the sort), in one step and one copy.
            n = len(iterable)
            left = sandbox.left - (n + 1 + n * max(n.bit_length(), 1) + 1)
            sandbox.left = left
            if left < 0:
                sandbox.out()
            return sorted(iterable, key=key, reverse=reverse)
        items = list(sized(iterable))
        sandbox.charge(len(items) * max(len(items).bit_length(), 1) + 1)
        return sorted(items, key=key, reverse=reverse)

    def reduce_with(function: Any) -> Any:
        def reducer(iterable: Any, *args: Any, **kwargs: Any) -> Any:
            return function(iterable if iterable.__class__ is _GENERATOR else sized(iterable), *args, **kwargs)
        reducer.__name__ = reducer.__qualname__ = function.__name__
        return reducer

    def lazy(function: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for a in args:   # no generator for the common call without a range
                if a.__class__ is Range:
                    return function(*(sized(a) if a.__class__ is Range else a for a in args), **kwargs)
            return function(*args, **kwargs)
        wrapper.__name__ = wrapper.__qualname__ = function.__name__
        return wrapper

    def iter_(iterable: Any, *sentinel: Any) -> Any:
        if sentinel:
            raise TypeError("iter() takes one argument here")
        return iter(sandbox.loop(iterable) if iterable.__class__ is not Range else iterable)

    def bytes_(source: Any = b"", *args: Any) -> bytes:
        if source.__class__ is int:
            sandbox.allocate(max(source, 0), source // BYTES_PER_INSTRUCTION + 1)
            return bytes(source)
        if isinstance(source, str):
            sandbox.allocate(4 * len(source), len(source) // BYTES_PER_INSTRUCTION + 1)
            return bytes(source, *args)
        return bytes(sized(source), *args)

    def bytearray_(source: Any = b"", *args: Any) -> bytearray:
        if source.__class__ is int:
            sandbox.allocate(max(source, 0), source // BYTES_PER_INSTRUCTION + 1)
            return bytearray(source)
        if isinstance(source, str):
            sandbox.allocate(4 * len(source), len(source) // BYTES_PER_INSTRUCTION + 1)
            return bytearray(source, *args)
        return bytearray(sized(source), *args)

    def int_(value: Any = 0, *args: Any) -> int:
        if isinstance(value, (str, bytes, bytearray)) and len(value) > 4000:
            base = args[0] if args else 10
            if base not in (2, 4, 8, 16, 32):
                raise ValueError("decimal text of more than 4,000 digits does not convert to int here")
        return int(value, *args)

    def str_(value: Any = "", *args: Any) -> str:
        if value.__class__ is int and -_SHORT_INT < value < _SHORT_INT:
            return str(value)   # at most 19 digits: the call's own instructions cover it
        if args:
            sandbox.charge(len(value) // BYTES_PER_INSTRUCTION + 1)
            return str(value, *args)
        return value if value.__class__ is str else _text(value, str, sandbox)

    def repr_(value: Any) -> str:
        return _text(value, repr, sandbox)

    def ascii_(value: Any) -> str:
        return _text(value, ascii, sandbox)

    def format_(value: Any, spec: str = "") -> str:
        _check_spec(spec)
        return _text(value, lambda v: format(v, spec), sandbox)

    def number_text(function: Any) -> Any:
        def convert(value: Any) -> str:
            sandbox.charge(value.bit_length() // 64 + 1 if value.__class__ is int else 1)
            return function(value)
        convert.__name__ = convert.__qualname__ = function.__name__
        return convert

    def sum_(iterable: Any, start: Any = 0) -> Any:
        if isinstance(start, (list, tuple, bytes, bytearray, str)):
            raise TypeError("sum() adds numbers here: join or extend sequences instead")
        return sum(sized(iterable), start)

    def print_(*values: Any, sep: Any = None, end: Any = None, file: Any = None, flush: Any = False) -> None:
        """``print``: one record of the canister's log (``self.log``) per call, the values as
        ``str`` shows them joined by ``sep``, then ``end`` without its final newline."""
        if file is not None:
            raise TypeError("print() writes to the canister's log only: no file")
        if (sep is not None and sep.__class__ is not str) or (end is not None and end.__class__ is not str):
            raise TypeError("print(): sep and end are text (str) or None")
        text = (" " if sep is None else sep).join([str_(value) for value in values]) + ("\n" if end is None else end)
        log = sandbox.log
        if log is not None:
            log(text[:-1] if text.endswith("\n") else text)
        else:
            sandbox.charge(len(text) // BYTES_PER_INSTRUCTION + 1)

    proxies = {
        real: _type_proxy(name, real, call) for name, real, call in (
            ("list", list, list_), ("tuple", tuple, tuple_), ("dict", dict, dict_), ("set", OrderedSet, set_),
            ("frozenset", OrderedFrozenSet, frozenset_), ("bytes", bytes, bytes_),
            ("bytearray", bytearray, bytearray_), ("int", int, int_), ("str", str, str_), ("range", Range, range_),
        )
    }

    def type_(value: Any) -> type:
        kind = type(value)
        proxy = proxies.get(kind)   # a proxied type is no metaclass: answered first
        if proxy is not None:
            return proxy
        if issubclass(kind, type):
            raise TypeError("type() of a class is not available")
        return kind

    table.update({proxy.__name__: proxy for proxy in proxies.values()})
    table.update({
        "__import__": import_, "sorted": sorted_, "sum": sum_, "min": reduce_with(min),
        "max": reduce_with(max), "any": reduce_with(any), "all": reduce_with(all), "enumerate": lazy(enumerate),
        "zip": lazy(zip), "map": lazy(map), "filter": lazy(filter), "reversed": lazy(reversed), "iter": iter_,
        "repr": repr_, "ascii": ascii_, "format": format_, "type": type_, "pow": sandbox.pow,
        "hex": number_text(hex), "oct": number_text(oct), "bin": number_text(bin), "print": print_,
    })
    return table


class _TypeProxy(type):
    """The metaclass of the names ``list``, ``str``, ``int``, ... in canister code: each
    stands for the real type (``isinstance``, ``issubclass``, subclassing, its attributes such
    as ``int.from_bytes``), but calling it goes through the charged constructor."""

    def __instancecheck__(cls, value: Any) -> bool:
        return isinstance(value, cls._sandbox_type)

    def __subclasscheck__(cls, kind: Any) -> bool:
        return issubclass(kind, cls._sandbox_type)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return cls._sandbox_call(*args, **kwargs)

    def __getattr__(cls, name: str) -> Any:
        return getattr(cls._sandbox_type, name)

    def __mro_entries__(cls, bases: tuple) -> tuple:
        return (cls._sandbox_type,)

    def __repr__(cls) -> str:
        return f"<class {cls.__name__!r}>"

    def __setattr__(cls, name: str, value: Any) -> None:
        raise TypeError(f"class {cls.__name__} is read-only")


def _type_proxy(name: str, real: type, call: Any) -> type:
    """A proxy class for ``real``; its own metaclass (a subclass of ``_TypeProxy``) calls
    ``call`` (a static ``__call__``: no frame between) and checks instances directly."""

    def instancecheck(cls: Any, value: Any) -> bool:
        return isinstance(value, real)

    meta = type.__new__(_TypeProxy.__class__, f"{name}_proxy", (_TypeProxy,),
                        {"__call__": staticmethod(call), "__instancecheck__": instancecheck})
    return type.__new__(meta, name, (), {"_sandbox_type": real, "_sandbox_call": staticmethod(call), "__slots__": ()})
