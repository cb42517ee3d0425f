"""Reading a Candid message at expected types (the Candid specification, *Deserialisation*).

``decode_message(data, table, refs)`` checks the magic ``DIDL``, reads the type table and the
argument types (every reference in range, every table entry a constructed type, record and
variant field ids strictly increasing and below 2^32), then reads each value at its wire type
and coerces it to the expected one in the same pass (*Coercion*):

* ``nat`` coerces to ``int``, a service reference to ``principal``; anything to ``reserved``
  (the value is read, checked and dropped);
* records: "the ``<nat2>*`` field names those only in the actual type. The values are
  ignored"; fields only in the expected type "must be of null, optional or reserved type. The
  ``null`` value is used for these";
* variants: "Only a variant value with an expected tag coerces at variant type";
* options: "An optional value coerces at an option type, if the constituent value has a
  suitable type, and else goes to ``null``"; a value of a non-null, non-optional,
  non-reserved type is read as an option of itself when it coerces, else as ``null``;
* argument lists coerce as tuple-like records: extra arguments are ignored (but read and
  checked), missing ones must be null, optional or reserved.

A value that does not coerce raises ``CandidTypeMismatch``, which an enclosing option turns
into ``null`` after skipping the value (skipping still checks it: a malformed value is never
recovered). Malformed bytes raise ``CandidMalformed``.

Bounds, so hostile messages cost little ("The implementation is encouraged to self-meter the
deserialisation cost"): every value read or skipped costs one unit of a work quota (and a
vector its length up front), by default ``10,000 + 16 × len(data)`` units, so a message of
billions of zero-sized values is refused early; values nest at most ``MAX_DEPTH`` deep; a
length is checked against the bytes left before anything is allocated. Exceeding a bound
raises ``CandidLimitExceeded``. The result depends only on the bytes and the types.
"""

from __future__ import annotations

import struct
from typing import Any

from ..errors import CandidLimitExceeded, CandidMalformed, CandidTypeMismatch
from .types import (
    BOOL, EMPTY, FIXED_WIDTH, FLOAT32, FLOAT64, FUNC, INT, LAST_KNOWN_OPCODE, MAX_FIELD_ID, NAT, NAT8, NULL,
    OPCODE_NAMES, OPT, PRIMITIVES, PRINCIPAL, RECORD, RESERVED, SERVICE, TEXT, VARIANT, VEC, Entry, Field,
    TypeTable, admits_none,
)
from .wire import Reader

__all__ = ["MAGIC", "MAX_DEPTH", "MAX_PRINCIPAL_BYTES", "default_quota", "read_header", "decode_message",
           "type_name"]

MAGIC = b"DIDL"
MAX_DEPTH = 128
MAX_PRINCIPAL_BYTES = 29
_KIND_NAMES = {OPT: "opt", VEC: "vec", RECORD: "record", VARIANT: "variant", FUNC: "func", SERVICE: "service"}
_FLOAT = {FLOAT32: struct.Struct("<f"), FLOAT64: struct.Struct("<d")}


def default_quota(length: int) -> int:
    """The work units a message of ``length`` bytes may use."""
    return 10_000 + 16 * length


def type_name(table: TypeTable, ref: int) -> str:
    if ref < 0:
        return OPCODE_NAMES.get(ref, f"future type {ref}")
    kind = table.entries[ref].kind
    return _KIND_NAMES.get(kind, f"future type {kind}")


# -- the header: type table and argument types --------------------------------------------------


def _count(reader: Reader, what: str) -> int:
    count = reader.leb()
    if count > reader.left:
        raise CandidMalformed(f"{what} count {count} exceeds the {reader.left} bytes left")
    return count


def _fields(reader: Reader) -> tuple[Field, ...]:
    fields, previous = [], -1
    for _ in range(_count(reader, "field")):
        field_id = reader.leb()
        if field_id > MAX_FIELD_ID:
            raise CandidMalformed(f"field id {field_id} is not below 2^32")
        if field_id <= previous:
            raise CandidMalformed(f"field ids not strictly increasing ({previous}, then {field_id})")
        previous = field_id
        fields.append(Field(field_id, reader.sleb(), field_id))
    return tuple(fields)


