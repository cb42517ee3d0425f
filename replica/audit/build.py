"""The build fingerprint: which code a process runs, as one hash.

A build is described by ``BuildInfo``:

* ``modules``       every module of the project's packages with the SHA-256 of its source;
* ``compiled``      the modules an import loads from a compiled extension (mypyc, C helpers)
                    rather than from their source;
* ``python``        implementation, version and extension ABI of the interpreter;
* ``dependencies``  ``(distribution, version)`` of every installed runtime dependency of the
                    project, transitively (``pyspark`` and its own dependencies excluded: Spark
                    is the audit's shell and a cluster brings its own).

``fingerprint`` is the SHA-256 of its canonical encoding. The live run records the build it
ran (``run_log``), every replayed row carries the fingerprint of the process that replayed
it, and the audit reports replicas replayed by another build (``report``).

``scan_build`` reads files (the source trees, installed metadata); everything else is pure.
``current_build`` scans this process's own packages once and keeps the answer.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.metadata
import importlib.util
import platform
import re
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from state_manager.codec import CodecError, check_bytes, check_str, check_tuple
from state_manager.encoding import encode

from .errors import RunLogError

__all__ = ["BuildInfo", "PROJECT_PACKAGES", "PROJECT_DISTRIBUTION", "SHELL_DISTRIBUTIONS", "scan_build",
           "current_build", "package_roots", "build_to_value", "build_from_value", "build_differences",
           "runtime_dependencies"]

#: The project's top-level packages (``pyproject.toml``'s ``packages.find``).
PROJECT_PACKAGES = ("replica", "message_routing", "state_manager", "xnet", "consensus_stub", "examples")
PROJECT_DISTRIBUTION = "subnet-replica"
#: Not part of a build: Spark runs the job; the replay never imports it.
SHELL_DISTRIBUTIONS = frozenset({"pyspark", "py4j"})

_BUILD_TAG = "replica-build"
_BUILD_VERSION = 1


@dataclass(frozen=True)
class BuildInfo:
    python: str
    modules: tuple[tuple[str, bytes], ...]        # sorted by module name
    compiled: tuple[str, ...]                     # sorted
    dependencies: tuple[tuple[str, str], ...]     # sorted by distribution

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(encode(build_to_value(self))).hexdigest()

    @property
    def short(self) -> str:
        return self.fingerprint[:12]


def build_to_value(build: BuildInfo) -> tuple:
    return (_BUILD_TAG, _BUILD_VERSION, build.python, tuple(build.modules), tuple(build.compiled),
            tuple(build.dependencies))


def build_from_value(value: Any) -> BuildInfo:
    """The inverse of ``build_to_value``; ``RunLogError`` for anything else."""
    try:
        tag, version, python, modules, compiled, dependencies = check_tuple(value, "build", 6)
        if tag != _BUILD_TAG or version != _BUILD_VERSION:
            raise RunLogError(f"build: not a version-{_BUILD_VERSION} {_BUILD_TAG}")
        build = BuildInfo(
            check_str(python, "python"),
            tuple((check_str(m, "module"), check_bytes(d, "source digest", 32))
                  for m, d in (check_tuple(e, "module entry", 2) for e in check_tuple(modules, "modules"))),
            tuple(check_str(m, "compiled module") for m in check_tuple(compiled, "compiled")),
            tuple((check_str(n, "distribution"), check_str(v, "version"))
                  for n, v in (check_tuple(e, "dependency", 2) for e in check_tuple(dependencies, "dependencies"))),
        )
    except CodecError as exc:
        raise RunLogError(f"build: {exc}") from exc
    for name, entries in (("modules", [m for m, _ in build.modules]), ("compiled", list(build.compiled)),
                          ("dependencies", [n for n, _ in build.dependencies])):
        if entries != sorted(set(entries)):
            raise RunLogError(f"build: {name} must be sorted and distinct")
    return build


def build_differences(recorded: BuildInfo, other: BuildInfo, limit: int = 20) -> list[str]:
    """What ``other`` runs differently from ``recorded``, one phrase per difference."""
    out = []
    if recorded.python != other.python:
        out.append(f"python {other.python} instead of {recorded.python}")
    mine, theirs = dict(recorded.modules), dict(other.modules)
    for module in sorted(set(mine) | set(theirs)):
        if module not in theirs:
            out.append(f"module {module} missing")
        elif module not in mine:
            out.append(f"module {module} added")
        elif mine[module] != theirs[module]:
            out.append(f"source of {module} differs")
    for module in sorted(set(recorded.compiled) - set(other.compiled)):
        out.append(f"{module} not compiled")
    for module in sorted(set(other.compiled) - set(recorded.compiled)):
        out.append(f"{module} compiled")
    deps, other_deps = dict(recorded.dependencies), dict(other.dependencies)
    for name in sorted(set(deps) | set(other_deps)):
        if deps.get(name) != other_deps.get(name):
            out.append(f"{name} {other_deps.get(name, 'missing')} instead of {deps.get(name, 'none')}")
    return out[:limit] + ([f"… {len(out) - limit} more"] if len(out) > limit else [])


# -- scanning (reads files) ---------------------------------------------------------------------

def _extension_module(path: Path) -> str | None:
    """``name`` of ``name.<ext suffix>``, or None when ``path`` is not an extension module."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if path.name.endswith(suffix):
            return path.name[: -len(suffix)]
    return None


