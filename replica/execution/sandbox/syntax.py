"""Static analysis and node building for the metering transform (``metering``).

``node_cost`` is the unit's definition in code: the syntax nodes an expression or a
statement evaluates once. The rest builds the instrumentation's nodes (names, sandbox calls,
charges) and recognizes the shapes ``metering`` gives fast paths: arithmetic trees of ints
and innermost loops that run to the end of their iterable.
"""

from __future__ import annotations

import ast

__all__ = [
    "node_cost", "name", "store", "method", "charge", "small", "sized_tree", "runs_to_the_end",
    "numeric_constant", "SIZED_OPS", "TREE_OPS", "INT", "STR", "LEN", "SMALL", "SHORT_TEXT", "PROXIED", "TYPE",
    "real_type", "bound_names", "native_type_test", "native_type_compare", "CONSUMERS", "native_consumer",
]

SIZED_OPS = {ast.Add: "add", ast.Mult: "mul", ast.Mod: "mod", ast.Pow: "pow", ast.LShift: "lshift"}
_SKIPPED = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def node_cost(node: ast.AST) -> int:
    """Syntax nodes ``node`` evaluates once: a lambda or comprehension counts 1 (its body is
    charged per call or item), plus a comprehension's first iterable; nested statement
    bodies are not counted (they are blocks of their own)."""
    if isinstance(node, _SKIPPED):
        cost = 1
        if not isinstance(node, ast.Lambda):
            cost += node_cost(node.generators[0].iter)
        return cost
    cost = 1
    for field, value in ast.iter_fields(node):
        if isinstance(value, list):
            for item in value:
                if isinstance(item, ast.AST) and not isinstance(item, (ast.stmt, ast.excepthandler, ast.match_case)):
                    cost += node_cost(item)
        elif isinstance(value, ast.AST) and not isinstance(value, ast.stmt):
            if field in ("ctx", "op"):
                continue
            cost += node_cost(value)
    return cost


def name(identifier: str) -> ast.Name:
    return ast.Name(identifier, ast.Load())


def store(identifier: str) -> ast.Name:
    return ast.Name(identifier, ast.Store())


def method(meter: str, attribute: str, *args: ast.expr) -> ast.Call:
    """``meter.attribute(*args)``."""
    return ast.Call(ast.Attribute(name(meter), attribute, ast.Load()), list(args), [])


TREE_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Mod, ast.FloorDiv, ast.BitAnd, ast.BitOr, ast.BitXor, ast.RShift)


def _tree_parts(node: ast.expr) -> tuple[int, int, bool]:
    """(operations, non-constant leaves, only int constants) of an arithmetic tree."""
    if isinstance(node, ast.BinOp) and type(node.op) in TREE_OPS:
        ops_l, leaves_l, ints_l = _tree_parts(node.left)
        ops_r, leaves_r, ints_r = _tree_parts(node.right)
        return ops_l + ops_r + 1, leaves_l + leaves_r, ints_l and ints_r
    if isinstance(node, ast.Constant):
        return 0, 0, type(node.value) is int
    return 0, 1, True


def sized_tree(node: ast.BinOp) -> bool:
    """Whether ``node`` is an arithmetic tree worth the int fast path: it has a charged
    operation, at least one non-constant operand and no constant but ints."""
    if type(node.op) not in TREE_OPS:
        return False
    operations, leaves, ints = _tree_parts(node)
    return ints and leaves > 0 and any(isinstance(n, ast.BinOp) and type(n.op) in SIZED_OPS for n in _tree_nodes(node))


def _tree_nodes(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and type(node.op) in TREE_OPS:
        return [node, *_tree_nodes(node.left), *_tree_nodes(node.right)]
    return []


def runs_to_the_end(loop: ast.For) -> bool:
    """Whether ``loop`` is innermost and leaves only at the end of its iterable (or by an
    exception): no nested loop, ``break``, ``return``, ``yield`` or ``await`` in its body
    (nested functions and classes aside)."""
    pending: list[ast.AST] = list(loop.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.For, ast.While, ast.AsyncFor, ast.Break, ast.Return, ast.Yield, ast.YieldFrom,
                             ast.Await)):
            return False
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        pending.extend(ast.iter_child_nodes(node))
    return True


def numeric_constant(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float, complex) and not isinstance(node.value, bool)


