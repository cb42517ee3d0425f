"""The recorded-run format: what an audit replays, as a directory or as one blob.

A run directory holds::

    manifest.bin        canonical msgpack (see ``_manifest_value``):
                        ["replica-run-log", 3, subnets, canister modules, limits name,
                         limits [[field, value], ...], checkpoint interval, topologies,
                         files [[subnet, file name, sha256, size], ...], build]
    subnet-000.bin ...  one per subnet, canonical msgpack:
                        ["replica-subnet-log", 1, subnet id, genesis state bytes,
                         [batch bytes, ...], [[height, full hash, certified root], ...],
                         [[height, checkpoint state bytes], ...]]

Genesis and checkpoints are ``state_codec.encode_state`` bytes, batches are
``message_routing.batch.encode_batch`` bytes for heights 1..n, and the hashes are the ones
the live run committed after each batch. Checkpoints (every ``checkpoint interval``
heights) are where restarted replicas resume. Canister modules are ``"package.module:Class"``
names; the limits are a named preset (``DEFAULT``, ``MINIMAL``) or ``custom``. ``build`` is
the build the live run ran (``build.build_to_value``), or nil when unknown.

Manifest and blob are at version 5; subnet files are still at version 1 (unchanged). Version
5 adds the limit ``max_canister_log_bytes`` (canister logs; older manifests get it from their
preset, as below). Version 4 adds the sandbox's limits (``max_instructions_per_message`` ... ``max_stable_state_bytes``),
which older manifests get from their preset, as below. Version 3 adds the limit ``bounded_wait_message_memory_capacity`` (bounded-wait calls); version 2
added ``build``. Older manifests are still read: a version-1 manifest (no ``build`` item) is
a run with no recorded build, and the audit says so instead of comparing builds; version-1
and -2 limits get the new limit's value from their preset (``DEFAULT``'s for ``custom``),
which no run recorded before bounded-wait calls could have reached.

``encode_run_log`` packs manifest and files into one blob (shipped to Spark executors and
replay subprocesses); ``decode_run_log`` and ``load_run_log`` check it all strictly and
raise ``RunLogError``. Encoding and decoding are pure; only ``write_run_log`` and
``load_run_log`` touch the file system.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from message_routing.limits import DEFAULT, MINIMAL, Limits
from state_manager.codec import CodecError, check_bytes, check_str, check_tuple, check_u64
from state_manager.durable_files import write_atomically
from state_manager.encoding import EncodingError, decode, encode
from state_manager.routing_table import NetworkTopology
from state_manager.state_codec import topology_from_value, topology_to_value

from .build import BuildInfo, build_from_value, build_to_value
from .errors import RunLogError

__all__ = [
    "RUN_LOG_VERSION", "MANIFEST_FILE", "LIMIT_PRESETS", "SubnetLog", "RunLog", "encode_run_log",
    "decode_run_log", "write_run_log", "load_run_log", "limits_preset_name",
]

RUN_LOG_VERSION = 5
SUBNET_FILE_VERSION = 1
READABLE_VERSIONS = (1, 2, 3, 4, 5)
_MANIFEST_ITEMS = {1: 9, 2: 10, 3: 10, 4: 10, 5: 10}
MANIFEST_FILE = "manifest.bin"
_RUN_TAG = "replica-run-log"
_SUBNET_TAG = "replica-subnet-log"
_BLOB_TAG = "replica-run-blob"
LIMIT_PRESETS: dict[str, Limits] = {"DEFAULT": DEFAULT, "MINIMAL": MINIMAL}
_LIMIT_FIELDS = tuple(f.name for f in fields(Limits))
#: Limits a manifest of each older version does not list.
_LIMITS_ADDED_IN = {3: ("bounded_wait_message_memory_capacity",),
                    4: ("max_instructions_per_message", "max_instructions_per_query", "max_instructions_per_install",
                        "max_instructions_per_round", "max_message_memory_bytes", "max_stable_state_bytes"),
                    5: ("max_canister_log_bytes",)}


def _limit_fields(version: int) -> tuple[str, ...]:
    """The limits a manifest of ``version`` lists, in ``Limits`` field order."""
    missing = {name for added, names in _LIMITS_ADDED_IN.items() if added > version for name in names}
    return tuple(name for name in _LIMIT_FIELDS if name not in missing)


@dataclass(frozen=True)
class SubnetLog:
    """One subnet's recording: genesis, the batches of heights 1..n, the live hashes and
    the checkpoints (height → state bytes) restarted replicas may resume from."""

    subnet_id: str
    genesis: bytes
    batches: tuple[bytes, ...]
    hashes: tuple[tuple[int, bytes, bytes], ...]
    checkpoints: tuple[tuple[int, bytes], ...] = ()

    @property
    def height(self) -> int:
        return len(self.batches)

    def checkpoint_heights(self) -> tuple[int, ...]:
        return tuple(h for h, _ in self.checkpoints)

    def checkpoint(self, height: int) -> bytes | None:
        for h, data in self.checkpoints:
            if h == height:
                return data
        return None


@dataclass(frozen=True)
class RunLog:
    """A whole recorded run: every subnet's log plus what replay needs to rebuild the replica."""

    subnets: tuple[SubnetLog, ...]
    canister_modules: tuple[str, ...]
    limits_name: str
    limits: Limits
    checkpoint_interval: int
    topologies: tuple[NetworkTopology, ...]
    build: BuildInfo | None = None      # the live run's build; None: recorded before builds were

    def subnet_ids(self) -> tuple[str, ...]:
        return tuple(s.subnet_id for s in self.subnets)

    def subnet(self, subnet_id: str) -> SubnetLog:
        for log in self.subnets:
            if log.subnet_id == subnet_id:
                return log
        raise RunLogError(f"the run has no subnet {subnet_id!r}; its subnets are {', '.join(self.subnet_ids())}")


