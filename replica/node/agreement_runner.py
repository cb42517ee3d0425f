"""Drives one node's ``AgreementNode`` with a real clock, a timer thread and gRPC (shell).

Messages from peers (``deliver``, called by the ``AgreementServer`` threads) and timer
expiries (``on_timer`` at the node's ``wakeup_at``) are fed to the protocol one at a time,
under one lock, with ``now = clock()``; the outputs are carried out in order, still under
the lock, so a ``Persist`` is done before the sends after it:

* ``Persist``      → ``persist(message)`` (a node process appends it to a file and syncs);
* ``Send``/``Broadcast`` → encoded once and pushed with the ``AgreementClient``;
* ``Finalized``    → ``on_finalized(output)`` (a node process stores and executes the block);
* anything else    → ``on_output(output)`` (ingress for the pool, certifications, refusals).

A callback that needs to feed the protocol (the node's own certification share after it
executed a block, ingress it admitted while holding the lock) uses ``post``: the input is
queued and run under the lock right after the current outputs, never re-entering the
protocol in the middle of a step.

The client's ``send`` must return at once and never call back into a runner on the same
thread (the ``AgreementClient``'s gRPC futures do not): it runs under the lock, and a
synchronous round trip to a peer that sends back would deadlock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Callable, Optional

from consensus_stub.agreement.messages import Message, Status, encode_message
from consensus_stub.agreement.protocol import AgreementNode, Broadcast, Finalized, Output, Persist, Send

from .agreement_transport import AgreementClient

__all__ = ["AgreementRunner"]

_log = logging.getLogger(__name__)
_MAX_WAIT_S = 0.5


class AgreementRunner:
    def __init__(
        self,
        node: AgreementNode,
        client: AgreementClient | None = None,
        *,
        persist: Callable[[Message], None] = lambda message: None,
        on_finalized: Callable[[Finalized], None] = lambda output: None,
        on_output: Callable[[Output], None] = lambda output: None,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.node = node
        self._client = client
        self._persist, self._on_finalized, self._on_output = persist, on_finalized, on_output
        self._clock = clock
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.failure: Optional[BaseException] = None
        self.refused_statuses = 0
        self._posted: deque[Callable[[AgreementNode, int], list[Output]]] = deque()

    def start(self, client: AgreementClient | None = None) -> None:
        """Send the protocol's first outputs and run its timers; ``client`` (if not given at
        construction: a node binds its own endpoints after restoring) carries its messages."""
        if client is not None:
            self._client = client
        if self._client is None:
            raise RuntimeError("an AgreementRunner needs a client to start")
        with self._lock:
            self._carry_out(self.node.start(self._clock()))
            self._drain()
        self._thread = threading.Thread(target=self._loop, name=f"agreement-{self.node.node_id}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def deliver(self, sender: str, message: Message) -> None:
        """A message from ``sender`` (authenticated by its TLS certificate). Signed artifacts
        may come from any peer (nodes relay them); a ``Status`` speaks for its sender only."""
        if isinstance(message, Status) and message.sender != sender:
            self.refused_statuses += 1
            return
        with self._lock:
            self._carry_out(self.node.on_message(message, self._clock()))
            self._drain()
        self._wake.set()   # the wakeup time may have moved

    def submit(self, outputs_of: Callable[[AgreementNode, int], list[Output]]) -> None:
        """Run a local input (``submit_ingress``, ``submit_certification_share``) under the lock."""
        with self._lock:
            self._carry_out(outputs_of(self.node, self._clock()))
            self._drain()

    def post(self, outputs_of: Callable[[AgreementNode, int], list[Output]]) -> None:
        """Queue a local input; it runs under the lock after the outputs being carried out
        (safe from inside an output callback, where ``submit`` would deadlock)."""
        self._posted.append(outputs_of)
        self._wake.set()

    def locked(self, action: Callable[[], object]) -> object:
        """``action()`` under the protocol's lock (reads and changes of what the callbacks own)."""
        with self._lock:
            result = action()
            self._drain()
            return result

    def _drain(self) -> None:
        while self._posted:
            outputs_of = self._posted.popleft()
            self._carry_out(outputs_of(self.node, self._clock()))

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                self._wake.clear()   # before reading wakeup_at: a deliver after this wakes us
                with self._lock:
                    now = self._clock()
                    self._drain()
                    if now >= self.node.wakeup_at:
                        self._carry_out(self.node.on_timer(now))
                        self._drain()
                    wait_s = (self.node.wakeup_at - self._clock()) / 1e9
                if wait_s > 0:
                    self._wake.wait(min(wait_s, _MAX_WAIT_S))
        except BaseException as exc:  # noqa: BLE001 - kept for the owner to re-raise
            _log.exception("agreement of %s stopped", self.node.node_id)
            self.failure = exc

    def _carry_out(self, outputs: list[Output]) -> None:
        peers = [n for n in self.node.config.subnet.node_ids if n != self.node.node_id]
        for output in outputs:
            if isinstance(output, Persist):
                self._persist(output.message)
            elif isinstance(output, Send):
                self._client.send(output.to, encode_message(output.message))
            elif isinstance(output, Broadcast):
                data = encode_message(output.message)
                for peer in peers:
                    self._client.send(peer, data)
            elif isinstance(output, Finalized):
                self._on_finalized(output)
            else:
                self._on_output(output)
