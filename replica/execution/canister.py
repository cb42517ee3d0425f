"""The canister SDK: the ``Canister`` base class and the method decorators.

A canister is a ``Canister`` subclass whose methods are marked ``@update``, ``@query`` or
``@callback``. A fresh instance is made for every message (``__init__`` is not called), so
instance attributes never persist: ``self.stable`` is the only persistent state. What a
running method may do goes through ``self._sys``, the per-message ``SystemApi``.

The class's methods are collected once, when the class is made, into a read-only table
``__canister_methods__`` (name → ``MethodSpec``); the execution layer only looks names up
in it, so it never depends on attribute order.

A method may declare Candid types (``@update(candid="(text) -> (nat)")``; see
``candid_methods``): then its argument and reply are Candid, else msgpack.
"""

from __future__ import annotations

import enum
import inspect
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Mapping

from replica.ic.candid import service_description
from state_manager.deadlines import deadline_ns

from .candid_methods import INTERFACE_METHOD, INTERFACE_SIGNATURE, compile_definitions, compile_signature
from .errors import CanisterDefinitionError

__all__ = ["Canister", "MethodKind", "MethodSpec", "update", "query", "callback", "new_instance"]

_KIND_ATTRIBUTE = "__canister_method__"
_CANDID_ATTRIBUTE = "__canister_candid__"


class MethodKind(enum.Enum):
    UPDATE = "update"      # callable by users (ingress) and canisters; may write and call
    QUERY = "query"        # read-only: writes are rolled back and calls refused
    CALLBACK = "callback"  # resumes after a call: ``(self, value, context)``
    INIT = "init"          # ``init(self, arg)`` at install, ``post_upgrade(self, arg)`` after an upgrade


@dataclass(frozen=True, slots=True)
class MethodSpec:
    name: str
    kind: MethodKind
    function: Callable[..., Any]
    takes_arg: bool
    #: The declared Candid types (``replica.ic.candid.Signature``), or None: msgpack.
    candid: Any = None


def _mark(kind: MethodKind) -> Callable[..., Any]:
    def decorator(function: Callable[..., Any] | None = None, *, candid: str | None = None) -> Any:
        if function is None:   # ``@update(candid=...)``: the decorator with the declaration
            if kind is MethodKind.CALLBACK:
                raise CanisterDefinitionError("a @callback takes no Candid types: its values are msgpack")
            return lambda method: decorator(method, candid=candid)
        if not inspect.isfunction(function):
            raise CanisterDefinitionError(f"@{kind.value} applies to plain functions, not {function!r}")
        setattr(function, _KIND_ATTRIBUTE, kind)
        if candid is not None:
            setattr(function, _CANDID_ATTRIBUTE, candid)
        return function
    decorator.__name__ = kind.value
    return decorator


#: ``@update``: a method users and canisters call; ``(self)`` or ``(self, arg)``;
#: ``@update(candid="(text, nat) -> (bool)")``: one parameter per Candid argument type.
update = _mark(MethodKind.UPDATE)
#: ``@query``: a read-only method; ``(self)`` or ``(self, arg)``; ``@query(candid=...)`` too.
query = _mark(MethodKind.QUERY)
#: ``@callback``: resumes after an outgoing call; ``(self, value, context)``.
callback = _mark(MethodKind.CALLBACK)

#: Names the SDK defines on ``Canister``; a subclass may not redefine them.
_SDK_NAMES = ("id", "caller", "time", "deadline", "stable", "certified_data", "call", "reply", "reject", "log", "_sys")


def _positional_arity(cls: type, name: str, function: Callable[..., Any]) -> int:
    """Number of parameters after ``self``; all must be plain positional parameters."""
    parameters = list(inspect.signature(function).parameters.values())
    for parameter in parameters:
        if parameter.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD:
            raise CanisterDefinitionError(f"{cls.__qualname__}.{name}: only plain positional parameters are supported")
    if not parameters:
        raise CanisterDefinitionError(f"{cls.__qualname__}.{name} must take self")
    return len(parameters) - 1


