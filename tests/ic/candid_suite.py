"""The Candid project's test suite (``tests/ic/data/candid/*.test.did``) read as test cases.

A file is ``<def>;* <test>;*`` with (the suite's README)::

    <test>  ::= assert <input> : <tuptype> <desc>?      the input decodes at the types
              | assert <input> !: <tuptype> <desc>?     it does not
              | assert <input> == <input> : <tuptype> <desc>?   both decode, and equal
              | assert <input> != <input> : <tuptype> <desc>?   both decode, and differ
    <input> ::= <text> | blob <text>

Textual inputs are Candid's text format, which the library does not implement; here they
are only the expected side of a comparison with a binary input, read by ``text_value`` into
the Python values the decoder gives (the suite's README: an implementation without the text
format treats a comparison of text and binary "as plain decoding assertions on the binary
value"; we compare, which is stronger). Tests with textual inputs only are not run.
"""

from __future__ import annotations

import math
import pathlib
import re
from dataclasses import dataclass

from replica.ic import candid
from replica.ic.candid.syntax import _skip_space as skip_space  # the Candid grammar's whitespace and comments
from replica.ic.candid.syntax import read_text_literal
from replica.ic.candid.types import (
    BOOL, FIXED_WIDTH, FLOAT32, FLOAT64, INT, NAT, NAT8, NULL, OPT, PRINCIPAL, RECORD, RESERVED, TEXT, VEC,
    TypeTable, idl_hash,
)
from replica.ic.principal import principal_from_text

DATA = pathlib.Path(__file__).parent / "data" / "candid"


@dataclass(frozen=True)
class SuiteCase:
    file: str
    line: int
    left: tuple[str, bytes | str]             # ("blob", bytes) or ("text", str)
    right: tuple[str, bytes | str] | None
    relation: str                              # ":" "!:" "==" "!="
    types: str                                 # "(...)"
    description: str
    definitions: str

    @property
    def name(self) -> str:
        return f"{self.file}:{self.line} {self.description}".strip()


def _balanced(text: str, pos: int) -> int:
    """The end of the parenthesized group at ``pos`` (strings and comments respected)."""
    depth = 0
    while True:
        char = text[pos]
        if char == '"':
            _, pos = read_text_literal(text, pos)
            continue
        if text.startswith("//", pos) or text.startswith("/*", pos):
            pos = skip_space(text, pos)
            continue
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return pos + 1
        pos += 1


def _input(text: str, pos: int) -> tuple[tuple[str, bytes | str], int]:
    if text.startswith("blob", pos):
        pos = skip_space(text, pos + 4)
        raw, pos = read_text_literal(text, pos)
        return ("blob", raw), pos
    raw, pos = read_text_literal(text, pos)
    return ("text", raw.decode("utf-8")), pos


def load(name: str) -> list[SuiteCase]:
    text = (DATA / name).read_text(encoding="utf-8")
    pos = skip_space(text, 0)
    first = text.find("assert", pos)
    definitions = text[pos:first if first >= 0 else len(text)]
    cases = []
    pos = first
    while pos >= 0 and pos < len(text):
        line = text.count("\n", 0, pos) + 1
        assert text.startswith("assert", pos), text[pos:pos + 40]
        pos = skip_space(text, pos + 6)
        left, pos = _input(text, skip_space(text, pos))
        pos = skip_space(text, pos)
        right, relation = None, None
        for symbol in ("==", "!="):
            if text.startswith(symbol, pos):
                right, pos = _input(text, skip_space(text, pos + 2))
                relation, pos = symbol, skip_space(text, pos)
        if text.startswith("!:", pos):
            relation, pos = "!:", pos + 2
        else:
            assert text.startswith(":", pos), text[pos:pos + 40]
            relation, pos = relation or ":", pos + 1
        pos = skip_space(text, pos)
        end = _balanced(text, pos)
        types = text[pos:end]
        pos = skip_space(text, end)
        description = ""
        if text[pos] == '"':
            raw, pos = read_text_literal(text, pos)
            description = raw.decode("utf-8")
            pos = skip_space(text, pos)
        assert text[pos] == ";", text[pos:pos + 40]
        cases.append(SuiteCase(name, line, left, right, relation, types, description, definitions))
        pos = skip_space(text, pos + 1)
    return cases


# -- the text format, as far as the comparisons need it -------------------------------------------

_TOKEN = re.compile(r"""\s*(?:(?P<num>[+-]?(?:0x[0-9a-fA-F_]+|[0-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][+-]?[0-9]+)?)
                      |(?P<id>[A-Za-z_][A-Za-z0-9_]*)|(?P<sym>[(){};=,:.])|(?P<str>"))""", re.VERBOSE)


