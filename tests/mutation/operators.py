"""AST mutation operators and the mutants' stable ids.

Every mutant replaces one node of the module's syntax tree. Its id hashes the module, the
enclosing function's qualified name, the operator, the original and the mutated code (as
``ast.unparse`` prints them, so reformatting changes nothing) and the occurrence among
identical mutants in that function: an edit elsewhere in the module, or lines moving, keeps
every other id (the equivalents file and the result cache rely on it).

What is not mutated: docstrings, annotations, decorators, imports, ``if TYPE_CHECKING``
blocks, f-strings, ``Literal[...]`` and the text of exceptions raised and of log calls
(messages, not behaviour). Statements are deleted only inside functions.
"""

from __future__ import annotations

import ast
import copy
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import CodeType

_NEGATE: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_BOUNDARY: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
}
_ARITHMETIC: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
    ast.Pow: ast.Mult,
}
_LOG_METHODS = frozenset({"debug", "info", "warning", "error", "exception", "critical"})

OPERATORS = (
    "cmp_negate",  # a == b -> a != b, a < b -> a >= b, in -> not in, is -> is not
    "cmp_boundary",  # a < b -> a <= b, a >= b -> a > b
    "bool_swap",  # and <-> or
    "not_remove",  # not x -> x
    "cond_negate",  # if x / while x / a if x else b -> not x
    "constant",  # True <-> False, 0 -> 1, 1 -> 0, n -> n + 1, "text" -> "", "" -> "mutated"
    "arithmetic",  # + <-> -, * <-> /, // -> *, ** -> *, and the augmented forms
    "delete",  # a call, assignment, raise or del statement -> pass
    "return_none",  # return x -> return None
)


@dataclass(frozen=True, slots=True)
class Mutant:
    """One fault in one module. ``node_index`` (position in ``ast.walk`` order) and
    ``new_node`` say how to make it from the current source; ``id`` names it for good."""

    id: str
    path: str
    function: str  # enclosing qualified name; "<module>" at top level
    operator: str
    line: int
    end_line: int
    original: str
    replacement: str
    in_function: bool  # inside a def: tests are selected by the lines it changes
    node_index: int = field(compare=False, repr=False)
    new_node: ast.AST = field(compare=False, repr=False)

    def describe(self, width: int = 100) -> str:
        text = f"{_short(self.original)} -> {_short(self.replacement)}"
        return text if len(text) <= width else text[: width - 3] + "..."


def _short(code: str) -> str:
    return " ".join(code.split())


@dataclass(slots=True)
class _Candidate:
    node: ast.AST
    operator: str
    new_node: ast.AST
    function: str
    in_function: bool


