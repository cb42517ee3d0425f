"""Where a live audit's simulated replicas live between micro-batches: replica hosts.

A live audit advances every replica by the heights each micro-batch brings. Replaying a
replica from its start every time would cost the whole run per micro-batch, so a replica's
state is kept: each ``(partition, hash seed)`` of the plan has one *host*, a process
(``python -m replica.audit.live_host``) started under that ``PYTHONHASHSEED`` by the first
Spark task that needs it and reached by every later one over a local socket, whichever Python
worker runs the task. Spark schedules the tasks; a host only keeps states, so a partition's
replicas continue where they stood (``replay.ReplicaRun``: the offline replay, a batch at a time).

A host that is gone (the audit restarted, the process was killed) is started again and its
replicas resume from their snapshots: every ``SNAPSHOT_EVERY`` checkpoint intervals each replica
writes its own state (``replicas/<replica>/<height>.bin``), restored exactly as a restart
perturbation reloads a state, and replays from there the batches it has already reported
without reporting them again (they are read from the feed). The unperturbed baseline replica
of each subnet also writes the run's checkpoints (``checkpoints/<subnet>/<height>.bin``),
from which ``checkpoint@k`` replicas start, as offline replicas start from a run log's. The
driver names that one replica (``replicas.checkpoint_writers``): the plan's other unperturbed
replicas live in other hosts, and two writers of one checkpoint race on its temporary file.

Requests and answers are canonical msgpack frames (4-byte length first). A request names
the replicas ``(replica, subnet, perturbation, reported, writes_checkpoints)`` — ``reported``:
the last height the audit holds a row of, -1 if none — the target height per subnet and the
new batches; the answer is the rows of every height after ``reported`` up to the target, as
``executor.replay_partition`` gives them. A replica whose replay fails reports one error row
and is left alone afterwards (the driver no longer asks for it).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import logging
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

from message_routing.batch import Batch, decode_batch
from state_manager.codec import CodecError, check_tuple
from state_manager.durable_files import write_atomically
from state_manager.encoding import EncodingError, decode, encode, encode_unchecked
from state_manager.state_codec import encode_state

from .build import current_build
from .executor import hash_seed_of
from .errors import IsolationError, ReplayError
from .isolation import child_environment
from .live_feed import FeedReader
from .perturbation import NONE, parse_perturbation
from .replay import ReplayContext, ReplicaRun, load_canister_classes

__all__ = ["ReplicaHost", "advance_task", "host_address", "call_host", "stop_hosts", "snapshot_path", "checkpoint_path",
           "read_checkpoint", "has_checkpoint", "START_TIMEOUT_S"]

_log = logging.getLogger(__name__)
_SNAPSHOT_TAG = "replica-live-snapshot"
#: ``[tag, version, replica, state bytes]``: a replica's own state at a height (the file's name).
SNAPSHOT_VERSION = 1
#: Decoded batches a host keeps (all replicas of a host read the same ones; late starters and
#: resumed replicas read older ones, from the feed once).
MAX_KEPT_BATCHES = 50_000
#: A replica snapshots its own state every this many checkpoint intervals.
SNAPSHOT_EVERY = 5
#: A host waits this long for its first connection, and at most this long between requests
#: while its audit process is gone.
_IDLE_S = 1.0
START_TIMEOUT_S = 120.0


def host_address(audit_dir: Path | str, key: str) -> str:
    """An abstract Unix socket name (no file, no length limit of a path) unique to the audit
    directory and the host's key."""
    digest = hashlib.sha256(str(Path(audit_dir).resolve()).encode()).hexdigest()[:16]
    return f"\0replica-live-{digest}-{key}"


def snapshot_path(audit_dir: Path, replica: int, height: int) -> Path:
    return audit_dir / "replicas" / str(replica) / f"{height:010d}.bin"


def checkpoint_path(audit_dir: Path, subnet: str, height: int) -> Path:
    return audit_dir / "checkpoints" / subnet / f"{height:010d}.bin"


def has_checkpoint(audit_dir: Path, subnet: str, height: int) -> bool:
    return checkpoint_path(audit_dir, subnet, height).exists()


def read_checkpoint(audit_dir: Path, subnet: str, height: int) -> bytes | None:
    try:
        return checkpoint_path(audit_dir, subnet, height).read_bytes()
    except FileNotFoundError:
        return None