def _entry(reader: Reader, refs: list[int], methods: list[int]) -> Entry:
    opcode = reader.sleb()
    if opcode == OPT or opcode == VEC:
        inner = reader.sleb()
        refs.append(inner)
        return Entry(opcode, inner)
    if opcode == RECORD or opcode == VARIANT:
        fields = _fields(reader)
        refs.extend(field.type for field in fields)
        return Entry(opcode, fields=fields)
    if opcode == FUNC:
        for what in ("argument", "result"):
            refs.extend(reader.sleb() for _ in range(_count(reader, what)))
        for _ in range(_count(reader, "annotation")):
            if reader.byte() not in (1, 2, 3):
                raise CandidMalformed("a function annotation other than query (1), oneway (2), composite_query (3)")
        return Entry(FUNC)
    if opcode == SERVICE:
        previous = None
        for _ in range(_count(reader, "method")):
            name = _utf8(reader.take(_count(reader, "method name byte")))
            if previous is not None and name <= previous:
                raise CandidMalformed(f"service methods not sorted by name ({previous!r}, then {name!r})")
            previous = name
            methods.append(reader.sleb())
        return Entry(SERVICE)
    if opcode < LAST_KNOWN_OPCODE:
        reader.take(_count(reader, "future type byte"))   # "followed by an LEB128-encoded count"
        return Entry(opcode)
    raise CandidMalformed(f"type table entry of opcode {opcode}: only constructed types belong in the table")


def _check_ref(ref: int, size: int) -> None:
    if not (ref in PRIMITIVES or 0 <= ref < size):
        raise CandidMalformed(f"type reference {ref} is neither a primitive type nor an entry of the table of {size}")


def read_header(reader: Reader) -> tuple[TypeTable, tuple[int, ...]]:
    """The message's type table and argument types, after the magic."""
    refs: list[int] = []
    methods: list[int] = []
    entries = tuple(_entry(reader, refs, methods) for _ in range(_count(reader, "type table")))
    arguments = tuple(reader.sleb() for _ in range(_count(reader, "argument")))
    size = len(entries)
    for ref in (*refs, *methods, *arguments):
        _check_ref(ref, size)
    for ref in methods:
        if ref < 0 or entries[ref].kind != FUNC:
            raise CandidMalformed("a service method whose type is not a function type")
    return TypeTable(entries), arguments


