"""The Python subset canister modules are written in, checked when a module is installed.

``check_module(tree)`` walks a parsed module and raises ``SubsetError`` naming the first
construct outside the subset (by line, then column) — ``"line 12: import of 'os' is not
allowed (allowed modules: ...)"`` — so every replica refuses the install with the same text.

What is refused, and why:

* imports of anything but ``ALLOWED_MODULES`` (deterministic, pure; ``re`` is not among them:
  a backtracking match can take time exponential in its input, which no charge by size can
  bound), star and relative imports, and names a module proxy does not offer;
* the names in ``FORBIDDEN_NAMES`` (host access, code from text, addresses and hash-seed
  dependent values, reflection that reaches around the rules below) and every dunder name
  (``__import__``, ``__builtins__``, ...) except assigning ``__all__`` at module level and
  ``__slots__`` in a class body;
* every dunder attribute (``x.__class__``, ``__dict__``, ``__globals__``, ``__subclasses__``,
  ``__traceback__``, ...), sunder attributes (``_value_``, ``_member_map_``), the SDK's
  internals (``_sys``, anything ``_sandbox_...``), frame, code and generator internals
  (``gi_frame``, ``f_globals``, ``tb_frame``, ...), ``mro`` and ``format``/``format_map``
  (a format string reaches attributes by name at run time);
* an attribute set or deleted other than as a whole target (``a.x, b = ...``, ``for a.x in``,
  ``with ... as a.x``, ``del (a.x, b)``): the sandbox checks ``x.a = v``, ``x.a += v`` and
  ``del x.a`` (classes, functions and modules outlive a message);
* ``x.keys`` or ``x.items`` other than called in place (``x.keys()``): the view's set
  operations would give a hash-ordered ``set``; called in place the sandbox orders them;
* ``global`` and ``nonlocal`` (module state and closures would outlive a message),
  ``async``/``await``, ``yield from``, a ``yield`` inside ``try ... finally`` or ``with``
  (a generator dropped there would run canister code whenever it is collected);
* ``except:`` and ``except BaseException`` (they would catch the instruction limit), ``except*``;
* a class with keywords (``metaclass=``), a dunder method outside ``ALLOWED_DUNDER_METHODS``
  (``__del__`` runs at collection time, ``__getattribute__``/``__setattr__`` bypass the checks);
* mutable default arguments and mutable module-level or class-level values given as
  displays or comprehensions (``[]``, ``{}``, ``{1}``, ...): a module global or class
  attribute persists between messages in one process but not across restarts, a
  determinism hazard; state lives in ``self.stable``. (Values computed by calls are checked
  when the module has run: ``sandbox.loader``.)
"""

from __future__ import annotations

import ast
from typing import Iterator

from ..errors import ModuleLoadError

__all__ = [
    "SubsetError", "check_module", "ALLOWED_MODULES", "FORBIDDEN_NAMES", "ALLOWED_DUNDER_METHODS",
    "is_forbidden_attribute",
]


class SubsetError(ModuleLoadError):
    """A canister module uses a construct outside the allowed subset (the text names it)."""


#: Modules canister code may import, and the names each offers (see ``safe_modules``).
ALLOWED_MODULES: dict[str, tuple[str, ...]] = {
    "__future__": ("annotations",),
    "replica.sdk": ("Canister", "update", "query", "callback", "CallError", "Trap", "ApiUsageError",
                    "RejectCode", "encode_value", "decode_payload", "MANAGEMENT_CANISTER_ID"),
    "math": ("ceil", "comb", "copysign", "e", "fabs", "factorial", "floor", "fmod", "fsum", "gcd", "inf",
             "isclose", "isfinite", "isinf", "isnan", "isqrt", "lcm", "nan", "perm", "pi", "prod", "sqrt",
             "tau", "trunc"),
    "hashlib": ("sha256", "sha224", "sha512", "sha384", "sha3_256", "sha3_512", "blake2b", "blake2s"),
    "functools": ("reduce", "cmp_to_key"),
    "string": ("ascii_letters", "ascii_lowercase", "ascii_uppercase", "digits", "hexdigits",
               "octdigits", "punctuation", "whitespace", "printable"),
}

