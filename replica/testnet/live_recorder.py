"""The live audit's recorder: what a running testnet's nodes execute, copied into a live feed
(``replica.audit.live_feed``) as they execute it (docs/architecture.md, *The live audit*).

Every node process appends each height it executes to its ``executed.log`` (batch bytes, full
hash, certified root; ``replica.node.node_store.ExecutedLog``) — what ``down`` assembles into
the run log. ``LiveRecorder.poll`` reads the new complete records of every node's log
*read-only* from where it stopped (a record still being appended is left for the next poll;
nothing is ever truncated or locked), and appends to the feed, per subnet, the heights after the
feed's last that some node has executed, taken from any node that holds them: a node that is
killed, restarts, or installs a peer's checkpoint (its log moved aside and started again above
genesis) does not stop the feed while one of its peers executes. Before writing a batch it
rewrites the feed's context when ``registry.bin`` has gained a version (a node executes a block
of a registry version only once the file holds it, so the context always covers the batches).

The feed's heights, not the recorder's memory, say where it stands: a recorder started again
continues after the feed's last chunk. Only the node-per-process model keeps an executed log
per node (the subnet model writes its recording when it stops), so only it can be followed.
"""

from __future__ import annotations

import logging
import os
import zlib
from pathlib import Path

from consensus_stub.registry import RegistryError, decode_registry
from replica.audit.build import current_build
from replica.audit.live_feed import Entry, FeedContext, FeedWriter
from replica.audit.run_log import limits_preset_name
from replica.node.process_config import NodeProcessConfig
from replica.node.testnet_dir import TestnetDirectory, TestnetError
from state_manager.codec import CodecError, check_bytes, check_tuple, check_u64
from state_manager.encoding import EncodingError, decode

from .recording import DEFAULT_CHECKPOINT_INTERVAL

__all__ = ["ExecutedTail", "LiveRecorder"]

_log = logging.getLogger(__name__)
_MAGIC = b"execlog1"
_HEADER = len(_MAGIC)


class ExecutedTail:
    """Read-only follower of one node's ``executed.log`` (module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._identity: tuple[int, int] | None = None
        self._offset = _HEADER
        self.entries: dict[int, Entry] = {}

    @property
    def last_height(self) -> int:
        return max(self.entries, default=0)

    def poll(self, keep_from: int) -> None:
        """Read the complete records appended since the last poll; forget heights below ``keep_from``."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return
        identity = (stat.st_dev, stat.st_ino)
        if identity != self._identity or stat.st_size < self._offset:
            # a new file (state sync moved the old one aside) or a rewrite: read it from the start
            self._identity, self._offset, self.entries = identity, _HEADER, {}
        if stat.st_size <= self._offset:
            return
        with open(self.path, "rb") as f:
            if f.read(_HEADER) != _MAGIC:
                return   # a header not written yet, or not an executed log
            f.seek(self._offset)
            data = f.read(stat.st_size - self._offset)
        pos = 0
        while len(data) - pos >= 8:
            length = int.from_bytes(data[pos:pos + 4], "big")
            end = pos + 8 + length
            if end > len(data):
                break   # the node is appending this record: the next poll reads it
            payload = data[pos + 8:end]
            if zlib.crc32(data[pos:pos + 4] + payload) != int.from_bytes(data[pos + 4:pos + 8], "big"):
                _log.warning("%s: a record at byte %d fails its checksum; following stops here", self.path,
                             self._offset + pos)
                break
            try:
                height, batch, full, root = check_tuple(decode(payload), "executed", 4)
                entry = (check_u64(height, "height"), check_bytes(batch, "batch"), check_bytes(full, "full hash", 32),
                         check_bytes(root, "root", 32))
            except (EncodingError, CodecError) as exc:
                _log.warning("%s: a record at byte %d does not decode (%s)", self.path, self._offset + pos, exc)
                break
            if entry[0] >= keep_from:
                self.entries[entry[0]] = entry
            pos = end
        self._offset += pos
        for height in [h for h in self.entries if h < keep_from]:
            del self.entries[height]


