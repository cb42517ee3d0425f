"""The architecture as a test: downward-only imports and a pure core.

Layers, top to bottom: replica → consensus_stub → xnet → message_routing → state_manager.
A package may import itself and anything below it, never anything above it; inside
``replica`` the rooms are layered the same way (``REPLICA_ROOMS``). The pure core
(message_routing, replica.execution, replica.ic, state_manager except its store module, xnet
except xnet.grpc) may not touch clocks, sockets, threads, files, randomness, or identity/hash-seed
dependent builtins. No module takes part in an import circle, and the Spark audit reaches the
replica only through the batch processor (never the example apps or the testnet).
"""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
LAYERS = ["replica", "consensus_stub", "xnet", "message_routing", "state_manager"]

#: Modules in the core that are allowed to do I/O (the thin shell parts of a package):
#: checkpoints on disk, and the one durable-file recipe (temporary file, fsync, rename,
#: directory fsync) that the store and every higher layer writing files after it share.
SHELL_MODULES = {"state_manager/store.py", "state_manager/durable_files.py"}
SHELL_PACKAGES = {"xnet/grpc"}

FORBIDDEN_MODULES = {
    "time", "datetime", "random", "secrets", "socket", "threading", "multiprocessing",
    "subprocess", "asyncio", "os", "pathlib", "io", "tempfile", "shutil", "uuid", "signal",
    "concurrent", "select", "selectors", "grpc", "pyspark", "glob",
}
FORBIDDEN_CALLS = {"hash", "id", "open", "input", "print", "globals", "vars", "breakpoint"}


def _python_files(package: str):
    return sorted((ROOT / package).rglob("*.py"))


