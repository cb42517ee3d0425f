"""``registry.bin`` as a running node or subnet process follows it (shell).

A process keeps the registry it runs by in a ``RegistryHolder`` and replaces it whole when
the file changes: the launcher rewrites the file with the addresses of the processes it
(re)started, and a migration publishes new versions (``launcher.update_registry_file``,
an atomic replacement, so a reader sees the old file or the new one, never a mix).

* ``poll()`` re-reads the file when its bytes changed (the routine check, every tick);
* ``knows(version)`` re-reads it at once when a block names a version the holder lacks: a
  node that executes a finalized block of a new version must not wait for its next poll.

A read that fails — the file missing or unreadable, not a registry, or a registry older than
the one held (a version once read is never given up) — is logged with its reason, kept in
``error`` for the status file, and tried again on the next call; the holder keeps the
registry it had.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from consensus_stub.registry import MalformedRegistry, Registry, decode_registry
from .replica_node import RegistryHolder

__all__ = ["RegistryFile"]

_log = logging.getLogger(__name__)

#: The same failure is logged again after this many seconds (a new one at once).
_RELOG_S = 10.0


class RegistryFile:
    """The registry file at ``path`` as ``owner`` (a node or subnet id, for the log) follows it."""

    def __init__(self, path: Path, owner: str) -> None:
        self.path, self.owner = path, owner
        data = path.read_bytes()   # at start a failure is the caller's: nothing to run by yet
        self.holder = RegistryHolder(decode_registry(data))
        self._seen = data
        self._lock = threading.Lock()
        #: Why the last read failed (``None`` after a good one).
        self.error: str | None = None
        self.failures = 0
        self._logged: tuple[str, float] | None = None

    @property
    def registry(self) -> Registry:
        return self.holder.get()

    def poll(self) -> bool:
        """Re-read the file if its bytes changed; whether a new registry was taken."""
        with self._lock:
            try:
                data = self.path.read_bytes()
            except OSError as exc:
                return self._failed(f"cannot read {self.path}: {exc}")
            if data == self._seen:
                return False
            try:
                registry = decode_registry(data)
            except MalformedRegistry as exc:
                return self._failed(f"{self.path} is not a registry: {exc}")
            held = self.holder.get().latest_version
            if registry.latest_version < held:
                return self._failed(f"{self.path} holds registry version {registry.latest_version}, older than "
                                    f"version {held} already read: kept {held}")
            self._seen = data
            self.holder.set(registry)
            if self.error is not None:
                _log.info("%s: %s read again (registry version %d)", self.owner, self.path, registry.latest_version)
            self.error, self._logged = None, None
            return True

    def knows(self, version: int) -> bool:
        """Whether the registry holds ``version``, re-reading the file first if it does not."""
        if self.holder.get().has_version(version):
            return True
        self.poll()
        return self.holder.get().has_version(version)

    def _failed(self, error: str) -> bool:
        self.error = error
        self.failures += 1
        now = time.monotonic()
        if self._logged is None or self._logged[0] != error or now - self._logged[1] >= _RELOG_S:
            _log.warning("%s: registry re-read failed (%d so far; keeping version %d, retrying): %s", self.owner,
                         self.failures, self.holder.get().latest_version, error)
            self._logged = (error, now)
        return False
