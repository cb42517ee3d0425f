"""A status line for long audits, fed from Spark's status tracker.

``StatusLine`` rewrites one line in place on a terminal and prints a plain line every few
seconds otherwise (logs stay readable). ``SparkProgress`` is a context manager that polls
the tasks of one Spark job group in a background thread while the job runs.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

__all__ = ["StatusLine", "SparkProgress"]


class StatusLine:
    def __init__(self, stream: TextIO | None = None, *, quiet: bool = False, log_every_s: float = 10.0) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.quiet = quiet
        self.interactive = bool(getattr(self.stream, "isatty", lambda: False)())
        self.log_every_s = log_every_s
        self._last_logged = 0.0
        self._width = 0

    def update(self, text: str) -> None:
        if self.quiet:
            return
        if self.interactive:
            self.stream.write("\r" + text.ljust(self._width))
            self._width = len(text)
            self.stream.flush()
        elif time.monotonic() - self._last_logged >= self.log_every_s:
            self._last_logged = time.monotonic()
            self.stream.write(text + "\n")
            self.stream.flush()

    def done(self, text: str) -> None:
        if self.quiet:
            return
        prefix = "\r" if self.interactive else ""
        self.stream.write(prefix + text.ljust(self._width) + "\n")
        self.stream.flush()
        self._width = 0
        self._last_logged = 0.0


class SparkProgress:
    """``with SparkProgress(sc, status, "replay", group):`` — run a job of ``group`` and
    show ``label: done/total tasks (running), elapsed`` until it finishes."""

    def __init__(self, spark_context, status: StatusLine, label: str, group: str, interval_s: float = 0.5) -> None:
        self.sc = spark_context
        self.status = status
        self.label = label
        self.group = group
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = 0.0

    def _counts(self) -> tuple[int, int, int]:
        tracker = self.sc.statusTracker()
        total = done = running = 0
        for job_id in tracker.getJobIdsForGroup(self.group):
            job = tracker.getJobInfo(job_id)
            if job is None:
                continue
            for stage_id in job.stageIds:
                stage = tracker.getStageInfo(stage_id)
                if stage is not None:
                    total += stage.numTasks
                    done += stage.numCompletedTasks
                    running += stage.numActiveTasks
        return done, total, running

    def _line(self) -> str:
        done, total, running = self._counts()
        elapsed = time.monotonic() - self._started
        if not total:
            return f"{self.label}: starting, {elapsed:.0f} s"
        return f"{self.label}: {done}/{total} tasks ({running} running), {elapsed:.0f} s"

    def _poll(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.status.update(self._line())
            except Exception:  # the tracker is best effort; never break the job over it
                pass

    def __enter__(self) -> "SparkProgress":
        self._started = time.monotonic()
        self.sc.setJobGroup(self.group, self.label)
        self._thread = threading.Thread(target=self._poll, name="audit-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.status.done(f"{self.label}: done in {time.monotonic() - self._started:.1f} s")