def _imports(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


CORE_PACKAGES = ("message_routing/", "state_manager/", "xnet/", "replica/execution/", "replica/ic/")


def _is_core(path: pathlib.Path) -> bool:
    rel = path.relative_to(ROOT).as_posix()
    if not rel.startswith(CORE_PACKAGES):
        return False
    if rel in SHELL_MODULES:
        return False
    return not any(rel.startswith(p + "/") for p in SHELL_PACKAGES)


@pytest.mark.parametrize("package", LAYERS)
def test_imports_only_point_down(package):
    allowed_above = set(LAYERS[: LAYERS.index(package)])
    violations = []
    for path in _python_files(package):
        for lineno, name in _imports(ast.parse(path.read_text(), str(path))):
            top = name.split(".")[0]
            if top in allowed_above:
                violations.append(f"{path.relative_to(ROOT)}:{lineno} imports {name}")
    assert not violations, "upward imports:\n" + "\n".join(violations)


@pytest.mark.parametrize("package", ["message_routing", "state_manager", "xnet", "replica/execution", "replica/ic"])
def test_core_is_pure(package):
    violations = []
    for path in _python_files(package):
        if not _is_core(path):
            continue
        tree = ast.parse(path.read_text(), str(path))
        rel = path.relative_to(ROOT)
        for lineno, name in _imports(tree):
            if name.split(".")[0] in FORBIDDEN_MODULES:
                violations.append(f"{rel}:{lineno} imports {name}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
                violations.append(f"{rel}:{node.lineno} calls {node.func.id}()")
            if isinstance(node, ast.Assert):
                violations.append(f"{rel}:{node.lineno} uses assert (stripped under python -O)")
    assert not violations, "impure core:\n" + "\n".join(violations)


def _is_shell_module(module: str) -> bool:
    path = module.replace(".", "/")
    return f"{path}.py" in SHELL_MODULES or any(path == p or path.startswith(p + "/") for p in SHELL_PACKAGES)


def test_core_imports_no_shell_module():
    """A pure module may not reach I/O through its own package's shell either (``xnet`` must
    not import ``xnet.grpc``): what both sides need lives in the core, below the shell."""
    modules = {_module_name(p) for package in PACKAGES for p in _python_files(package)}
    violations = []
    for package in ("message_routing", "state_manager", "xnet", "replica/execution", "replica/ic"):
        for path in _python_files(package):
            if _is_core(path):
                violations += [f"{path.relative_to(ROOT)}:{lineno} imports {name}"
                               for lineno, name in _project_imports(path, modules) if _is_shell_module(name)]
    assert not violations, "the pure core imports a shell module:\n" + "\n".join(violations)


def test_shell_module_check_knows_the_shell():
    assert _is_shell_module("xnet.grpc.messages") and _is_shell_module("xnet.grpc")
    assert _is_shell_module("state_manager.store") and not _is_shell_module("xnet.slice_fetcher")


def test_checker_catches_a_violation(tmp_path):
    """The purity check itself can fail: an impure snippet is flagged."""
    snippet = "import time\nimport random as r\nx = hash('a')\nassert x\n"
    tree = ast.parse(snippet)
    names = [name for _, name in _imports(tree)]
    calls = [n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    asserts = [n for n in ast.walk(tree) if isinstance(n, ast.Assert)]
    assert {"time", "random"} <= set(names) and "hash" in calls and asserts


# -- import circles, rooms inside replica, the audit's surface ---------------------------------

PACKAGES = LAYERS + ["examples"]

#: Rooms of ``replica``, top to bottom: a room imports itself and rooms below it only.
#: ``cluster`` (the local Spark cluster launcher) sits below ``audit``: the audit may use it, it
#: knows nothing of audits or replicas.
#: ``ic`` (the IC's wire format: CBOR, request ids, principals, envelopes, certificates) sits
#: below every room that speaks it, the node and the client included; of the others it imports only
#: ``errors``. What runs and watches local testnets is split by job: ``demo`` (``replica demo`` and
#: ``simulate``), ``load`` (``replica load``), ``processes`` (a testnet directory run as processes:
#: supervisor, lifecycle, process models, chaos), ``observe`` (status page, stream status, traces),
#: ``inprocess`` (subnets in one process: the in-process subnet, the hostile-network simulation)
#: and ``testnet`` (the testnet directory: its layout, genesis apps, recordings, ingress addresses,
#: registry versions); none of them holds node logic, which is ``node``'s.
REPLICA_ROOMS = ["cli", "testing", "demo", "load", "processes", "observe", "inprocess", "testnet", "audit", "cluster",
                 "node", "client", "sdk", "execution", "ic", "progress", "errors"]

#: What the audit may import of the rest of ``replica``: the batch processor (and the progress
#: display, and the root of its exceptions).
AUDIT_SURFACE = {"replica.node.batch_processor", "replica.progress", "replica.errors"}


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _project_imports(path: pathlib.Path, modules: set[str]):
    """``(line, module)`` for every import of a project module, relative ones resolved; ``from
    package import name`` counts as importing the submodule when ``name`` is one."""
    own = _module_name(path)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            module = node.module or ""
            full = f"{base}.{module}".strip(".") if node.level else module
            names = [(node.lineno, f"{full}.{a.name}" if f"{full}.{a.name}" in modules else full)
                     for a in node.names]
        else:
            continue
        for lineno, name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != own:
                yield lineno, name


def _import_graph() -> dict[str, set[str]]:
    paths = [p for package in PACKAGES for p in _python_files(package)]
    modules = {_module_name(p) for p in paths}
    return {_module_name(p): {name for _, name in _project_imports(p, modules)} for p in paths}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteration order fixed)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circles():
    assert _circles(_import_graph()) == []


def test_the_circle_finder_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "replica" and len(parts) > 1 else None


def test_replica_rooms_import_only_downward():
    violations = []
    for module, imported in _import_graph().items():
        room = _room(module)
        if room is None:
            continue
        allowed = set(REPLICA_ROOMS[REPLICA_ROOMS.index(room):])
        violations += [f"{module} imports {name}" for name in sorted(imported)
                       if _room(name) is not None and _room(name) not in allowed]
    assert not violations, "upward imports inside replica:\n" + "\n".join(violations)


def test_the_audit_reaches_the_replica_only_through_the_batch_processor():
    violations = []
    for module, imported in _import_graph().items():
        if _room(module) != "audit":
            continue
        violations += [f"{module} imports {name}" for name in sorted(imported)
                       if name.split(".")[0] == "examples"
                       or (_room(name) not in (None, "audit") and name not in AUDIT_SURFACE)]
    assert not violations, "the audit imports more of the replica than its replay API:\n" + "\n".join(violations)


# -- the architecture document ------------------------------------------------------------------

ARCHITECTURE_DOC = ROOT / "docs" / "architecture.md"
_CITATION = re.compile(r"docs/architecture\.md,\s*\*([^*]+)\*")
_OUTSIDE_DOCUMENT = re.compile(r"\bDESIGN\s*§")


def _cited_sections(text: str) -> list[str]:
    return [" ".join(title.split()) for title in _CITATION.findall(text)]


def test_code_cites_only_sections_the_architecture_document_has():
    """Code cites ``docs/architecture.md, *Section title*`` (a title may wrap across lines), never
    a document outside the project; a renamed or removed section fails here."""
    titles = {line.lstrip("#").strip() for line in ARCHITECTURE_DOC.read_text().splitlines() if line.startswith("#")}
    cited, violations = 0, []
    for path in [p for package in PACKAGES + ["tests"] for p in _python_files(package)]:
        if path == pathlib.Path(__file__).resolve():
            continue   # the examples in this file are not citations
        text = path.read_text()
        rel = path.relative_to(ROOT)
        violations += [f"{rel} cites a document outside the project" for _ in _OUTSIDE_DOCUMENT.findall(text)]
        for title in _cited_sections(text):
            cited += 1
            if title not in titles:
                violations.append(f"{rel} cites docs/architecture.md, *{title}*, which has no such section")
    assert not violations, "\n".join(violations)
    assert cited, "the citation pattern found no citation at all"


def test_citation_pattern_reads_wrapped_titles():
    assert _cited_sections("(docs/architecture.md, *Hash trees and the\n    certified state*)") == \
        ["Hash trees and the certified state"]
