"""Candid, the Internet Computer's interface description language: types, the binary
message format ("DIDL") and its subtyping on decoding, after the Candid specification.

What is here: the primitive types (null, bool, nat, int, nat8..64, int8..64, float32,
float64, text, reserved, empty, principal), the constructed ones (opt, vec, record, variant,
blob; tuples as records with fields 0..n-1), field ids as the name hash (``idl_hash``), type
definitions with recursion, decoding at a wider or narrower type by the specification's
coercion rules, and bounded work. Function and service *references* are read and skipped
(or read as a principal) on the wire but cannot be declared (``CandidUnsupported``).

* ``types("(text, nat)")``: a compiled type list; ``.encode(values)``, ``.decode(data)``;
* ``signature("(text) -> (record { ok : bool })")``: a method's argument and result types;
* ``service_description(methods, definitions)``: the service's text, as canisters publish it.

Modules: ``types`` (the table form), ``syntax`` (text → tables), ``wire`` (LEB128),
``decode``, ``encode``. Everything is pure, deterministic and raises only ``CandidError``s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from .decode import decode_message
from .encode import DEFAULT_ENCODE_QUOTA, encode_message
from .syntax import Definitions, compile_tuple, parse_definitions, parse_signature, parse_tuple, quote_name, render_tuple
from .types import TypeTable, idl_hash

__all__ = ["Types", "Signature", "Definitions", "types", "signature", "parse_definitions", "service_description",
           "idl_hash"]


@dataclass(frozen=True)
class Types:
    """A list of types compiled into one table (an argument or result list)."""

    table: TypeTable
    refs: tuple[int, ...]
    text: str

    def encode(self, values: Sequence[Any], quota: int = DEFAULT_ENCODE_QUOTA) -> bytes:
        """The message of ``values`` (one per type)."""
        return encode_message(self.table, self.refs, values, quota)[0]

    def encode_metered(self, values: Sequence[Any], quota: int = DEFAULT_ENCODE_QUOTA) -> tuple[bytes, int]:
        """The message and the work units it took."""
        return encode_message(self.table, self.refs, values, quota)

    def decode(self, data: bytes, quota: int | None = None) -> list[Any]:
        """The values of message ``data`` at these types (one per type)."""
        return decode_message(data, self.table, self.refs, quota)


def _compile(items, definitions: Definitions | None) -> Types:
    table, refs = compile_tuple(items, definitions)
    return Types(table, refs, render_tuple(items))


def types(text: str, definitions: Definitions | None = None) -> Types:
    """Compile a type list such as ``"(text, opt nat)"``, names taken from ``definitions``."""
    return _compile(parse_tuple(text), definitions)


@dataclass(frozen=True)
class Signature:
    """A method's types: ``arguments -> results``."""

    arguments: Types
    results: Types

    @property
    def text(self) -> str:
        return f"{self.arguments.text} -> {self.results.text}"


def signature(text: str, definitions: Definitions | None = None) -> Signature:
    """Compile ``"(<argtypes>) -> (<resulttypes>)"``."""
    arguments, results = parse_signature(text)
    return Signature(_compile(arguments, definitions), _compile(results, definitions))


def service_description(methods: Sequence[tuple[str, Signature, bool]], definitions: Definitions | None = None) -> str:
    """The service's Candid text: the definitions, then ``service : { name : sig; ... }``
    with ``query`` after the queries' signatures; ``methods`` are (name, signature, is query)."""
    lines = [f"  {quote_name(name)} : {sig.text}{' query' if is_query else ''};" for name, sig, is_query in methods]
    prefix = definitions.render() if definitions is not None else ""
    return prefix + "service : {\n" + "".join(line + "\n" for line in lines) + "}\n"