def _send(conn: socket.socket, value: Any) -> None:
    data = encode_unchecked(value)
    conn.sendall(len(data).to_bytes(4, "big") + data)


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    parts, got = [], 0
    while got < n:
        part = conn.recv(min(n - got, 1 << 20))
        if not part:
            raise IsolationError("the replica host closed the connection")
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def _recv(conn: socket.socket) -> Any:
    size = int.from_bytes(_recv_exact(conn, 4), "big")
    data = _recv_exact(conn, size)
    try:
        return decode(data, max_bytes=max(size, 1))
    except EncodingError as exc:
        raise IsolationError(f"a malformed replica host frame: {exc}") from exc


class ReplicaHost:
    """The kept replicas of one host (module docstring)."""

    def __init__(self, audit_dir: Path, feed: FeedReader) -> None:
        self.audit_dir, self.feed = audit_dir, feed
        self.runs: dict[int, ReplicaRun] = {}
        self.failed: set[int] = set()
        self.build = current_build().fingerprint
        self._context: tuple[bytes, ReplayContext] | None = None
        self._classes: tuple[tuple[str, ...], tuple[type, ...]] | None = None
        self._batches: dict[tuple[str, int], Batch] = {}

    def context(self) -> ReplayContext:
        """The feed's context (re-read when the recorder rewrote it: a new registry version)."""
        data = (self.feed.root / "context.bin").read_bytes()
        if self._context is None or self._context[0] != data:
            context = self.feed.context()
            if self._classes is None or self._classes[0] != context.canister_modules:
                self._classes = (context.canister_modules, load_canister_classes(context.canister_modules))
            self._context = (data, ReplayContext(self._classes[1], context.limits, context.topologies))
        return self._context[1]

    def _batch(self, subnet: str, height: int, target: int) -> Batch:
        batch = self._batches.get((subnet, height))
        if batch is None:   # an older height (a replica resuming or starting late): up to the target at once
            for h, data, _, _ in self.feed.entries(subnet, height, target):
                self._batches[(subnet, h)] = decode_batch(data)
            batch = self._batches.get((subnet, height))
        if batch is None:
            raise ReplayError(f"no batch of {subnet} at height {height}")
        return batch

    def _start(self, replica: int, subnet: str, text: str, reported: int, interval: int) -> ReplicaRun:
        perturbation = parse_perturbation(text)
        context = self.context()
        snapshots = sorted(self.audit_dir.glob(f"replicas/{replica}/*.bin"))
        for path in reversed(snapshots):
            height = int(path.stem)
            if height <= reported and height >= perturbation.start:
                try:
                    tag, version, number, state = check_tuple(decode(path.read_bytes()), "snapshot", 4)
                except (OSError, EncodingError, CodecError) as exc:   # an older snapshot, or the start, will do
                    _log.warning("snapshot %s not used: %s", path, exc)
                    continue
                if tag == _SNAPSHOT_TAG and version == SNAPSHOT_VERSION and number == replica:
                    return ReplicaRun(state, perturbation, context, height=height)
        if perturbation.start:
            data = read_checkpoint(self.audit_dir, subnet, perturbation.start)
            if data is None:
                raise ReplayError(f"the live audit has no checkpoint of {subnet} at height {perturbation.start}")
        else:
            data = self.feed.genesis(subnet)
        return ReplicaRun(data, perturbation, context)

    def _keep(self, replica: int, run: ReplicaRun, subnet: str, baseline: bool, interval: int) -> bool:
        """The baseline's checkpoint at every checkpoint height (as a run log has them); a
        snapshot of the replica's own state every ``SNAPSHOT_EVERY`` of them (encoding a state
        costs about as much as executing a few batches, so not at every one). Whether it
        snapshotted."""
        if run.height % interval or run.height == 0:
            return False
        snapshot = run.height % (interval * SNAPSHOT_EVERY) == 0
        if not (snapshot or baseline):
            return False
        state = encode_state(run.state)
        if snapshot:
            path = snapshot_path(self.audit_dir, replica, run.height)
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, encode((_SNAPSHOT_TAG, SNAPSHOT_VERSION, replica, state)), sync=False)
        if baseline:
            checkpoint = checkpoint_path(self.audit_dir, subnet, run.height)
            checkpoint.parent.mkdir(parents=True, exist_ok=True)
            # not fsynced (nor are snapshots): after a power loss the baseline writes it again
            write_atomically(checkpoint, state, sync=False)
        return snapshot

    def _prune(self, replica: int, reported: int) -> None:
        """Snapshots older than the newest one at or below what the audit has kept go."""
        snapshots = sorted(self.audit_dir.glob(f"replicas/{replica}/*.bin"))
        kept = [p for p in snapshots if int(p.stem) <= reported]
        for path in kept[:-1]:
            path.unlink(missing_ok=True)

    def advance(self, specs: list, targets: dict[str, int], batches: list, interval: int) -> Iterator[tuple]:
        for subnet, height, data in batches:
            self._batches[(subnet, height)] = decode_batch(data)
        if len(self._batches) > MAX_KEPT_BATCHES:   # the oldest heights go first
            for key in sorted(self._batches, key=lambda k: k[1])[: len(self._batches) - MAX_KEPT_BATCHES]:
                del self._batches[key]
        for replica, subnet, text, reported, writes_checkpoints in specs:
            if replica in self.failed:
                continue
            target = targets.get(subnet, 0)
            at = reported
            try:
                run = self.runs.get(replica)
                if run is None or run.height > reported:   # new here, or the audit lost rows it had
                    run = self._start(replica, subnet, text, reported, interval)
                    self.runs[replica] = run
                    if run.height > reported:
                        at = run.height
                        trees = run.trees
                        yield (replica, subnet, run.height, trees.full_hash, trees.certified_root, None, self.build)
                run.context = self.context()   # a registry version may have come since
                # only the driver's named writer: any other unperturbed replica (same states) would race it
                baseline = bool(writes_checkpoints) and parse_perturbation(text) == NONE
                snapshotted = False
                while run.height < target:
                    at = run.height + 1
                    height, _, trees = run.step(self._batch(subnet, at, target))
                    snapshotted = self._keep(replica, run, subnet, baseline, interval) or snapshotted
                    if height > reported:
                        yield (replica, subnet, height, trees.full_hash, trees.certified_root, None, self.build)
                if snapshotted:
                    self._prune(replica, reported)
            except Exception as exc:  # a replica's failure is a finding, reported as a row (as offline)
                self.failed.add(replica)
                self.runs.pop(replica, None)
                yield (replica, subnet, max(at, reported + 1), None, None, f"{type(exc).__name__}: {exc}", self.build)


