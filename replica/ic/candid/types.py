"""Candid types as tables: the one representation of wire types and declared types.

A type is a *reference*: a negative opcode for a primitive type, or the index of an entry in
a ``TypeTable``, as the binary format has it (the Candid specification, *Binary Format*,
*Types*: "Every nested type is encoded as either a primitive type, via the negative op-code,
or an index into a list of type definitions"). The table a message carries is read into one
(``decode``); the types a method declares are compiled into one (``syntax``), so recursion is
an index and decoding walks two tables side by side.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "NULL", "BOOL", "NAT", "INT", "NAT8", "NAT16", "NAT32", "NAT64", "INT8", "INT16", "INT32", "INT64",
    "FLOAT32", "FLOAT64", "TEXT", "RESERVED", "EMPTY", "PRINCIPAL", "OPT", "VEC", "RECORD", "VARIANT",
    "FUNC", "SERVICE", "PRIMITIVES", "PRIMITIVE_NAMES", "FIXED_WIDTH", "MAX_FIELD_ID",
    "Field", "Entry", "TypeTable", "idl_hash", "admits_none",
]

# Opcodes (the specification's T function; sleb128 on the wire).
NULL, BOOL, NAT, INT = -1, -2, -3, -4
NAT8, NAT16, NAT32, NAT64 = -5, -6, -7, -8
INT8, INT16, INT32, INT64 = -9, -10, -11, -12
FLOAT32, FLOAT64, TEXT, RESERVED, EMPTY = -13, -14, -15, -16, -17
OPT, VEC, RECORD, VARIANT, FUNC, SERVICE = -18, -19, -20, -21, -22, -23
PRINCIPAL = -24
#: "A serialised type may be headed by an opcode other than the ones defined above (i.e.,
#: less than -24) ... called a future type": every opcode below this one.
LAST_KNOWN_OPCODE = PRINCIPAL

PRIMITIVE_NAMES: dict[str, int] = {
    "null": NULL, "bool": BOOL, "nat": NAT, "int": INT, "nat8": NAT8, "nat16": NAT16, "nat32": NAT32,
    "nat64": NAT64, "int8": INT8, "int16": INT16, "int32": INT32, "int64": INT64, "float32": FLOAT32,
    "float64": FLOAT64, "text": TEXT, "reserved": RESERVED, "empty": EMPTY, "principal": PRINCIPAL,
}
PRIMITIVES = frozenset(PRIMITIVE_NAMES.values())
OPCODE_NAMES = {code: name for name, code in PRIMITIVE_NAMES.items()}

#: Fixed-width numbers: opcode → (bytes, signed).
FIXED_WIDTH: dict[int, tuple[int, bool]] = {
    NAT8: (1, False), NAT16: (2, False), NAT32: (4, False), NAT64: (8, False),
    INT8: (1, True), INT16: (2, True), INT32: (4, True), INT64: (8, True),
}

#: "An id value must be smaller than 2^32".
MAX_FIELD_ID = 2**32 - 1


def idl_hash(name: str) -> int:
    """The field id of a name: "hash(id) = ( Sum_(i=0..k) utf8(id)[i] * 223^(k-i) ) mod 2^32"."""
    value = 0
    for byte in name.encode("utf-8", "surrogatepass"):
        value = (value * 223 + byte) & 0xFFFFFFFF
    return value


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a record or variant: its id, its type, and the label a host value uses
    (the name for a named field, else the id)."""

    id: int
    type: int
    label: str | int


@dataclass(frozen=True, slots=True)
class Entry:
    """A constructed type. ``kind`` is its opcode (OPT, VEC, RECORD, VARIANT, FUNC, SERVICE, or
    a future type's). ``inner`` is the element of an opt or vec; ``fields`` the fields of a
    record or variant, ordered by id. ``tuple_like``: a record with fields 0..n-1 (n ≥ 1), a
    Python tuple. ``listed``: an opt whose element type has None among its values (an opt,
    null, reserved), so the option is a list of zero or one item to keep ``null`` and
    ``opt null`` apart."""

    kind: int
    inner: int = 0
    fields: tuple[Field, ...] = ()
    tuple_like: bool = False
    listed: bool = False


@dataclass(frozen=True, slots=True)
class TypeTable:
    entries: tuple[Entry, ...]

    def entry(self, ref: int) -> Entry | None:
        """The entry a reference names, or None for a primitive."""
        return self.entries[ref] if ref >= 0 else None


def admits_none(table: TypeTable, ref: int) -> bool:
    """``null <: t``: t is null, reserved or an opt (the specification's premise for optional
    record fields and arguments)."""
    if ref < 0:
        return ref == NULL or ref == RESERVED
    return table.entries[ref].kind == OPT
