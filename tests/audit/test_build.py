"""The build fingerprint: what it covers, how run logs carry it, and how the audit uses it."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from replica.audit.build import (
    PROJECT_PACKAGES, BuildInfo, build_differences, build_from_value, build_to_value, current_build, package_roots,
    runtime_dependencies, scan_build,
)
from replica.audit.build_check import compare_builds
from replica.audit.errors import RunLogError
from replica.audit.run_log import MANIFEST_FILE, decode_run_log, encode_run_log, load_run_log, write_run_log
from state_manager.encoding import decode, encode

from .runs import small_run

CHANGED_MODULE = "message_routing.stream_handler"


def copy_of_this_build(target: Path) -> dict[str, Path]:
    """The project's packages copied (sources and compiled extensions) to ``target``."""
    roots = {}
    for package, root in package_roots().items():
        roots[package] = target / package
        shutil.copytree(root, roots[package], ignore=shutil.ignore_patterns("__pycache__"))
    return roots


def build_with_one_change(target: Path) -> BuildInfo:
    """This build, but with one source file edited (a comment appended)."""
    roots = copy_of_this_build(target)
    path = roots["message_routing"] / "stream_handler.py"
    path.write_text(path.read_text() + "\n# edited after the live run\n")
    return scan_build(roots, runtime_dependencies())


@pytest.fixture(scope="module")
def edited(tmp_path_factory) -> BuildInfo:
    return build_with_one_change(tmp_path_factory.mktemp("edited"))


def test_an_identical_copy_is_the_same_build(tmp_path):
    copy = scan_build(copy_of_this_build(tmp_path), runtime_dependencies())
    assert copy == current_build() and copy.fingerprint == current_build().fingerprint


def test_one_changed_source_file_is_another_build(edited):
    assert edited.fingerprint != current_build().fingerprint
    assert build_differences(current_build(), edited) == [f"source of {CHANGED_MODULE} differs"]


def test_every_module_of_every_package_is_covered():
    modules = dict(current_build().modules)
    for package in PROJECT_PACKAGES:
        assert package in modules
    assert {"replica.audit.build", "message_routing.stream_handler", "state_manager.labeled_trie"} <= set(modules)


def test_compiled_modules_are_those_with_an_extension_beside_them(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    for name in ("__init__.py", "fast.py", "slow.py"):
        (package / name).write_text("x = 1\n")
    (package / "fast.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    (package / "helper.abi3.so").write_bytes(b"")
    build = scan_build({"pkg": package}, (("dep", "1.0"),), python="CPython 3.11.7")
    assert build.compiled == ("pkg.fast", "pkg.helper")
    assert [m for m, _ in build.modules] == ["pkg", "pkg.fast", "pkg.slow"]
    pure = scan_build({"pkg": package}, (("dep", "1.0"),), python="CPython 3.11.7")
    (package / "fast.cpython-311-x86_64-linux-gnu.so").unlink()
    assert scan_build({"pkg": package}, (("dep", "1.0"),), python="CPython 3.11.7").fingerprint != pure.fingerprint


def test_python_and_dependency_versions_are_part_of_the_build():
    build = current_build()
    other_python = dataclasses.replace(build, python="CPython 3.12.0")
    names = [n for n, _ in build.dependencies]
    assert "msgpack" in names and "pyspark" not in names and "py4j" not in names
    bumped = dataclasses.replace(build, dependencies=tuple((n, v + ".1" if n == "msgpack" else v)
                                                           for n, v in build.dependencies))
    assert len({build.fingerprint, other_python.fingerprint, bumped.fingerprint}) == 3
    assert any(d.startswith("msgpack ") for d in build_differences(build, bumped))


def test_build_value_round_trip_and_strictness():
    build = current_build()
    assert build_from_value(decode(encode(build_to_value(build)))) == build
    tag, version, python, modules, compiled, deps = build_to_value(build)
    with pytest.raises(RunLogError, match="sorted"):
        build_from_value((tag, version, python, tuple(reversed(modules)), compiled, deps))
    with pytest.raises(RunLogError, match="not a version"):
        build_from_value((tag, version + 1, python, modules, compiled, deps))


# -- run logs ---------------------------------------------------------------------------------------

def test_recorded_runs_carry_the_recording_build():
    log = small_run(batches=2)
    assert log.build == current_build()
    assert decode_run_log(encode_run_log(log)).build == current_build()


def test_a_version_1_run_directory_still_loads_without_a_build(tmp_path):
    write_run_log(small_run(batches=2), tmp_path)
    manifest = list(decode((tmp_path / MANIFEST_FILE).read_bytes()))
    # A version-1 manifest also predates the bounded-wait limit (added in version 3), the
    # sandbox's limits (version 4) and the canister log's (version 5).
    manifest[5] = tuple(p for p in manifest[5] if p[0] != "bounded_wait_message_memory_capacity"
                        and not p[0].startswith(("max_instructions_", "max_message_memory", "max_stable_state",
                                                 "max_canister_log")))
    (tmp_path / MANIFEST_FILE).write_bytes(encode(tuple([manifest[0], 1, *manifest[2:9]])))
    old = load_run_log(tmp_path)
    assert old.build is None and old.subnet_ids() == ("subnet-0", "subnet-1")


# -- the build check --------------------------------------------------------------------------------

def test_compare_builds_flags_replicas_of_another_build(edited):
    live = current_build()
    section = compare_builds(live, [(live.fingerprint, 6, 30, [0, 1, 2, 3, 4, 5]),
                                    (edited.fingerprint, 2, 10, [7, 6]), (None, 1, 1, [8])],
                             {live.fingerprint: live, edited.fingerprint: edited})
    assert section["agree"] is False and section["other_build_replicas"] == 2
    other = next(e for e in section["replayed"] if e["build"] == edited.fingerprint)
    assert other["sample"] == [6, 7] and other["differences"] == [f"source of {CHANGED_MODULE} differs"]
    assert next(e for e in section["replayed"] if e["build"] == live.fingerprint)["recorded"]


def test_compare_builds_without_a_recorded_build_flags_nothing():
    live = current_build()
    section = compare_builds(None, [(live.fingerprint, 3, 9, [0, 1, 2])], {live.fingerprint: live})
    assert section["agree"] is None and section["other_build_replicas"] == 0 and "records no build" in section["note"]


@pytest.mark.spark
def test_an_audit_flags_every_replica_replayed_by_another_build_than_the_live_run(spark, edited):
    from replica.audit.job import AuditOptions, run_audit
    from replica.audit.report import render_text

    log = dataclasses.replace(small_run(batches=4), build=edited)   # the live run ran the edited build
    report = run_audit(spark, log, AuditOptions(replicas=16, seed=3, drilldowns=0), source="edited", run_dir=None)
    assert report["summary"]["divergent_rows"] == 0 and report["recorded"]["agree"]   # same hashes, still flagged
    assert report["verdict"] == "other-build" and report["exit_status"] == 1
    build = report["build"]
    assert build["recorded"] == edited.fingerprint and build["other_build_replicas"] == 16
    # in-process replicas and the hash-seed subprocesses alike report the build they ran
    assert len(build["replayed"]) == 1 and build["replayed"][0]["replicas"] == 16
    assert f"source of {CHANGED_MODULE} differs" in build["replayed"][0]["differences"]
    assert "BUILD MISMATCH: 16 replica(s)" in render_text(report)
