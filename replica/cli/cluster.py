"""``replica cluster up | status | down``: a local Spark standalone cluster (``replica.cluster``).

``up`` starts a master and workers on 127.0.0.1 from the Spark inside the installed pyspark
and prints the master's ``spark://`` URL (the only line on stdout), to pass to
``replica audit --master``. ``status`` shows each process and whether it runs; ``down``
stops every process by its recorded pid. Everything lives in ``--dir``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .help import HelpFormatter, plain

__all__ = ["register"]


def _up(args: argparse.Namespace) -> int:
    from replica.cluster import ClusterConfig, ClusterError, cluster_up
    from replica.progress import Progress

    config = ClusterConfig(directory=Path(args.dir), workers=args.workers, cores=args.cores, memory=args.memory,
                           port=args.port)
    try:
        state = cluster_up(config, Progress(quiet=args.quiet))
    except ClusterError as exc:
        print(f"replica cluster up: {exc}", file=sys.stderr)
        return 2
    print(state.url)
    print(f"audit on it: replica audit RUN_DIR --master {state.url}   stop it: replica cluster down --dir {args.dir}",
          file=sys.stderr)
    return 0


def _status(args: argparse.Namespace) -> int:
    from replica.cluster import ClusterError, cluster_status
    from replica.cluster.launcher import alive

    try:
        state = cluster_status(Path(args.dir))
    except ClusterError as exc:
        print(f"replica cluster status: {exc}", file=sys.stderr)
        return 2
    if state is None:
        print(f"no cluster in {args.dir}")
        return 1
    running = [alive(p) for p in state.processes]
    print(f"{state.url}  {'running' if all(running) else 'NOT RUNNING' if not any(running) else 'PARTLY RUNNING'}")
    for process, up in zip(state.processes, running):
        detail = f"  {process.cores} core(s), {process.memory}" if process.role != "master" else ""
        print(f"  {process.role:<10} pid {process.pid:<8} {'running' if up else 'stopped'}{detail}")
    return 0 if all(running) else 1


def _down(args: argparse.Namespace) -> int:
    from replica.cluster import ClusterError, cluster_down

    try:
        stopped = cluster_down(Path(args.dir))
    except ClusterError as exc:
        print(f"replica cluster down: {exc}", file=sys.stderr)
        return 2
    print(f"stopped {len(stopped)} process(es): " + ", ".join(f"{p.role} (pid {p.pid})" for p in stopped))
    return 0


def register(sub) -> None:
    """``cluster up``, ``cluster status``, ``cluster down``."""
    cluster = sub.add_parser("cluster", help="a local Spark standalone cluster on 127.0.0.1 for audits",
                             description=plain(__doc__), formatter_class=HelpFormatter)
    actions = cluster.add_subparsers(dest="action", required=True)
    up = actions.add_parser("up", help="start a master and workers; print the spark:// URL",
                            formatter_class=HelpFormatter)
    up.add_argument("--workers", type=int, default=2, help="worker processes")
    up.add_argument("--cores", type=int, default=1, help="cores each worker offers")
    up.add_argument("--memory", default="1g", help="memory each worker offers (an executor takes 1g by default)")
    up.add_argument("--port", type=int, default=0, help="the master's port (0: a free one)")
    up.add_argument("--quiet", action="store_true", help="no progress line")
    up.set_defaults(func=_up)
    status = actions.add_parser("status", help="the cluster's URL and processes", formatter_class=HelpFormatter)
    status.set_defaults(func=_status)
    down = actions.add_parser("down", help="stop every process of the cluster", formatter_class=HelpFormatter)
    down.set_defaults(func=_down)
    for parser in (up, status, down):
        parser.add_argument("--dir", default=".replica/cluster", help="the cluster's directory (pids, logs, work)")