class _Collector:
    """Walks the tree keeping the qualified name and what must not be mutated."""

    def __init__(self) -> None:
        self.found: list[_Candidate] = []
        self._names: list[str] = []
        self._in_function = False

    @property
    def qualname(self) -> str:
        return ".".join(self._names) or "<module>"

    def add(self, node: ast.AST, operator: str, new_node: ast.AST) -> None:
        new = ast.copy_location(new_node, node)
        self.found.append(_Candidate(node, operator, new, self.qualname, self._in_function))

    # --- statements -----------------------------------------------------------------

    def body(self, statements: list[ast.stmt], *, docstring: bool) -> None:
        for i, statement in enumerate(statements):
            if docstring and i == 0 and _is_docstring(statement):
                continue
            self.statement(statement)

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            self._scope(node.name, node, function=True)
            return
        if isinstance(node, ast.ClassDef):
            self._scope(node.name, node, function=self._in_function)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            return
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            self.body(node.orelse, docstring=False)
            return
        if self._in_function:
            self._deletion(node)
        if (
            isinstance(node, ast.Return)
            and node.value is not None
            and not isinstance(node.value, ast.Constant)
        ):
            self.add(node, "return_none", ast.Return(value=ast.Constant(value=None)))
        if isinstance(node, ast.AugAssign) and type(node.op) in _ARITHMETIC:
            self.add(node, "arithmetic", _with(node, op=_ARITHMETIC[type(node.op)]()))
        if isinstance(node, ast.If | ast.While):
            self._condition(node.test)
        if isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.expression(node.value)
            return
        if isinstance(node, ast.Raise):
            # The message is for people; the exception's type and fields are behaviour.
            if node.exc is not None:
                self.expression(node.exc, messages=False)
            return
        if isinstance(node, ast.Expr) and _is_log_call(node.value):
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                continue
            if isinstance(child, ast.expr):
                self.expression(child)
        for item in getattr(node, "items", []):
            if isinstance(item, ast.withitem):
                self.expression(item.context_expr)
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list):
                self.body([s for s in block if isinstance(s, ast.stmt)], docstring=False)
        for handler in getattr(node, "handlers", []):
            if isinstance(handler, ast.ExceptHandler):
                self.body(handler.body, docstring=False)

    def _scope(
        self,
        name: str,
        node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef,
        *,
        function: bool,
    ) -> None:
        outer = self._in_function
        self._names.append(name)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            # Defaults are evaluated where the def runs (at import), not in the call.
            for default in [*node.args.defaults, *node.args.kw_defaults]:
                if default is not None:
                    self.expression(default)
        self._in_function = function
        self.body(node.body, docstring=True)
        self._names.pop()
        self._in_function = outer

    def _deletion(self, node: ast.stmt) -> None:
        deletable = isinstance(
            node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Raise | ast.Delete
        ) or (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call | ast.Await | ast.Yield | ast.YieldFrom)
        )
        if isinstance(node, ast.AnnAssign) and node.value is None:
            deletable = False
        if deletable:
            self.add(node, "delete", ast.Pass())

    def _condition(self, test: ast.expr) -> None:
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return  # not_remove makes this one
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _NEGATE:
            return  # cmp_negate makes this one
        self.add(test, "cond_negate", ast.UnaryOp(op=ast.Not(), operand=copy.deepcopy(test)))

    # --- expressions ----------------------------------------------------------------

    def expression(self, node: ast.expr, *, messages: bool = True) -> None:
        if isinstance(node, ast.JoinedStr | ast.Lambda):
            return
        if isinstance(node, ast.Subscript) and _name(node.value) == "Literal":
            return
        if isinstance(node, ast.Call) and _is_log_call(node):
            return
        if not messages and isinstance(node, ast.Constant) and isinstance(node.value, str):
            return
        self._operators(node)
        if isinstance(node, ast.IfExp):
            self._condition(node.test)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expression(child, messages=messages)
            elif isinstance(child, ast.keyword | ast.comprehension):
                for sub in ast.iter_child_nodes(child):
                    if isinstance(sub, ast.expr):
                        self.expression(sub, messages=messages)

    def _operators(self, node: ast.expr) -> None:
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                for name, table in (("cmp_negate", _NEGATE), ("cmp_boundary", _BOUNDARY)):
                    if type(op) in table:
                        ops = list(node.ops)
                        ops[i] = table[type(op)]()
                        self.add(node, name, _with(node, ops=ops))
        elif isinstance(node, ast.BoolOp):
            swapped = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            self.add(node, "bool_swap", _with(node, op=swapped))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            self.add(node, "not_remove", copy.deepcopy(node.operand))
        elif isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
            if not (isinstance(node.op, ast.Add) and (_is_text(node.left) or _is_text(node.right))):
                self.add(node, "arithmetic", _with(node, op=_ARITHMETIC[type(node.op)]()))
        elif isinstance(node, ast.Constant):
            value = _constant(node.value)
            if value is not None:
                self.add(node, "constant", ast.Constant(value=value))