FORBIDDEN_NAMES = frozenset({
    # host access and code from text
    "open", "exec", "eval", "compile", "input", "breakpoint", "help", "exit", "quit",
    "copyright", "credits", "license",
    # addresses and hash-seed dependent values
    "id", "hash",
    # reflection that reaches around the attribute rules
    "globals", "locals", "vars", "dir", "getattr", "setattr", "delattr", "super", "object", "memoryview",
    # exceptions that stop a process, or catch everything
    "BaseException", "SystemExit", "KeyboardInterrupt", "GeneratorExit",
})

#: Dunder methods a canister's own classes may define (operators, containers, ``__init__``).
ALLOWED_DUNDER_METHODS = frozenset({
    "__init__", "__repr__", "__str__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
    "__hash__", "__bool__", "__len__", "__iter__", "__next__", "__reversed__", "__contains__",
    "__getitem__", "__setitem__", "__delitem__", "__enter__", "__exit__", "__neg__", "__pos__",
    "__abs__", "__invert__", "__int__", "__index__", "__float__",
    *(f"__{op}__" for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or",
                              "xor", "lshift", "rshift", "matmul")),
    *(f"__r{op}__" for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or",
                               "xor", "lshift", "rshift", "matmul")),
    *(f"__i{op}__" for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or",
                               "xor", "lshift", "rshift", "matmul")),
})

#: Attributes that are never reachable: frame, code, generator and traceback internals,
#: format strings, the method resolution order, and the SDK's private parts.
_FORBIDDEN_ATTRIBUTES = frozenset({
    "format", "format_map", "mro", "_sys",
    "gi_frame", "gi_code", "gi_yieldfrom", "gi_running", "gi_suspended",
    "cr_frame", "cr_code", "cr_await", "cr_running", "cr_origin", "cr_suspended",
    "ag_frame", "ag_code", "ag_await", "ag_running",
    "f_back", "f_builtins", "f_code", "f_globals", "f_locals", "f_lasti", "f_lineno", "f_trace",
    "f_trace_lines", "f_trace_opcodes", "tb_frame", "tb_next", "tb_lasti", "tb_lineno",
})

#: Methods whose views have set operations (``d.keys() - other``): called in place only, so
#: the sandbox can give an ordered view (``metering``).
_VIEWS = ("keys", "items")
_MUTABLE_DISPLAYS = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp, ast.GeneratorExp)


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def is_forbidden_attribute(name: str) -> bool:
    """Dunder, sunder (``_x_``), ``_sandbox_...`` and the names of ``_FORBIDDEN_ATTRIBUTES``."""
    if name.startswith("__") and name.endswith("__"):
        return True
    if len(name) > 2 and name.startswith("_") and name.endswith("_"):
        return True
    return name.startswith("_sandbox_") or name in _FORBIDDEN_ATTRIBUTES


def _allowed_list() -> str:
    return ", ".join(sorted(ALLOWED_MODULES))


def _describe_mutable(node: ast.AST) -> str:
    return {ast.List: "a list", ast.Dict: "a dict", ast.Set: "a set", ast.ListComp: "a list comprehension",
            ast.DictComp: "a dict comprehension", ast.SetComp: "a set comprehension",
            ast.GeneratorExp: "a generator"}[type(node)]