def limits_preset_name(limits: Limits) -> str:
    """The preset ``limits`` equals, or ``"custom"``."""
    for name, preset in LIMIT_PRESETS.items():
        if limits == preset:
            return name
    return "custom"


# -- encoding ---------------------------------------------------------------------------------

def _subnet_file_name(position: int) -> str:
    return f"subnet-{position:03d}.bin"


def _subnet_value(log: SubnetLog) -> tuple:
    return (_SUBNET_TAG, SUBNET_FILE_VERSION, log.subnet_id, log.genesis, tuple(log.batches),
            tuple((h, f, c) for h, f, c in log.hashes), tuple((h, d) for h, d in log.checkpoints))


def _manifest_value(log: RunLog, files: tuple[tuple[str, str, bytes, int], ...]) -> tuple:
    return (
        _RUN_TAG, RUN_LOG_VERSION, log.subnet_ids(), tuple(log.canister_modules), log.limits_name,
        tuple((name, getattr(log.limits, name)) for name in _LIMIT_FIELDS), log.checkpoint_interval,
        tuple(topology_to_value(t) for t in log.topologies), files,
        None if log.build is None else build_to_value(log.build),
    )


def _encode_files(log: RunLog) -> tuple[bytes, dict[str, bytes]]:
    ids = log.subnet_ids()
    if list(ids) != sorted(set(ids)):
        raise RunLogError("subnets must be distinct and sorted by id")
    files: dict[str, bytes] = {}
    entries = []
    for position, subnet in enumerate(log.subnets):
        data = encode(_subnet_value(subnet))
        name = _subnet_file_name(position)
        files[name] = data
        entries.append((subnet.subnet_id, name, hashlib.sha256(data).digest(), len(data)))
    return encode(_manifest_value(log, tuple(entries))), files


