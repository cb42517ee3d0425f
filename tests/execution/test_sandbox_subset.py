"""Install-time refusals: a module outside the allowed subset is refused with the line and the
construct, the same text on every replica; what the subset allows still works."""

from __future__ import annotations

import pytest

from replica.execution.errors import ModuleLoadError
from replica.execution.sandbox import load_sandboxed
from replica.execution.sandbox.subset import SubsetError

HEAD = "from replica.sdk import Canister, update\n\n\nclass C(Canister):\n    @update\n    def m(self, arg):\n"


def _load(source: str):
    return load_sandboxed(source, "canister_test", "<canister module test>", 10**8, 2**30)


def _method(*lines: str) -> str:
    return HEAD + "".join(f"        {line}\n" for line in lines)


ALLOWED = "__future__, functools, hashlib, math, replica.sdk, string"


@pytest.mark.parametrize("source, message", [
    # imports of the host
    ("import os\n", f"line 1: import of 'os' is not allowed (allowed modules: {ALLOWED})"),
    ("x = 1\nimport sys\n", "line 2: import of 'sys' is not allowed"),
    ("from time import time\n", "line 1: import of 'time' is not allowed"),
    ("import random\n", "line 1: import of 'random' is not allowed"),
    ("import re\n", "line 1: import of 're' is not allowed"),
    ("import socket, subprocess\n", "line 1: import of 'socket' is not allowed (allowed modules: "
                                    f"{ALLOWED}) (and 1 more)"),
    ("from math import exp\n", "line 1: math.exp is not available (it offers "),
    ("from math import *\n", "line 1: a star import from 'math' is not allowed"),
    ("from . import x\n", "line 1: a relative import is not allowed"),
    ("import replica.sdk\n", "line 1: import replica.sdk needs a name: write from replica.sdk import ..."),
    (_method("import os", "os._exit(9)"), "line 7: import of 'os' is not allowed"),
    # names
    (_method("return open('/etc/hostname').read()"), "line 7: the name 'open' is not allowed"),
    (_method("return eval('1')"), "line 7: the name 'eval' is not allowed"),
    (_method("exec('x = 1')"), "line 7: the name 'exec' is not allowed"),
    (_method("return compile('1', 'f', 'eval')"), "line 7: the name 'compile' is not allowed"),
    (_method("return __import__('os')"), "line 7: the name '__import__' is not allowed"),
    (_method("return id(self)"), "line 7: the name 'id' is not allowed"),
    (_method("return hash('a')"), "line 7: the name 'hash' is not allowed"),
    (_method("return globals()"), "line 7: the name 'globals' is not allowed"),
    (_method("return getattr(self, 'x')"), "line 7: the name 'getattr' is not allowed"),
    (_method("return super().m(arg)"), "line 7: the name 'super' is not allowed"),
    (_method("return object()"), "line 7: the name 'object' is not allowed"),
    (_method("raise SystemExit(3)"), "line 7: the name 'SystemExit' is not allowed"),
    (_method("return __builtins__"), "line 7: the name '__builtins__' is not allowed"),
    # attributes
    (_method("return self.__class__"), "line 7: access to the attribute '__class__' is not allowed"),
    (_method("return arg.__dict__"), "line 7: access to the attribute '__dict__' is not allowed"),
    (_method("return self.m.__globals__"), "line 7: access to the attribute '__globals__' is not allowed"),
    (_method("return C.__subclasses__()"), "line 7: access to the attribute '__subclasses__' is not allowed"),
    (_method("return self._sys"), "line 7: access to the attribute '_sys' is not allowed"),
    (_method("return self.stable._sandbox_map"), "line 7: access to the attribute '_sandbox_map' is not allowed"),
    (_method("return '{0.__class__}'.format(arg)"), "line 7: access to the attribute 'format' is not allowed"),
    (_method("return '{x}'.format_map(arg)"), "line 7: access to the attribute 'format_map' is not allowed"),
    (_method("g = (x for x in ())", "return g.gi_frame"), "line 8: access to the attribute 'gi_frame' is not allowed"),
    (_method("return arg._value_"), "line 7: access to the attribute '_value_' is not allowed"),
    # statements
    ("X = 0\n" + _method("global X", "X = 1"), "line 8: a global statement is not allowed"),
    (_method("x = 0", "def f():", "    nonlocal x", "f()"), "line 9: a nonlocal statement is not allowed"),
    (_method("try:", "    pass", "except:", "    pass"), "line 9: a bare except: is not allowed"),
    (_method("try:", "    pass", "except BaseException:", "    pass"), "line 9: the name 'BaseException' is not allowed"),
    ("async def f():\n    pass\n", "line 1: async code is not allowed"),
    (_method("def g():", "    yield from range(3)", "return 1"), "line 8: yield from is not allowed"),
    (_method("def g():", "    try:", "        yield 1", "    finally:", "        pass"),
     "line 9: yield inside try/finally or with is not allowed"),
    (_method("f = len", "for f.x in (1, 2):", "    pass"),
     "line 8: setting the attribute 'x' is allowed only as a whole target"),
    (_method("a, arg.x = 1, 2"), "line 7: setting the attribute 'x' is allowed only as a whole target"),
    (_method("del (arg.x, arg.y)"), "line 7: setting the attribute 'x' is allowed only as a whole target"),
    (_method("keys = arg.keys", "return tuple(keys() - {1})"),
     "line 7: x.keys is allowed only called where it is named (x.keys())"),
    (_method("return tuple(map(dict.items, arg))"), "line 7: x.items is allowed only called where it is named"),
    # state that would outlive a message
    ("CACHE = {}\n", "line 1: a dict as a module-level value is not allowed"),
    ("SEEN = [1, 2]\n", "line 1: a list as a module-level value is not allowed"),
    ("TAGS = {'a'}\n", "line 1: a set as a module-level value is not allowed"),
    ("class K:\n    items = []\n", "line 2: a list as a class-level value is not allowed"),
    (_method("def f(x=[]):", "    return x"), "line 7: a list as a default argument is not allowed"),
    ("class K(metaclass=type):\n    pass\n", "line 1: class K: class keywords (metaclass=...) are not allowed"),
    ("class K:\n    def __del__(self):\n        pass\n", "line 2: defining __del__ is not allowed"),
    ("class K:\n    def __getattribute__(self, n):\n        pass\n", "line 2: defining __getattribute__ is not allowed"),
])
def test_refused_with_line_and_construct(source, message):
    with pytest.raises(SubsetError) as refused:
        _load(source)
    assert str(refused.value).startswith(message), str(refused.value)