class _Checker:
    """Collects ``(line, column, message)`` for every construct outside the subset."""

    def __init__(self, lazy_annotations: bool) -> None:
        self.found: list[tuple[int, int, str]] = []
        #: ``from __future__ import annotations``: annotations are never evaluated, so not checked.
        self.lazy_annotations = lazy_annotations

    def annotation(self, node: ast.AST | None) -> None:
        if node is not None and not self.lazy_annotations:
            self.expressions(node)

    def refuse(self, node: ast.AST, message: str) -> None:
        self.found.append((getattr(node, "lineno", 0), getattr(node, "col_offset", 0), message))

    # -- the walk ----------------------------------------------------------------------------

    def module(self, tree: ast.Module) -> None:
        self.body(tree.body, scope="module", in_generator_guard=False)

    def body(self, statements: list[ast.stmt], *, scope: str, in_generator_guard: bool) -> None:
        for statement in statements:
            self.statement(statement, scope=scope, guard=in_generator_guard)

    def statement(self, node: ast.stmt, *, scope: str, guard: bool) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            self.import_(node)
            return
        if isinstance(node, (ast.AsyncFunctionDef, ast.AsyncFor, ast.AsyncWith)):
            self.refuse(node, "async code is not allowed")
            return
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            kind = "global" if isinstance(node, ast.Global) else "nonlocal"
            self.refuse(node, f"a {kind} statement is not allowed (state lives in self.stable)")
            return
        if type(node).__name__ == "TryStar":
            self.refuse(node, "except* is not allowed")
            return
        if isinstance(node, ast.FunctionDef):
            self.function(node, scope)
            return
        if isinstance(node, ast.ClassDef):
            self.class_(node)
            return
        if scope in ("module", "class") and isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            self.shared_value(node, scope)
        # An attribute is set or deleted only as a whole target (the sandbox checks it there).
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Attribute):
            node.targets[0].whole_target = True
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Attribute):
            node.target.whole_target = True
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                if isinstance(target, ast.Attribute):
                    target.whole_target = True
        if isinstance(node, ast.AnnAssign):
            self.annotation(node.annotation)
            for part in (node.target, node.value):
                if part is not None:
                    self.expressions(part, guard=guard)
            return
        if isinstance(node, ast.Try):
            self.try_(node, scope, guard)
            return
        if isinstance(node, ast.With):
            for item in node.items:
                self.expressions(item)
            self.body(node.body, scope=scope, in_generator_guard=True)
            return
        # compound statements: expressions of the header, then the nested bodies
        for field, value in ast.iter_fields(node):
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                self.body(value, scope=scope, in_generator_guard=guard)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        self.expressions(item, guard=guard)
            elif isinstance(value, ast.AST):
                self.expressions(value, guard=guard)

    def try_(self, node: ast.Try, scope: str, guard: bool) -> None:
        self.body(node.body, scope=scope, in_generator_guard=guard or bool(node.finalbody))
        for handler in node.handlers:
            if handler.type is None:
                self.refuse(handler, "a bare except: is not allowed (name the exceptions; it would catch "
                                     "the instruction limit)")
            else:
                self.expressions(handler.type)
            self.body(handler.body, scope=scope, in_generator_guard=guard or bool(node.finalbody))
        self.body(node.orelse, scope=scope, in_generator_guard=guard or bool(node.finalbody))
        self.body(node.finalbody, scope=scope, in_generator_guard=guard)

    def import_(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                self.refuse(node, "a relative import is not allowed")
                return
            module = node.module or ""
            if module not in ALLOWED_MODULES:
                self.refuse(node, f"import of {module!r} is not allowed (allowed modules: {_allowed_list()})")
                return
            for alias in node.names:
                if alias.name == "*":
                    self.refuse(node, f"a star import from {module!r} is not allowed")
                elif alias.name not in ALLOWED_MODULES[module]:
                    self.refuse(node, f"{module}.{alias.name} is not available (it offers "
                                      f"{', '.join(ALLOWED_MODULES[module])})")
            return
        for alias in node.names:
            if alias.name not in ALLOWED_MODULES:
                self.refuse(node, f"import of {alias.name!r} is not allowed (allowed modules: {_allowed_list()})")
            elif "." in alias.name and alias.asname is None:
                self.refuse(node, f"import {alias.name} needs a name: write from {alias.name} import ...")

    def function(self, node: ast.FunctionDef, scope: str) -> None:
        if _is_dunder(node.name) and node.name not in ALLOWED_DUNDER_METHODS:
            self.refuse(node, f"defining {node.name} is not allowed")
        for decorator in node.decorator_list:
            self.expressions(decorator)
        self.arguments(node.args)
        self.annotation(node.returns)
        self.body(node.body, scope="function", in_generator_guard=False)

    def arguments(self, args: ast.arguments) -> None:
        for default in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
            if isinstance(default, _MUTABLE_DISPLAYS):
                self.refuse(default, f"{_describe_mutable(default)} as a default argument is not allowed (it is "
                                     f"shared by every call; use None)")
            self.expressions(default)
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is not None:
                self.name(arg, arg.arg)
                self.annotation(arg.annotation)

    def class_(self, node: ast.ClassDef) -> None:
        if _is_dunder(node.name):
            self.refuse(node, f"a class named {node.name} is not allowed")
        if node.keywords:
            self.refuse(node, f"class {node.name}: class keywords (metaclass=...) are not allowed")
        for expression in [*node.bases, *node.decorator_list]:
            self.expressions(expression)
        self.body(node.body, scope="class", in_generator_guard=False)

    def shared_value(self, node: ast.Assign | ast.AnnAssign | ast.AugAssign, scope: str) -> None:
        value = node.value
        where = "module-level" if scope == "module" else "class-level"
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if (scope == "module" and isinstance(node, ast.Assign) and len(targets) == 1
                and isinstance(targets[0], ast.Name) and targets[0].id == "__all__"):
            return  # made a tuple when the module is loaded
        if isinstance(node, ast.AugAssign):
            self.refuse(node, f"a {where} augmented assignment is not allowed")
        elif isinstance(value, _MUTABLE_DISPLAYS):
            self.refuse(node, f"{_describe_mutable(value)} as a {where} value is not allowed (it would keep "
                              f"state between messages; state lives in self.stable, constants are tuples "
                              f"or frozensets)")

    # -- expressions ---------------------------------------------------------------------------

    def expressions(self, root: ast.AST, *, guard: bool = False) -> None:
        for node in _walk_expression(root):   # a parent before its children
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _VIEWS:
                node.func.called_here = True
            if isinstance(node, ast.Name):
                self.name(node, node.id)
            elif isinstance(node, ast.Attribute):
                if is_forbidden_attribute(node.attr):
                    self.refuse(node, f"access to the attribute {node.attr!r} is not allowed")
                elif node.attr in _VIEWS and isinstance(node.ctx, ast.Load) and not getattr(node, "called_here", False):
                    self.refuse(node, f"x.{node.attr} is allowed only called where it is named (x.{node.attr}()): "
                                      f"the sandbox orders the set operations of the view it returns")
                elif not isinstance(node.ctx, ast.Load) and not getattr(node, "whole_target", False):
                    self.refuse(node, f"setting the attribute {node.attr!r} is allowed only as a whole target "
                                      f"(x.{node.attr} = ..., x.{node.attr} += ..., del x.{node.attr})")
            elif isinstance(node, ast.Await):
                self.refuse(node, "async code is not allowed")
            elif isinstance(node, ast.YieldFrom):
                self.refuse(node, "yield from is not allowed (write: for x in it: yield x)")
            elif isinstance(node, ast.Yield) and guard:
                self.refuse(node, "yield inside try/finally or with is not allowed")
            elif isinstance(node, ast.Lambda):
                self.arguments(node.args)
            elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                for generator in node.generators:
                    if generator.is_async:
                        self.refuse(node, "async code is not allowed")

    def name(self, node: ast.AST, name: str) -> None:
        if name in FORBIDDEN_NAMES:
            self.refuse(node, f"the name {name!r} is not allowed")
        elif _is_dunder(name) and name not in ("__all__", "__slots__"):
            self.refuse(node, f"the name {name!r} is not allowed")
        elif name.startswith("_sandbox_"):
            self.refuse(node, f"the name {name!r} is reserved")


def _walk_expression(root: ast.AST) -> Iterator[ast.AST]:
    """Every node under ``root`` (an expression or a part of one), lambdas' bodies included."""
    return ast.walk(root)


def check_module(tree: ast.Module) -> None:
    """Raise ``SubsetError`` for the first construct (by line) outside the subset."""
    lazy = any(isinstance(s, ast.ImportFrom) and s.module == "__future__" and any(a.name == "annotations" for a in s.names)
               for s in tree.body)
    checker = _Checker(lazy)
    checker.module(tree)
    if checker.found:
        found = sorted(checker.found)
        line, _, message = found[0]
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise SubsetError(f"line {line}: {message}{more}")