def _method_spec(cls: type, name: str, function: Callable[..., Any], kind: MethodKind,
                 definitions: Any = None) -> MethodSpec:
    arity = _positional_arity(cls, name, function)
    declared = getattr(function, _CANDID_ATTRIBUTE, None)
    if declared is not None:
        owner = f"{cls.__qualname__}.{name}"
        signature = compile_signature(owner, declared, definitions)
        if arity != len(signature.arguments.refs):
            raise CanisterDefinitionError(
                f"{owner} takes {arity} argument(s) but declares {len(signature.arguments.refs)}: {signature.text}")
        return MethodSpec(name, kind, function, arity >= 1, signature)
    if kind is MethodKind.CALLBACK:
        if arity != 2:
            raise CanisterDefinitionError(f"callback {cls.__qualname__}.{name} must take (self, value, context)")
    elif arity > 1:
        raise CanisterDefinitionError(f"{kind.value} method {cls.__qualname__}.{name} takes (self) or (self, arg)")
    return MethodSpec(name, kind, function, arity == 1)


#: Methods the system runs at install (``init``) and after an upgrade (``post_upgrade``).
_LIFECYCLE_NAMES = ("init", "post_upgrade")


def _lifecycle_spec(cls: type, name: str) -> MethodSpec | None:
    function = inspect.getattr_static(cls, name, None)
    if function is None:
        return None
    if not inspect.isfunction(function):
        raise CanisterDefinitionError(f"{cls.__qualname__}.{name} must be a plain method")
    return _method_spec(cls, name, function, MethodKind.INIT)


def _candid_interface(self: Any) -> str:
    return type(self).__canister_candid_interface__


def collect_methods(cls: type) -> tuple[Mapping[str, MethodSpec], MethodSpec | None, MethodSpec | None]:
    """The method table of ``cls`` (inherited methods included), its ``init`` and its
    ``post_upgrade``, if any. A class with Candid methods also answers the query
    ``__get_candid_interface_tmp_hack`` with its service description, as IC canisters do."""
    definitions = compile_definitions(cls.__qualname__, getattr(cls, "CANDID_TYPES", ""))
    methods: dict[str, MethodSpec] = {}
    for name in sorted(dir(cls)):
        attribute = inspect.getattr_static(cls, name)
        kind = getattr(attribute, _KIND_ATTRIBUTE, None) if inspect.isfunction(attribute) else None
        if kind is None:
            continue
        if attribute.__name__ != name:
            # Callbacks are stored by name; an alias would resume a different name.
            raise CanisterDefinitionError(f"{cls.__qualname__}.{name} is an alias of {attribute.__name__}")
        if name in _LIFECYCLE_NAMES:
            raise CanisterDefinitionError(f"{cls.__qualname__}.{name} is run by the system and cannot be @{kind.value}")
        methods[name] = _method_spec(cls, name, attribute, kind, definitions)
    declared = [(name, spec.candid, spec.kind is MethodKind.QUERY) for name, spec in methods.items() if spec.candid]
    cls.__canister_candid_interface__ = service_description(declared, definitions) if declared else ""
    if declared:
        methods[INTERFACE_METHOD] = MethodSpec(INTERFACE_METHOD, MethodKind.QUERY, _candid_interface, False,
                                               INTERFACE_SIGNATURE)
    return MappingProxyType(methods), _lifecycle_spec(cls, "init"), _lifecycle_spec(cls, "post_upgrade")


