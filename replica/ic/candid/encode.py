"""Writing Python values as a Candid message at declared types (the Candid specification,
*Binary Format*: ``B(kv* : <datatype>*) = "DIDL" T*(<comptype>*) I*(<datatype>*) M(kv*)``).

The declared ``TypeTable`` is the message's type table, so the bytes depend only on the
types and the values. Host values, by type (only these exact built-in types are accepted, so
encoding never runs code of the value's own class):

* ``null``, ``reserved``: None; ``bool``: bool; ``nat``, ``int``, ``nat8``..``int64``: int in
  range; ``float32``, ``float64``: float or int; ``text``: str; ``principal``: bytes (at most
  29) or a ``Principal``;
* ``opt t``: None or a value of t; when t has None among its values (an opt, null, reserved),
  a list of zero or one value, so ``null`` and ``opt null`` stay apart;
* ``vec t``: a list or tuple; ``blob`` (``vec nat8``) also bytes or bytearray;
* ``record``: a dict keyed by field name (a numeric field by its int id); optional fields
  may be left out, unknown keys are refused; a tuple-like record (fields 0..n-1) a tuple or
  list;
* ``variant``: a dict of one entry, tag → value; a tag of type null may be given as its
  name alone.

A value of another type raises ``CandidValueRefused``. Every value costs a unit of a work
quota and nests at most ``MAX_DEPTH`` deep, so cyclic or hugely shared values are refused
(``CandidLimitExceeded``) instead of running away; the units used are returned for metering.
"""

from __future__ import annotations

import struct
from typing import Any

from ..errors import CandidLimitExceeded, CandidValueRefused
from ..principal import Principal
from .decode import MAGIC, MAX_DEPTH, MAX_PRINCIPAL_BYTES
from .types import (
    BOOL, EMPTY, FIXED_WIDTH, FLOAT32, FLOAT64, INT, NAT, NAT8, NULL, OPCODE_NAMES, OPT, PRINCIPAL, RECORD, RESERVED,
    TEXT, VARIANT, VEC, Entry, TypeTable, admits_none,
)
from .wire import leb128, sleb128

__all__ = ["encode_message", "encode_header", "DEFAULT_ENCODE_QUOTA"]

DEFAULT_ENCODE_QUOTA = 10_000_000
_FLOAT = {FLOAT32: struct.Struct("<f"), FLOAT64: struct.Struct("<d")}
_SEQUENCES = (list, tuple)


def encode_header(table: TypeTable, refs: tuple[int, ...]) -> bytes:
    out = bytearray(MAGIC)
    out += leb128(len(table.entries))
    for entry in table.entries:
        out += sleb128(entry.kind)
        if entry.kind == OPT or entry.kind == VEC:
            out += sleb128(entry.inner)
        else:
            out += leb128(len(entry.fields))
            for field in entry.fields:
                out += leb128(field.id) + sleb128(field.type)
    out += leb128(len(refs))
    for ref in refs:
        out += sleb128(ref)
    return bytes(out)


def _refuse(ref_name: str, value: Any, why: str = "") -> CandidValueRefused:
    text = f"a {type(value).__name__} is not a value of type {ref_name}"
    return CandidValueRefused(text + (f" ({why})" if why else ""))


