"""A node process's own durable records (shell): what it signed, its latest finalization
proof, and what it executed.

* ``RecordFile`` — an append-only file of framed records::

      file   = magic (8 bytes) ‖ record*
      record = length (4 bytes BE) ‖ CRC-32(length ‖ payload) (4 bytes BE) ‖ payload

  Opening validates every record. A file that ends inside its last record (an append cut
  short by a crash) loses that record, with a warning; any other damage — a complete record
  whose CRC fails, a wrong magic — raises ``CorruptRecordFile`` (file, record, offset) and
  leaves the file as it was. Appends are flushed and, when ``sync``, fsynced.
* ``AgreementLog`` — the agreement artifacts this node signed (``Persist`` outputs), which a
  restarted node must get back so it never signs two blocks at one height. Compacted to
  the artifacts above the finalized height (a new file renamed over the old one).
* ``ProofFile`` — the finalized height, block hash and finalization signatures of the latest
  step: what ``AgreementNode.restore`` needs on top of the stored blocks. Replaced atomically
  but not fsynced (it is written every height): after a power loss an older proof is as
  good, restore accepts blocks without a matching proof.
* ``ExecutedLog`` — per executed height: the batch bytes, the full-state hash and the
  certified root. A restarted node re-executing a height it had executed checks it reaches
  the same hashes (``ExecutedMismatch`` otherwise: never overwritten). It is the source of the
  testnet's run log (``replica.testnet.recording.read_node_recording``), so the audit replays what the node executed.
"""

from __future__ import annotations

import logging
import zlib
from pathlib import Path

from consensus_stub.agreement.messages import MalformedMessage, Message, artifact_height, decode_message, encode_message
from replica.errors import ReplicaError
from state_manager.codec import CodecError, check_bytes, check_tuple, check_u64
from state_manager.durable_files import fsync_file, rename_durably, write_atomically
from state_manager.encoding import EncodingError, decode, encode

__all__ = [
    "NodeStoreError", "CorruptRecordFile", "ExecutedMismatch", "RecordFile", "AgreementLog", "ProofFile",
    "ExecutedLog", "move_aside", "parse_records", "read_executed_log",
]

_log = logging.getLogger(__name__)
_HEADER = 8


class NodeStoreError(ReplicaError, RuntimeError):
    pass


class CorruptRecordFile(NodeStoreError):
    def __init__(self, path: Path, index: int, offset: int, reason: str) -> None:
        super().__init__(f"{path} is corrupt at record {index} (byte {offset}): {reason}")
        self.path, self.index, self.offset = path, index, offset


class ExecutedMismatch(NodeStoreError):
    """Re-executing a height gave other hashes than the node recorded the first time."""


def move_aside(path: Path) -> Path | None:
    """Rename ``path`` to ``<name>.replaced-<n>`` (the first free n), durably; never deletes it."""
    if not path.exists():
        return None
    n = 1
    while path.with_name(f"{path.name}.replaced-{n}").exists():
        n += 1
    target = path.with_name(f"{path.name}.replaced-{n}")
    rename_durably(path, target)
    return target


def _frame(payload: bytes) -> bytes:
    length = len(payload).to_bytes(4, "big")
    return length + zlib.crc32(length + payload).to_bytes(4, "big") + payload


def parse_records(path: Path, data: bytes, magic: bytes) -> tuple[list[bytes], int | None]:
    """The records of a record file's bytes, and the offset of a torn last record (``None``:
    none); ``CorruptRecordFile`` for any other damage. Writes nothing: a reader of another
    process's live file (a fork of a running testnet) takes what is complete."""
    if data[:_HEADER] != magic:
        raise CorruptRecordFile(path, 0, 0, f"not a {magic!r} file (it begins {data[:_HEADER]!r})")
    records, pos = [], _HEADER
    while pos < len(data):
        if len(data) - pos < 8:
            return records, pos
        length = int.from_bytes(data[pos:pos + 4], "big")
        end = pos + 8 + length
        if end > len(data):
            return records, pos
        payload = data[pos + 8:end]
        if zlib.crc32(data[pos:pos + 4] + payload) != int.from_bytes(data[pos + 4:pos + 8], "big"):
            raise CorruptRecordFile(path, len(records), pos, "checksum mismatch")
        records.append(payload)
        pos = end
    return records, None


class RecordFile:
    """An append-only file of framed records (module docstring)."""

    def __init__(self, path: Path, magic: bytes, *, sync: bool = True) -> None:
        if len(magic) != _HEADER:
            raise ValueError("magic must be 8 bytes")
        self.path, self.magic, self.sync = Path(path), magic, sync
        self.records: list[bytes] = self._read()
        self._handle = open(self.path, "ab")

    def _read(self) -> list[bytes]:
        if not self.path.exists() or self.path.stat().st_size == 0:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._write_new(self.path, [])
            return []
        data = self.path.read_bytes()
        if data[:_HEADER] != self.magic and len(data) < _HEADER and self.magic.startswith(data):
            _log.warning("%s: header cut short by a crash; starting it again", self.path)
            self._write_new(self.path, [])
            return []
        records, torn_at = parse_records(self.path, data, self.magic)
        return records if torn_at is None else self._torn(data, records, torn_at)

    def _torn(self, data: bytes, records: list[bytes], pos: int) -> list[bytes]:
        _log.warning("%s: dropping a torn last record at byte %d (a crash cut an append short)", self.path, pos)
        with open(self.path, "r+b") as f:   # only the torn, never-acknowledged tail goes
            f.truncate(pos)
            fsync_file(f)
        return records

    def _write_new(self, path: Path, records: list[bytes]) -> None:
        write_atomically(path, self.magic + b"".join(_frame(r) for r in records))

    def append(self, payload: bytes) -> None:
        self._handle.write(_frame(payload))
        if self.sync:
            fsync_file(self._handle)
        else:
            self._handle.flush()
        self.records.append(payload)

    def rewrite(self, records: list[bytes]) -> None:
        """Replace the whole file atomically by ``records``."""
        self._handle.close()
        self._write_new(self.path, records)
        self.records = list(records)
        self._handle = open(self.path, "ab")

    def close(self) -> None:
        self._handle.close()


