"""A one-line live status for long jobs (stderr; redrawn in place on a terminal)."""

from __future__ import annotations

import sys
import time


class StatusLine:
    def __init__(self, label: str, total: int | None = None, stream=None) -> None:
        self.label = label
        self.total = total
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self._tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last_draw = 0.0
        self._width = 0

    def update(self, done: int, detail: str = "") -> None:
        now = time.monotonic()
        if not self._tty and now - self._last_draw < 2.0 and (self.total is None or done < self.total):
            return  # in logs, a line every 2 s is plenty
        self._last_draw = now
        elapsed = now - self.started
        if self.total:
            filled = int(24 * done / self.total)
            bar = "#" * filled + "-" * (24 - filled)
            text = f"{self.label} [{bar}] {done}/{self.total} {elapsed:5.1f}s {detail}"
        else:
            text = f"{self.label} {done} {elapsed:5.1f}s {detail}"
        if self._tty:
            pad = max(0, self._width - len(text))
            self.stream.write("\r" + text + " " * pad)
            self._width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def done(self, summary: str = "") -> None:
        elapsed = time.monotonic() - self.started
        text = f"{self.label} done in {elapsed:.1f}s {summary}"
        if self._tty:
            self.stream.write("\r" + text + " " * max(0, self._width - len(text)) + "\n")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
