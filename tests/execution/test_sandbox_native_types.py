"""``isinstance(x, <builtin>)`` and ``type(x) is <builtin>`` run on the real types in
canister code (no proxy call), with the same answers and the same instruction counts as the
proxied forms; a module that binds one of those names anywhere keeps the proxied form."""

from __future__ import annotations

import pytest

from replica.execution.sandbox import load_sandboxed

TESTS = '''
Alias = int


def native(x):
    return (isinstance(x, dict), isinstance(x, (int, str)), isinstance(x, set), isinstance(x, range),
            type(x) is int, type(x) is not str, type(x) is bool, type(x) is tuple, type(x) is frozenset)


def proxied(x):
    a, d, s, r, t, st, fs, b = int, dict, set, range, tuple, str, frozenset, bool
    return (isinstance(x, d), isinstance(x, (a, st)), isinstance(x, s), isinstance(x, r),
            type(x) is a, type(x) is not st, type(x) is b, type(x) is t, type(x) is fs)


def of_a_class():
    return type(Alias) is int


def type_of_a_class():
    return type(Alias)
'''

SHADOWED = '''
int = str


def test(x):
    return (type(x) is int, isinstance(x, int))
'''


def _run(source: str, function: str, *args):
    loaded = load_sandboxed(source, "canister_test", "<canister module test>", 10**8, 2**30)
    sandbox = loaded.sandbox
    sandbox.begin(10**8, 2**30)
    try:
        result = getattr(loaded.module, function)(*args)
    finally:
        used = sandbox.end()
    return result, used


@pytest.mark.parametrize("value", [1, True, "a", {}, (1,), set([1]), frozenset([1]), range(3), 2.5, None, b"x"])
def test_native_type_tests_answer_and_count_as_the_proxied_ones(value):
    made, _ = _run(TESTS + f"\n\ndef make():\n    return {_construct(value)}\n", "make")
    native, native_used = _run(TESTS, "native", made)
    proxied, proxied_used = _run(TESTS, "proxied", made)
    assert native == proxied
    # The counts do not depend on the form: ``proxied`` pays its aliasing statement only.
    aliasing = _run("def f():\n    a, d, s, r, t, st, fs, b = int, dict, set, range, tuple, str, frozenset, bool\n",
                    "f")[1] - _run("def f():\n    pass\n", "f")[1]
    assert proxied_used - native_used == aliasing + 1   # the baseline's ``pass`` is one node


def _construct(value) -> str:
    if isinstance(value, (set, frozenset)):
        return f"{type(value).__name__}([1])"
    return repr(value)


def test_a_class_type_compares_unequal_but_is_not_handed_out():
    assert _run(TESTS, "of_a_class")[0] is False
    with pytest.raises(TypeError, match="type\\(\\) of a class is not available"):
        _run(TESTS, "type_of_a_class")


def test_a_module_that_binds_a_builtin_name_keeps_the_proxied_tests():
    # ``int`` is the proxy of str here: the tests compare with what the name is bound to.
    assert _run(SHADOWED, "test", "a")[0] == (True, True)
    assert _run(SHADOWED, "test", 1)[0] == (False, False)


LOOPS = '''
def loops(a, b):
    total = 0
    for i, x in enumerate(a):
        total += i
    for x, y in zip(a, b):
        total += 1
    return total, [x for x in sorted(a)], [x for x in list(b)], {x: 1 for x in tuple(a)}, [x for x in map(str, a)]
'''


def test_loops_over_builtin_calls_count_as_through_the_meter():
    # Binding the names keeps every iterable going through ``Sandbox.loop``.
    plain = _run("ALIASES = 1\n" + LOOPS, "loops", (3, 1, 2), "abc")
    bound = _run("zip, enumerate, sorted, list, tuple, map = zip, enumerate, sorted, list, tuple, map\n" + LOOPS,
                 "loops", (3, 1, 2), "abc")
    assert plain == bound


CONSUMED = '''
def consumed(a):
    return (tuple(x for x in a), list(x for x in a), any(x > 2 for x in a), all(x for x in a), sum(x for x in a),
            min(x for x in a), max(x for x in a), sorted(set(x for x in a)), sorted(frozenset(x for x in a)),
            dict((x, 1) for x in a))
'''


def test_generator_consumers_answer_and_count_as_their_wrappers():
    plain = _run("ALIASES = 1\n" + CONSUMED, "consumed", (3, 1, 2))
    bound = _run("tuple, list, any, all, sum, min, max, set, frozenset, dict = "
                 "tuple, list, any, all, sum, min, max, set, frozenset, dict\n" + CONSUMED, "consumed", (3, 1, 2))
    assert plain == bound


FILTERED = '''
def filtered(a):
    return ([v for v in a if type(v) is int], [v for v in a if isinstance(v, (str, bytes))],
            any(type(v) is not str for v in a))
'''


def test_type_tests_in_comprehension_clauses_count_as_the_proxied_ones():
    plain = _run("ALIASES = 1\n" + FILTERED, "filtered", (3, "a", b"b"))
    bound = _run("type, isinstance, int, str, bytes = type, isinstance, int, str, bytes\n" + FILTERED, "filtered",
                 (3, "a", b"b"))
    assert plain == bound