class AgreementLog:
    """The agreement artifacts this node signed (module docstring)."""

    def __init__(self, path: Path) -> None:
        # 02: agreement messages of version 2; a version 1 log (its messages refused) is a
        # CorruptRecordFile naming the magic it has.
        self._file = RecordFile(path, b"agrlog02")
        try:
            self.artifacts: list[Message] = [decode_message(r) for r in self._file.records]
        except MalformedMessage as exc:   # decode_message's one error: corruption here
            raise CorruptRecordFile(self._file.path, 0, 0, f"an artifact does not decode: {exc}") from exc

    def append(self, message: Message) -> None:
        self._file.append(encode_message(message))
        self.artifacts.append(message)

    def compact(self, finalized_height: int) -> None:
        """Keep only artifacts above ``finalized_height`` (the rest can never matter again)."""
        kept = [m for m in self.artifacts if artifact_height(m) > finalized_height]
        if len(kept) != len(self.artifacts):
            self._file.rewrite([encode_message(m) for m in kept])
            self.artifacts = kept

    def close(self) -> None:
        self._file.close()


class ProofFile:
    """The latest finalization proof: ``(height, block hash, ((signer, signature), ...))``."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def read(self) -> tuple[int, bytes, tuple[tuple[str, bytes], ...]] | None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            height, digest, signatures = check_tuple(decode(data), "proof", 3)
            proof = tuple((str(s), check_bytes(sig, "signature")) for s, sig in signatures)
            return check_u64(height, "height"), check_bytes(digest, "block hash", 32), proof
        except (EncodingError, CodecError, TypeError, ValueError) as exc:
            raise NodeStoreError(f"{self.path} does not decode: {exc}") from exc

    def write(self, height: int, digest: bytes, proof: tuple[tuple[str, bytes], ...]) -> None:
        # not fsynced (module docstring): a crash leaves the old proof, which restore accepts too
        write_atomically(self.path, encode((height, digest, tuple(proof))), sync=False)


_EXECUTED_MAGIC = b"execlog1"


def _executed_entries(path: Path, records: list[bytes]) -> list[tuple[int, bytes, bytes, bytes]]:
    entries: list[tuple[int, bytes, bytes, bytes]] = []
    for index, record in enumerate(records):
        try:
            height, batch, full, root = check_tuple(decode(record), "executed", 4)
            entry = (check_u64(height, "height"), check_bytes(batch, "batch"),
                     check_bytes(full, "full hash", 32), check_bytes(root, "root", 32))
        except (EncodingError, CodecError, TypeError, ValueError) as exc:
            raise CorruptRecordFile(path, index, 0, str(exc)) from exc
        if entries and entry[0] != entries[-1][0] + 1:
            raise CorruptRecordFile(path, index, 0, f"height {entry[0]} after {entries[-1][0]}")
        entries.append(entry)
    return entries


def read_executed_log(path: Path) -> list[tuple[int, bytes, bytes, bytes]]:
    """The complete entries of an executed log, read only (a record being appended is left
    out); ``CorruptRecordFile`` for damage, ``OSError`` if it cannot be read."""
    path = Path(path)
    return _executed_entries(path, parse_records(path, path.read_bytes(), _EXECUTED_MAGIC)[0])


class ExecutedLog:
    """Per executed height: batch bytes, full hash, certified root (module docstring)."""

    def __init__(self, path: Path) -> None:
        self._file = RecordFile(path, _EXECUTED_MAGIC, sync=False)
        self.entries: list[tuple[int, bytes, bytes, bytes]] = _executed_entries(self._file.path, self._file.records)

    @property
    def first_height(self) -> int | None:
        return self.entries[0][0] if self.entries else None

    @property
    def last_height(self) -> int:
        return self.entries[-1][0] if self.entries else 0

    def record(self, height: int, batch: bytes, full_hash: bytes, root: bytes) -> None:
        """Append the next height, or check a re-executed one against what was recorded."""
        if self.entries and self.entries[0][0] <= height <= self.entries[-1][0]:
            _, _, full, recorded_root = self.entries[height - self.entries[0][0]]
            if (full, recorded_root) != (full_hash, root):
                raise ExecutedMismatch(
                    f"{self._file.path}: height {height} re-executed to full hash {full_hash.hex()} / root "
                    f"{root.hex()}, but {full.hex()} / {recorded_root.hex()} was recorded")
            return
        if self.entries and height != self.entries[-1][0] + 1:
            raise NodeStoreError(f"{self._file.path}: height {height} does not follow {self.entries[-1][0]}")
        self._file.append(encode((height, batch, full_hash, root)))
        self.entries.append((height, batch, full_hash, root))

    def close(self) -> None:
        self._file.close()
