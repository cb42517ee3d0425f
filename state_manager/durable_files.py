"""Durable files (shell): replacing a file or a directory so that a crash at any instant leaves
the old one or the new one, never a mix, and the new one is still there after a power loss.

The recipe, written out once here and used by every module that must find its files again
after a crash (checkpoints, the block log and its mark, a node's own records, the testnet
directory, run logs, identities, ...):

1. write the new bytes to a temporary sibling and fsync it (the bytes are on disk);
2. rename it over the target — the commit point: a rename within one directory is atomic, so
   a reader or a restart sees the old bytes or the new ones;
3. fsync the directory (the rename itself is on disk).

A failure before the rename removes the temporary file and leaves the target as it was; a
crash leaves at most the temporary file beside it, which the next write replaces. A directory
(a checkpoint: several files) is replaced the same way, its files fsynced first.

``sync=False`` keeps steps 1 and 2 without the fsyncs: atomic for readers and against a killed
process, not against a power loss. Only a record whose older version is as good (a node's
latest finalization proof) may use it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

__all__ = [
    "tmp_sibling", "fsync_file", "fsync_directory", "replacing", "write_atomically",
    "write_new_file", "install_file", "write_directory_atomically", "rename_durably",
]


def tmp_sibling(path: Path) -> Path:
    """The temporary file a replacement of ``path`` is written to: ``<name>.tmp`` beside it."""
    return path.with_name(path.name + ".tmp")


def fsync_file(handle: BinaryIO) -> None:
    """Flush ``handle`` and fsync its file: what was written (or truncated) is on disk."""
    handle.flush()
    os.fsync(handle.fileno())


def fsync_directory(directory: Path | str) -> None:
    """Fsync ``directory``: the renames, creations and removals in it are on disk."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _open_new(tmp: Path, mode: int | None) -> BinaryIO:
    """``tmp`` opened for writing from empty; with ``mode``, with exactly that mode before a
    byte is written (never readable by others for a moment, whatever the umask or a leftover)."""
    if mode is None:
        return open(tmp, "wb")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)
        return os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise


@contextmanager
def replacing(path: Path | str, *, tmp: Path | None = None, mode: int | None = None, sync: bool = True,
              sync_directory: bool = True) -> Iterator[BinaryIO]:
    """A file to write the new contents of ``path`` to; they replace it when the block ends
    without an exception (the recipe in the module docstring). ``tmp``: the temporary file
    (default ``tmp_sibling(path)``); ``mode``: the file's permissions; ``sync_directory=False``
    leaves step 3 to the caller (to tell a failure before the commit point from one after)."""
    path = Path(path)
    tmp = tmp_sibling(path) if tmp is None else Path(tmp)
    committed = False
    try:
        with _open_new(tmp, mode) as out:
            yield out
            if sync:
                fsync_file(out)
        os.replace(tmp, path)   # the commit point
        committed = True
    finally:
        if not committed:
            tmp.unlink(missing_ok=True)
    if sync and sync_directory:
        fsync_directory(path.parent)


def write_atomically(path: Path | str, data: bytes, *, tmp: Path | None = None, mode: int | None = None,
                     sync: bool = True) -> None:
    """Replace ``path`` by ``data`` (``replacing``)."""
    with replacing(path, tmp=tmp, mode=mode, sync=sync) as out:
        out.write(data)


def write_new_file(path: Path | str, data: bytes, *, tmp: Path, mode: int | None = None) -> None:
    """Create ``path`` holding ``data``, durably, never replacing an existing file
    (``FileExistsError``): written and fsynced as ``tmp`` (a name unique to the writer),
    hard-linked to ``path`` (fails if it exists), ``tmp`` removed."""
    path, tmp = Path(path), Path(tmp)
    try:
        with _open_new(tmp, mode) as out:
            out.write(data)
            fsync_file(out)
        os.link(tmp, path)   # the commit point; refuses an existing name
    finally:
        tmp.unlink(missing_ok=True)
    fsync_directory(path.parent)


def install_file(written: Path | str, path: Path | str) -> None:
    """Put a complete file that another writer (a library) produced at ``written`` in place at
    ``path``, durably: its bytes fsynced, renamed over ``path``, the directory fsynced."""
    written, path = Path(written), Path(path)
    with open(written, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(written, path)
    fsync_directory(path.parent)


def write_directory_atomically(final: Path | str, files: Sequence[tuple[str, bytes]], *, tmp: Path,
                               before_rename: Callable[[Path], None] | None = None) -> None:
    """Create directory ``final`` holding ``files`` (name, bytes): each written and fsynced in
    ``tmp`` (a leftover of an earlier attempt is removed first), ``tmp`` fsynced, renamed to
    ``final`` (the commit point), the parent fsynced. ``before_rename(tmp)`` runs just before
    the rename (fault tests). A crash leaves ``tmp`` behind: its owner removes such leftovers."""
    final, tmp = Path(final), Path(tmp)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for name, data in files:
        with open(tmp / name, "wb") as out:
            out.write(data)
            fsync_file(out)
    fsync_directory(tmp)
    if before_rename is not None:
        before_rename(tmp)
    os.rename(tmp, final)
    fsync_directory(final.parent)


def rename_durably(source: Path | str, target: Path | str) -> None:
    """Rename ``source`` (a file or a directory) to ``target`` and fsync the directories
    involved, so the move survives a power loss."""
    source, target = Path(source), Path(target)
    os.rename(source, target)
    fsync_directory(target.parent)
    if source.parent != target.parent:
        fsync_directory(source.parent)
