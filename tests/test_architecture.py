"""The architecture as a test: downward-only imports and a pure core.

Layers, top to bottom: replica → consensus_stub → xnet → message_routing → state_manager.
A package may import itself and anything below it, never anything above it. The pure core
(message_routing, state_manager except its store module, xnet except xnet.grpc) may not
touch clocks, sockets, threads, files, randomness, or identity/hash-seed dependent builtins.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
LAYERS = ["replica", "consensus_stub", "xnet", "message_routing", "state_manager"]

#: Modules in the core that are allowed to do I/O (the thin shell parts of a package).
SHELL_MODULES = {"state_manager/store.py"}
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


def _is_core(path: pathlib.Path) -> bool:
    rel = path.relative_to(ROOT).as_posix()
    if not rel.startswith(("message_routing/", "state_manager/", "xnet/")):
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


@pytest.mark.parametrize("package", ["message_routing", "state_manager", "xnet"])
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


def test_checker_catches_a_violation(tmp_path):
    """The purity check itself can fail: an impure snippet is flagged."""
    snippet = "import time\nimport random as r\nx = hash('a')\nassert x\n"
    tree = ast.parse(snippet)
    names = [name for _, name in _imports(tree)]
    calls = [n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    asserts = [n for n in ast.walk(tree) if isinstance(n, ast.Assert)]
    assert {"time", "random"} <= set(names) and "hash" in calls and asserts
