"""The durable-file recipe: a crash or a failure before the rename leaves the old file, and
every step that must reach the disk (the temporary file, the directory) is fsynced in order."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from state_manager import durable_files as df


@pytest.fixture
def disk(monkeypatch):
    """Records, in order, each fsync (``("fsync", "dir" | "file", inode)``) and each rename."""
    events: list[tuple] = []
    real_fsync, real_replace, real_rename, real_link = os.fsync, os.replace, os.rename, os.link

    def fsync(fd):
        st = os.fstat(fd)
        events.append(("fsync", "dir" if stat.S_ISDIR(st.st_mode) else "file", st.st_ino))
        real_fsync(fd)

    def renaming(real, name):
        def call(src, dst, *args, **kwargs):
            events.append((name, Path(src).stat().st_ino, Path(dst).name))
            return real(src, dst, *args, **kwargs)
        return call

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", renaming(real_replace, "replace"))
    monkeypatch.setattr(os, "rename", renaming(real_rename, "rename"))
    monkeypatch.setattr(os, "link", renaming(real_link, "link"))
    return events


def test_write_atomically_fsyncs_the_file_then_renames_then_fsyncs_the_directory(tmp_path, disk):
    path = tmp_path / "f.bin"
    path.write_bytes(b"old")
    df.write_atomically(path, b"new")
    assert path.read_bytes() == b"new" and sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]
    new_inode = path.stat().st_ino
    assert disk == [("fsync", "file", new_inode), ("replace", new_inode, "f.bin"),
                    ("fsync", "dir", tmp_path.stat().st_ino)]


def test_without_sync_nothing_is_fsynced_but_the_replacement_is_atomic(tmp_path, disk):
    path = tmp_path / "f.bin"
    df.write_atomically(path, b"new", sync=False)
    assert path.read_bytes() == b"new"
    assert [e[0] for e in disk] == ["replace"]


_CRASH_BEFORE_RENAME = textwrap.dedent("""
    import os, sys
    from state_manager import durable_files
    os.replace = lambda src, dst: os._exit(9)   # the process dies where the rename would be
    durable_files.write_atomically(sys.argv[1], b"new bytes")
""")


def test_a_crash_between_the_write_and_the_rename_leaves_the_old_file(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"old bytes")
    done = subprocess.run([sys.executable, "-c", _CRASH_BEFORE_RENAME, str(path)], cwd=Path(df.__file__).parents[1],
                          capture_output=True, timeout=60)
    assert done.returncode == 9, done.stderr.decode()
    assert path.read_bytes() == b"old bytes"
    assert df.tmp_sibling(path).read_bytes() == b"new bytes"   # written and fsynced, never committed
    df.write_atomically(path, b"again")                        # the leftover is simply overwritten
    assert path.read_bytes() == b"again" and not df.tmp_sibling(path).exists()


def test_a_failed_rename_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "f.bin"
    path.write_bytes(b"old")

    def disk_full(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(OSError, match="disk full"):
        df.write_atomically(path, b"new")
    assert path.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]


def test_a_writer_that_fails_midway_replaces_nothing(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with df.replacing(path) as out:
            out.write(b"half of it")
            raise RuntimeError("the writer failed")
    assert path.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]


def test_replacing_can_leave_the_directory_fsync_to_its_caller(tmp_path, disk):
    path = tmp_path / "f.bin"
    with df.replacing(path, sync_directory=False) as out:
        out.write(b"streamed")
    assert path.read_bytes() == b"streamed"
    assert [e[:2] for e in disk] == [("fsync", "file"), ("replace", path.stat().st_ino)]


def test_a_mode_is_exact_whatever_the_umask_or_a_leftover_temporary(tmp_path):
    path = tmp_path / "secret"
    df.tmp_sibling(path).write_bytes(b"leftover")
    df.tmp_sibling(path).chmod(0o644)
    old = os.umask(0o022)
    try:
        df.write_atomically(path, b"key", mode=0o600)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.read_bytes() == b"key"


def test_write_new_file_never_replaces_and_fsyncs_the_directory(tmp_path, disk):
    path = tmp_path / "id.pem"
    df.write_new_file(path, b"first", tmp=tmp_path / ".id.tmp", mode=0o600)
    assert disk[-1] == ("fsync", "dir", tmp_path.stat().st_ino)
    assert [e[0] for e in disk] == ["fsync", "link", "fsync"]
    with pytest.raises(FileExistsError):
        df.write_new_file(path, b"second", tmp=tmp_path / ".id.tmp", mode=0o600)
    assert path.read_bytes() == b"first" and sorted(p.name for p in tmp_path.iterdir()) == ["id.pem"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    (tmp_path / ".other.tmp").write_bytes(b"left by a writer that crashed")   # does not block the next
    df.write_new_file(tmp_path / "other.pem", b"second", tmp=tmp_path / ".other.tmp", mode=0o600)
    assert (tmp_path / "other.pem").read_bytes() == b"second" and not (tmp_path / ".other.tmp").exists()


def test_a_directory_is_complete_or_absent(tmp_path, disk):
    final, tmp = tmp_path / "00042", tmp_path / "tmp-00042"

    def crash(directory: Path) -> None:
        raise KeyboardInterrupt   # stands for the process dying just before the rename

    with pytest.raises(KeyboardInterrupt):
        df.write_directory_atomically(final, (("a", b"1"), ("b", b"2")), tmp=tmp, before_rename=crash)
    assert not final.exists() and sorted(p.name for p in tmp.iterdir()) == ["a", "b"]   # a leftover
    disk.clear()
    df.write_directory_atomically(final, (("a", b"1"), ("b", b"2")), tmp=tmp)
    assert not tmp.exists() and {p.name: p.read_bytes() for p in final.iterdir()} == {"a": b"1", "b": b"2"}
    kinds = [(e[0], e[1]) if e[0] == "fsync" else (e[0],) for e in disk]
    assert kinds == [("fsync", "file"), ("fsync", "file"), ("fsync", "dir"), ("rename",), ("fsync", "dir")]
    assert disk[2][2] == final.stat().st_ino and disk[4][2] == tmp_path.stat().st_ino


def test_rename_durably_fsyncs_both_directories(tmp_path, disk):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "f").write_bytes(b"x")
    df.rename_durably(tmp_path / "a" / "f", tmp_path / "b" / "g")
    assert (tmp_path / "b" / "g").read_bytes() == b"x"
    assert [e for e in disk if e[0] == "fsync"] == [("fsync", "dir", (tmp_path / "b").stat().st_ino),
                                                    ("fsync", "dir", (tmp_path / "a").stat().st_ino)]


def test_install_file_fsyncs_what_another_writer_produced(tmp_path, disk):
    written, target = tmp_path / "partial", tmp_path / "archive"
    written.write_bytes(b"archive bytes")
    inode = written.stat().st_ino
    df.install_file(written, target)
    assert target.read_bytes() == b"archive bytes" and not written.exists()
    assert disk == [("fsync", "file", inode), ("replace", inode, "archive"), ("fsync", "dir", tmp_path.stat().st_ino)]
