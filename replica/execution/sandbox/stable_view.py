"""``StableView``: ``self.stable`` as a sandboxed canister sees it.

The mapping API of ``StableMap`` (``get``, ``[]``, ``in``, ``len``, iteration, ``keys``,
``items``, ``irange``, ``[]=``, ``del``, ``pop``) and nothing else: no transaction control,
no internals. Every access is charged (``meter``'s unit): a read one instruction plus its
key's bytes, a write the encoded size of its key and value, listing keys or items one
instruction per entry. Keys are exactly ``str`` and values exactly the plain types (no
subclasses, whose methods would run as canister code long after the message).

The view also keeps ``growth``: the change of the canister's stable size in encoded bytes
(``stable_entry_bytes``) this message caused, so the runtime can hold the size to
``Limits.max_stable_state_bytes`` when the message commits.
"""

from __future__ import annotations

from typing import Any, Iterator

from state_manager.encoding import encode
from state_manager.stable_map import StableMap, StableValueError

from .meter import BYTES_PER_INSTRUCTION, Meter

__all__ = ["StableView", "stable_entry_bytes", "stable_state_bytes", "check_exact_value"]

_ABSENT = object()
#: Instructions of one read (``get``, ``[]``, ``in``).
READ = 1
_SCALARS = (type(None), bool, int, str, bytes)
#: ``_int_bytes`` of an int in ``[0, 2**64)`` by its bit length (one lookup on the write path).
_UINT_BYTES = tuple(1 if bits <= 7 else 2 if bits <= 8 else 3 if bits <= 16 else 5 if bits <= 32 else 9
                    for bits in range(65))
_UINT_MAX = 2**64 - 1


def _int_bytes(value: int) -> int:
    """The length of msgpack's shortest encoding of a 64-bit ``value`` (what ``encode`` writes)."""
    if -32 <= value <= 127:
        return 1
    if value > 0:
        return 2 if value <= 0xFF else 3 if value <= 0xFFFF else 5 if value <= 0xFFFFFFFF else 9
    return 2 if value >= -0x80 else 3 if value >= -0x8000 else 5 if value >= -0x80000000 else 9


def stable_entry_bytes(key: str, value: Any) -> int:
    """``len(UTF-8 key) + len(encode(value))``: what one entry adds to the stable size."""
    key_bytes = len(key) if key.isascii() else len(key.encode("utf-8"))
    if type(value) is int:
        return key_bytes + _int_bytes(value)
    return key_bytes + len(encode(value))


def stable_state_bytes(stable: StableMap) -> int:
    """The stable size of a canister: the sum of ``stable_entry_bytes`` over its entries."""
    return sum(stable_entry_bytes(key, value) for key, value in stable.items())


def check_exact_value(value: Any, depth: int = 0) -> None:
    """Refuse values that are not exactly None, bool, int, str, bytes or tuples of them."""
    kind = type(value)
    if kind is tuple and depth < 32:
        for item in value:
            check_exact_value(item, depth + 1)
    elif kind not in _SCALARS:
        raise StableValueError(
            f"stable state holds None, bool, int, str, bytes and tuples of them (exactly), not {kind.__name__}")


class StableView:
    """``self.stable`` for sandboxed code (module docstring)."""

    __slots__ = ("_sandbox_map", "_sandbox_meter", "_sandbox_growth")

    def __init__(self, stable: StableMap, meter: Meter) -> None:
        self._sandbox_map = stable
        self._sandbox_meter = meter
        self._sandbox_growth = 0

    @property
    def growth(self) -> int:
        return self._sandbox_growth

    def _read(self, key: Any) -> None:
        meter = self._sandbox_meter
        meter.left -= READ
        if meter.left < 0:
            meter.out()

    # -- reading (one instruction each: a key's hash is computed once, a lookup is O(1)) -----------

    def __getitem__(self, key: str) -> Any:
        meter = self._sandbox_meter
        meter.left -= READ
        if meter.left < 0:
            meter.out()
        return self._sandbox_map[key]

    def get(self, key: str, default: Any = None) -> Any:
        meter = self._sandbox_meter
        meter.left -= READ
        if meter.left < 0:
            meter.out()
        return self._sandbox_map.get(key, default)

    def __contains__(self, key: object) -> bool:
        meter = self._sandbox_meter
        meter.left -= READ
        if meter.left < 0:
            meter.out()
        return key in self._sandbox_map

    def __len__(self) -> int:
        return len(self._sandbox_map)

    def keys(self) -> list[str]:
        """The keys in order (a list, charged one instruction per key)."""
        self._sandbox_meter.charge(len(self._sandbox_map) + 1)
        return list(self._sandbox_map.keys())

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def items(self) -> list[tuple[str, Any]]:
        """The entries in key order (a list, charged one instruction per entry)."""
        self._sandbox_meter.charge(len(self._sandbox_map) + 1)
        return list(self._sandbox_map.items())

    def irange(self, minimum: str | None = None, maximum: str | None = None) -> Iterator[str]:
        """Keys in ``[minimum, maximum]`` in order, charged one instruction per key."""
        meter = self._sandbox_meter
        for key in self._sandbox_map.irange(minimum, maximum):
            meter.charge(1)
            yield key

    # -- writing ---------------------------------------------------------------------------------

    def __setitem__(self, key: str, value: Any) -> None:
        if key.__class__ is not str:
            raise StableValueError(f"stable keys are str, not {type(key).__name__}")
        # The common write, an int under an ASCII key, is sized inline (as
        # ``stable_entry_bytes`` sizes it): one call less per write on the hottest path.
        key_bytes = len(key) if key.isascii() else len(key.encode("utf-8"))
        if value.__class__ is int:
            size = key_bytes + (_UINT_BYTES[value.bit_length()] if 0 <= value <= _UINT_MAX else _int_bytes(value))
        else:
            if value.__class__ not in _SCALARS:
                check_exact_value(value)
            size = key_bytes + len(encode(value))
        meter = self._sandbox_meter
        meter.left -= (size >> 4) + 1
        if meter.left < 0:
            meter.out()
        stable = self._sandbox_map
        old = stable.get(key, _ABSENT)
        stable[key] = value
        if old is not _ABSENT:
            size -= key_bytes + ((_UINT_BYTES[old.bit_length()] if 0 <= old <= _UINT_MAX else _int_bytes(old))
                                 if old.__class__ is int else len(encode(old)))
        self._sandbox_growth += size

    def __delitem__(self, key: str) -> None:
        self._read(key)
        old = self._sandbox_map[key]
        del self._sandbox_map[key]
        self._sandbox_growth -= stable_entry_bytes(key, old)

    def pop(self, key: str, default: Any = _ABSENT) -> Any:
        self._read(key)
        if key in self._sandbox_map:
            value = self._sandbox_map[key]
            del self[key]
            return value
        if default is _ABSENT:
            raise KeyError(key)
        return default

    def __repr__(self) -> str:
        return f"<stable state of {len(self._sandbox_map)} entries>"