def encode_run_log(log: RunLog) -> bytes:
    """The whole run as one canonical blob (manifest plus subnet files)."""
    manifest, files = _encode_files(log)
    return encode((_BLOB_TAG, RUN_LOG_VERSION, manifest, tuple(files[name] for name in sorted(files))))


# -- decoding ---------------------------------------------------------------------------------

def _decode(data: bytes, what: str) -> Any:
    try:
        return decode(data, max_bytes=max(len(data), 1))
    except EncodingError as exc:
        raise RunLogError(f"{what}: {exc}") from exc


def _check_version(tag: Any, version: Any, expected_tag: str, what: str,
                   readable: tuple[int, ...] = READABLE_VERSIONS) -> int:
    if tag != expected_tag:
        raise RunLogError(f"{what}: not a {expected_tag} (tag {tag!r})")
    if type(version) is not int or version not in readable:
        raise RunLogError(f"{what}: unsupported version {version!r} (this build reads "
                          f"{', '.join(map(str, readable))})")
    return version


def _limits(name: str, values: Any, version: int) -> Limits:
    pairs = check_tuple(values, "limits")
    expected = _limit_fields(version)
    if tuple(check_tuple(p, "limit", 2)[0] for p in pairs) != expected:
        raise RunLogError(f"limits: expected the fields {expected}")
    given = {field: check_u64(value, f"limit {field}") for field, value in pairs}
    preset = LIMIT_PRESETS.get(name)
    for field in _LIMIT_FIELDS:  # limits an older version did not record: its preset's
        given.setdefault(field, getattr(preset or DEFAULT, field))
    limits = Limits(**given)
    if preset is not None and preset != limits:
        raise RunLogError(f"limits: values differ from the {name} preset this build knows")
    if preset is None and name != "custom":
        raise RunLogError(f"limits: unknown preset {name!r}")
    return limits


def _decode_subnet(data: bytes, subnet_id: str) -> SubnetLog:
    what = f"subnet log {subnet_id}"
    tag, version, sid, genesis, batches, hashes, checkpoints = check_tuple(_decode(data, what), what, 7)
    _check_version(tag, version, _SUBNET_TAG, what, (SUBNET_FILE_VERSION,))
    if sid != subnet_id:
        raise RunLogError(f"{what}: file holds subnet {sid!r}")
    batch_bytes = tuple(check_bytes(b, "batch") for b in check_tuple(batches, "batches"))
    hash_rows = []
    for position, entry in enumerate(check_tuple(hashes, "hashes")):
        height, full, certified = check_tuple(entry, "hash entry", 3)
        if check_u64(height, "height") != position + 1:
            raise RunLogError(f"{what}: hash entry {position} is for height {height}, expected {position + 1}")
        hash_rows.append((height, check_bytes(full, "full hash", 32), check_bytes(certified, "certified root", 32)))
    if len(hash_rows) != len(batch_bytes):
        raise RunLogError(f"{what}: {len(batch_bytes)} batches but {len(hash_rows)} recorded hashes")
    checkpoint_rows = []
    previous = 0
    for entry in check_tuple(checkpoints, "checkpoints"):
        height, state = check_tuple(entry, "checkpoint", 2)
        if check_u64(height, "checkpoint height") <= previous or height > len(batch_bytes):
            raise RunLogError(f"{what}: checkpoint heights must increase within 1..{len(batch_bytes)}")
        checkpoint_rows.append((height, check_bytes(state, "checkpoint state")))
        previous = height
    return SubnetLog(subnet_id, check_bytes(genesis, "genesis"), batch_bytes, tuple(hash_rows), tuple(checkpoint_rows))


