"""One audit from start to end: a Spark session, the job, the reports on disk, the summary.

``audit_run_log`` is what ``replica audit``, ``replica demo`` and ``replica simulate`` share:
it starts the session for ``master``, runs ``job.run_audit``, stops the session, writes
``report.json`` and ``report.html`` to ``out``, prints the summary and returns the exit
status (0: every replica agreed with every other and with the live run; 1: not; 2: the
input was unusable).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TextIO

from .errors import AuditError
from replica.progress import Progress

from .job import AuditOptions, run_audit, spark_session
from .report import render_html, render_text
from .run_log import RunLog

__all__ = ["audit_run_log", "write_reports"]


def write_reports(report: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    (out / "report.html").write_text(render_html(report))


def audit_run_log(log: RunLog, *, run_dir: str, out: str | Path, options: AuditOptions = AuditOptions(),
                  master: str = "local[*]", status: Progress | None = None, stream: TextIO | None = None,
                  command: str = "audit", archive: Path | None = None) -> int:
    """Audit ``log`` (recorded in ``run_dir``) on ``master``; reports to ``out`` (module docstring)."""
    stream = stream or sys.stdout
    try:
        spark = spark_session(master, archive=archive, status=status)
        try:
            report = run_audit(spark, log, options, source=run_dir, run_dir=run_dir, status=status or Progress())
        finally:
            spark.stop()
    except AuditError as exc:
        print(f"replica {command}: {exc}", file=sys.stderr)
        return 2
    out = Path(out)
    write_reports(report, out)
    print(render_text(report), file=stream)
    print(f"report: {out / 'report.json'}  page: {out / 'report.html'}", file=stream)
    return report["exit_status"]
