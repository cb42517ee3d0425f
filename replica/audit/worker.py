"""The executor-side shell of the Spark job: run-log cache, GC tuning, the task functions.

A Spark Python worker is reused across tasks, so the broadcast run-log blob is decoded and
its batches prepared once per worker process (cached by digest) and then shared, read-only,
by every replica the worker replays. ``replay_task`` and ``states_task`` are what
``mapPartitions`` calls; they bind the pure ``executor`` functions to that cache and to
``isolation.run_isolated``. ``describe_worker`` is what a worker says about itself: its
executor, interpreter and build, and which compiled modules it actually loaded.
"""

from __future__ import annotations

import gc
import hashlib
import importlib
import importlib.machinery
import os
import sys
import time
from functools import partial
from pathlib import Path
from typing import Iterable, Iterator

from state_manager.encoding import encode

from .build import build_to_value, current_build
from .executor import replay_partition, states_partition
from .perturbation import parse_perturbation
from .inputs import RunInputs, prepare_run
from .isolation import run_isolated
from .run_log import decode_run_log

__all__ = ["tune_gc", "inputs_for", "replay_task", "states_task", "init_local_worker", "local_replay_chunk",
           "describe_worker", "executor_name"]

_CACHE: dict[bytes, RunInputs] = {}
_GC_TUNED = False


def tune_gc() -> None:
    """Freeze what is loaded and collect rarely: replays allocate many short-lived, acyclic
    trie nodes, and the default thresholds spend a third of the time scanning them."""
    global _GC_TUNED
    if not _GC_TUNED:
        gc.collect()
        gc.freeze()
        gc.set_threshold(100_000, 50, 100)
        _GC_TUNED = True


def inputs_for(blob: bytes) -> RunInputs:
    """The prepared run of ``blob``, decoded at most once per process (the last one kept)."""
    digest = hashlib.sha256(blob).digest()
    run = _CACHE.get(digest)
    if run is None:
        _CACHE.clear()
        run = _CACHE[digest] = prepare_run(decode_run_log(blob))
        tune_gc()
    return run


def _isolated(blob: bytes, mode: str, seed: int, items: list) -> Iterator[tuple]:
    try:
        yield from run_isolated(blob, mode, seed, items)
    except Exception as exc:  # the whole group failed: one error row per item
        message = f"{type(exc).__name__}: {exc}"
        for item in items:
            if mode == "rows":
                yield (item[0], item[1], parse_perturbation(item[2]).start, None, None, message, None)
            else:
                yield (item[0], -1, None, None, None, message)


def replay_task(broadcast, specs: Iterable) -> Iterator[tuple]:
    """``mapPartitions`` body: spec rows ``(replica, subnet, perturbation, ...)`` → result rows."""
    blob = broadcast.value
    work = ((row[0], row[1], row[2]) for row in specs)
    return replay_partition(work, inputs_for(blob), partial(_isolated, blob), current_build().fingerprint)


def states_task(broadcast, requests: Iterable) -> Iterator[tuple]:
    """``mapPartitions`` body of the drill-down: requests → state rows."""
    blob = broadcast.value
    work = ((r[0], r[1], r[2], r[3]) for r in requests)
    return states_partition(work, inputs_for(blob), partial(_isolated, blob))


_LOCAL_BLOB: bytes | None = None


def init_local_worker(blob: bytes) -> None:
    """Process-pool initializer: keep the run-log blob and prepare it once (benchmark baseline)."""
    global _LOCAL_BLOB
    _LOCAL_BLOB = blob
    inputs_for(blob)


def local_replay_chunk(specs: list) -> list:
    """The same work as ``replay_task`` for a plain process pool (benchmark baseline)."""
    blob = _LOCAL_BLOB
    if blob is None:
        raise RuntimeError("init_local_worker was not run in this process")
    return list(replay_partition(((r[0], r[1], r[2]) for r in specs), inputs_for(blob), partial(_isolated, blob),
                                 current_build().fingerprint))


def executor_name(cwd: Path) -> str:
    """A standalone executor works in ``<worker dir>/app-…/<executor id>``; anything else is the
    driver's machine (``local[*]``)."""
    return f"{cwd.parent.name}/{cwd.name}" if cwd.parent.name.startswith("app-") else "local"


def _loads_compiled(module: str) -> bool:
    path = getattr(importlib.import_module(module), "__file__", None) or ""
    return path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def describe_worker(items: Iterable) -> Iterator[tuple]:
    """``mapPartitions`` body: ``(executor, pid, python, encoded build, compiled modules loaded,
    {module: file} of the project's top package and its first dependencies)``.
    Sleeps a little so that a handful of these tasks spread over every executor."""
    for _ in items:
        pass
    time.sleep(0.2)
    build = current_build()
    loaded = tuple(m for m in build.compiled if _loads_compiled(m))
    origins = {name: str(getattr(importlib.import_module(name), "__file__", "") or "")
               for name in ("replica", "msgpack", "sortedcontainers", "pyblst")}
    yield executor_name(Path.cwd()), os.getpid(), sys.executable, encode(build_to_value(build)), loaded, origins
