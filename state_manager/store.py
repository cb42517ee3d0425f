"""Checkpoints on disk (the state manager's only I/O).

A checkpoint of height h is a directory ``<root>/<h as 20 digits>/`` holding ``state.bin``
(``encode_state``) and ``manifest.bin`` (canonical msgpack ``[1, height, full_hash,
sha256(state.bin), len(state.bin)]``). It is written into a temporary directory, each
file fsynced, then renamed into place and the parent fsynced
(``durable_files.write_directory_atomically``): a crash at any instant leaves either no
checkpoint of h or a complete one. Temporary leftovers are removed at load.
Loading verifies the file digest, decodes strictly and recomputes the full-state hash.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .codec import CodecError, check_bytes, check_tuple, check_u64
from .durable_files import write_directory_atomically
from .encoding import EncodingError, decode, encode
from .errors import StateManagerError
from .replicated_state import ReplicatedState
from .state_codec import decode_state, encode_state
from .state_tree import build_state_trees

__all__ = ["CheckpointStore", "CheckpointError", "CorruptCheckpoint", "Checkpoint", "encode_manifest",
           "read_checkpoint_bytes"]

MANIFEST_VERSION = 1
_TMP_PREFIX = "tmp-"


class CheckpointError(StateManagerError):
    pass


class CorruptCheckpoint(CheckpointError):
    """A finished checkpoint whose bytes or hash do not verify: refuse to start from it."""


@dataclass(frozen=True)
class Checkpoint:
    height: int
    full_hash: bytes
    state: ReplicatedState


def encode_manifest(height: int, full_hash: bytes, data: bytes) -> bytes:
    """``manifest.bin`` of the checkpoint of ``height`` whose ``state.bin`` is ``data``."""
    return encode([MANIFEST_VERSION, height, full_hash, hashlib.sha256(data).digest(), len(data)])


def read_checkpoint_bytes(directory: Path, height: int) -> tuple[bytes, bytes]:
    """``(full hash, state.bin)`` of the checkpoint of ``height`` in ``directory``, checked
    against its manifest (version, height, length, SHA-256) but not decoded;
    ``CorruptCheckpoint`` for anything missing, unreadable or inconsistent."""
    try:
        manifest_bytes = (directory / "manifest.bin").read_bytes()
        data = (directory / "state.bin").read_bytes()
    except OSError as exc:
        raise CorruptCheckpoint(f"checkpoint {directory}: cannot read: {exc}") from exc
    try:
        version, m_height, full_hash, digest, size = check_tuple(decode(manifest_bytes), "manifest", 5)
        if version != MANIFEST_VERSION or check_u64(m_height, "height") != height:
            raise CodecError("manifest version or height does not match")
        check_bytes(full_hash, "full hash", 32)
        check_bytes(digest, "digest", 32)
    except (EncodingError, CodecError, ValueError) as exc:
        raise CorruptCheckpoint(f"checkpoint {directory}: bad manifest: {exc}") from exc
    if len(data) != size or hashlib.sha256(data).digest() != digest:
        raise CorruptCheckpoint(f"checkpoint {directory}: state.bin does not match its manifest digest")
    return full_hash, data


class CheckpointStore:
    def __init__(self, root: Path | str, *, interval: int = 10, keep: int = 3) -> None:
        if interval < 1 or keep < 1:
            raise CheckpointError("interval and keep must be at least 1")
        self.root = Path(root)
        self.interval = interval
        self.keep = keep
        self.root.mkdir(parents=True, exist_ok=True)

    def is_due(self, height: int) -> bool:
        return height % self.interval == 0

    def heights(self) -> list[int]:
        return sorted(int(p.name) for p in self.root.iterdir() if p.is_dir() and p.name.isdigit())

    def write(self, height: int, state: ReplicatedState, full_hash: bytes,
              *, before_rename: Callable[[Path], None] | None = None) -> Path:
        """Write the checkpoint of ``height`` atomically; return its directory.
        ``before_rename(tmp)`` runs between the temporary write and the rename (fault tests)."""
        final = self.root / f"{height:020d}"
        if final.exists():
            return final
        data = encode_state(state)
        manifest = encode_manifest(height, full_hash, data)
        write_directory_atomically(final, (("state.bin", data), ("manifest.bin", manifest)),
                                   tmp=self.root / f"{_TMP_PREFIX}{height:020d}", before_rename=before_rename)
        self._prune()
        return final

    def _prune(self) -> None:
        for height in self.heights()[: -self.keep]:
            shutil.rmtree(self.root / f"{height:020d}", ignore_errors=True)

    def remove_leftovers(self) -> None:
        for path in self.root.iterdir():
            if path.name.startswith(_TMP_PREFIX):
                shutil.rmtree(path, ignore_errors=True)

    def load(self, height: int) -> Checkpoint:
        """Read, verify and decode the checkpoint of ``height`` (``CorruptCheckpoint`` if bad)."""
        directory = self.root / f"{height:020d}"
        full_hash, data = read_checkpoint_bytes(directory, height)
        try:
            state = decode_state(data)
        except CodecError as exc:
            raise CorruptCheckpoint(f"checkpoint {directory}: state does not decode: {exc}") from exc
        if state.metadata.batch_number != height:
            raise CorruptCheckpoint(f"checkpoint {directory}: state is of height {state.metadata.batch_number}")
        recomputed = build_state_trees(state).full_hash
        if recomputed != full_hash:
            raise CorruptCheckpoint(
                f"checkpoint {directory}: full-state hash {recomputed.hex()} != manifest {full_hash.hex()}")
        return Checkpoint(height, full_hash, state)

    def load_latest(self) -> Checkpoint | None:
        """The newest checkpoint (after removing unfinished temporary ones), or None."""
        self.remove_leftovers()
        heights = self.heights()
        return self.load(heights[-1]) if heights else None