def _scan_package(package: str, root: Path) -> tuple[list[tuple[str, bytes]], list[str]]:
    modules, compiled = [], []
    for path in sorted(root.rglob("*")):
        if "__pycache__" in path.parts or not path.is_file():
            continue
        parts = path.relative_to(root).parts
        if path.suffix == ".py":
            name = ".".join((package, *parts[:-1], path.stem)).removesuffix(".__init__")
            modules.append((name, hashlib.sha256(path.read_bytes()).digest()))
        else:
            stem = _extension_module(path)
            if stem is not None:   # an import finds the extension before the source beside it
                compiled.append(".".join((package, *parts[:-1], stem)))
    return modules, compiled


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def runtime_dependencies(distribution: str = PROJECT_DISTRIBUTION) -> tuple[tuple[str, str], ...]:
    """``(name, version)`` of the installed runtime dependencies of ``distribution``,
    transitively; extras and ``SHELL_DISTRIBUTIONS`` left out, uninstalled ones (a marker
    that does not apply here) skipped."""
    found: dict[str, str] = {}
    pending = [distribution]
    while pending:
        try:
            requirements = importlib.metadata.requires(pending.pop()) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for requirement in requirements:
            match = _REQUIREMENT_NAME.match(requirement)
            if match is None or "extra ==" in requirement.replace('"', "").replace("'", ""):
                continue
            name = _normalize(match.group(1))
            if name in found or name in SHELL_DISTRIBUTIONS:
                continue
            try:
                found[name] = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                continue
            pending.append(name)
    return tuple(sorted(found.items()))


def package_roots(packages: tuple[str, ...] = PROJECT_PACKAGES) -> dict[str, Path]:
    """Where this process imports each package from (without importing it)."""
    roots = {}
    for package in packages:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise RunLogError(f"package {package} is not importable here")
        roots[package] = Path(list(spec.submodule_search_locations)[0])
    return roots


def python_description() -> str:
    return f"{platform.python_implementation()} {platform.python_version()} {sysconfig.get_config_var('EXT_SUFFIX')}"


def scan_build(roots: Mapping[str, Path], dependencies: tuple[tuple[str, str], ...],
               python: str | None = None) -> BuildInfo:
    """The build of the packages at ``roots`` (package → directory)."""
    modules: list[tuple[str, bytes]] = []
    compiled: list[str] = []
    for package in sorted(roots):
        found, extensions = _scan_package(package, Path(roots[package]))
        modules += found
        compiled += extensions
    return BuildInfo(python or python_description(), tuple(sorted(modules)), tuple(sorted(set(compiled))),
                     tuple(sorted(dependencies)))


_CURRENT: list[BuildInfo] = []


def current_build() -> BuildInfo:
    """This process's build, scanned once."""
    if not _CURRENT:
        _CURRENT.append(scan_build(package_roots(), runtime_dependencies()))
    return _CURRENT[0]