def charge(meter: str, instructions: int) -> list[ast.stmt]:
    """``meter.left -= n; if meter.left < 0: meter.out()``."""
    attribute = ast.Attribute(name(meter), "left", ast.Store())
    return [
        ast.AugAssign(attribute, ast.Sub(), ast.Constant(instructions)),
        ast.If(ast.Compare(ast.Attribute(name(meter), "left", ast.Load()), [ast.Lt()], [ast.Constant(0)]),
               [ast.Expr(method(meter, "out"))], []),
    ]


#: The global under which instrumented code finds the real ``int`` (canister code's ``int``
#: is the charged constructor), and the bound under which ``*`` of two ints runs inline.
INT = "__int__"
STR = "__str_type__"
LEN = "__len_function__"
SMALL = 2**62
#: A str slice or ``+`` whose result is shorter than this runs natively in a function body:
#: its work is bounded by a constant its node covers (``meter``'s unit).
SHORT_TEXT = 256


def small(identifier: str) -> ast.expr:
    """``-SMALL < identifier < SMALL``."""
    return ast.Compare(ast.Constant(-SMALL), [ast.Lt(), ast.Lt()], [name(identifier), ast.Constant(SMALL)])


#: The builtin names that are proxies of a real type in canister code (``safe_builtins``):
#: calling one is charged, ``isinstance`` with one and ``type(x) is`` one are not. The real
#: type is the global ``real_type(name)`` of instrumented code; ``TYPE`` is the real ``type``.
PROXIED = ("list", "tuple", "dict", "set", "frozenset", "bytes", "bytearray", "int", "str", "range")
TYPE = "__type_function__"


def real_type(builtin: str) -> str:
    return f"__real_{builtin}__"


def bound_names(tree: ast.AST) -> set[str]:
    """Every name ``tree`` binds anywhere: assigned, deleted, a parameter, a definition, an
    import, a handler's or a pattern's capture, or declared global or nonlocal."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
    return names


def native_type_test(node: ast.expr, builtins: frozenset[str]) -> ast.expr | None:
    """The class argument of ``isinstance(x, <builtin>)`` (or a tuple of them) with the
    proxies replaced by their real types — the same answer, without the proxy's Python
    ``__instancecheck__`` — or None. ``builtins``: the builtin names the module never binds."""
    if isinstance(node, ast.Name) and node.id in builtins and node.id in PROXIED:
        return name(real_type(node.id))
    if isinstance(node, ast.Tuple) and any(isinstance(e, ast.Name) and e.id in PROXIED and e.id in builtins
                                           for e in node.elts):
        return ast.Tuple([native_type_test(e, builtins) or e for e in node.elts], ast.Load())
    return None


def native_type_compare(node: ast.Compare, builtins: frozenset[str]) -> ast.Compare | None:
    """``type(x) is <builtin type>`` (or ``is not``) as ``real type(x) is <real type>``: the
    same answer, without the ``type()`` wrapper (which refuses to hand out a class's type;
    here nothing is handed out, so a class's type simply compares unequal); or None."""
    left, right = node.left, node.comparators[0] if len(node.comparators) == 1 else None
    if not (isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id == "type"
            and "type" in builtins and len(left.args) == 1 and not left.keywords
            and not isinstance(left.args[0], ast.Starred) and len(node.ops) == 1
            and isinstance(node.ops[0], (ast.Is, ast.IsNot)) and isinstance(right, ast.Name)
            and right.id in builtins and right.id in (*PROXIED, "bool", "float")):
        return None
    real = name(real_type(right.id)) if right.id in PROXIED else right
    return ast.Compare(ast.Call(name(TYPE), left.args, []), node.ops, [real])


#: Builtins that take a generator expression as it is (their wrappers charge nothing for one:
#: its items are charged as they are made), found under ``real_type(name)``.
CONSUMERS = ("any", "all", "sum", "min", "max")


def native_consumer(node: ast.Call, builtins: frozenset[str]) -> str | None:
    """The real builtin's global for ``tuple(<generator expression>)``, ``any(...)``, ...
    (one generator expression, nothing else, the name never bound): the wrapper's frame
    would only hand the generator over."""
    function = node.func
    if (isinstance(function, ast.Name) and function.id in builtins and len(node.args) == 1 and not node.keywords
            and isinstance(node.args[0], ast.GeneratorExp)
            and function.id in ("tuple", "list", "set", "frozenset", "dict", *CONSUMERS)):
        return real_type(function.id)
    return None
