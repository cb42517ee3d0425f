"""The audit's progress, fed from Spark's status tracker.

``SparkProgress`` is a context manager that polls the tasks of one Spark job group in a
background thread while the job runs, and shows them on a ``replica.progress.Progress`` line.
"""

from __future__ import annotations

import logging
import threading

from py4j.protocol import Py4JError

from replica.progress import Progress

__all__ = ["SparkProgress"]

_log = logging.getLogger(__name__)


class SparkProgress:
    """``with SparkProgress(sc, progress, "replay", group):`` — run a job of ``group`` and
    show ``label [bar] done/total elapsed tasks (running)`` until it finishes."""

    def __init__(self, spark_context, parent: Progress, label: str, group: str, interval_s: float = 0.5) -> None:
        self.sc = spark_context
        self.status = parent.child(label)
        self.label = label
        self.group = group
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

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

    def _poll(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                done, total, running = self._counts()
                self.status.total = total or None
                self.status.update(f"tasks ({running} running)" if total else "starting", done=done if total else None)
            except Py4JError as exc:   # the JVM is busy or stopping: best effort, the job goes on
                _log.debug("progress of job group %s not read: %s", self.group, exc)

    def __enter__(self) -> "SparkProgress":
        self.sc.setJobGroup(self.group, self.label)
        self._thread = threading.Thread(target=self._poll, name="audit-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.status.finish()