def _constant(value: object) -> str | bool | int | float | None:
    """The mutated constant, or None: None, bytes and ``...`` are left alone."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return {0: 1, 1: 0}.get(value, value + 1)
    if isinstance(value, float):
        return value + 1.0
    if isinstance(value, str):
        return "" if value else "mutated"
    return None


def _with(node: ast.AST, **changes: object) -> ast.AST:
    new = copy.deepcopy(node)
    for name, value in changes.items():
        setattr(new, name, value)
    return new


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_text(node: ast.expr) -> bool:
    return isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _is_type_checking(test: ast.expr) -> bool:
    return _name(test) == "TYPE_CHECKING"


def _is_log_call(node: ast.expr) -> bool:
    """``log.warning(...)``, ``logger.info(...)``: what the operator reads, not behaviour."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _LOG_METHODS
        and _name(node.func.value) in {"log", "logger", "logging", "LOG"}
    )


# --- ids, generation and application ------------------------------------------------


def mutant_id(
    path: str, function: str, operator: str, original: str, replacement: str, occurrence: int
) -> str:
    key = "|".join((path, function, operator, original, replacement, str(occurrence)))
    digest = hashlib.sha256(key.encode()).hexdigest()[:8]
    stem = path.rsplit("/", 1)[-1].removesuffix(".py")
    return f"{stem}-{digest}"


def generate(path: str, source: str, keep: Callable[[str], bool] | None = None) -> list[Mutant]:
    """Every mutant of ``source`` (the text of ``path``), in source order; ``keep`` filters
    by enclosing qualified name."""
    tree = ast.parse(source)
    index = {id(node): i for i, node in enumerate(ast.walk(tree))}
    collector = _Collector()
    collector.body(tree.body, docstring=True)
    seen: dict[tuple[str, str, str, str], int] = {}
    mutants: list[Mutant] = []
    for c in collector.found:
        if keep is not None and not keep(c.function):
            continue
        original, replacement = ast.unparse(c.node), ast.unparse(c.new_node)
        if original == replacement:
            continue
        key = (c.function, c.operator, original, replacement)
        occurrence = seen.get(key, 0)
        seen[key] = occurrence + 1
        mutants.append(
            Mutant(
                id=mutant_id(path, c.function, c.operator, original, replacement, occurrence),
                path=path,
                function=c.function,
                operator=c.operator,
                line=getattr(c.node, "lineno", 0),
                end_line=_end_line(c.node),
                original=original,
                replacement=replacement,
                in_function=c.in_function,
                node_index=index[id(c.node)],
                new_node=c.new_node,
            )
        )
    mutants.sort(key=lambda m: (m.line, m.node_index, m.operator, m.replacement))
    return mutants


def _end_line(node: ast.AST) -> int:
    end: int | None = getattr(node, "end_lineno", None)
    start: int = getattr(node, "lineno", 0)
    return end or start


class _Replace(ast.NodeTransformer):
    def __init__(self, target: ast.AST, new: ast.AST) -> None:
        self.target = target
        self.new = new

    def visit(self, node: ast.AST) -> ast.AST:
        if node is self.target:
            return self.new
        visited: ast.AST = super().visit(node)
        return visited


def apply(source: str, mutant: Mutant) -> ast.Module:
    """The module's tree with ``mutant`` in it (parsed afresh: ``source`` is untouched)."""
    tree = ast.parse(source)
    nodes: Iterator[ast.AST] = ast.walk(tree)
    target = next(node for i, node in enumerate(nodes) if i == mutant.node_index)
    if ast.unparse(target) != mutant.original:
        raise ValueError(f"{mutant.id}: the source changed since the mutants were generated")
    new = ast.copy_location(copy.deepcopy(mutant.new_node), target)
    mutated = _Replace(target, new).visit(tree)
    assert isinstance(mutated, ast.Module)
    return ast.fix_missing_locations(mutated)


def compile_mutant(source: str, mutant: Mutant, filename: str) -> CodeType:
    """The mutated module's code object, reporting ``filename`` in tracebacks."""
    return compile(apply(source, mutant), filename, "exec", dont_inherit=True)