def _utf8(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CandidMalformed(f"text that is not UTF-8: {exc.reason} at byte {exc.start}") from None


# -- values -----------------------------------------------------------------------------------


class _Decoder:
    __slots__ = ("reader", "wire", "want", "left", "_variant_cases")

    def __init__(self, reader: Reader, wire: TypeTable, want: TypeTable, quota: int) -> None:
        self.reader = reader
        self.wire = wire
        self.want = want
        self.left = quota
        self._variant_cases: dict[int, dict[int, Field]] = {}

    def charge(self, units: int) -> None:
        self.left -= units
        if self.left < 0:
            raise CandidLimitExceeded("decoding the message needs more work than its quota allows")

    def mismatch(self, wire: int, want: int, detail: str = "") -> CandidTypeMismatch:
        text = f"a value of type {type_name(self.wire, wire)} does not coerce to {type_name(self.want, want)}"
        return CandidTypeMismatch(text + (f": {detail}" if detail else ""))

    # primitives

    def primitive(self, code: int) -> Any:
        reader = self.reader
        if code == NAT:
            return reader.leb()
        if code == INT:
            return reader.sleb()
        if code == TEXT:
            size = reader.leb()
            if size > reader.left:
                raise CandidMalformed(f"text of {size} bytes, {reader.left} left")
            return _utf8(reader.take(size))
        if code == BOOL:
            byte = reader.byte()
            if byte > 1:
                raise CandidMalformed(f"bool byte {byte}")
            return byte == 1
        if code in FIXED_WIDTH:
            width, signed = FIXED_WIDTH[code]
            return int.from_bytes(reader.take(width), "little", signed=signed)
        if code == NULL or code == RESERVED:
            return None
        if code in _FLOAT:
            return _FLOAT[code].unpack(reader.take(_FLOAT[code].size))[0]
        if code == PRINCIPAL:
            return self.principal()
        if code == EMPTY:
            raise CandidMalformed("a value of type empty (empty has no values)")
        raise CandidMalformed(f"a value of the unknown primitive type {code}")

    def principal(self) -> bytes:
        reader = self.reader
        tag = reader.byte()
        if tag != 1:
            raise CandidMalformed(f"principal tag {tag}: only public ids (1) are supported, not opaque references")
        size = reader.leb()
        if size > MAX_PRINCIPAL_BYTES:
            raise CandidMalformed(f"principal of {size} bytes; at most {MAX_PRINCIPAL_BYTES}")
        return reader.take(size)

    # skipping: read and check a value, keep nothing

    def skip(self, wire: int, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise CandidLimitExceeded(f"values nested deeper than {MAX_DEPTH}")
        self.charge(1)
        if wire < 0:
            self.primitive(wire)
            return
        entry = self.wire.entries[wire]
        kind = entry.kind
        reader = self.reader
        if kind == OPT:
            tag = reader.byte()
            if tag == 1:
                self.skip(entry.inner, depth + 1)
            elif tag != 0:
                raise CandidMalformed(f"opt tag {tag}")
        elif kind == VEC:
            count = self.length(entry.inner)
            inner = entry.inner
            if inner in FIXED_WIDTH:
                reader.take(count * FIXED_WIDTH[inner][0])
            else:
                for _ in range(count):
                    self.skip(inner, depth + 1)
        elif kind == RECORD:
            for field in entry.fields:
                self.skip(field.type, depth + 1)
        elif kind == VARIANT:
            self.skip(self.case(entry).type, depth + 1)
        elif kind == SERVICE:
            self.principal()
        elif kind == FUNC:
            if reader.byte() != 1:
                raise CandidMalformed("function reference tag other than 1 (public)")
            self.principal()
            self.primitive(TEXT)
        else:   # a future type: "two LEB128-encoded counts, m and n, followed by m bytes"
            size = reader.leb()
            reader.leb()
            if size > reader.left:
                raise CandidMalformed(f"future value of {size} bytes, {reader.left} left")
            reader.take(size)

    def length(self, inner: int) -> int:
        """A vector's length, charged up front and checked against the bytes left when its
        elements take at least a byte each."""
        count = self.reader.leb()
        self.charge(count)
        if count > self.reader.left and _sized(self.wire, inner):
            raise CandidMalformed(f"vector of {count} elements, {self.reader.left} bytes left")
        return count

    def case(self, entry: Entry) -> Field:
        index = self.reader.leb()
        if index >= len(entry.fields):
            raise CandidMalformed(f"variant index {index} of a variant with {len(entry.fields)} cases")
        return entry.fields[index]

    # coercion

    def value(self, wire: int, want: int, depth: int) -> Any:
        """The value of wire type ``wire`` read next, coerced to the expected type ``want``."""
        if depth > MAX_DEPTH:
            raise CandidLimitExceeded(f"values nested deeper than {MAX_DEPTH}")
        if want < 0:
            if want == RESERVED:
                self.skip(wire, depth)
                return None
            self.charge(1)
            if wire == want or (want == INT and wire == NAT):
                return self.primitive(wire)
            if wire == EMPTY:
                raise CandidMalformed("a value of type empty (empty has no values)")
            if want == PRINCIPAL and wire >= 0 and self.wire.entries[wire].kind == SERVICE:
                return self.principal()
            raise self.mismatch(wire, want)
        self.charge(1)
        entry = self.want.entries[want]
        kind = entry.kind
        if kind == OPT:
            return self.option(wire, entry, depth)
        if wire == EMPTY:
            raise CandidMalformed("a value of type empty (empty has no values)")
        wire_entry = self.wire.entries[wire] if wire >= 0 else None
        if wire_entry is None or wire_entry.kind != kind:
            raise self.mismatch(wire, want)
        if kind == VEC:
            count = self.length(wire_entry.inner)
            inner = entry.inner
            if inner == NAT8 and wire_entry.inner == NAT8:
                return self.reader.take(count)
            return [self.value(wire_entry.inner, inner, depth + 1) for _ in range(count)]
        if kind == RECORD:
            return self.record(wire_entry, entry, depth)
        return self.variant(wire_entry, entry, want, depth)

    def option(self, wire: int, entry: Entry, depth: int) -> Any:
        none = [] if entry.listed else None
        if wire == NULL or wire == RESERVED:
            return none
        reader = self.reader
        wire_entry = self.wire.entries[wire] if wire >= 0 else None
        if wire_entry is not None and wire_entry.kind == OPT:
            tag = reader.byte()
            if tag == 0:
                return none
            if tag != 1:
                raise CandidMalformed(f"opt tag {tag}")
            wire = wire_entry.inner
        start = reader.pos
        try:
            value = self.value(wire, entry.inner, depth + 1)
        except CandidTypeMismatch:
            reader.pos = start
            self.skip(wire, depth + 1)
            return none
        return [value] if entry.listed else value

    def record(self, wire_entry: Entry, entry: Entry, depth: int) -> Any:
        want_fields = entry.fields
        values: list[Any] = [None] * len(want_fields)
        index, count = 0, len(want_fields)
        for field in wire_entry.fields:
            while index < count and want_fields[index].id < field.id:
                values[index] = self.missing(want_fields[index])
                index += 1
            if index < count and want_fields[index].id == field.id:
                values[index] = self.value(field.type, want_fields[index].type, depth + 1)
                index += 1
            else:
                self.skip(field.type, depth + 1)
        while index < count:
            values[index] = self.missing(want_fields[index])
            index += 1
        if entry.tuple_like:
            return tuple(values)
        return {field.label: value for field, value in zip(want_fields, values)}

    def missing(self, field: Field) -> Any:
        if not admits_none(self.want, field.type):
            raise CandidTypeMismatch(f"record field {field.label!r} is missing and not optional")
        return [] if field.type >= 0 and self.want.entries[field.type].listed else None

    def variant(self, wire_entry: Entry, entry: Entry, want: int, depth: int) -> dict:
        field = self.case(wire_entry)
        cases = self._variant_cases.get(want)
        if cases is None:
            cases = self._variant_cases[want] = {f.id: f for f in entry.fields}
        expected = cases.get(field.id)
        if expected is None:
            raise CandidTypeMismatch(f"variant case {field.id} is not among the expected cases")
        return {expected.label: self.value(field.type, expected.type, depth + 1)}


def _sized(table: TypeTable, ref: int) -> bool:
    """Whether every value of the type takes at least one byte (records may not)."""
    if ref < 0:
        return ref != NULL and ref != RESERVED
    return table.entries[ref].kind != RECORD


def decode_message(data: bytes, table: TypeTable, refs: tuple[int, ...], quota: int | None = None) -> list[Any]:
    """The values of the message ``data`` at the expected types ``refs`` of ``table``."""
    if type(data) is not bytes:
        raise CandidMalformed(f"a Candid message is bytes, not {type(data).__name__}")
    if data[:4] != MAGIC:
        raise CandidMalformed("not a Candid message: it does not begin with DIDL")
    reader = Reader(data, 4)
    wire, arguments = read_header(reader)
    decoder = _Decoder(reader, wire, table, default_quota(len(data)) if quota is None else quota)
    decoder.charge(len(wire.entries) + len(arguments))
    values = []
    for position, want in enumerate(refs):
        if position < len(arguments):
            values.append(decoder.value(arguments[position], want, 0))
        elif admits_none(table, want):
            values.append([] if want >= 0 and table.entries[want].listed else None)
        else:
            raise CandidTypeMismatch(f"argument {position} ({type_name(table, want)}) is missing and not optional")
    for wire in arguments[len(refs):]:
        decoder.skip(wire, 0)
    if reader.left:
        raise CandidMalformed(f"{reader.left} bytes after the last value")
    return values