class _Encoder:
    __slots__ = ("table", "out", "left", "_labels")

    def __init__(self, table: TypeTable, quota: int) -> None:
        self.table = table
        self.out = bytearray()
        self.left = quota
        self._labels: dict[int, dict[Any, tuple[int, Any]]] = {}

    def charge(self, units: int) -> None:
        self.left -= units
        if self.left < 0:
            raise CandidLimitExceeded("encoding the value needs more work than its quota allows")

    def name(self, ref: int) -> str:
        if ref < 0:
            return OPCODE_NAMES[ref]
        return {OPT: "opt", VEC: "vec", RECORD: "record", VARIANT: "variant"}[self.table.entries[ref].kind]

    def value(self, ref: int, value: Any, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise CandidLimitExceeded(f"a value nested deeper than {MAX_DEPTH} (or cyclic)")
        self.charge(1)
        if ref < 0:
            self.primitive(ref, value)
            return
        entry = self.table.entries[ref]
        kind = entry.kind
        out = self.out
        if kind == OPT:
            if entry.listed:
                if type(value) not in _SEQUENCES or len(value) > 1:
                    raise _refuse("opt of an optional type", value, "give [] or [value]")
                present, inner = bool(value), (value[0] if value else None)
            else:
                present, inner = value is not None, value
            if present:
                out.append(1)
                self.value(entry.inner, inner, depth + 1)
            else:
                out.append(0)
        elif kind == VEC:
            kind_of = type(value)
            if entry.inner == NAT8 and (kind_of is bytes or kind_of is bytearray):
                self.charge(len(value) // 16)
                out += leb128(len(value))
                out += value
            elif kind_of in _SEQUENCES:
                out += leb128(len(value))
                for item in value:
                    self.value(entry.inner, item, depth + 1)
            else:
                raise _refuse("vec", value)
        elif kind == RECORD:
            self.record(entry, value, depth)
        else:
            self.variant(ref, entry, value, depth)

    def record(self, entry: Entry, value: Any, depth: int) -> None:
        fields = entry.fields
        if entry.tuple_like and type(value) in _SEQUENCES:
            if len(value) != len(fields):
                raise _refuse("record", value, f"{len(value)} items for a tuple of {len(fields)}")
            for field, item in zip(fields, value):
                self.value(field.type, item, depth + 1)
            return
        if type(value) is not dict:
            raise _refuse("record", value, "give a dict keyed by field name")
        for key in value:
            if type(key) is not str and type(key) is not int:
                raise _refuse("record", value, f"a field key of type {type(key).__name__}")
        matched = 0
        for field in fields:
            if field.label in value:
                matched += 1
                self.value(field.type, value[field.label], depth + 1)
            elif admits_none(self.table, field.type):
                if field.type >= 0:
                    self.out.append(0)   # an opt: null
            else:
                raise _refuse("record", value, f"field {field.label!r} is missing")
        if matched != len(value):
            known = {field.label for field in fields}
            unknown = sorted(repr(key) for key in value if key not in known)
            raise _refuse("record", value, f"unknown field(s) {', '.join(unknown)}")

    def variant(self, ref: int, entry: Entry, value: Any, depth: int) -> None:
        labels = self._labels.get(ref)
        if labels is None:
            labels = self._labels[ref] = {field.label: (index, field) for index, field in enumerate(entry.fields)}
        if type(value) is str and value in labels and labels[value][1].type == NULL:
            self.out += leb128(labels[value][0])
            return
        if type(value) is not dict or len(value) != 1:
            raise _refuse("variant", value, "give a dict of one entry, tag → value")
        ((tag, inner),) = value.items()
        if (type(tag) is not str and type(tag) is not int) or tag not in labels:
            raise _refuse("variant", value, f"no case {tag!r}")
        index, field = labels[tag]
        self.out += leb128(index)
        self.value(field.type, inner, depth + 1)

    def primitive(self, code: int, value: Any) -> None:
        out = self.out
        kind = type(value)
        if code == TEXT:
            if kind is not str:
                raise _refuse("text", value)
            try:
                raw = value.encode("utf-8")
            except UnicodeEncodeError:
                raise _refuse("text", value, "it holds a lone surrogate") from None
            self.charge(len(raw) // 16)
            out += leb128(len(raw))
            out += raw
        elif code == NAT or code == INT:
            if kind is not int or (code == NAT and value < 0):
                raise _refuse(OPCODE_NAMES[code], value, "negative" if kind is int else "")
            out += leb128(value) if code == NAT else sleb128(value)
        elif code in FIXED_WIDTH:
            width, signed = FIXED_WIDTH[code]
            if kind is not int:
                raise _refuse(OPCODE_NAMES[code], value)
            try:
                out += value.to_bytes(width, "little", signed=signed)
            except OverflowError:
                raise _refuse(OPCODE_NAMES[code], value, f"{value} is out of range") from None
        elif code == BOOL:
            if kind is not bool:
                raise _refuse("bool", value)
            out.append(1 if value else 0)
        elif code == NULL or code == RESERVED:
            if value is not None:
                raise _refuse(OPCODE_NAMES[code], value, "give None")
        elif code in _FLOAT:
            if kind is not float and kind is not int:
                raise _refuse(OPCODE_NAMES[code], value)
            try:
                out += _FLOAT[code].pack(value)
            except (OverflowError, struct.error):
                raise _refuse(OPCODE_NAMES[code], value, "out of range") from None
        elif code == PRINCIPAL:
            raw = value.raw if kind is Principal else value
            if type(raw) is not bytes or len(raw) > MAX_PRINCIPAL_BYTES:
                raise _refuse("principal", value, f"give bytes (at most {MAX_PRINCIPAL_BYTES}) or a Principal")
            out.append(1)
            out += leb128(len(raw))
            out += raw
        elif code == EMPTY:
            raise _refuse("empty", value, "empty has no values")
        else:
            raise _refuse(OPCODE_NAMES.get(code, str(code)), value, "unsupported type")


def encode_message(table: TypeTable, refs: tuple[int, ...], values: Any, quota: int = DEFAULT_ENCODE_QUOTA,
                   ) -> tuple[bytes, int]:
    """The message of ``values`` (a list or tuple, one per type of ``refs``) and the work
    units it used."""
    if type(values) not in _SEQUENCES or len(values) != len(refs):
        count = len(values) if type(values) in _SEQUENCES else "not a list of"
        raise CandidValueRefused(f"{count} values for {len(refs)} types")
    encoder = _Encoder(table, quota)
    for ref, value in zip(refs, values):
        encoder.value(ref, value, 0)
    return encode_header(table, refs) + bytes(encoder.out), quota - encoder.left
