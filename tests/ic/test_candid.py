"""``replica.ic.candid``: round trips of generated types and values, hostile bytes and text
only ever raise ``CandidError``s, and the rules a canister author meets (subtyping on
decoding, the Python forms, the bounds)."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from replica.ic import candid
from replica.ic.candid.decode import MAX_DEPTH
from replica.ic.errors import (
    CandidError, CandidLimitExceeded, CandidMalformed, CandidSyntaxError, CandidTypeError, CandidTypeMismatch,
    CandidUnsupported, CandidValueRefused,
)
from replica.ic.principal import Principal

# -- generated types with values of them ------------------------------------------------------

_NAMES = st.sampled_from(["a", "b", "ok", "name", "value", "head", "tail", "☃", "x_1"])
_PRIMITIVES = {
    "null": st.none(), "bool": st.booleans(), "nat": st.integers(0, 2**130), "int": st.integers(-2**130, 2**130),
    "nat8": st.integers(0, 255), "nat16": st.integers(0, 2**16 - 1), "nat32": st.integers(0, 2**32 - 1),
    "nat64": st.integers(0, 2**64 - 1), "int8": st.integers(-128, 127), "int16": st.integers(-2**15, 2**15 - 1),
    "int32": st.integers(-2**31, 2**31 - 1), "int64": st.integers(-2**63, 2**63 - 1),
    "float64": st.floats(allow_nan=False), "float32": st.floats(width=32, allow_nan=False),
    "text": st.text(max_size=20), "reserved": st.none(), "principal": st.binary(max_size=29),
    "blob": st.binary(max_size=40),
}


def _admits_none(text: str) -> bool:
    return text in ("null", "reserved") or text.startswith("opt ")


@st.composite
def typed_values(draw, depth: int = 0):
    """(type text, strategy of its Python values)."""
    choices = ["prim"] * 3 + (["opt", "vec", "record", "tuple", "variant"] if depth < 3 else [])
    kind = draw(st.sampled_from(choices))
    if kind == "prim":
        name = draw(st.sampled_from(sorted(_PRIMITIVES)))
        return name, _PRIMITIVES[name]
    if kind in ("opt", "vec"):
        inner, values = draw(typed_values(depth + 1))
        if kind == "vec":   # vec nat8 is blob: bytes
            return f"vec {inner}", st.binary(max_size=4) if inner == "nat8" else st.lists(values, max_size=4)
        if _admits_none(inner):
            return f"opt {inner}", st.one_of(st.just([]), values.map(lambda v: [v]))
        return f"opt {inner}", st.one_of(st.none(), values)
    if kind == "tuple":
        items = draw(st.lists(typed_values(depth + 1), min_size=1, max_size=3))
        return "record { " + "; ".join(t for t, _ in items) + " }", st.tuples(*(v for _, v in items))
    names = draw(st.lists(_NAMES, min_size=1 if kind == "variant" else 0, max_size=4, unique=True))
    fields = [(name, draw(typed_values(depth + 1))) for name in names]
    text = f"{kind} {{ " + "; ".join(f'"{n}" : {t}' for n, (t, _) in fields) + " }"
    if kind == "record":
        return text, st.fixed_dictionaries({n: v for n, (_, v) in fields})
    return text, st.one_of(*(v.map(lambda value, n=n: {n: value}) for n, (_, v) in fields))


@st.composite
def messages(draw):
    items = draw(st.lists(typed_values(), max_size=4))
    values = [draw(strategy) for _, strategy in items]
    return "(" + ", ".join(t for t, _ in items) + ")", values


def _same(a, b) -> bool:
    if type(a) is float and type(b) is float:
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if type(a) in (list, tuple) and type(a) is type(b):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if type(a) is dict and type(b) is dict:
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages())
def test_encoding_then_decoding_gives_the_values_back(message):
    text, values = message
    compiled = candid.types(text)
    data = compiled.encode(values)
    assert _same(compiled.decode(data), values)
    assert compiled.encode(compiled.decode(data)) == data   # one byte string per value


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages(), st.data())
def test_mutated_messages_decode_or_raise_a_candid_error(message, data):
    text, values = message
    compiled = candid.types(text)
    encoded = bytearray(compiled.encode(values))
    for _ in range(data.draw(st.integers(1, 4))):
        action = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        position = data.draw(st.integers(0, max(len(encoded) - 1, 0)))
        if action == "flip" and encoded:
            encoded[position] ^= data.draw(st.integers(1, 255))
        elif action == "cut":
            del encoded[position:]
        else:
            encoded[position:position] = data.draw(st.binary(min_size=1, max_size=4))
    try:
        compiled.decode(bytes(encoded))
    except CandidError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64), st.sampled_from(["()", "(nat)", "(opt vec text)", "(record { a : int; b : opt bool })",
                                                 "(variant { x; y : blob }, reserved)"]))
def test_arbitrary_bytes_decode_or_raise_a_candid_error(tail, text):
    for data in (tail, b"DIDL" + tail):
        try:
            candid.types(text).decode(data)
        except CandidError:
            pass


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="(){}:;,=->\"\\ abnoptcdrvximlesu0123456789_/*\n", max_size=60))
def test_arbitrary_type_text_compiles_or_raises_a_candid_error(text):
    for parse in (candid.types, candid.signature, candid.parse_definitions):
        try:
            parse(text)
        except CandidError:
            pass


# -- the rules, by example ------------------------------------------------------------------------


def test_decoding_at_a_narrower_record_ignores_extra_fields_and_reads_missing_options_as_null():
    wide = candid.types("(record { name : text; age : nat; extra : vec nat })")
    data = wide.encode([{"name": "ann", "age": 7, "extra": [1, 2]}])
    assert candid.types("(record { name : text; nickname : opt text })").decode(data) == \
        [{"name": "ann", "nickname": None}]
    with pytest.raises(CandidTypeMismatch, match="missing"):
        candid.types("(record { name : text; nickname : text })").decode(data)


def test_options_coerce_by_the_specification():
    nat = candid.types("(nat)").encode([5])
    assert candid.types("(opt nat)").decode(nat) == [5]               # t <: opt t
    assert candid.types("(opt text)").decode(nat) == [None]           # not t <: t': null
    assert candid.types("(opt opt nat)").decode(nat) == [[5]]          # listed: [] / [v]
    assert candid.types("(opt opt nat)").decode(candid.types("(opt nat)").encode([None])) == [[]]
    assert candid.types("(nat, opt text, reserved)").decode(nat) == [5, None, None]   # missing arguments
    assert candid.types("(int)").decode(nat) == [5]                   # nat <: int
    with pytest.raises(CandidTypeMismatch):
        candid.types("(nat)").decode(candid.types("(int)").encode([5]))


def test_python_forms_of_the_constructed_types():
    compiled = candid.types("(blob, record { nat; text }, variant { on; off : nat }, principal, vec int8)")
    values = [b"\x00\x01", (3, "x"), {"on": None}, b"\x04", [-1, 2]]
    assert compiled.decode(compiled.encode(values)) == values
    assert compiled.encode([bytearray(b"\x00\x01"), [3, "x"], "on", Principal(b"\x04"), (-1, 2)]) == \
        compiled.encode(values)


def test_field_ids_are_the_name_hash_and_fields_go_in_id_order():
    assert candid.idl_hash("foo") == 5097222 and candid.idl_hash("bar") == 4895187
    a = candid.types("(record { foo : nat; bar : nat })").encode([{"foo": 1, "bar": 2}])
    b = candid.types("(record { bar : nat; foo : nat })").encode([{"bar": 2, "foo": 1}])
    assert a == b


@pytest.mark.parametrize("types, values, refused", [
    ("(nat)", [-1], CandidValueRefused), ("(nat8)", [256], CandidValueRefused), ("(int)", [True], CandidValueRefused),
    ("(text)", ["\ud800"], CandidValueRefused), ("(record { a : nat })", [{"a": 1, "b": 2}], CandidValueRefused),
    ("(record { a : nat })", [{}], CandidValueRefused), ("(variant { a; b })", [{"c": None}], CandidValueRefused),
    ("(float32)", [1e300], CandidValueRefused), ("(principal)", [b"x" * 30], CandidValueRefused),
    ("(empty)", [None], CandidValueRefused), ("(nat, nat)", [1], CandidValueRefused),
])
def test_values_of_another_type_are_refused(types, values, refused):
    with pytest.raises(refused):
        candid.types(types).encode(values)


def test_cyclic_and_hugely_shared_values_are_refused_not_run_away():
    cyclic: list = []
    cyclic.append(cyclic)
    with pytest.raises(CandidLimitExceeded):
        candid.types("(Tree)", candid.parse_definitions("type Tree = vec Tree;")).encode([cyclic])
    shared: list = [[]]
    for _ in range(40):
        shared = [shared, shared]   # 2^40 leaves, 41 objects
    with pytest.raises(CandidLimitExceeded):
        candid.types("(Tree)", candid.parse_definitions("type Tree = vec Tree;")).encode([shared])


def test_nesting_beyond_the_bound_is_refused_on_decoding():
    tree = candid.types("(Tree)", candid.parse_definitions("type Tree = vec Tree;"))
    deep: list = []
    for _ in range(MAX_DEPTH - 2):
        deep = [deep]
    assert tree.decode(tree.encode([deep])) == [deep]
    data = b"DIDL\x01\x6d\x00\x01\x00" + b"\x01" * (MAX_DEPTH + 5) + b"\x00"
    with pytest.raises(CandidLimitExceeded):
        tree.decode(data)


@pytest.mark.parametrize("text, error", [
    ("(nat", CandidSyntaxError), ("(record { a : nat; a : text })", CandidTypeError),
    ("(Unknown)", CandidTypeError), ("(func () -> ())", CandidUnsupported), ("(service {})", CandidUnsupported),
    ("(record { 4294967296 : nat })", CandidTypeError), ('("unclosed)', CandidSyntaxError),
    ("(variant { nat })", CandidSyntaxError), ("(/* unclosed)", CandidSyntaxError),
])
def test_bad_type_text_raises_typed_errors(text, error):
    with pytest.raises(error):
        candid.types(text)


def test_definitions_recursion_and_alias_cycles():
    definitions = candid.parse_definitions("type List = opt record { head : int; tail : List }; type L2 = List;")
    listed = candid.types("(L2)", definitions)
    value = {"head": 1, "tail": {"head": 2, "tail": None}}
    assert listed.decode(listed.encode([value])) == [value]
    with pytest.raises(CandidTypeError, match="only itself"):
        candid.parse_definitions("type A = B; type B = A;")


def test_signatures_render_and_services_describe_themselves():
    sig = candid.signature("(name : text, blob) -> (record { ok : bool; 1 : nat }, variant { a; b : int })")
    assert sig.text == "(name : text, blob) -> (record { ok : bool; 1 : nat }, variant { a; b : int })"
    assert candid.service_description([("greet", sig, False), ("peek", candid.signature("() -> (text)"), True)]) == (
        "service : {\n  greet : (name : text, blob) -> (record { ok : bool; 1 : nat }, variant { a; b : int });\n"
        "  peek : () -> (text) query;\n}\n")
    with pytest.raises(CandidSyntaxError):
        candid.signature("(text) -> (nat) query")   # the kind is the decorator's


def test_decoding_refuses_non_bytes_and_trailing_bytes():
    with pytest.raises(CandidMalformed):
        candid.types("()").decode(bytearray(b"DIDL\x00\x00"))
    with pytest.raises(CandidMalformed, match="after the last value"):
        candid.types("()").decode(b"DIDL\x00\x00\x00")
