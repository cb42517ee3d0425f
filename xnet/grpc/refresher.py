"""Background refill of the XNet slice pool, so block making never waits for the network.

Every ``interval_s`` one pass runs: for each peer subnet, ask ``wanted(subnet)`` what to
fetch (``None``: nothing), fetch it from the replicas of that subnet in ``PeerSelector``
order — the next replica on any failure — and hand the bytes to ``deliver(subnet, bytes)``.
A ``deliver`` that returns ``False`` refuses the bytes (they did not decode or verify): the
serving replica is penalised like a failed fetch and the next replica is asked.
Subnets are fetched in parallel, so one slow subnet delays no other. Block making reads
whatever the pool holds at that moment. Failures are counted per peer and kind, logged, and
never end the thread; ``deliver`` and ``wanted`` run on refresher threads and must be quick
and thread-safe.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter
from concurrent import futures
from typing import Callable, Mapping, Protocol, Sequence

from xnet.errors import FetchError, PeerRejected, PeerTimeout
from xnet.grpc.client import PeerEndpoint
from xnet.grpc.messages import GetStreamSliceRequest
from xnet.peer_selection import PeerSelector

__all__ = ["SliceClient", "SlicePoolRefresher"]

_log = logging.getLogger(__name__)

PeerDirectory = Callable[[], Mapping[str, Sequence[PeerEndpoint]]] | Mapping[str, Sequence[PeerEndpoint]]


class SliceClient(Protocol):
    """What the refresher needs from a client (``XNetClient`` fits)."""

    def get_stream_slice(self, peer: PeerEndpoint, request: GetStreamSliceRequest) -> bytes: ...


class SlicePoolRefresher:
    """A daemon thread that keeps fetching wanted slices from peer replicas.

    ``peers`` maps each peer subnet to its replicas (a mapping, or a callable read at every
    pass so registry changes apply). ``error_counts()`` and ``error_counts_by_kind()`` expose
    failures per peer node id; ``delivered_counts()`` successful deliveries per subnet.
    """

    def __init__(
        self,
        client: SliceClient,
        selector: PeerSelector,
        peers: PeerDirectory,
        wanted: Callable[[str], GetStreamSliceRequest | None],
        deliver: Callable[[str, bytes], bool | None],
        *,
        interval_s: float = 0.5,
        rng: random.Random | None = None,
        max_parallel_fetches: int = 4,
        max_attempts: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_fetched: Callable[[str, float], None] | None = None,
    ) -> None:
        if not interval_s > 0:
            raise ValueError("interval_s must be positive")
        if type(max_parallel_fetches) is not int or max_parallel_fetches < 1:
            raise ValueError("max_parallel_fetches must be a positive int")
        if max_attempts is not None and (type(max_attempts) is not int or max_attempts < 1):
            raise ValueError("max_attempts must be a positive int or None")
        self._client = client
        self._selector = selector
        self._peers = peers if callable(peers) else (lambda: peers)
        self._wanted = wanted
        self._deliver = deliver
        self._interval_s = float(interval_s)
        self._rng = rng if rng is not None else random.Random()
        self._max_parallel = max_parallel_fetches
        self._max_attempts = max_attempts
        self._clock = clock
        self._on_fetched = on_fetched  # (subnet, seconds) of every successful fetch: the node's metrics
        # Guards the selector, the rng and the counters, shared by the fetch threads.
        self._lock = threading.Lock()
        self._errors: Counter[tuple[str, str]] = Counter()
        self._callback_errors: Counter[str] = Counter()
        self._delivered: Counter[str] = Counter()
        self._passes = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._executor: futures.ThreadPoolExecutor | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Start the background thread (returns at once)."""
        if self._thread is not None:
            raise RuntimeError("refresher already started")
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="xnet-slice-refresher", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Ask the thread to stop after the current pass and join it."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    @property
    def running(self) -> bool:
        """Whether the background thread is alive."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def __enter__(self) -> "SlicePoolRefresher":
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = self._clock()
            try:
                self.refresh_once()
            except Exception:  # noqa: BLE001 - the refresher must outlive any bug in a pass
                _log.exception("slice pool refresh pass failed")
                with self._lock:
                    self._callback_errors["pass"] += 1
            self._stop.wait(max(0.0, self._interval_s - (self._clock() - started)))

    # -- one pass --------------------------------------------------------------------------

    def refresh_once(self) -> None:
        """Run one pass over all peer subnets and wait for it to finish."""
        directory = {subnet: tuple(replicas) for subnet, replicas in self._peers().items()}
        if self._executor is None:
            self._executor = futures.ThreadPoolExecutor(self._max_parallel, thread_name_prefix="xnet-fetch")
        pending = [self._executor.submit(self._refresh_subnet, s, directory[s]) for s in sorted(directory)]
        futures.wait(pending)
        for done in pending:
            if done.exception() is not None:  # _refresh_subnet catches everything; belt and braces
                _log.error("refreshing a subnet failed: %r", done.exception())
        with self._lock:
            self._passes += 1

    def _refresh_subnet(self, subnet: str, replicas: Sequence[PeerEndpoint]) -> None:
        try:
            request = self._wanted(subnet)
        except Exception:  # noqa: BLE001 - a callback bug must not stop other subnets
            _log.exception("wanted(%s) failed", subnet)
            self._count_callback_error("wanted")
            return
        if request is None or not replicas:
            return
        by_id = {replica.node_id: replica for replica in replicas}
        with self._lock:
            order = self._selector.order(by_id, self._rng)
        if self._max_attempts is not None:
            order = order[: self._max_attempts]
        for node_id in order:
            data = self._fetch(subnet, by_id[node_id], request)
            if data is None:
                continue
            try:
                accepted = self._deliver(subnet, data)
            except Exception:  # noqa: BLE001
                _log.exception("deliver(%s) failed", subnet)
                self._count_callback_error("deliver")
                return
            if accepted is False:
                # The bytes did not decode or verify: that replica misbehaved; ask the next one.
                with self._lock:
                    self._errors[(node_id, "RejectedSlice")] += 1
                    self._selector.record_failure(node_id)
                continue
            with self._lock:
                self._delivered[subnet] += 1
            return
        _log.warning("no replica of %s served %r", subnet, request)

    def _fetch(self, subnet: str, peer: PeerEndpoint, request: GetStreamSliceRequest) -> bytes | None:
        """The slice from ``peer``, or ``None`` after recording why not."""
        started = self._clock()
        try:
            data = self._client.get_stream_slice(peer, request)
        except Exception as exc:  # noqa: BLE001 - any failure means: try the next replica
            elapsed = max(0.0, self._clock() - started)
            if not isinstance(exc, FetchError):
                _log.exception("unexpected error fetching from %s", peer.node_id)
            else:
                _log.info("fetch from %s failed: %s", peer.node_id, exc)
            with self._lock:
                self._errors[(peer.node_id, type(exc).__name__)] += 1
                if isinstance(exc, PeerRejected) and exc.code == "NOT_FOUND":
                    # An honest answer ("no stream to you yet"), not a fault: no penalty, or
                    # every replica of a subnet that has not sent to us yet would be backed off.
                    self._selector.record_success(peer.node_id, elapsed)
                else:
                    self._selector.record_failure(
                        peer.node_id, timed_out=isinstance(exc, PeerTimeout), latency_s=elapsed)
            return None
        elapsed = max(0.0, self._clock() - started)
        with self._lock:
            self._selector.record_success(peer.node_id, elapsed)
        if self._on_fetched is not None:
            self._on_fetched(subnet, elapsed)
        return data

    def _count_callback_error(self, kind: str) -> None:
        with self._lock:
            self._callback_errors[kind] += 1

    # -- counters --------------------------------------------------------------------------

    def error_counts(self) -> dict[str, int]:
        """Failed fetches per peer node id."""
        totals: Counter[str] = Counter()
        with self._lock:
            for (node_id, _), count in self._errors.items():
                totals[node_id] += count
        return dict(sorted(totals.items()))

    def error_counts_by_kind(self) -> dict[tuple[str, str], int]:
        """Failed fetches per ``(peer node id, error class name)``."""
        with self._lock:
            return dict(sorted(self._errors.items()))

    def callback_error_counts(self) -> dict[str, int]:
        """Exceptions raised by ``wanted`` / ``deliver`` (and whole passes), per kind."""
        with self._lock:
            return dict(sorted(self._callback_errors.items()))

    def delivered_counts(self) -> dict[str, int]:
        """Slices handed to ``deliver``, per subnet."""
        with self._lock:
            return dict(sorted(self._delivered.items()))

    @property
    def passes(self) -> int:
        """Completed passes."""
        with self._lock:
            return self._passes
