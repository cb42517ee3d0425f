"""Candid type text: the lexer, the parser and the compiler into ``TypeTable``s.

Grammar (the Candid specification, *Core Grammar* and *Syntactic Shorthands*), the part a
method declaration needs::

    <defs>      ::= (type <id> = <datatype> ;)*
    <signature> ::= <tuptype> -> <tuptype>
    <tuptype>   ::= ( (<name> :)? <datatype>,* )
    <datatype>  ::= <id> | <primtype> | opt <datatype> | vec <datatype> | blob
                  | record { <fieldtype>;* } | variant { <fieldtype>;* }
    <fieldtype> ::= <nat> : <datatype> | <name> : <datatype>
                  | <datatype>               (records: "N is either 0 or previous + 1")
                  | <nat> | <name>           (variants: ":= <name> : null")

``func`` and ``service`` reference types are refused (``CandidUnsupported``). Comments are
``//`` to the end of the line and ``/* */``, which nest. Every failure is a typed error
(``CandidSyntaxError``, ``CandidTypeError``); the work is linear in the text.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import CandidSyntaxError, CandidTypeError, CandidUnsupported
from .types import (
    MAX_FIELD_ID, NAT8, NULL, OPCODE_NAMES, OPT, PRIMITIVE_NAMES, RECORD, RESERVED, VARIANT, VEC, Entry, Field,
    TypeTable, idl_hash,
)

__all__ = ["Token", "tokenize", "Definitions", "parse_definitions", "parse_tuple", "parse_signature",
           "compile_tuple", "render", "render_tuple", "quote_name", "MAX_TEXT_BYTES", "MAX_NESTING"]

#: Bounds on declarations (they are canister source, so bounded already; these keep parsing
#: and compiling cheap and the recursion of the parser shallow).
MAX_TEXT_BYTES = 64 * 1024
MAX_NESTING = 64

KEYWORDS = frozenset({"type", "import", "service", "func", "opt", "vec", "record", "variant", "blob", "query",
                      "oneway", "composite_query"}) | frozenset(PRIMITIVE_NAMES)

_SYMBOLS = ("->", "(", ")", "{", "}", ";", ":", ",", "=")
_ID_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_ID_CHARS = _ID_START | frozenset("0123456789")
_HEX = frozenset("0123456789abcdefABCDEF")
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "'": "'"}


@dataclass(frozen=True, slots=True)
class Token:
    kind: str        # "id", "nat", "text", "sym", "end"
    value: object    # the name, the number, the text's bytes, the symbol
    pos: int


def _fail(text: str, pos: int, what: str) -> CandidSyntaxError:
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return CandidSyntaxError(f"line {line}, column {column}: {what}")


def _skip_space(text: str, pos: int) -> int:
    length = len(text)
    while pos < length:
        char = text[pos]
        if char in " \t\r\n":
            pos += 1
        elif text.startswith("//", pos):
            end = text.find("\n", pos)
            pos = length if end < 0 else end + 1
        elif text.startswith("/*", pos):
            depth, start = 0, pos
            while True:
                if pos >= length:
                    raise _fail(text, start, "unclosed comment")
                if text.startswith("/*", pos):
                    depth, pos = depth + 1, pos + 2
                elif text.startswith("*/", pos):
                    depth, pos = depth - 1, pos + 2
                    if depth == 0:
                        break
                else:
                    pos += 1
        else:
            break
    return pos


def read_text_literal(text: str, pos: int) -> tuple[bytes, int]:
    """The bytes of the string literal at ``text[pos] == '"'`` and the position after it:
    characters as UTF-8, ``\\hh`` as one byte, ``\\u{hex}`` as a code point, and the escapes
    ``\\n \\r \\t \\\\ \\" \\'``."""
    out = bytearray()
    start, pos, length = pos, pos + 1, len(text)
    while True:
        if pos >= length:
            raise _fail(text, start, "unclosed text")
        char = text[pos]
        if char == '"':
            return bytes(out), pos + 1
        if char != "\\":
            out += char.encode("utf-8", "surrogatepass")
            pos += 1
            continue
        following = text[pos + 1:pos + 2]
        if following in _ESCAPES:
            out += _ESCAPES[following].encode()
            pos += 2
        elif following == "u" and text[pos + 2:pos + 3] == "{":
            end = text.find("}", pos + 3)
            digits = "" if end < 0 else text[pos + 3:end].replace("_", "")
            if end < 0 or not digits or len(digits) > 6 or not set(digits) <= _HEX:
                raise _fail(text, pos, "malformed \\u{...} escape")
            code = int(digits, 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise _fail(text, pos, f"\\u{{{digits}}} is not a Unicode scalar value")
            out += chr(code).encode("utf-8")
            pos = end + 1
        elif len(text) >= pos + 3 and set(text[pos + 1:pos + 3]) <= _HEX:
            out.append(int(text[pos + 1:pos + 3], 16))
            pos += 3
        else:
            raise _fail(text, pos, "unknown escape")


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text``, ending with an ``end`` token."""
    if len(text) > MAX_TEXT_BYTES:
        raise CandidSyntaxError(f"type text of {len(text)} characters; at most {MAX_TEXT_BYTES}")
    tokens: list[Token] = []
    pos = _skip_space(text, 0)
    length = len(text)
    while pos < length:
        char = text[pos]
        if char in _ID_START:
            end = pos + 1
            while end < length and text[end] in _ID_CHARS:
                end += 1
            tokens.append(Token("id", text[pos:end], pos))
        elif char.isdigit() and char.isascii():
            end = pos + 1
            hexadecimal = text.startswith(("0x", "0X"), pos)
            if hexadecimal:
                end = pos + 2
            digits = _HEX if hexadecimal else frozenset("0123456789")
            while end < length and (text[end] in digits or text[end] == "_"):
                end += 1
            body = text[pos + 2 if hexadecimal else pos:end]
            if not body or body.startswith("_") or body.endswith("_") or "__" in body:
                raise _fail(text, pos, "malformed number")
            tokens.append(Token("nat", int(body.replace("_", ""), 16 if hexadecimal else 10), pos))
        elif char == '"':
            value, end = read_text_literal(text, pos)
            tokens.append(Token("text", value, pos))
        else:
            symbol = next((s for s in _SYMBOLS if text.startswith(s, pos)), None)
            if symbol is None:
                raise _fail(text, pos, f"unexpected character {char!r}")
            tokens.append(Token("sym", symbol, pos))
            end = pos + len(symbol)
        pos = _skip_space(text, end)
    tokens.append(Token("end", None, length))
    return tokens


# -- the parser: text → syntax nodes ---------------------------------------------------------
# A node is ("prim", opcode) | ("name", id) | ("opt", node) | ("vec", node)
# | ("record", fields) | ("variant", fields), fields a tuple of (id, label, node, written label).


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.index = 0

    def peek(self, offset: int = 0) -> Token:
        return self.tokens[min(self.index + offset, len(self.tokens) - 1)]

    def take(self) -> Token:
        token = self.peek()
        self.index += 1
        return token

    def fail(self, what: str, token: Token | None = None) -> CandidSyntaxError:
        token = self.peek() if token is None else token
        found = "the end" if token.kind == "end" else repr(self.text[token.pos:token.pos + 12])
        return _fail(self.text, token.pos, f"{what}, found {found}")

    def is_sym(self, symbol: str, offset: int = 0) -> bool:
        token = self.peek(offset)
        return token.kind == "sym" and token.value == symbol

    def expect(self, symbol: str) -> None:
        if not self.is_sym(symbol):
            raise self.fail(f"expected {symbol!r}")
        self.index += 1

    def at_end(self) -> bool:
        return self.peek().kind == "end"

    def datatype(self, depth: int = 0) -> tuple:
        if depth > MAX_NESTING:
            raise self.fail(f"types nested deeper than {MAX_NESTING}")
        token = self.take()
        if token.kind != "id":
            raise self.fail("expected a type", token)
        word = token.value
        if word in PRIMITIVE_NAMES:
            return ("prim", PRIMITIVE_NAMES[word])
        if word == "opt" or word == "vec":
            return (word, self.datatype(depth + 1))
        if word == "blob":
            return ("vec", ("prim", NAT8))
        if word == "record" or word == "variant":
            return (word, self.fields(word == "variant", depth))
        if word == "func" or word == "service":
            raise CandidUnsupported(f"{word} references are not supported (at {self.text[token.pos:token.pos + 40]!r})")
        if word in KEYWORDS:
            raise self.fail("expected a type", token)
        return ("name", word)

    def label(self) -> tuple[int, str | int, str] | None:
        """A field label followed by ``:`` (or, in a variant, standing alone), else None."""
        token = self.peek()
        if token.kind == "nat":
            if token.value > MAX_FIELD_ID:
                raise CandidTypeError(f"field id {token.value} is not below 2^32")
            return token.value, token.value, str(token.value)
        if token.kind == "text":
            try:
                name = token.value.decode("utf-8")
            except UnicodeDecodeError:
                raise self.fail("a field name is UTF-8 text") from None
            return idl_hash(name), name, quote_name(name)
        if token.kind == "id" and token.value not in KEYWORDS:
            return idl_hash(token.value), token.value, token.value
        return None

    def fields(self, variant: bool, depth: int) -> tuple:
        self.expect("{")
        fields, seen, next_id = [], set(), 0
        while not self.is_sym("}"):
            label = self.label()
            if label is not None and self.is_sym(":", 1):
                self.index += 2
                node = self.datatype(depth + 1)
            elif label is not None and variant and (self.is_sym(";", 1) or self.is_sym("}", 1)):
                self.index += 1
                node = ("prim", NULL)
            elif variant:
                raise self.fail("expected a variant case")
            else:
                node = self.datatype(depth + 1)
                label = (next_id, next_id, "")
            field_id = label[0]
            if field_id > MAX_FIELD_ID:
                raise CandidTypeError(f"field id {field_id} is not below 2^32")
            if field_id in seen:
                raise CandidTypeError(f"field id {field_id} ({label[1]!r}) occurs twice")
            seen.add(field_id)
            fields.append((field_id, label[1], node, label[2]))
            next_id = field_id + 1
            if not self.is_sym("}"):
                self.expect(";")
        self.index += 1
        return tuple(fields)

    def tuple(self) -> tuple[tuple[str | None, tuple], ...]:
        """``( (<name> :)? <datatype>,* )``: (argument name or None, node) pairs."""
        self.expect("(")
        items = []
        while not self.is_sym(")"):
            name = None
            if self.peek().kind in ("id", "text") and self.is_sym(":", 1) and self.label() is not None:
                name = self.label()[2]
                self.index += 2
            items.append((name, self.datatype()))
            if not self.is_sym(")"):
                self.expect(",")
        self.index += 1
        return tuple(items)

    def definitions(self) -> dict[str, tuple]:
        definitions: dict[str, tuple] = {}
        while self.peek().kind == "id" and self.peek().value == "type":
            self.index += 1
            token = self.take()
            if token.kind != "id" or token.value in KEYWORDS:
                raise self.fail("expected a type name", token)
            if token.value in definitions:
                raise CandidTypeError(f"type {token.value} is defined twice")
            self.expect("=")
            definitions[token.value] = self.datatype()
            self.expect(";")
        return definitions


@dataclass(frozen=True)
class Definitions:
    """Named types (``type <id> = <datatype>;``), in the order written."""

    nodes: dict[str, tuple]

    def render(self) -> str:
        return "".join(f"type {name} = {render(node)};\n" for name, node in self.nodes.items())


def parse_definitions(text: str) -> Definitions:
    parser = _Parser(text)
    nodes = parser.definitions()
    if not parser.at_end():
        raise parser.fail("expected 'type <name> = <datatype>;'")
    definitions = Definitions(nodes)
    for name in nodes:
        _Compiler(definitions).reference(("name", name))   # every definition well-formed
    return definitions


def parse_tuple(text: str) -> tuple[tuple[str | None, tuple], ...]:
    parser = _Parser(text)
    items = parser.tuple()
    if not parser.at_end():
        raise parser.fail("expected the end after the type list")
    return items


def parse_signature(text: str) -> tuple[tuple, tuple]:
    """``<tuptype> -> <tuptype>``: the argument and result lists."""
    parser = _Parser(text)
    arguments = parser.tuple()
    parser.expect("->")
    results = parser.tuple()
    if not parser.at_end():
        raise parser.fail("expected the end after the result types (the method's kind is its decorator)")
    return arguments, results


# -- the compiler: syntax nodes → a TypeTable ------------------------------------------------


class _Compiler:
    def __init__(self, definitions: Definitions) -> None:
        self.definitions = definitions.nodes
        self.entries: list[Entry | None] = []
        self.kinds: list[int] = []
        self.named: dict[str, int] = {}

    def _reserve(self, kind: int) -> int:
        self.entries.append(None)
        self.kinds.append(kind)
        return len(self.entries) - 1

    def _admits_none(self, ref: int) -> bool:
        return ref == NULL or ref == RESERVED or (ref >= 0 and self.kinds[ref] == OPT)

    def _resolve_alias(self, name: str) -> tuple:
        """The first node of a name's definition that is not itself a name."""
        seen = []
        node = ("name", name)
        while node[0] == "name":
            target = node[1]
            if target in self.named:
                return ("ref", self.named[target])
            if target not in self.definitions:
                raise CandidTypeError(f"unknown type {target}")
            if target in seen:
                raise CandidTypeError(f"type {target} is only itself ({' = '.join(seen + [target])})")
            seen.append(target)
            node = self.definitions[target]
        return node

    def reference(self, node: tuple) -> int:
        kind = node[0]
        if kind == "prim":
            return node[1]
        if kind == "ref":
            return node[1]
        if kind == "name":
            name = node[1]
            if name in self.named:
                return self.named[name]
            body = self._resolve_alias(name)
            if body[0] in ("prim", "ref"):
                self.named[name] = body[1]
                return body[1]
            index = self._reserve(_KINDS[body[0]])
            self.named[name] = index   # before the body: recursion refers to it
            self._build(index, body)
            return index
        index = self._reserve(_KINDS[kind])
        self._build(index, node)
        return index

    def _build(self, index: int, node: tuple) -> None:
        kind = node[0]
        if kind in ("opt", "vec"):
            inner = self.reference(node[1])
            entry = Entry(_KINDS[kind], inner, listed=kind == "opt" and self._admits_none(inner))
        else:
            fields = tuple(sorted((Field(fid, self.reference(sub), label) for fid, label, sub, _ in node[1]),
                                  key=lambda f: f.id))
            tuple_like = kind == "record" and bool(fields) and all(
                f.id == i and f.label == i for i, f in enumerate(fields))
            entry = Entry(_KINDS[kind], fields=fields, tuple_like=tuple_like)
        self.entries[index] = entry

    def table(self) -> TypeTable:
        return TypeTable(tuple(entry for entry in self.entries if entry is not None))


_KINDS = {"opt": OPT, "vec": VEC, "record": RECORD, "variant": VARIANT}


def compile_tuple(items, definitions: Definitions | None = None) -> tuple[TypeTable, tuple[int, ...]]:
    """The table and references of a type list (``parse_tuple``'s items)."""
    compiler = _Compiler(definitions or Definitions({}))
    refs = tuple(compiler.reference(node) for _, node in items)
    return compiler.table(), refs


# -- rendering --------------------------------------------------------------------------------


def quote_name(name: str) -> str:
    """``name`` as an identifier if it is one (and no keyword), else as quoted text."""
    if name and name[0] in _ID_START and all(c in _ID_CHARS for c in name) and name not in KEYWORDS:
        return name
    escaped = name.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return '"' + escaped.replace("\t", "\\t") + '"'


def render(node: tuple) -> str:
    """The text of a syntax node, in the grammar's canonical spacing."""
    kind = node[0]
    if kind == "prim":
        return OPCODE_NAMES[node[1]]
    if kind == "name":
        return node[1]
    if kind == "vec" and node[1] == ("prim", NAT8):
        return "blob"
    if kind in ("opt", "vec"):
        return f"{kind} {render(node[1])}"
    parts = []
    for _, _, sub, written in node[1]:
        if not written:
            parts.append(render(sub))
        elif kind == "variant" and sub == ("prim", NULL):
            parts.append(written)
        else:
            parts.append(f"{written} : {render(sub)}")
    return f"{kind} {{ {'; '.join(parts)} }}" if parts else f"{kind} {{}}"


def render_tuple(items) -> str:
    return "(" + ", ".join(render(node) if name is None else f"{name} : {render(node)}" for name, node in items) + ")"