def advance_task(payload: tuple, items) -> Iterator[tuple]:
    """``mapPartitions`` body of a live micro-batch: ``(replica, subnet, perturbation, reported,
    writes_checkpoints)`` items → the rows their hosts answer, one host per hash seed of the partition (the
    replicas without one run under ``worker_seed``, the seed Spark gives its Python workers).
    A host that fails while answering is started again once (its replicas resume from their
    snapshots); a second failure fails the task, so Spark retries it."""
    from pyspark import TaskContext

    audit_dir, feed_dir, parent, worker_seed, targets, batches, interval = payload
    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    by_seed: dict[int, list] = {}
    for item in items:
        seed = hash_seed_of(item[2])
        by_seed.setdefault(worker_seed if seed is None else seed, []).append(tuple(item))
    for seed in sorted(by_seed):
        key = f"p{partition}-s{seed}"
        try:
            rows = call_host(Path(audit_dir), Path(feed_dir), key, seed, parent, by_seed[seed], targets, batches,
                             interval)
        except (IsolationError, OSError):
            rows = call_host(Path(audit_dir), Path(feed_dir), key, seed, parent, by_seed[seed], targets, batches,
                             interval)
        yield from rows


def _parent_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def serve(address: str, audit_dir: Path, feed_dir: Path, parent: int) -> int:
    """Answer requests on ``address`` until asked to stop or the audit process (``parent``) is gone."""
    host = ReplicaHost(audit_dir, FeedReader(feed_dir))
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(address)
    server.listen(4)
    server.settimeout(_IDLE_S)
    while True:
        try:
            conn, _ = server.accept()
        except socket.timeout:
            if not _parent_alive(parent):
                return 0
            continue
        with conn:
            conn.settimeout(None)
            try:
                request = _recv(conn)
                if request[0] == "stop":
                    _send(conn, ("stopped", os.getpid()))
                    return 0
                if request[0] == "pid":
                    _send(conn, ("pid", os.getpid()))
                    continue
                _, specs, targets, batches, interval = check_tuple(request, "request", 5)
                rows = list(host.advance(list(specs), dict(targets), list(batches), interval))
                _send(conn, ("rows", tuple(rows)))
            except (IsolationError, CodecError, OSError, ValueError) as exc:
                try:
                    _send(conn, ("error", f"{type(exc).__name__}: {exc}"))
                except OSError:
                    pass


