"""The executors' environment: this build, packed as a relocatable archive for ``spark.archives``.

PySpark's way to give a cluster's executors their Python packages is an archive of a
virtual environment that Spark unpacks in every executor's working directory and runs its
Python workers from. ``environment_archive`` makes one of the build this process runs:

1. the project's sources (the packages, ``setup.py``, ``pyproject.toml``, ``README.md``) are
   copied to a scratch directory and ``pip wheel --no-deps`` builds them — ``setup.py``
   compiles the mypyc modules, so the wheel holds the same compiled modules as this
   process's build;
2. a fresh venv of this interpreter gets that wheel and the runtime dependencies pinned to
   the versions installed here (``build.runtime_dependencies``; pyspark is not needed: the
   workers' Spark provides it);
3. the venv must report the same build fingerprint as this process (else
   ``EnvironmentArchiveError`` naming the differences);
4. ``venv-pack`` packs it (it refuses editable installs, hence the wheel).

The archive is cached under its fingerprint (``replica-env-<fingerprint>.tar.gz``), so it is
built again only when the build changes. The archive does not contain the interpreter:
executors need the same Python version at the same path (``docs/cluster.md``).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from replica.progress import Progress
from state_manager.durable_files import install_file

from .build import PROJECT_PACKAGES, BuildInfo, build_differences, build_from_value, current_build, package_roots
from .errors import EnvironmentArchiveError

__all__ = ["environment_archive", "archive_name", "default_cache_dir", "source_root", "ARCHIVE_ALIAS",
           "EXECUTOR_PYTHON"]

#: The directory Spark unpacks the archive into, in each executor's working directory.
ARCHIVE_ALIAS = "environment"
EXECUTOR_PYTHON = f"./{ARCHIVE_ALIAS}/bin/python"
KEEP_ARCHIVES = 3
_PROJECT_FILES = ("setup.py", "pyproject.toml", "README.md")
_SOURCE_SUFFIXES = (".py", ".c")


def archive_name(build: BuildInfo) -> str:
    return f"replica-env-{build.fingerprint}.tar.gz"


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "subnet-replica" / "environments"


def source_root() -> Path:
    """The source tree this process's packages come from (an editable install)."""
    roots = {path.parent for path in package_roots().values()}
    if len(roots) != 1:
        raise EnvironmentArchiveError(f"the project's packages come from several directories: {sorted(map(str, roots))}")
    root = roots.pop()
    missing = [name for name in _PROJECT_FILES if not (root / name).is_file()]
    if missing:
        raise EnvironmentArchiveError(f"{root} is not the project's source tree (no {', '.join(missing)}): "
                                      "pass a packed environment with --environment-archive instead")
    return root


def _copy_sources(root: Path, target: Path) -> None:
    for package in PROJECT_PACKAGES:
        for path in sorted((root / package).rglob("*")):
            if path.suffix in _SOURCE_SUFFIXES and path.is_file() and "__pycache__" not in path.parts:
                destination = target / path.relative_to(root)
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, destination)
    for name in _PROJECT_FILES:
        shutil.copy2(root / name, target / name)


def _clean_environment() -> dict[str, str]:
    """This environment without what points Python at the source tree: with the checkout on
    ``PYTHONPATH``, pip would take the project as already installed and skip the wheel."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def _run(command: list[str], what: str, **kwargs) -> str:
    result = subprocess.run(command, capture_output=True, text=True, check=False, env=_clean_environment(), **kwargs)
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-8:]
        raise EnvironmentArchiveError(f"{what} failed (exit {result.returncode}): " + " | ".join(tail))
    return result.stdout


_REPORT_BUILD = ("import json; from replica.audit.build import build_to_value, current_build; "
                 "print(json.dumps(build_to_value(current_build()), default=bytes.hex))")


def _venv_build(python: Path) -> BuildInfo:
    """The build a venv's interpreter reports (run outside any source tree)."""
    out = _run([str(python), "-c", _REPORT_BUILD], "reading the packed build", cwd=python.parent)
    tag, version, py, modules, compiled, deps = json.loads(out)
    value = (tag, version, py, tuple((m, bytes.fromhex(d)) for m, d in modules), tuple(compiled),
             tuple(tuple(d) for d in deps))
    return build_from_value(value)


def _build_archive(build: BuildInfo, target: Path, scratch: Path, status: Progress) -> None:
    source = scratch / "source"
    _copy_sources(source_root(), source)
    status.update("environment archive: building the project's wheel (compiles the mypyc modules)")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(scratch / "wheels"), str(source)],
         "pip wheel")
    wheels = sorted((scratch / "wheels").glob("*.whl"))
    if len(wheels) != 1:
        raise EnvironmentArchiveError(f"pip wheel produced {len(wheels)} wheels")
    status.update("environment archive: installing the wheel and pinned dependencies into a fresh venv")
    venv = scratch / "venv"
    base_python = getattr(sys, "_base_executable", sys.executable)
    _run([base_python, "-m", "venv", str(venv)], "python -m venv")
    pins = [f"{name}=={version}" for name, version in build.dependencies]
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps", str(wheels[0]), *pins],
         "pip install into the venv")
    packed = _venv_build(venv / "bin" / "python")
    if packed.fingerprint != build.fingerprint:
        raise EnvironmentArchiveError("the packed environment is another build than this one: "
                                      + "; ".join(build_differences(build, packed)))
    status.update("environment archive: packing the venv")
    import venv_pack  # the packer PySpark's documentation recommends for virtual environments

    partial = scratch / target.name   # renamed into place only when complete
    try:
        venv_pack.pack(prefix=str(venv), output=str(partial), format="tar.gz", compress_level=1)
    except venv_pack.VenvPackException as exc:
        raise EnvironmentArchiveError(f"venv-pack: {exc}") from exc
    os.chmod(partial, 0o644)
    install_file(partial, target)


def _prune(cache_dir: Path, keep: int) -> None:
    """Keep the ``keep`` newest archives: every source edit makes a new build."""
    archives = sorted(cache_dir.glob("replica-env-*.tar.gz"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in archives[keep:]:
        old.unlink(missing_ok=True)


def environment_archive(cache_dir: Path | None = None, *, build: BuildInfo | None = None,
                        status: Progress | None = None) -> Path:
    """The packed environment of ``build`` (default: this process's), built if not cached."""
    build = build or current_build()
    status = status or Progress(quiet=True)
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    target = cache_dir / archive_name(build)
    if target.is_file():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    # One builder at a time (e.g. parallel test workers): the others wait and find it cached.
    with open(cache_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file():
            return target
        with tempfile.TemporaryDirectory(prefix="replica-env-", dir=cache_dir) as scratch:
            _build_archive(build, target, Path(scratch), status)
        _prune(cache_dir, KEEP_ARCHIVES)
    status.finish(f"environment archive of build {build.short}: {target}")
    return target
