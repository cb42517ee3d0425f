"""Replays under another ``PYTHONHASHSEED``: a subprocess running ``replica.audit.child``.

The hash seed is fixed when a Python process starts, so a replica perturbed with
``hashseed:S`` runs in a child process started with ``PYTHONHASHSEED=S`` and the parent's
``sys.path`` (so code shipped to a Spark executor as a zip is found there too). The child
gets the run-log blob and the work on stdin and answers on stdout, both canonical msgpack;
it runs the very functions of ``executor``. A child that fails or answers garbage raises
``IsolationError`` (the callers turn that into error rows).
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Iterator

from state_manager.codec import CodecError, check_tuple
from state_manager.encoding import EncodingError, decode, encode_unchecked

from .errors import IsolationError

__all__ = ["run_isolated", "check_child_hash_seed", "encode_request", "decode_request", "encode_answer", "decode_answer",
           "MODES"]

_REQUEST_TAG = "replica-audit-child"
_ANSWER_TAG = "replica-audit-answer"
_VERSION = 1
MODES = ("rows", "states")   # what ``replica.audit.child`` does; other children name their own


def encode_request(mode: str, hash_seed: int, blob: bytes, items: list) -> bytes:
    return encode_unchecked((_REQUEST_TAG, _VERSION, mode, hash_seed, blob, tuple(tuple(i) for i in items)))


def decode_request(data: bytes, modes: tuple[str, ...] = MODES) -> tuple[str, int, bytes, tuple]:
    try:
        tag, version, mode, seed, blob, items = check_tuple(decode(data, max_bytes=max(len(data), 1)), "request", 6)
    except (EncodingError, CodecError) as exc:
        raise IsolationError(f"malformed child request: {exc}") from exc
    if tag != _REQUEST_TAG or version != _VERSION or mode not in modes or not isinstance(blob, bytes) \
            or type(seed) is not int:
        raise IsolationError("malformed child request")
    return mode, seed, blob, items


def encode_answer(rows: list) -> bytes:
    return encode_unchecked((_ANSWER_TAG, _VERSION, tuple(tuple(r) for r in rows)))


def decode_answer(data: bytes) -> tuple:
    try:
        tag, version, rows = check_tuple(decode(data, max_bytes=max(len(data), 1)), "answer", 3)
    except (EncodingError, CodecError) as exc:
        raise IsolationError(f"malformed child answer: {exc}") from exc
    if tag != _ANSWER_TAG or version != _VERSION:
        raise IsolationError("malformed child answer")
    return rows


def child_environment(hash_seed: int) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = str(hash_seed)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return env


def check_child_hash_seed(seed: int) -> None:
    """Refuse to work in a child that does not run under the hash seed it was asked for."""
    if os.environ.get("PYTHONHASHSEED") != str(seed):
        raise IsolationError(f"the child was asked for PYTHONHASHSEED={seed} but runs with "
                             f"{os.environ.get('PYTHONHASHSEED')!r}")


def run_isolated(blob: bytes, mode: str, hash_seed: int, items: list, *,
                 child_module: str = "replica.audit.child", modes: tuple[str, ...] = MODES) -> Iterator[tuple]:
    """Run ``items`` in ``python -m child_module`` under ``hash_seed`` (by default the
    ``executor``'s rows or states work of ``replica.audit.child``)."""
    if mode not in modes:
        raise IsolationError(f"unknown mode {mode!r}")
    process = subprocess.run(
        [sys.executable, "-m", child_module], input=encode_request(mode, hash_seed, blob, items),
        capture_output=True, env=child_environment(hash_seed), check=False,
    )
    if process.returncode != 0:
        tail = process.stderr.decode("utf-8", "replace").strip().splitlines()[-5:]
        raise IsolationError(f"replay child (PYTHONHASHSEED={hash_seed}) exited with {process.returncode}: "
                             + " | ".join(tail))
    return iter(decode_answer(process.stdout))
