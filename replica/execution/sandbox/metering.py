"""The metering transform: a canister module's syntax tree, instrumented once at load.

``instrument(tree)`` rewrites a module that passed ``subset.check_module`` so that, when it
runs with ``__meter__`` (a ``safe_builtins.Sandbox``) in its globals:

* every block (a body of a module, class, function, loop, branch, handler) starts by
  charging the instructions of its own statements — their syntax nodes, counted statically
  (``meter`` defines the unit) — and checking the meter;
* a function's entry charges ``FUNCTION_CALL`` and counts call depth; each ``return``, and
  the end of the body, uncounts it; a ``yield`` uncounts it while the generator is
  suspended; a handler of ``try`` resets depth to what it was when its ``try`` began (an
  exception unwinds frames without returning) and turns a host-dependent ``RecursionError``
  or ``MemoryError`` into a fault;
* each loop iteration and each comprehension item charges its header and test; a lambda
  charges its body per call and counts depth;
* operations whose cost grows with their operands (``+ * % ** <<`` and their augmented
  forms, slicing, ``*x`` unpacking, f-string formatting, and the methods in
  ``SIZED_METHODS``) go through the sandbox, which charges by size before they run (in a
  function, ints, and str slices and ``+`` with results under ``SHORT_TEXT``, run natively
  after inline type tests); a ``for`` loop's iterable goes through ``loop`` (a ``range`` is
  iterated natively there) unless it is a call of ``zip``, ``enumerate``, ... (``_ITERATORS``);
* ``isinstance(x, <builtin type>)`` and ``type(x) is <builtin type>`` test the real types
  (no call of the name's proxy), and ``tuple``, ``any``, ... of one generator expression
  call the real builtin (``CONSUMERS``), when the module never binds those names; same
  answers, same counts;
* set displays and set comprehensions build ``OrderedSet``s; ``x.keys()``/``x.items()``
  give views whose set operations are ordered too;
* attribute stores and deletes go through the sandbox, which refuses them on classes,
  functions and modules (those persist between messages);
* classes are made by the sandbox's frozen metaclass (no attribute changes after the class
  body ran), and ``__all__`` becomes a tuple.

The instrumented names are dunders (``__meter__``, ``__m__``, ``__d0__``, ...), which
canister code may not use, so it cannot reach or forge them.
"""

from __future__ import annotations

import ast
import copy

from .meter import FUNCTION_CALL, LOOP_ITERATION, MAX_CALL_DEPTH
from .syntax import CONSUMERS, INT, LEN, PROXIED, SHORT_TEXT, SMALL, STR, TYPE, node_cost, real_type
from .syntax import bound_names as _bound_names
from .syntax import native_type_compare as _native_type_compare
from .syntax import native_consumer as _native_consumer
from .syntax import native_type_test as _native_type_test
from .syntax import SIZED_OPS as _SIZED_OPS
from .syntax import TREE_OPS as _TREE_OPS
from .syntax import charge as _charge
from .syntax import method as _method
from .syntax import name as _name
from .syntax import numeric_constant as _numeric_constant
from .syntax import runs_to_the_end as _runs_to_the_end
from .syntax import sized_tree as _sized_tree
from .syntax import small as _small
from .syntax import store as _store

__all__ = ["instrument", "node_cost", "SIZED_METHODS", "METER", "INT", "STR", "LEN", "TYPE", "PROXIED", "CONSUMERS",
           "real_type"]

METER = "__meter__"
_LOCAL = "__m__"
#: Methods whose work grows with the receiver or the arguments (charged by ``Sandbox.method``).
SIZED_METHODS = frozenset({
    "join", "ljust", "rjust", "center", "zfill", "replace", "expandtabs", "extend", "update", "fromkeys",
    "to_bytes", "sort", "copy", "count", "index", "find", "rfind", "split", "rsplit", "splitlines", "strip",
    "lstrip", "rstrip", "upper", "lower", "casefold", "title", "capitalize", "swapcase", "encode", "decode",
    "hex", "fromhex", "translate", "insert", "remove", "partition", "rpartition", "startswith", "endswith",
})
#: Builtins whose result a loop iterates as it is (``Sandbox.loop`` would hand it back).
_ITERATORS = ("zip", "enumerate", "map", "filter", "iter", "sorted", "list", "tuple")   # not reversed: __reversed__ may give a range


