"""A node's checkpoints on disk and what is kept beside them (shell).

* ``checkpoints/<height>/`` — the state every ``checkpoint_interval`` heights
  (``state_manager.store.CheckpointStore``: written to a temporary directory, fsynced,
  renamed; verified when loaded). ``load_newest`` takes the newest that verifies; a corrupt
  one is moved aside (never deleted) and the next older tried.
* ``certifications/<height>.bin`` — beside each checkpoint, the subnet's certification of
  that height and the hash of its finalized block: what a peer's state sync checks the
  checkpoint against and continues the chain from. Written when the certification arrives,
  removed with its checkpoint.
  The newest checkpoint with both is what a peer's ``FetchCheckpoint`` is offered
  (``replica.node.state_sync.CheckpointServer``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

from state_manager.certification import Certification, decode_certification, encode_certification
from state_manager.codec import CodecError, check_bytes, check_tuple
from state_manager.durable_files import write_atomically
from state_manager.encoding import EncodingError, decode, encode
from state_manager.replicated_state import ReplicatedState
from state_manager.store import Checkpoint, CheckpointStore, CorruptCheckpoint

from .node_store import move_aside

__all__ = ["NodeCheckpoints"]

_log = logging.getLogger(__name__)


class NodeCheckpoints:
    """The checkpoints of one node in ``root`` every ``interval`` heights, the newest ``keep``
    kept, with their certifications in ``certifications`` (module docstring)."""

    def __init__(self, root: Path, certifications: Path, *, interval: int, keep: int) -> None:
        self.store = CheckpointStore(root, interval=interval, keep=keep)
        self._certifications = certifications

    def heights(self) -> list[int]:
        return self.store.heights()

    def load_newest(self) -> Checkpoint | None:
        """The newest checkpoint that verifies; corrupt ones are moved aside, with a log line."""
        self.store.remove_leftovers()
        for height in reversed(self.store.heights()):
            try:
                return self.store.load(height)
            except CorruptCheckpoint as exc:
                aside = move_aside(self.store.root / f"{height:020d}")
                _log.error("refusing checkpoint %d (%s); moved to %s, trying an older one", height, exc, aside)
        return None

    def write_if_due(self, height: int, state: ReplicatedState, full_hash: bytes,
                     before_rename: Callable[[Path], None] | None = None) -> bool:
        """Checkpoint ``height`` if it is a checkpoint height not written yet; whether it did."""
        if not self.store.is_due(height) or height in self.store.heights():
            return False
        self.store.write(height, state, full_hash, before_rename=before_rename)
        return True

    def set_aside_from(self, height: int) -> None:
        """Move the checkpoints of ``height`` and above aside (a diverged state's), with a log line."""
        for old in self.store.heights():
            if old >= height:
                aside = move_aside(self.store.root / f"{old:020d}")
                self._certification_path(old).unlink(missing_ok=True)
                _log.warning("checkpoint %d is of a diverged state: moved to %s", old, aside)

    def write(self, height: int, state: ReplicatedState, full_hash: bytes) -> None:
        """Checkpoint ``height`` now (a state installed by state sync)."""
        self.store.write(height, state, full_hash)

    def _certification_path(self, height: int) -> Path:
        return self._certifications / f"{height:020d}.bin"

    def keep_certification(self, certification: Certification, block_hash: bytes | None) -> None:
        """Beside the checkpoint of the certification's height (if there is one): the
        certification and the block hash; those of checkpoints since deleted go."""
        height = certification.height
        path = self._certification_path(height)
        # called for every certified height: one stat, not a directory listing
        if block_hash is None or path.exists() or not (self.store.root / f"{height:020d}").is_dir():
            return
        self._certifications.mkdir(parents=True, exist_ok=True)
        write_atomically(path, encode((block_hash, encode_certification(certification))), tmp=path.with_suffix(".tmp"))
        kept = set(self.store.heights())
        for old in self._certifications.glob("*.bin"):
            if old.stem.isdigit() and int(old.stem) not in kept:
                old.unlink(missing_ok=True)

    def kept_certification(self, height: int) -> tuple[bytes, Certification] | None:
        """The block hash and certification kept beside checkpoint ``height``; ``None`` if there
        is no usable record (not certified yet, or unreadable: logged)."""
        try:
            block_hash, certification = check_tuple(decode(self._certification_path(height).read_bytes()),
                                                    "checkpoint certification", 2)
            return check_bytes(block_hash, "hash", 32), decode_certification(certification)
        except (OSError, EncodingError, CodecError, ValueError) as exc:
            _log.debug("checkpoint %d has no usable certification: %s", height, exc)
            return None
