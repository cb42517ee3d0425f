"""The slice fetcher shared by the refresher threads and the node's round thread (shell).

``SharedSliceFetcher`` puts the pure ``SliceFetcher`` and its ``SlicePool`` behind one lock:

* the refresher's threads call ``wanted(X)`` and ``deliver(X, data)`` — one thread per peer
  subnet at a time, several subnets at once;
* the node calls ``remember_indices`` after each block and builds blocks from the pool inside
  ``with pool() as p:``.

``deliver`` decodes and verifies outside the lock — the slow step, a signature check — so
subnets are verified in parallel and block making never waits for one. An answer the
decoder refuses (``SliceDecodeError``) or the check refuses (``FetchedSliceRejected``) is
converted here, at one boundary, into ``deliver``'s ``False`` (the refresher then penalises
that replica and asks the next one), logged, and counted per ``(X, error class name)``.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

from state_manager.certified_slice import SliceDecodeError
from state_manager.messages import SubnetId
from state_manager.replicated_state import ReplicatedState
from xnet.fetched_slice import FetchedSliceRejected
from xnet.grpc.messages import GetStreamSliceRequest
from xnet.payload_validator import PublicKeyLookup
from xnet.slice_fetcher import SliceFetcher
from xnet.slice_pool import SlicePool

__all__ = ["RegistryKeys", "SharedSliceFetcher"]

_log = logging.getLogger(__name__)

#: The key lookup and the registry version fetched slices are verified at, read per answer.
RegistryKeys = Callable[[], tuple[PublicKeyLookup, int]]


class SharedSliceFetcher:
    """A thread-safe ``SliceFetcher`` (module docstring); ``name`` prefixes its log lines."""

    def __init__(self, fetcher: SliceFetcher, registry_keys: RegistryKeys, *, name: str = "") -> None:
        self._fetcher = fetcher
        self._registry_keys = registry_keys
        self._name = name or fetcher.own_subnet
        self._lock = threading.Lock()
        self._rejected: Counter[tuple[SubnetId, str]] = Counter()

    # -- the node's round thread ----------------------------------------------------------

    def remember_indices(self, state: ReplicatedState, remotes: Iterable[SubnetId]) -> None:
        """``SliceFetcher.remember_indices`` under the lock."""
        with self._lock:
            self._fetcher.remember_indices(state, remotes)

    @contextmanager
    def pool(self) -> Iterator[SlicePool]:
        """The slice pool, held locked for the ``with`` block (no fetch is pooled meanwhile)."""
        with self._lock:
            yield self._fetcher.pool

    # -- the refresher's threads ----------------------------------------------------------

    def wanted(self, remote: SubnetId) -> GetStreamSliceRequest | None:
        """``SliceFetcher.next_request`` under the lock."""
        with self._lock:
            return self._fetcher.next_request(remote)

    def deliver(self, remote: SubnetId, data: bytes) -> bool:
        """Decode, verify, check and pool an answer from ``remote``; ``False``: the bytes are bad."""
        with self._lock:
            if self._fetcher.is_last_answer(remote, data):
                return True  # the same answer as last time: nothing new, nothing wrong
        public_key_for, registry_version = self._registry_keys()
        try:
            decoded = self._fetcher.decode(remote, data, public_key_for, registry_version)
            with self._lock:
                self._fetcher.accept(remote, data, decoded)
        except (SliceDecodeError, FetchedSliceRejected) as exc:
            with self._lock:
                self._rejected[(remote, type(exc).__name__)] += 1
            _log.info("%s: slice from %s refused: %s", self._name, remote, exc)
            return False
        return True

    # -- counters -------------------------------------------------------------------------

    def rejected_slices(self) -> dict[tuple[SubnetId, str], int]:
        """Answers refused, per ``(remote subnet, error class name)``."""
        with self._lock:
            return dict(sorted(self._rejected.items()))
