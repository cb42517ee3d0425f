"""``replica load``: drive calls through the ingress API of the running testnet and report.

It installs its own load canisters (``--canisters`` per subnet), then offers ``--rate`` calls
per second for ``--duration`` seconds: each call relays to a canister of another subnet (a
``--cross-subnet`` fraction of them) or of its own and answers once the echo is back. Every
answer is read from certified, verified state. The final table: offered, submitted and
achieved calls/s, latency percentiles in ms and rounds, replies, rejects by code (as users
saw them, and of the inner calls), submissions refused by reason, calls not submitted (the
client could not keep up, or no node confirmed them), the drain, lost and duplicated calls.
Back-pressure shows as rejects with their codes, never as loss. The report is printed also
when the run ends early (Ctrl-C: the load stops, answers are awaited, then the report) or
by an error (then the error too). Exit status: 0 if no call was lost or duplicated, 1 if
one was, 2 after an error, 130 after an interrupt.
"""

from __future__ import annotations

import argparse
import json
import sys

from replica.errors import ReplicaError

from .help import HelpFormatter, plain

__all__ = ["register"]


def _load(args: argparse.Namespace) -> int:
    from replica.client.identities import IdentityStore
    from replica.progress import Progress
    from replica.testnet.http_endpoints import agent_for_testnet
    from replica.processes.lifecycle import testnet_directory
    from replica.load.load import LoadFailed, LoadOptions, run_load

    options = LoadOptions(rate=args.rate, duration_s=args.duration, canisters=args.canisters,
                          cross_subnet=args.cross_subnet, pad_bytes=args.pad, timeout_s=args.timeout_s,
                          drain_s=args.drain,
                          submitters=args.submitters, seed=args.seed)
    try:
        store = IdentityStore()
        identity = store.load(args.identity) if args.identity else store.current()
        with agent_for_testnet(testnet_directory(args.dir), identity.key) as agent:
            subnets = [record.subnet_id for record in agent.registry.latest().subnets]
            progress = Progress(f"load: {args.rate:g} calls/s for {args.duration:g} s on {len(subnets)} subnets",
                                total=int(args.duration * 10))
            try:
                report = run_load(agent, subnets, options, progress=progress)
            except LoadFailed as failed:
                progress.finish("ended by an error")
                if failed.report is not None:
                    _print(failed.report, args.json)
                raise
            progress.finish(f"{report.replied} replied, {report.lost} lost, {report.duplicated} duplicated")
    except ReplicaError as exc:
        print(f"replica load: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    _print(report, args.json)
    if report.ended_early is not None and report.ended_early.startswith("interrupted"):
        return 130
    return 0 if report.lost == 0 and report.duplicated == 0 else 1


def _print(report, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report.as_json()), flush=True)
    else:
        print("\n".join(report.table()), flush=True)


def register(sub) -> None:
    """``load``."""
    load = sub.add_parser("load", formatter_class=HelpFormatter, description=plain(__doc__),
                          help="offer calls at a rate through the ingress API; report latency, rejects, losses")
    load.add_argument("--rate", type=float, default=100.0, help="calls offered per second")
    load.add_argument("--duration", type=float, default=10.0, help="seconds of offered load")
    load.add_argument("--canisters", type=int, default=2, help="load canisters installed per subnet")
    load.add_argument("--cross-subnet", type=float, default=1.0,
                      help="fraction of calls whose inner call goes to another subnet")
    load.add_argument("--pad", type=int, default=0, help="bytes of padding in every inner request")
    load.add_argument("--timeout-s", type=int, default=None,
                      help="make the inner calls bounded-wait calls with this timeout (none: guaranteed-response)")
    load.add_argument("--drain", type=float, default=60.0,
                      help="seconds to wait for answers after the load window (then the rest count as lost)")
    load.add_argument("--submitters", type=int, default=4,
                      help="threads submitting calls (a call none of them takes up within a second of its due time "
                           "is not submitted: the client is the limit)")
    load.add_argument("--seed", type=int, default=0, help="seed of the choice of canisters")
    load.add_argument("--json", action="store_true", help="print the report as one JSON object")
    load.add_argument("--dir", default=None, help="testnet directory (none: $REPLICA_TESTNET, else .replica/testnet)")
    load.add_argument("--identity", default=None, help="identity to sign with (none: the one in use)")
    load.set_defaults(func=_load)