class Canister:
    """Base class of canister apps (see the module docstring for the model)."""

    #: Declared code version; part of the module hash, so bump it when behaviour changes.
    VERSION: int | str = 0
    #: Candid type definitions the methods' ``candid=`` signatures may name.
    CANDID_TYPES: str = ""

    __slots__ = ("_sys",)
    __canister_methods__: Mapping[str, MethodSpec] = MappingProxyType({})
    __canister_init__: MethodSpec | None = None
    __canister_post_upgrade__: MethodSpec | None = None
    __canister_candid_interface__: str = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        version = cls.VERSION
        if not (type(version) is int or type(version) is str):
            raise CanisterDefinitionError(f"{cls.__qualname__}.VERSION must be an int or a str")
        for name in _SDK_NAMES:
            if name in cls.__dict__:
                raise CanisterDefinitionError(f"{cls.__qualname__}.{name} redefines an SDK name")
        cls.__canister_methods__, cls.__canister_init__, cls.__canister_post_upgrade__ = collect_methods(cls)

    # -- what a running message can read ----------------------------------------------------

    @property
    def id(self) -> int:
        """This canister's id."""
        return self._sys.canister_id

    @property
    def caller(self) -> bytes | int:
        """Who made the current call: user id bytes (ingress) or a canister id (int).
        In a callback it is the caller of the call being handled."""
        return self._sys.caller

    @property
    def time(self) -> int:
        """The batch time in nanoseconds (the same for every message of a round)."""
        return self._sys.time

    @property
    def deadline(self) -> int:
        """The deadline of the call being handled, in nanoseconds since the epoch (a whole
        number of seconds); 0 for a guaranteed-response call and for users' calls. In a
        callback, the deadline of the call that is being answered."""
        return deadline_ns(self._sys.deadline)

    @property
    def stable(self):
        """The persistent ``StableMap`` (text keys, immutable canonical values); for a
        sandboxed canister its charged view (``sandbox.stable_view``)."""
        view = self._sys.stable_view
        return self._sys.stable if view is None else view

    @property
    def certified_data(self) -> bytes:
        """Up to 32 bytes certified under ``/canister/<id>/certified_data``."""
        return self._sys.get_certified_data()

    @certified_data.setter
    def certified_data(self, data: bytes) -> None:
        self._sys.set_certified_data(data)

    # -- what a running message can do ------------------------------------------------------

    def call(
        self, dst: int, method: str, arg: Any = None, *, on_reply: Any, on_reject: Any, context: Any = None,
        timeout_s: int | None = None,
    ) -> None:
        """Call ``method`` of canister ``dst`` with ``arg``. ``on_reply(self, value, context)``
        or ``on_reject(self, (code, message), context)`` resumes when the answer arrives;
        both must be ``@callback`` methods of this class. Raises ``CallError`` if the call
        cannot be queued. The call is sent only if the current message does not trap.

        Without ``timeout_s`` the call is guaranteed-response: it gets exactly one answer,
        however long that takes. With ``timeout_s=T`` (an int ≥ 1) it is a bounded-wait call
        with deadline ``⌊now⌋ + min(T, 300)`` seconds: it gets at most one response and its
        callback runs exactly once — with the reply, a reject, or ``SYS_UNKNOWN`` (code 6:
        the call may or may not have executed) once the deadline has passed or the response
        was shed under memory pressure."""
        self._sys.call(self, dst, method, arg, on_reply, on_reject, context, timeout_s)

    def reply(self, value: Any = None) -> None:
        """Answer the current call with ``value`` (at most one answer per call)."""
        self._sys.reply(value)

    def reject(self, message: str) -> None:
        """Answer the current call with a ``CANISTER_REJECT`` reject carrying ``message``."""
        self._sys.reject(message)

    def log(self, text: str) -> None:
        """Append ``text`` to this canister's log (``replica canister logs ID``), stamped
        with the batch time. Kept only if the message does not trap; the log keeps its
        newest 4 KiB (``Limits.max_canister_log_bytes``), across upgrades, not reinstalls."""
        self._sys.log(text)


def new_instance(cls: type[Canister], system: Any) -> Canister:
    """A fresh instance bound to one message's system API (``__init__`` is not run)."""
    instance = cls.__new__(cls)
    instance._sys = system
    return instance
