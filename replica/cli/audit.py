"""``replica audit`` and ``replica replay-one``: the audit's command-line shell.

``replica audit RUN_DIR`` (or ``--generate …``) runs the Spark job, prints the summary,
writes ``report.json`` and ``report.html`` to ``--out`` and exits 0 when every replica
agrees with every other and with the live run, 1 when not, 2 when the input is unusable.
``replica audit --follow [--dir D]`` audits a running testnet as it runs: every height its
nodes execute is replayed on Spark (Structured Streaming) by 64 replicas per subnet under the
same perturbations; the verdict and the lag in rounds are in ``D/live-audit/status.json``
(``replica testnet status``, the status page) and on its own ``/metrics``; a divergence is
reported with the offline drill-down; when the testnet stops it reports the whole run
(exit status as above). Stopped and started again, it resumes where it stopped.
``replica replay-one`` replays one replica locally (in a subprocess with the hash seed the
audit's workers used, or the replica's own), compares it with the live hashes and
optionally with another replica, down to the differing state paths.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from replica.audit.errors import AuditError
from replica.audit.perturbation import parse_fault, parse_perturbation
from replica.progress import Progress

from .help import HelpFormatter, plain

__all__ = ["register", "audit_command", "replay_one_command", "parse_replica_fault"]


def parse_replica_fault(text: str):
    """``REPLICA:KIND@HEIGHT[:MESSAGE[:OTHER]]`` → ``(replica, Fault)``."""
    replica, _, fault = text.partition(":")
    if not replica.isdigit() or not fault:
        raise argparse.ArgumentTypeError(f"fault {text!r} is not REPLICA:KIND@HEIGHT[:MESSAGE[:OTHER]]")
    try:
        return int(replica), parse_fault(fault)
    except AuditError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(sub) -> None:
    """``audit`` and ``replay-one``."""
    audit = sub.add_parser("audit", help="determinism audit: replay a recorded run on many simulated replicas with Spark",
                           description=plain(__doc__), formatter_class=HelpFormatter)
    audit.add_argument("run_dir", nargs="?", help="a recorded run directory (see replica.audit.run_log)")
    gen = audit.add_argument_group("generated workload (instead of RUN_DIR)")
    gen.add_argument("--generate", action="store_true", help="generate a seeded multi-subnet run and audit it")
    gen.add_argument("--subnets", type=int, default=4, help="subnets of the generated run")
    gen.add_argument("--canisters", type=int, default=16, help="canisters per subnet")
    gen.add_argument("--batches", type=int, default=50, help="batches per subnet")
    gen.add_argument("--messages", type=int, default=100, help="messages (ingress + XNet) per batch, about")
    gen.add_argument("--nondeterministic", action="store_true",
                     help="also host the deliberately nondeterministic example canister")
    audit.add_argument("--seed", type=int, default=1, help="seed of the workload and of the replica plan")
    audit.add_argument("--replicas", type=int, default=None, help="simulated replicas to replay the run on "
                       "(default 2048; with --follow, --replicas-per-subnet per subnet)")
    live = audit.add_argument_group("following a running testnet (instead of RUN_DIR)")
    live.add_argument("--follow", action="store_true", help="audit a running testnet's heights as its nodes execute them")
    live.add_argument("--dir", default=None, help="the testnet directory (default: $REPLICA_TESTNET, else .replica/testnet)")
    live.add_argument("--replicas-per-subnet", type=int, default=64, help="with --follow: replicas per subnet")
    live.add_argument("--trigger-ms", type=int, default=250, help="with --follow: how often Spark looks for new heights")
    audit.add_argument("--master", default="local[*]", help="local[*] or spark://HOST:PORT")
    audit.add_argument("--environment-archive", default=None, metavar="TAR_GZ",
                       help="the executors' packed environment for a cluster master (default: this build's, "
                            "built and cached on first use; see docs/cluster.md)")
    audit.add_argument("--partitions", type=int, default=None, help="default: 4 × the cluster's cores, at most one per 64 replicas")
    audit.add_argument("--fault", dest="faults", action="append", type=parse_replica_fault, default=[],
                       metavar="REPLICA:KIND@HEIGHT[:MSG[:MSG2]]", help="inject a fault (flip, drop, swap); repeatable")
    audit.add_argument("--faults", dest="faults", nargs="+", action="extend", type=parse_replica_fault,
                       metavar="SPEC", help="several faults at once")
    audit.add_argument("--from-genesis", action="store_true", help="every replica replays from genesis")
    audit.add_argument("--plan", choices=("default", "live"), default="default",
                       help="live: the replicas a live audit (--follow) with the same --replicas and --seed replays, "
                            "to compare an offline audit with it")
    audit.add_argument("--drilldowns", type=int, default=32, help="divergence clusters to diff down to state paths (at most)")
    audit.add_argument("--out", default=None, help="directory for report.json, report.html (and a generated run); "
                       "default runs/audit, with --follow DIR/live-audit")
    audit.add_argument("--quiet", action="store_true", help="no progress line")
    audit.set_defaults(func=audit_command)

    one = sub.add_parser("replay-one", help="replay one simulated replica locally and compare it",
                         formatter_class=HelpFormatter)
    one.add_argument("run_dir")
    one.add_argument("--subnet", required=True)
    one.add_argument("--perturbation", default="none", help="e.g. none, checkpoint@20+shuffle:7, hashseed:3")
    one.add_argument("--until", type=int, default=None, help="last height to replay")
    one.add_argument("--against", default=None, help="another replica's perturbation to diff with")
    one.add_argument("--worker-hash-seed", type=int, default=0,
                     help="PYTHONHASHSEED for replicas without hashseed (the audit reports the one its workers used)")
    one.add_argument("--paths", type=int, default=32, help="differing paths to show at most")
    one.set_defaults(func=replay_one_command)


def _generate(args, status) -> tuple:
    from replica.inprocess.workload import generate_isolated
    from replica.audit.job import default_worker_hash_seed
    from replica.audit.run_log import decode_run_log, write_run_log
    from replica.inprocess.workload import WorkloadConfig

    config = WorkloadConfig(subnets=args.subnets, canisters=args.canisters, batches=args.batches,
                            messages=args.messages, seed=args.seed, nondeterministic=args.nondeterministic)
    status.update(f"generating workload: {config.subnets} subnets × {config.batches} batches")
    log = decode_run_log(generate_isolated(config, default_worker_hash_seed()))
    run_dir = Path(args.out) / "run"
    write_run_log(log, run_dir)
    status.finish(f"generated {config.subnets} subnets × {config.batches} batches into {run_dir}")
    return log, str(run_dir)


def audit_command(args: argparse.Namespace) -> int:
    from replica.audit.job import AuditOptions
    from replica.audit.run_log import load_run_log
    from replica.audit.session import audit_run_log

    status = Progress(quiet=args.quiet)
    if args.follow:
        if args.run_dir or args.generate:
            print("replica audit: --follow audits a running testnet: give no RUN_DIR or --generate", file=sys.stderr)
            return 2
        from .audit_follow import follow_command

        return follow_command(args, status)
    if bool(args.run_dir) == bool(args.generate):
        print("replica audit: give a RUN_DIR or --generate (not both)", file=sys.stderr)
        return 2
    args.replicas = 2048 if args.replicas is None else args.replicas
    args.out = "runs/audit" if args.out is None else args.out
    try:
        if args.generate:
            log, run_dir = _generate(args, status)
        else:
            log, run_dir = load_run_log(args.run_dir), args.run_dir
    except AuditError as exc:
        print(f"replica audit: {exc}", file=sys.stderr)
        return 2
    options = AuditOptions(replicas=args.replicas, seed=args.seed, faults=tuple(args.faults),
                           partitions=args.partitions, drilldowns=args.drilldowns, from_genesis=args.from_genesis,
                           plan=args.plan)
    return audit_run_log(log, run_dir=run_dir, out=args.out, options=options, master=args.master, status=status,
                         archive=Path(args.environment_archive) if args.environment_archive else None)


def _rows(blob: bytes, subnet: str, perturbation: str, seed: int, until: int | None) -> list[tuple]:
    from replica.audit.isolation import run_isolated

    rows = [r for r in run_isolated(blob, "rows", seed, [(0, subnet, perturbation)])]
    return [r for r in rows if until is None or r[2] <= until]


def _seed_for(perturbation: str, worker_seed: int) -> int:
    own = parse_perturbation(perturbation).hash_seed
    return worker_seed if own is None else own


def replay_one_command(args: argparse.Namespace) -> int:
    from replica.audit.drilldown import diff_states
    from replica.audit.isolation import run_isolated
    from replica.audit.run_log import encode_run_log, load_run_log

    try:
        log = load_run_log(args.run_dir)
        subnet = log.subnet(args.subnet)
        blob = encode_run_log(log)
        live = {h: (f, c) for h, f, c in subnet.hashes}
        sides = [args.perturbation] + ([args.against] if args.against else [])
        replays = {p: _rows(blob, args.subnet, p, _seed_for(p, args.worker_hash_seed), args.until) for p in sides}
    except AuditError as exc:
        print(f"replica replay-one: {exc}", file=sys.stderr)
        return 2
    ok = True
    for p, rows in replays.items():
        seed = _seed_for(p, args.worker_hash_seed)
        print(f"replica {p} of {args.subnet} (PYTHONHASHSEED={seed}):")
        for _, _, height, full, certified, error, *_ in rows:  # the build last
            if error is not None:
                print(f"  {height:>5}  replay failed: {error}")
                ok = False
                continue
            mark = "" if height not in live else ("live: same" if live[height] == (full, certified) else "live: DIFFERS")
            ok = ok and (height not in live or live[height] == (full, certified))
            print(f"  {height:>5}  {bytes(full).hex()[:16]}  {bytes(certified).hex()[:16]}  {mark}")
    if args.against:
        a = {r[2]: (r[3], r[4]) for r in replays[args.perturbation]}
        b = {r[2]: (r[3], r[4]) for r in replays[args.against]}
        common = sorted(set(a) & set(b))
        differing = [h for h in common if a[h] != b[h]]
        if not differing:
            print(f"{args.perturbation} and {args.against} agree at heights {common[0] if common else '-'}.."
                  f"{common[-1] if common else '-'}")
        else:
            ok = False
            height = differing[0]
            print(f"{args.perturbation} and {args.against} first differ at height {height}; differing state paths:")
            states = [next(iter(run_isolated(blob, "states", _seed_for(p, args.worker_hash_seed),
                                             [(i, args.subnet, p, height)])))
                      for i, p in enumerate((args.perturbation, args.against))]
            drill = diff_states(states[0], states[1], limit=args.paths)
            for note in drill["notes"]:
                print(f"  note: {note}")
            for path in drill["paths"]:
                print(f"  {path['path']}: {path['minority']!r}  (other: {path['majority']!r})")
            if drill["more_paths"]:
                print(f"  … {drill['more_paths']} more")
    return 0 if ok else 1
