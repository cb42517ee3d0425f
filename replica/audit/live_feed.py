"""The live audit's input: a directory a recorder fills with the heights a running testnet's
nodes execute, as they execute them (docs/architecture.md, *The live audit*).

A feed directory holds::

    context.bin                     canonical msgpack: ["replica-live-context", 1, subnets,
                                    canister modules, limits name, [[field, value], ...],
                                    checkpoint interval, topologies, build]; rewritten (atomically)
                                    whenever the registry gains a version, before any batch of it
    genesis/<subnet>.bin            the subnet's genesis state (``state_codec``)
    chunks/<subnet>.<first>-<last>.bin
                                    canonical msgpack: ["replica-live-chunk", 1, subnet,
                                    [[height, batch bytes, full hash, certified root], ...]] for
                                    heights first..last (ten digits each), written once, atomically
                                    under a hidden name, so that Spark's file source never sees a
                                    partial chunk

Chunks of one subnet follow each other without gaps or overlaps; a height is in the feed
once its chunk is. Only ``FeedWriter`` and the readers touch the file system; encoding and
decoding are pure and strict (``RunLogError``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from message_routing.limits import Limits
from state_manager.codec import CodecError, check_bytes, check_str, check_tuple, check_u64
from state_manager.durable_files import write_atomically
from state_manager.encoding import EncodingError, decode, encode
from state_manager.routing_table import NetworkTopology
from state_manager.state_codec import topology_from_value, topology_to_value

from .build import BuildInfo, build_from_value, build_to_value
from .errors import RunLogError
from .run_log import RUN_LOG_VERSION, RunLog, SubnetLog, _LIMIT_FIELDS, _limits

__all__ = ["FeedContext", "Entry", "FeedWriter", "FeedReader", "encode_context", "decode_context", "encode_chunk",
           "decode_chunk", "chunk_name", "parse_chunk_name", "CHUNKS", "FEED_VERSION"]

_CONTEXT_TAG, _CHUNK_TAG = "replica-live-context", "replica-live-chunk"
#: The version of the context and chunk encodings (``tests/golden`` pins their bytes).
FEED_VERSION = 1
CHUNKS = "chunks"
_CHUNK_NAME = re.compile(r"^(?P<subnet>[A-Za-z0-9_-]+)\.(?P<first>\d{10})-(?P<last>\d{10})\.bin$")
#: ``(height, batch bytes, full hash, certified root)``: one executed height.
Entry = tuple[int, bytes, bytes, bytes]


@dataclass(frozen=True)
class FeedContext:
    """What every replica of the followed testnet shares (as a run log's manifest says)."""

    subnets: tuple[str, ...]
    canister_modules: tuple[str, ...]
    limits_name: str
    limits: Limits
    checkpoint_interval: int
    topologies: tuple[NetworkTopology, ...]
    build: BuildInfo | None

    def run_log(self, subnets: Sequence[SubnetLog]) -> RunLog:
        """The run log of this context and ``subnets`` (what an offline audit of it reads)."""
        return RunLog(tuple(subnets), self.canister_modules, self.limits_name, self.limits, self.checkpoint_interval,
                      self.topologies, self.build)


def encode_context(context: FeedContext) -> bytes:
    return encode((_CONTEXT_TAG, FEED_VERSION, tuple(context.subnets), tuple(context.canister_modules),
                   context.limits_name, tuple((name, getattr(context.limits, name)) for name in _LIMIT_FIELDS),
                   context.checkpoint_interval, tuple(topology_to_value(t) for t in context.topologies),
                   None if context.build is None else build_to_value(context.build)))


def _decoded(data: bytes, what: str) -> Any:
    try:
        return decode(data, max_bytes=max(len(data), 1))
    except EncodingError as exc:
        raise RunLogError(f"{what}: {exc}") from exc


def decode_context(data: bytes) -> FeedContext:
    try:
        tag, version, subnets, modules, name, limits, interval, topologies, build = check_tuple(
            _decoded(data, "live context"), "live context", 9)
        if tag != _CONTEXT_TAG or version != FEED_VERSION:
            raise RunLogError(f"live context: not a version-{FEED_VERSION} {_CONTEXT_TAG}")
        if check_u64(interval, "checkpoint interval") < 1:
            raise RunLogError("live context: the checkpoint interval is at least 1")
        return FeedContext(tuple(check_str(s, "subnet") for s in check_tuple(subnets, "subnets")),
                           tuple(check_str(m, "canister module") for m in check_tuple(modules, "modules")),
                           check_str(name, "limits name"), _limits(name, limits, RUN_LOG_VERSION), interval,
                           tuple(topology_from_value(t) for t in check_tuple(topologies, "topologies")),
                           None if build is None else build_from_value(build))
    except (CodecError, ValueError) as exc:
        raise RunLogError(f"live context: {exc}") from exc


def encode_chunk(subnet: str, entries: Sequence[Entry]) -> bytes:
    return encode((_CHUNK_TAG, FEED_VERSION, subnet, tuple(tuple(e) for e in entries)))


def decode_chunk(data: bytes) -> tuple[str, tuple[Entry, ...]]:
    """``(subnet, entries)``: heights that follow each other, hashes of 32 bytes."""
    try:
        tag, version, subnet, entries = check_tuple(_decoded(data, "live chunk"), "live chunk", 4)
        if tag != _CHUNK_TAG or version != FEED_VERSION:
            raise RunLogError(f"live chunk: not a version-{FEED_VERSION} {_CHUNK_TAG}")
        out: list[Entry] = []
        for entry in check_tuple(entries, "entries"):
            height, batch, full, root = check_tuple(entry, "entry", 4)
            out.append((check_u64(height, "height"), check_bytes(batch, "batch"), check_bytes(full, "full hash", 32),
                        check_bytes(root, "certified root", 32)))
            if len(out) > 1 and out[-1][0] != out[-2][0] + 1:
                raise RunLogError(f"live chunk of {subnet}: height {out[-1][0]} after {out[-2][0]}")
        return check_str(subnet, "subnet"), tuple(out)
    except CodecError as exc:
        raise RunLogError(f"live chunk: {exc}") from exc


def chunk_name(subnet: str, first: int, last: int) -> str:
    return f"{subnet}.{first:010d}-{last:010d}.bin"


def parse_chunk_name(name: str) -> tuple[str, int, int] | None:
    match = _CHUNK_NAME.match(name)
    return None if match is None else (match["subnet"], int(match["first"]), int(match["last"]))


class FeedReader:
    """Reads a feed directory (module docstring)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    @property
    def chunks(self) -> Path:
        return self.root / CHUNKS

    def context(self) -> FeedContext:
        try:
            return decode_context((self.root / "context.bin").read_bytes())
        except OSError as exc:
            raise RunLogError(f"{self.root} is not a live feed: {exc.strerror}") from exc

    def genesis(self, subnet: str) -> bytes:
        try:
            return (self.root / "genesis" / f"{subnet}.bin").read_bytes()
        except OSError as exc:
            raise RunLogError(f"the feed has no genesis of {subnet}: {exc.strerror}") from exc

    def chunk_files(self) -> dict[str, list[tuple[int, int, Path]]]:
        """Per subnet, its chunk files as ``(first, last, path)`` in height order."""
        found: dict[str, list[tuple[int, int, Path]]] = {}
        if self.chunks.is_dir():
            for path in self.chunks.iterdir():
                parsed = parse_chunk_name(path.name)
                if parsed is not None:
                    found.setdefault(parsed[0], []).append((parsed[1], parsed[2], path))
        return {subnet: sorted(files) for subnet, files in found.items()}

    def heights(self) -> dict[str, int]:
        """Per subnet, the last height its chunks hold without a gap from height 1."""
        out = {}
        for subnet, files in self.chunk_files().items():
            last = 0
            for first, end, _ in files:
                if first != last + 1:
                    break
                last = end
            out[subnet] = last
        return out

    def entries(self, subnet: str, first: int, last: int) -> list[Entry]:
        """The entries of heights ``first..last`` (``RunLogError`` if one is missing)."""
        out: list[Entry] = []
        for start, end, path in self.chunk_files().get(subnet, []):
            if end < first or start > last:
                continue
            chunk_subnet, entries = decode_chunk(path.read_bytes())
            if chunk_subnet != subnet:
                raise RunLogError(f"{path} holds heights of {chunk_subnet}")
            out.extend(e for e in entries if first <= e[0] <= last)
        if [e[0] for e in out] != list(range(first, last + 1)):
            raise RunLogError(f"the feed lacks heights of {subnet} in {first}..{last}")
        return out


class FeedWriter(FeedReader):
    """What a recorder writes (module docstring)."""

    def write_context(self, context: FeedContext) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        write_atomically(self.root / "context.bin", encode_context(context))

    def write_genesis(self, subnet: str, data: bytes) -> None:
        path = self.root / "genesis" / f"{subnet}.bin"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, data)

    def append(self, subnet: str, entries: Iterable[Entry]) -> int:
        """Write ``entries`` (the heights after the subnet's last) as one chunk; how many."""
        entries = list(entries)
        if not entries:
            return 0
        expected = self.heights().get(subnet, 0) + 1
        if entries[0][0] != expected:
            raise RunLogError(f"a chunk of {subnet} starting at height {entries[0][0]}, but the feed needs {expected}")
        data = encode_chunk(subnet, entries)
        decode_chunk(data)   # refuse what a reader would refuse, before anyone sees it
        self.chunks.mkdir(parents=True, exist_ok=True)
        name = chunk_name(subnet, entries[0][0], entries[-1][0])
        write_atomically(self.chunks / name, data, tmp=self.chunks / f".{name}.tmp")
        return len(entries)