def _tokens(text: str) -> list:
    out, pos = [], 0
    while True:
        pos = skip_space(text, pos)
        if pos >= len(text):
            return out
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ValueError(f"text value: unexpected {text[pos:pos + 10]!r}")
        if match.group("str"):
            raw, pos = read_text_literal(text, match.start("str"))
            out.append(("str", raw))
            continue
        kind = match.lastgroup
        out.append((kind, match.group(kind)))
        pos = match.end()


def _parse_value(tokens: list, index: int):
    kind, value = tokens[index]
    if kind == "num":
        return ("num", value), index + 1
    if kind == "str":
        return ("str", value), index + 1
    if kind == "sym" and value == "(":
        inner, index = _parse_value(tokens, index + 1)
        while tokens[index] != ("sym", ")"):   # an annotation ": <type>" is dropped
            index += 1
        return inner, index + 1
    if value in ("true", "false"):
        return ("bool", value == "true"), index + 1
    if value == "null":
        return ("null",), index + 1
    if value == "opt":
        inner, index = _parse_value(tokens, index + 1)
        return ("opt", inner), index
    if value in ("blob", "principal", "service"):
        return (value, tokens[index + 1][1]), index + 2
    if value in ("vec", "record", "variant"):
        assert tokens[index + 1] == ("sym", "{")
        index += 2
        items = []
        while tokens[index] != ("sym", "}"):
            label = None
            if tokens[index][0] in ("id", "num", "str") and tokens[index + 1] in (("sym", "="), ("sym", ";"), ("sym", "}")) \
                    and value != "vec" and not (value == "record" and tokens[index + 1] != ("sym", "=")):
                label = tokens[index]
                if tokens[index + 1] == ("sym", "="):
                    item, index = _parse_value(tokens, index + 2)
                else:
                    item, index = ("null",), index + 1
            else:
                item, index = _parse_value(tokens, index)
            items.append((label, item))
            if tokens[index] == ("sym", ";"):
                index += 1
        return (value, items), index + 1
    raise ValueError(f"text value: unexpected {value!r}")


def _field_id(label) -> int:
    kind, value = label
    if kind == "num":
        return int(value.replace("_", ""), 0)
    if kind == "str":
        return idl_hash(value.decode("utf-8"))
    return idl_hash(value)


def _python(node, table: TypeTable, ref: int):
    """The Python value the decoder gives for textual value ``node`` at type ``ref``."""
    if ref == RESERVED:
        return None
    if ref < 0:
        kind = node[0]
        if ref == NULL:
            assert kind == "null"
            return None
        if ref == BOOL:
            return node[1]
        if ref in (NAT, INT) or ref in FIXED_WIDTH:
            return int(node[1].replace("_", ""), 0)
        if ref in (FLOAT32, FLOAT64):
            return float(node[1])
        if ref == TEXT:
            return node[1].decode("utf-8")
        if ref == PRINCIPAL:
            return principal_from_text(node[1].decode("utf-8"))
        raise ValueError(f"no text value for type {ref}")
    entry = table.entries[ref]
    if entry.kind == OPT:
        if node[0] == "null":
            return [] if entry.listed else None
        assert node[0] == "opt", node
        inner = _python(node[1], table, entry.inner)
        return [inner] if entry.listed else inner
    if entry.kind == VEC:
        if node[0] == "blob":
            return node[1]
        items = [_python(item, table, entry.inner) for _, item in node[1]]
        return bytes(items) if entry.inner == NAT8 else items
    if entry.kind == RECORD:
        given, next_id = {}, 0
        for label, item in node[1]:
            field_id = next_id if label is None else _field_id(label)
            given[field_id] = item
            next_id = field_id + 1
        values = []
        for field in entry.fields:
            if field.id in given:
                values.append(_python(given[field.id], table, field.type))
            else:
                values.append([] if field.type >= 0 and table.entries[field.type].listed else None)
        if entry.tuple_like:
            return tuple(values)
        return {field.label: value for field, value in zip(entry.fields, values)}
    ((label, item),) = node[1]
    field = next(f for f in entry.fields if f.id == _field_id(label))
    return {field.label: _python(item, table, field.type)}


def text_value(text: str, compiled: candid.Types) -> list:
    tokens = _tokens(text)
    assert tokens[0] == ("sym", "(")
    nodes, index = [], 1
    while tokens[index] != ("sym", ")"):
        node, index = _parse_value(tokens, index)
        nodes.append(node)
        if tokens[index] == ("sym", ","):
            index += 1
    values = [_python(node, compiled.table, ref) for node, ref in zip(nodes, compiled.refs)]
    for ref in compiled.refs[len(nodes):]:   # missing arguments read as null
        values.append([] if ref >= 0 and compiled.table.entries[ref].listed else None)
    return values


def same(a, b) -> bool:
    """Equality with NaN equal to itself (the suite compares with the host's equality)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b
