"""The one live status display for long work (start-up, settling, audits, load, benchmarks).

``Progress(label, total)`` shows ``label [bar] done/total elapsed detail`` (no bar without a
``total``): redrawn in place on a terminal by ``rich``, and written as a plain line at most
every ``log_every_s`` seconds otherwise, so logs stay readable. ``finish(summary)`` prints the
closing line with the elapsed time. ``quiet`` shows nothing. Thread-safe: ``rich`` redraws
from its own thread, and the audit's Spark poller calls ``update`` from another.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text

__all__ = ["Progress"]

_BAR_WIDTH = 24


class Progress:
    def __init__(self, label: str = "", total: int | None = None, *, stream: TextIO | None = None,
                 quiet: bool = False, log_every_s: float = 2.0) -> None:
        self.label = label
        self.total = total
        self.quiet = quiet
        self.log_every_s = log_every_s
        self.started = time.monotonic()
        self.stream = stream if stream is not None else sys.stderr
        self._console = Console(file=self.stream, highlight=False)
        self._lock = threading.Lock()
        self._live: Live | None = None
        self._last_logged = float("-inf")

    def _line(self, done: int | None, detail: str) -> str:
        parts = [self.label] if self.label else []
        if done is not None and self.total:
            filled = min(_BAR_WIDTH, _BAR_WIDTH * done // self.total)
            parts.append(f"[{'#' * filled}{'-' * (_BAR_WIDTH - filled)}] {done}/{self.total}")
        elif done is not None:
            parts.append(str(done))
        parts.append(f"{time.monotonic() - self.started:5.1f}s")
        if detail:
            parts.append(detail)
        return " ".join(parts)

    def child(self, label: str, total: int | None = None) -> "Progress":
        """A display for one stage of this work, on the same stream and as quiet."""
        return Progress(label, total, stream=self.stream, quiet=self.quiet, log_every_s=self.log_every_s)

    def update(self, detail: str = "", done: int | None = None) -> None:
        """Show ``detail`` (and ``done`` of ``total``)."""
        if self.quiet:
            return
        line = Text(self._line(done, detail))
        with self._lock:
            if self._console.is_terminal:
                if self._live is None:
                    self._live = Live(line, console=self._console, transient=True, auto_refresh=False)
                    self._live.start()
                self._live.update(line, refresh=True)
            elif time.monotonic() - self._last_logged >= self.log_every_s:
                self._last_logged = time.monotonic()
                self._console.print(line, soft_wrap=True)

    def finish(self, summary: str = "") -> None:
        """Replace the live line with ``label done in Ns summary``."""
        if self.quiet:
            return
        text = " ".join(p for p in (self.label, f"done in {time.monotonic() - self.started:.1f}s", summary) if p)
        with self._lock:
            if self._live is not None:
                self._live.stop()
                self._live = None
            self._console.print(Text(text), soft_wrap=True)