@pytest.mark.parametrize("source, message", [
    ("X = list((1, 2))\n", "the module-level value 'X' is a list, which is mutable"),
    ("def make():\n    box = [0]\n    def f():\n        return box\n    return f\nF = make()\n",
     "the module-level value 'F' (a variable it closes over) is a list"),
    ("def f(x=dict()):\n    return x\n", "the module-level value 'f' (a default argument) is a dict"),
    ("class K:\n    pass\nk = K()\n", "the module-level value 'k' is a K, which is mutable"),
    ("class K:\n    d = dict()\n", "the class-level value K.d is a dict"),
    ("while True:\n    pass\n", "the module exceeded the instruction limit for single message execution while it ran"),
])
def test_mutable_module_state_and_endless_module_bodies_are_refused(source, message):
    with pytest.raises(ModuleLoadError) as refused:
        _load(source)
    assert message in str(refused.value), str(refused.value)


def test_a_refusal_is_the_same_text_every_time():
    source = _method("x = 1", "import os")
    texts = set()
    for _ in range(3):
        with pytest.raises(SubsetError) as refused:
            _load(source)
        texts.add(str(refused.value))
    assert texts == {"line 8: import of 'os' is not allowed (allowed modules: " + ALLOWED + ")"}


def test_what_the_subset_allows_loads():
    source = '''
"""A canister using the allowed subset."""
from __future__ import annotations

import hashlib
import math
from functools import reduce
from string import ascii_lowercase

from replica.sdk import Canister, Trap, query, update

__all__ = ["Good"]
LIMIT = 2**64 - 1
NAMES = ("a", "b")
VOWELS = frozenset("aeiou")


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Point:
    __slots__ = ("x", "y")

    def __init__(self, x, y):
        self.x = x
        self.y = y

    def __eq__(self, other):
        return (self.x, self.y) == (other.x, other.y)


class Good(Canister):
    VERSION = 1

    @update
    def run(self, n: int) -> tuple:
        p = Point(1, 2)
        p.x = 3
        total = reduce(lambda a, b: a + b, range(n), 0)
        words = {w for w in ascii_lowercase[:n] if w not in VOWELS}
        try:
            math.isqrt(-1)
        except ValueError as exc:
            error = str(exc)
        return (total, tuple(words), digest(b"x"), error, p == Point(3, 2), isinstance(n, int))
'''
    module = _load(source).module
    assert module.__all__ == ("Good",) and module.Good.VERSION == 1