def _assemble(manifest_bytes: bytes, files: dict[str, bytes]) -> RunLog:
    try:
        value = check_tuple(_decode(manifest_bytes, "manifest"), "manifest")
        version = _check_version(value[0] if value else None, value[1] if len(value) > 1 else None, _RUN_TAG,
                                 "manifest")
        value = check_tuple(value, "manifest", _MANIFEST_ITEMS[version])
        tag, version, subnets, modules, limits_name, limits, interval, topologies, entries = value[:9]
        build = None if version == 1 or value[9] is None else build_from_value(value[9])
        subnet_ids = tuple(check_str(s, "subnet") for s in check_tuple(subnets, "subnets"))
        if list(subnet_ids) != sorted(set(subnet_ids)) or not subnet_ids:
            raise RunLogError("manifest: subnets must be a non-empty sorted list of distinct ids")
        module_names = tuple(check_str(m, "canister module") for m in check_tuple(modules, "canister modules"))
        limits_value = _limits(check_str(limits_name, "limits name"), limits, version)
        if check_u64(interval, "checkpoint interval") < 1:
            raise RunLogError("manifest: the checkpoint interval is at least 1")
        topology_values = tuple(topology_from_value(t) for t in check_tuple(topologies, "topologies"))
        versions = [t.registry_version for t in topology_values]
        if not versions or len(set(versions)) != len(versions):
            raise RunLogError("manifest: topologies must have distinct registry versions")
        logs = []
        entries = check_tuple(entries, "files")
        if tuple(check_tuple(e, "file entry", 4)[0] for e in entries) != subnet_ids:
            raise RunLogError("manifest: file entries do not list the subnets in order")
        for subnet_id, name, digest, size in entries:
            data = files.get(check_str(name, "file name"))
            if data is None:
                raise RunLogError(f"subnet log file {name!r} is missing")
            if len(data) != check_u64(size, "file size") or hashlib.sha256(data).digest() != check_bytes(digest, "digest", 32):
                raise RunLogError(f"subnet log file {name!r} does not match its manifest digest")
            logs.append(_decode_subnet(data, subnet_id))
    except CodecError as exc:
        raise RunLogError(f"run log: {exc}") from exc
    except ValueError as exc:  # e.g. a Limits/Topology constructor refusing a value
        raise RunLogError(f"run log: {exc}") from exc
    return RunLog(tuple(logs), module_names, limits_name, limits_value, interval, topology_values, build)


def decode_run_log(blob: bytes) -> RunLog:
    """The inverse of ``encode_run_log``; strict (``RunLogError``)."""
    try:
        tag, version, manifest, files = check_tuple(_decode(blob, "run blob"), "run blob", 4)
        _check_version(tag, version, _BLOB_TAG, "run blob")
        file_bytes = tuple(check_bytes(f, "subnet file") for f in check_tuple(files, "files"))
        manifest = check_bytes(manifest, "manifest")
    except CodecError as exc:
        raise RunLogError(f"run blob: {exc}") from exc
    return _assemble(manifest, {_subnet_file_name(i): data for i, data in enumerate(file_bytes)})


# -- the file system --------------------------------------------------------------------------

def write_run_log(log: RunLog, directory: Path | str) -> Path:
    """Write ``log`` as a run directory (subnet files first, the manifest last)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    manifest, files = _encode_files(log)
    for name, data in files.items():
        write_atomically(directory / name, data)
    write_atomically(directory / MANIFEST_FILE, manifest)
    return directory


def load_run_log(directory: Path | str) -> RunLog:
    """Read and check a run directory (``RunLogError`` if anything is missing or wrong)."""
    directory = Path(directory)
    try:
        manifest = (directory / MANIFEST_FILE).read_bytes()
    except OSError as exc:
        raise RunLogError(f"{directory} is not a recorded run: cannot read {MANIFEST_FILE}: {exc.strerror}") from exc
    files: dict[str, bytes] = {}
    for path in sorted(directory.glob("subnet-*.bin")):
        try:
            files[path.name] = path.read_bytes()
        except OSError as exc:
            raise RunLogError(f"cannot read {path.name}: {exc.strerror}") from exc
    return _assemble(manifest, files)