class LiveRecorder:
    """Copies a node-per-process testnet's executed heights into a live feed (module docstring)."""

    def __init__(self, testnet_dir: Path | str, feed_dir: Path | str, *,
                 checkpoint_interval: int = DEFAULT_CHECKPOINT_INTERVAL) -> None:
        self.directory = TestnetDirectory(Path(testnet_dir))
        manifest = self.directory.read_manifest()
        if manifest.get("process_model", "subnet") != "node":
            raise TestnetError(f"{testnet_dir} runs a process per subnet, which records what it executed only when "
                               "it stops: a live audit follows a testnet of one process per node")
        self.subnets = tuple(sorted(manifest["subnets"]))
        self.modules = tuple(manifest.get("canister_modules") or ())
        self.limits = self.directory.limits(manifest)
        self.interval = checkpoint_interval
        self.feed = FeedWriter(feed_dir)
        self.tails: dict[str, ExecutedTail] = {}
        self.subnet_of: dict[str, str] = {}
        self.written = dict.fromkeys(self.subnets, 0)
        self.latest = dict.fromkeys(self.subnets, 0)
        self._versions: tuple[int, ...] = ()
        self._build = current_build()

    def start(self) -> None:
        """Genesis of every subnet and the context, once; where the feed stands."""
        for subnet in self.subnets:
            self.feed.write_genesis(subnet, self.directory.genesis(subnet).read_bytes())
        self._write_context(force=not (self.feed.root / "context.bin").exists())
        self.written.update(self.feed.heights())

    def _nodes(self) -> None:
        for config in sorted((self.directory.root / "nodes").glob("*/config.json")):
            node = config.parent.name
            if node not in self.subnet_of:
                try:
                    self.subnet_of[node] = NodeProcessConfig.from_file(config).subnet_id
                except (OSError, ValueError, KeyError, TypeError) as exc:
                    _log.debug("node %s not followed yet: %s", node, exc)
                    continue
                self.tails[node] = ExecutedTail(self.directory.node_files(node).executed_log)

    def _write_context(self, force: bool = False) -> None:
        try:
            registry = decode_registry(self.directory.registry.read_bytes())
        except (OSError, RegistryError) as exc:
            _log.warning("registry.bin not read (%s); the feed keeps its context", exc)
            return
        records = registry.records
        versions = tuple(r.version for r in records)
        if versions == self._versions and not force:
            return
        self.feed.write_context(FeedContext(self.subnets, self.modules, limits_preset_name(self.limits), self.limits,
                                            self.interval, tuple(r.topology() for r in records), self._build))
        self._versions = versions

    def poll(self) -> dict[str, int]:
        """One pass (module docstring); the heights appended per subnet."""
        self._nodes()
        for node, tail in self.tails.items():
            tail.poll(self.written.get(self.subnet_of[node], 0) + 1)
        for subnet in self.subnets:
            tails = [t for n, t in self.tails.items() if self.subnet_of[n] == subnet]
            self.latest[subnet] = max([self.written[subnet], *(t.last_height for t in tails)])
        pending: dict[str, list[Entry]] = {}
        for subnet in self.subnets:
            tails = [t for n, t in sorted(self.tails.items()) if self.subnet_of[n] == subnet]
            height, entries = self.written[subnet] + 1, []
            while True:
                entry = next((t.entries[height] for t in tails if height in t.entries), None)
                if entry is None:
                    break
                entries.append(entry)
                height += 1
            pending[subnet] = entries
        if any(pending.values()):
            self._write_context()
        appended = {}
        for subnet, entries in pending.items():
            appended[subnet] = self.feed.append(subnet, entries)
            self.written[subnet] += appended[subnet]
        return appended

    def heights(self) -> dict[str, int]:
        """The last height some node of each subnet has executed, as of the last poll."""
        return dict(self.latest)