def _connect(address: str) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(address)
        return conn
    except OSError:
        conn.close()
        return None


def _open(audit_dir: Path, feed_dir: Path, key: str, hash_seed: int, parent: int) -> socket.socket:
    """A connection to the host ``key``, started (once: a lock file guards it) if it is not running."""
    address = host_address(audit_dir, key)
    conn = _connect(address)
    if conn is not None:
        return conn
    hosts = audit_dir / "hosts"
    hosts.mkdir(parents=True, exist_ok=True)
    with open(hosts / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        conn = _connect(address)
        if conn is not None:
            return conn
        log = open(hosts / f"{key}.log", "ab")
        process = subprocess.Popen(
            [sys.executable, "-m", "replica.audit.live_host", "--key", key, "--audit-dir", str(audit_dir),
             "--feed", str(feed_dir), "--parent", str(parent)],
            env=child_environment(hash_seed), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)   # it outlives the Python worker that started it; it watches the audit
        log.close()
        (hosts / f"{key}.pid").write_text(str(process.pid))
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            conn = _connect(address)
            if conn is not None:
                return conn
            if process.poll() is not None:
                raise IsolationError(f"replica host {key} exited with {process.returncode}: see {hosts / key}.log")
            if time.monotonic() > deadline:
                raise IsolationError(f"replica host {key} did not listen within {START_TIMEOUT_S:.0f} s")
            time.sleep(0.05)


def call_host(audit_dir: Path, feed_dir: Path, key: str, hash_seed: int, parent: int, specs: list,
              targets: dict[str, int], batches: list, interval: int) -> list[tuple]:
    """The rows host ``key`` answers for ``specs`` (module docstring)."""
    conn = _open(audit_dir, feed_dir, key, hash_seed, parent)
    with conn:
        _send(conn, ("advance", tuple(tuple(s) for s in specs), tuple(sorted(targets.items())),
                     tuple(tuple(b) for b in batches), interval))
        answer = _recv(conn)
    if answer[0] != "rows":
        raise IsolationError(f"replica host {key}: {answer[1]}")
    return [tuple(r) for r in answer[1]]


def stop_hosts(audit_dir: Path, timeout_s: float = 10.0) -> list[int]:
    """Stop every host of ``audit_dir`` this machine runs: asked to stop, then by its pid
    (SIGKILL) if it is still alive after ``timeout_s``; the pids stopped."""
    stopped = []
    for pid_file in sorted((audit_dir / "hosts").glob("*.pid")):
        key = pid_file.stem
        try:
            pid = int(pid_file.read_text())
        except (OSError, ValueError):
            continue
        conn = _connect(host_address(audit_dir, key))
        if conn is not None:
            with conn:
                try:
                    _send(conn, ("stop",))
                    _recv(conn)
                except (OSError, IsolationError):
                    pass
        deadline = time.monotonic() + timeout_s
        while _alive_child(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive_child(pid) and _is_host(pid):
            os.kill(pid, 9)
        pid_file.unlink(missing_ok=True)
        stopped.append(pid)
    return stopped


def _alive_child(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    return _parent_alive(pid) and _is_host(pid)


def _is_host(pid: int) -> bool:
    try:
        return b"replica.audit.live_host" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m replica.audit.live_host")
    parser.add_argument("--key", required=True)
    parser.add_argument("--audit-dir", required=True)
    parser.add_argument("--feed", required=True)
    parser.add_argument("--parent", type=int, required=True)
    args = parser.parse_args(argv)
    from .worker import tune_gc

    tune_gc()
    audit_dir = Path(args.audit_dir)
    return serve(host_address(audit_dir, args.key), audit_dir, Path(args.feed), args.parent)


if __name__ == "__main__":
    sys.exit(main())