def _str_constant(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is str


def _short_texts(a: str, b: str) -> ast.expr:
    """``a`` and ``b`` are both str and their concatenation is shorter than ``SHORT_TEXT``."""
    return ast.BoolOp(ast.And(), [
        ast.Compare(ast.Attribute(_name(a), "__class__", ast.Load()), [ast.Is()], [_name(STR)]),
        ast.Compare(ast.Attribute(_name(b), "__class__", ast.Load()), [ast.Is()], [_name(STR)]),
        ast.Compare(ast.BinOp(ast.Call(_name(LEN), [_name(a)], []), ast.Add(), ast.Call(_name(LEN), [_name(b)], [])),
                    [ast.Lt()], [ast.Constant(SHORT_TEXT)])])


class _Instrument(ast.NodeTransformer):
    def __init__(self, builtins: frozenset[str]) -> None:
        self.scopes: list[str] = ["module"]   # module | class | function | lambda | comprehension
        self.try_counter = 0
        self.builtins = builtins   # builtin names the module never binds

    # -- where the meter is --------------------------------------------------------------------

    @property
    def meter(self) -> str:
        """``__m__`` (the function's local alias) inside a function — also in its lambdas and
        comprehensions, as a closure variable — else the module global ``__meter__``."""
        for scope in reversed(self.scopes):
            if scope == "function":
                return _LOCAL
            if scope in ("class", "module"):
                return METER
        return METER

    def temporary(self) -> str:
        self.try_counter += 1
        return f"__t{self.try_counter}__"

    def fast(self, operation: str, left: ast.expr, right: ast.expr, in_place: bool = False) -> ast.expr:
        """``left <op> right``: inline when both are ints (small ones for ``*``), else the
        sandbox's charged operation. Inline only in a function body, where the walrus
        temporaries are plain locals."""
        helper = ("i" + operation) if in_place else operation
        if self.scopes[-1] != "function" or operation not in ("add", "mul", "mod"):
            return _method(self.meter, helper, left, right)
        op = {"add": ast.Add(), "mul": ast.Mult(), "mod": ast.Mod()}[operation]
        if operation == "add" and not in_place and (_str_constant(left) or _str_constant(right)):
            return self.short_text(left, right)
        a = self.temporary()
        literal = isinstance(right, ast.Constant) and type(right.value) is int
        if literal:
            guard: ast.expr = ast.Compare(ast.Attribute(ast.NamedExpr(_store(a), left), "__class__", ast.Load()), [ast.Is()],
                                [_name(INT)])
            if operation == "mul":
                guard = ast.BoolOp(ast.And(), [guard, _small(a)]) if abs(right.value) < SMALL else ast.Constant(False)
            return ast.IfExp(guard, ast.BinOp(_name(a), op, right), _method(self.meter, helper, _name(a), right))
        b = self.temporary()
        both = ast.BinOp(
            ast.Compare(ast.Attribute(ast.NamedExpr(_store(a), left), "__class__", ast.Load()), [ast.Is()], [_name(INT)]),
            ast.BitAnd(),
            ast.Compare(ast.Attribute(ast.NamedExpr(_store(b), right), "__class__", ast.Load()), [ast.Is()], [_name(INT)]))
        guard = ast.BoolOp(ast.And(), [both, _small(a), _small(b)]) if operation == "mul" else both
        slow = _method(self.meter, helper, _name(a), _name(b))
        if operation == "add" and not in_place:
            slow = ast.IfExp(_short_texts(a, b), ast.BinOp(_name(a), ast.Add(), _name(b)), slow)
        return ast.IfExp(guard, ast.BinOp(_name(a), op, _name(b)), slow)

    def short_text(self, left: ast.expr, right: ast.expr) -> ast.expr:
        """``left + right`` with a str constant on one side: native if the other side is a
        str and the result shorter than ``SHORT_TEXT`` (no int test: it cannot be one)."""
        constant, other = (left, right) if _str_constant(left) else (right, left)
        a = self.temporary()
        guard = ast.BoolOp(ast.And(), [
            ast.Compare(ast.Attribute(ast.NamedExpr(_store(a), other), "__class__", ast.Load()), [ast.Is()],
                        [_name(STR)]),
            ast.Compare(ast.Call(_name(LEN), [_name(a)], []), [ast.Lt()],
                        [ast.Constant(SHORT_TEXT - len(constant.value))])])
        operands = (constant, _name(a)) if constant is left else (_name(a), constant)
        return ast.IfExp(guard, ast.BinOp(*operands[:1], ast.Add(), operands[1]),
                         _method(self.meter, "add", *copy.deepcopy(operands)))

    # -- blocks --------------------------------------------------------------------------------

    def block(self, statements: list[ast.stmt], extra: int = 0, charge: bool = True) -> list[ast.stmt]:
        """The statements, transformed, after one charge for the nodes they evaluate themselves."""
        cost = extra + sum(self.statement_cost(s) for s in statements)
        out: list[ast.stmt] = _charge(self.meter, cost) if cost and charge else []
        for statement in statements:
            result = self.visit(statement)
            if isinstance(result, list):
                out.extend(result)
            elif result is not None:
                out.append(result)
        return out

    def statement_cost(self, statement: ast.stmt) -> int:
        if isinstance(statement, (ast.FunctionDef, ast.ClassDef)):
            return 1 + sum(node_cost(d) for d in statement.decorator_list) + (
                sum(node_cost(d) for d in statement.args.defaults) if isinstance(statement, ast.FunctionDef) else
                sum(node_cost(b) for b in statement.bases))
        if isinstance(statement, (ast.For, ast.While)):
            return 1 + (node_cost(statement.iter) if isinstance(statement, ast.For) else 0)
        if isinstance(statement, ast.If):
            return 1 + node_cost(statement.test)
        if isinstance(statement, ast.With):
            return 1 + sum(node_cost(item.context_expr) for item in statement.items)
        if isinstance(statement, ast.Try):
            return 1
        if isinstance(statement, ast.Match):
            return 1 + node_cost(statement.subject)
        return node_cost(statement)

    # -- statements ------------------------------------------------------------------------------

    def visit_Module(self, node: ast.Module) -> ast.Module:
        body = []
        for statement in node.body:
            if (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                    and isinstance(statement.targets[0], ast.Name) and statement.targets[0].id == "__all__"
                    and isinstance(statement.value, ast.List)):
                statement.value = ast.Tuple(statement.value.elts, ast.Load())
            body.append(statement)
        # The docstring and ``from __future__`` imports must stay first; they evaluate nothing.
        head = 0
        while head < len(body) and (
                (isinstance(body[head], ast.ImportFrom) and body[head].module == "__future__")
                or (head == 0 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant))):
            head += 1
        node.body = body[:head] + self.block(body[head:])
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
        node.bases = [_method(METER, "base", self.visit(b)) for b in node.bases]
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.keywords = [ast.keyword("metaclass", ast.Attribute(_name(METER), "frozen_class", ast.Load()))]
        self.scopes.append("class")
        node.body = self.block(node.body) or [ast.Pass()]
        self.scopes.pop()
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.args = self.visit(node.args)
        self.scopes.append("function")
        cost = FUNCTION_CALL + sum(self.statement_cost(s) for s in node.body)
        # ``__m__.depth = __d__ = __m__.depth + 1`` and the same for ``left``, then one test
        # of the two locals: fewer attribute reads than augmented assignments.
        entry: list[ast.stmt] = [
            ast.Assign([_store(_LOCAL)], _name(METER)),
            ast.Assign([_store("__d__")], ast.BinOp(ast.Attribute(_name(_LOCAL), "depth", ast.Load()), ast.Add(),
                                                    ast.Constant(1))),
            ast.Assign([ast.Attribute(_name(_LOCAL), "depth", ast.Store())], _name("__d__")),
            ast.Assign([_store("__l__")], ast.BinOp(ast.Attribute(_name(_LOCAL), "left", ast.Load()), ast.Sub(),
                                                    ast.Constant(cost))),
            ast.Assign([ast.Attribute(_name(_LOCAL), "left", ast.Store())], _name("__l__")),
            ast.If(ast.BoolOp(ast.Or(), [
                ast.Compare(_name("__l__"), [ast.Lt()], [ast.Constant(0)]),
                ast.Compare(_name("__d__"), [ast.Gt()], [ast.Constant(MAX_CALL_DEPTH)])]),
                [ast.Expr(_method(_LOCAL, "out"))], []),
        ]
        body = self.block(node.body, charge=False)  # its statements were charged at entry
        if node.name == "__exit__" and len(node.args.args) >= 3:
            # A context manager is handed the exception without an except clause.
            entry.append(ast.Expr(_method(_LOCAL, "scrub_exception", _name(node.args.args[2].arg))))
        self.scopes.pop()
        tail: list[ast.stmt] = []
        if not node.body or not isinstance(node.body[-1], (ast.Return, ast.Raise)):
            tail = [ast.AugAssign(ast.Attribute(_name(_LOCAL), "depth", ast.Store()), ast.Sub(), ast.Constant(1))]
        node.body = entry + body + tail
        return node

    def visit_Return(self, node: ast.Return) -> list[ast.stmt]:
        if self.scopes[-1] != "function":
            return [node]
        value = self.visit(node.value) if node.value is not None else ast.Constant(None)
        return [
            ast.Assign([_store("__r__")], value),
            ast.AugAssign(ast.Attribute(_name(_LOCAL), "depth", ast.Store()), ast.Sub(), ast.Constant(1)),
            ast.Return(_name("__r__")),
        ]

    def visit_For(self, node: ast.For) -> ast.stmt | list[ast.stmt]:
        per_iteration = LOOP_ITERATION + node_cost(node.target)
        if self.scopes[-1] == "function" and _runs_to_the_end(node):
            return self.upfront_for(node, per_iteration)
        node.target = self.visit(node.target)
        node.iter = self.loop(node.iter, self.visit(node.iter))
        node.body = self.block(node.body, extra=per_iteration)
        node.orelse = self.block(node.orelse)
        return node

    def upfront_for(self, node: ast.For, per_iteration: int) -> list[ast.stmt]:
        """An innermost loop that runs to the end of its iterable (no ``break``, ``return``
        or ``yield``) in two versions: over an immutable sized iterable (a ``range``, tuple,
        str, bytes, frozenset) whose iterations fit in what is left, all of them are charged
        when it starts and the body runs without its per-iteration charge; otherwise the
        loop charges each iteration. (A loop left by an exception was charged in full.)"""
        iterable = self.temporary()
        own = per_iteration + sum(self.statement_cost(s) for s in node.body)
        target = self.visit(node.target)
        charged = ast.For(target, _method(self.meter, "loop", _name(iterable)),
                          self.block(node.body, charge=False) or [ast.Pass()], [], type_comment=None)
        stepwise = ast.For(copy.deepcopy(target), _method(self.meter, "loop", _name(iterable)),
                           _charge(self.meter, own) + copy.deepcopy(charged.body), [], type_comment=None)
        orelse = self.block(node.orelse)
        if orelse:
            charged.orelse, stepwise.orelse = orelse, copy.deepcopy(orelse)
        return [
            ast.Assign([_store(iterable)], self.visit(node.iter)),
            ast.If(_method(self.meter, "upfront", _name(iterable), ast.Constant(own)), [charged], [stepwise]),
        ]

    def visit_While(self, node: ast.While) -> ast.While:
        node.test = self.visit(node.test)
        node.body = self.block(node.body, extra=LOOP_ITERATION + node_cost(node.test))
        node.orelse = self.block(node.orelse)
        return node

    def visit_If(self, node: ast.If) -> ast.If:
        node.test = self.visit(node.test)
        node.body = self.block(node.body) or [ast.Pass()]
        node.orelse = self.block(node.orelse)
        return node

    def visit_With(self, node: ast.With) -> ast.With:
        node.items = [self.visit(item) for item in node.items]
        node.body = self.block(node.body) or [ast.Pass()]
        return node

    def visit_Try(self, node: ast.Try) -> list[ast.stmt]:
        saved = f"__d{self.try_counter}__"
        self.try_counter += 1
        node.body = self.block(node.body) or [ast.Pass()]
        for handler in node.handlers:
            handler.type = self.visit(handler.type) if handler.type is not None else None
            handler.body = [ast.Expr(_method(self.meter, "caught", _name(saved)))] + self.block(handler.body)
        node.orelse = self.block(node.orelse)
        node.finalbody = self.block(node.finalbody)
        return [ast.Assign([_store(saved)], ast.Attribute(_name(self.meter), "depth", ast.Load())), node]

    def visit_match_case(self, node: ast.match_case) -> ast.match_case:
        node.pattern = self.visit(node.pattern)
        node.guard = self.visit(node.guard) if node.guard is not None else None
        node.body = self.block(node.body) or [ast.Pass()]
        return node

    def visit_Assign(self, node: ast.Assign) -> ast.stmt:
        node.value = self.visit(node.value)
        if any(isinstance(t, ast.Starred) for target in node.targets if isinstance(target, (ast.Tuple, ast.List))
               for t in target.elts):
            node.value = _method(self.meter, "sized", node.value)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Attribute):
            target = node.targets[0]
            return ast.Expr(_method(self.meter, "setattr", self.visit(target.value), ast.Constant(target.attr),
                                    node.value))
        node.targets = [self.visit(t) for t in node.targets]
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.stmt:
        if node.value is None:
            return ast.Pass()  # a bare annotation evaluates nothing that matters
        return self.visit(ast.copy_location(ast.Assign([node.target], node.value), node))

    def visit_Delete(self, node: ast.Delete) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for target in node.targets:
            if isinstance(target, ast.Attribute):
                out.append(ast.Expr(_method(self.meter, "delattr", self.visit(target.value),
                                            ast.Constant(target.attr))))
            else:
                out.append(ast.Delete([self.visit(target)]))
        return out

    def visit_AugAssign(self, node: ast.AugAssign) -> list[ast.stmt]:
        value = self.visit(node.value)
        operation = _SIZED_OPS.get(type(node.op))
        if operation == "add" and _numeric_constant(node.value):
            operation = None
        target = node.target
        counter = self.try_counter
        self.try_counter += 1
        container, key = f"__c{counter}__", f"__k{counter}__"

        def combine(current: ast.expr) -> ast.expr:
            if operation is None:
                return ast.BinOp(current, node.op, value)
            return self.fast(operation, current, value, in_place=True)

        if isinstance(target, ast.Name):
            if operation is None:
                return [ast.AugAssign(target, node.op, value)]
            return [ast.Assign([_store(target.id)], combine(_name(target.id)))]
        if isinstance(target, ast.Subscript):
            return [
                ast.Assign([_store(container)], self.visit(target.value)),
                ast.Assign([_store(key)], self.visit(target.slice)),
                ast.Assign([ast.Subscript(_name(container), _name(key), ast.Store())],
                           combine(ast.Subscript(_name(container), _name(key), ast.Load()))),
            ]
        return [  # an attribute
            ast.Assign([_store(container)], self.visit(target.value)),
            ast.Expr(_method(self.meter, "setattr", _name(container), ast.Constant(target.attr),
                             combine(ast.Attribute(_name(container), target.attr, ast.Load())))),
        ]

    # -- expressions -------------------------------------------------------------------------------

    def visit_Set(self, node: ast.Set) -> ast.expr:
        elements = [self.visit(e) for e in node.elts]
        return _method(self.meter, "ordered_set", ast.Tuple(elements, ast.Load()))

    def comprehension(self, generators: list[ast.comprehension], per_item: int) -> list[ast.comprehension]:
        out = []
        for position, generator in enumerate(generators):
            generator.target = self.visit(generator.target)
            # No walrus temporaries anywhere in a comprehension, its first iterable included
            # (Python refuses an assignment expression there).
            generator.iter = self.loop(generator.iter, self.inside("comprehension", generator.iter))
            ifs = [self.inside("comprehension", i) for i in generator.ifs]
            cost = LOOP_ITERATION + sum(node_cost(i) for i in generator.ifs) + (
                per_item if position == len(generators) - 1 else 0)
            generator.ifs = [_method(self.meter, "step", ast.Constant(cost)), *ifs]
            out.append(generator)
        return out

    def inside(self, scope: str, node: ast.AST) -> ast.AST:
        self.scopes.append(scope)
        try:
            return self.visit(node)
        finally:
            self.scopes.pop()

    def visit_ListComp(self, node: ast.ListComp) -> ast.expr:
        node.generators = self.comprehension(node.generators, node_cost(node.elt))
        node.elt = self.inside("comprehension", node.elt)
        return node

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> ast.expr:
        node.generators = self.comprehension(node.generators, node_cost(node.elt))
        node.elt = self.inside("comprehension", node.elt)
        return node

    def visit_SetComp(self, node: ast.SetComp) -> ast.expr:
        node.generators = self.comprehension(node.generators, node_cost(node.elt))
        node.elt = self.inside("comprehension", node.elt)
        return _method(self.meter, "ordered_set", ast.GeneratorExp(node.elt, node.generators))

    def visit_DictComp(self, node: ast.DictComp) -> ast.expr:
        node.generators = self.comprehension(node.generators, node_cost(node.key) + node_cost(node.value))
        node.key = self.inside("comprehension", node.key)
        node.value = self.inside("comprehension", node.value)
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.expr:
        node.args = self.visit(node.args)
        cost = FUNCTION_CALL + node_cost(node.body)
        calls = any(isinstance(n, ast.Call) for n in ast.walk(node.body))
        body = self.inside("comprehension", node.body)  # no inline temporaries in a lambda either
        if not calls:   # it calls nothing, so it cannot recurse: no depth to count
            node.body = ast.BoolOp(ast.And(), [_method(METER, "step", ast.Constant(cost)), body])
            return node
        node.body = _method(METER, "leave", ast.BoolOp(ast.And(), [_method(METER, "enter", ast.Constant(cost)), body]))
        return node

    def visit_Yield(self, node: ast.Yield) -> ast.expr:
        value = self.visit(node.value) if node.value is not None else ast.Constant(None)
        return _method(self.meter, "resumed", ast.Yield(_method(self.meter, "suspended", value)))

    def visit_FormattedValue(self, node: ast.FormattedValue) -> ast.expr:
        spec = self.visit(node.format_spec) if node.format_spec is not None else ast.Constant("")
        inner = self.visit(node.value)
        if self.scopes[-1] == "function" and node.conversion == -1 and node.format_spec is None:
            # A str or an int below 2**62 needs nothing: test it inline, else call the sandbox.
            temporary = self.temporary()
            kind = ast.Attribute(_name(temporary), "__class__", ast.Load())
            plain = ast.BoolOp(ast.Or(), [
                ast.Compare(ast.Attribute(ast.NamedExpr(_store(temporary), inner), "__class__", ast.Load()),
                            [ast.Is()], [_name(STR)]),
                ast.BoolOp(ast.And(), [ast.Compare(kind, [ast.Is()], [_name(INT)]), _small(temporary)])])
            value: ast.expr = ast.IfExp(
                plain, _name(temporary), _method(self.meter, "format", _name(temporary), ast.Constant(-1), spec))
        else:
            value = _method(self.meter, "format", inner, ast.Constant(node.conversion), spec)
        return ast.FormattedValue(value, -1, None)

    def visit_BinOp(self, node: ast.BinOp) -> ast.expr:
        if self.scopes[-1] == "function" and _sized_tree(node):
            return self.int_tree(node)
        return self.binop(node)

    def int_tree(self, node: ast.BinOp) -> ast.expr:
        """An arithmetic expression of ``+ - * % // & | ^ >>`` as one unit: its operands
        (the leaves) are evaluated left to right into temporaries; if all are ints — and,
        where the tree multiplies, below 2**62 in size, so one expression cannot grow a
        number without bound — the expression runs natively; else each operation goes
        through the sandbox as usual. (An operation's error then comes after all operands
        were evaluated; the result is the same.)"""
        leaves: list[tuple[str, ast.expr]] = []

        multiplied: list[str] = []   # leaves under a ``*``: those must be small

        def fast(part: ast.expr, under_mult: bool = False) -> ast.expr:
            if isinstance(part, ast.BinOp) and type(part.op) in _TREE_OPS:
                under = under_mult or isinstance(part.op, ast.Mult)
                return ast.BinOp(fast(part.left, under), part.op, fast(part.right, under))
            if _numeric_constant(part):
                return part
            name = self.temporary()
            leaves.append((name, part))
            if under_mult:
                multiplied.append(name)
            return _name(name)

        def slow(part: ast.expr) -> ast.expr:
            if isinstance(part, ast.BinOp) and type(part.op) in _TREE_OPS:
                left, right = slow(part.left), slow(part.right)
                operation = _SIZED_OPS.get(type(part.op))
                if operation is None:
                    return ast.BinOp(left, part.op, right)
                charged = _method(self.meter, operation, left, right)
                if operation == "add" and isinstance(left, ast.Name) and isinstance(right, ast.Name):
                    # Two short strs (``prefix + key``): native, as in ``fast``.
                    return ast.IfExp(_short_texts(left.id, right.id), ast.BinOp(_name(left.id), ast.Add(), _name(right.id)),
                                     charged)
                return charged
            if _numeric_constant(part):
                return part
            return _name(next(name for name, leaf in leaves if leaf is part))

        fast_expression = fast(node)
        slow_expression = slow(node)
        checks: list[ast.expr] = [
            ast.Compare(ast.Attribute(ast.NamedExpr(_store(name), self.visit(expression)), "__class__", ast.Load()),
                        [ast.Is()], [_name(INT)])
            for name, expression in leaves]
        guard: ast.expr = checks[0]
        for check in checks[1:]:
            guard = ast.BinOp(guard, ast.BitAnd(), check)
        if multiplied:
            guard = ast.BoolOp(ast.And(), [guard, *(_small(name) for name in multiplied)])
        return ast.IfExp(guard, fast_expression, slow_expression)

    def binop(self, node: ast.BinOp) -> ast.expr:
        node.left = self.visit(node.left)
        node.right = self.visit(node.right)
        operation = _SIZED_OPS.get(type(node.op))
        if operation is None or (_numeric_constant(node.left) and _numeric_constant(node.right)):
            return node
        if operation == "add" and (_numeric_constant(node.left) or _numeric_constant(node.right)):
            return node
        return self.fast(operation, node.left, node.right)

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        node.value = self.visit(node.value)
        if isinstance(node.slice, ast.Slice) and isinstance(node.ctx, ast.Load):
            part = node.slice
            bounds = [self.visit(b) if b is not None else ast.Constant(None) for b in (part.lower, part.upper, part.step)]
            if self.scopes[-1] != "function":
                return _method(self.meter, "getslice", node.value, *bounds)
            # A slice of a str shorter than SHORT_TEXT characters is at most as small: native.
            temporary = self.temporary()
            short = ast.BoolOp(ast.And(), [
                ast.Compare(ast.Attribute(ast.NamedExpr(_store(temporary), node.value), "__class__", ast.Load()),
                            [ast.Is()], [_name(STR)]),
                ast.Compare(ast.Call(_name(LEN), [_name(temporary)], []), [ast.Lt()], [ast.Constant(SHORT_TEXT)])])
            native = ast.Subscript(_name(temporary), ast.Slice(*bounds), ast.Load())
            return ast.IfExp(short, native, _method(self.meter, "getslice", _name(temporary),
                                                    *copy.deepcopy(bounds)))
        node.slice = self.visit(node.slice)
        return node

    def visit_Starred(self, node: ast.Starred) -> ast.expr:
        node.value = self.visit(node.value)
        if isinstance(node.ctx, ast.Load):
            node.value = _method(self.meter, "sized", node.value)
        return node

    def loop(self, original: ast.expr, iterable: ast.expr) -> ast.expr:
        """``Sandbox.loop(iterable)``, or ``iterable`` itself where it is a call of a builtin
        (``zip``, ``enumerate``, ...) that never gives a range or a dict view to unwrap."""
        if (isinstance(original, ast.Call) and isinstance(original.func, ast.Name)
                and original.func.id in _ITERATORS and original.func.id in self.builtins):
            return iterable
        return _method(self.meter, "loop", iterable)

    def visit_Compare(self, node: ast.Compare) -> ast.expr:
        native = _native_type_compare(node, self.builtins)
        return self.generic_visit(native if native is not None else node)

    def visit_Call(self, node: ast.Call) -> ast.expr:
        if (isinstance(node.func, ast.Name) and node.func.id == "isinstance" and "isinstance" in self.builtins
                and len(node.args) == 2 and not node.keywords):
            node.args[1] = _native_type_test(node.args[1], self.builtins) or node.args[1]
        consumer = _native_consumer(node, self.builtins)
        if consumer is not None:
            node.func = _name(consumer)
        node.args = [self.visit(a) for a in node.args]
        node.keywords = [self.visit(k) for k in node.keywords]
        function = node.func
        if isinstance(function, ast.Attribute) and isinstance(function.ctx, ast.Load):
            receiver = self.visit(function.value)
            if function.attr in ("keys", "items"):
                return ast.Call(ast.Attribute(_name(self.meter), "view", ast.Load()),
                                [receiver, ast.Constant(function.attr), *node.args], node.keywords)
            if function.attr in SIZED_METHODS:
                return ast.Call(ast.Attribute(_name(self.meter), "method", ast.Load()),
                                [receiver, ast.Constant(function.attr), *node.args], node.keywords)
            function.value = receiver
            return node
        node.func = self.visit(function)
        return node


def instrument(tree: ast.Module) -> ast.Module:
    """The metered form of ``tree`` (module docstring); ``tree`` itself is changed."""
    builtins = frozenset(("type", "isinstance", "bool", "float", *PROXIED, *_ITERATORS, *CONSUMERS)) - _bound_names(tree)
    result = _Instrument(builtins).visit(tree)
    return ast.fix_missing_locations(result)

