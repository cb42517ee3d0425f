"""``replica testnet up | status | logs | kill-node | restart-node | migrate | registry | fork | down | run``: a local multi-subnet testnet.

``up`` starts it in the background and returns once every subnet has certified a block;
later commands find it through the directory (``--dir``, else ``$REPLICA_TESTNET``, else
``.replica/testnet``). ``run`` is the scripted foreground run: demo traffic for
``--duration`` seconds, then settle, check the ledgers' supply and stop. ``migrate``
moves a canister you control to another subnet (``replica.testnet.migration``);
``registry`` shows the registry's versions or publishes one step of a migration by hand.
``fork --from D --at HEIGHT`` starts a new testnet from the recorded state of ``D`` at a
height (``replica.testnet.fork``).
``--process-model node`` runs one process per node instead of one per subnet; then
``kill-node NODE [--hold]`` and ``restart-node NODE`` stop and start single nodes, and
``--chaos-kill RATE`` kills random nodes while it runs (never more than f of a subnet).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import time

from replica.errors import ReplicaError
from replica.ic.textual_ids import canister_text

from .arguments import CANISTER_HELP, canister_argument
from .help import HelpFormatter, plain

__all__ = ["register"]


def _up(args: argparse.Namespace) -> int:
    from replica.processes.lifecycle import testnet_directory, up
    from replica.observe.status_page import status_page_url

    directory = testnet_directory(args.dir)
    rows = up(directory, subnets=args.subnets, nodes=args.nodes, round_ms=args.round_ms, fresh=args.fresh,
              restart=not args.no_restart, process_model=args.process_model, chaos_kill=args.chaos_kill,
              chaos_seed=args.chaos_seed)
    print(f"{'subnet':<10} {'nodes':>5}  {'canister range':<57}  {'ingress endpoint':<28}  log")
    for r in rows:
        endpoint = next(iter(sorted(r.endpoints.items())), ("", "-"))[1]
        ids = _range_text(*r.canister_range)
        print(f"{r.subnet:<10} {r.nodes:>5}  {ids:<57}  {'http://' + endpoint:<28}  {r.log}")
    page = status_page_url(directory)
    if page:
        print(f"live status page: {page}")
    print(f"testnet up in {directory}; stop it with `replica testnet down`")
    return 0


def _range_text(start: int, end: int) -> str:
    """A canister range as people read it: ``rwlgt-iiaaa-aaaaa-aaaaa-cai..<end's principal>``."""
    return f"{canister_text(start)}..{canister_text(end)}"


def _down(args: argparse.Namespace) -> int:
    from replica.processes.lifecycle import down, testnet_directory

    directory = testnet_directory(args.dir)
    if down(directory):
        print(f"testnet in {directory} stopped; its run log: {directory / 'run'}")
    else:
        print(f"no testnet is running in {directory}")
    return 0


def _status(args: argparse.Namespace) -> int:
    """The directory's view of each subnet, then (while it runs) heights, rates and streams
    read from certified state (``replica.observe.stream_status``); ``--watch`` repeats."""
    from replica.audit.live_status import describe_live_status, read_live_status
    from replica.processes.lifecycle import status, testnet_directory
    from replica.observe.stream_status import format_view, reader_for_testnet
    from replica.testnet.certification_status import certification_problems
    from replica.testnet.launcher import TestnetLayout

    directory = testnet_directory(args.dir)
    reader = None
    try:
        rows = status(directory)
        reader = reader_for_testnet(directory) if any(r.running for r in rows) else None
        while True:
            view = reader.view(interval_s=args.interval) if reader is not None else None
            problems = certification_problems(TestnetLayout(directory))   # diverged or stalled nodes
            live = read_live_status(directory)   # replica audit --follow: its verdict and lag
            if args.json:
                print(json.dumps({"subnets": [r.as_json() for r in rows],
                                  "certified": view.as_json() if view is not None else None,
                                  "certification_problems": [p.as_json() for p in problems],
                                  "live_audit": live}, indent=2), flush=True)
            else:
                if args.watch:
                    print("\033[H\033[J", end="")  # clear the terminal between views
                print(f"{'subnet':<10} {'IC principal':<63} {'state':<8} {'height':>7} {'certified':>9}  {'nodes':>5}  "
                      f"endpoints")
                for r in rows:
                    endpoints = " ".join(f"{node}=http://{address}" for node, address in sorted(r.endpoints.items()))
                    # node model: running / all nodes, and the held ones
                    nodes = f"{r.nodes_running}/{r.nodes}" if r.process_model == "node" else str(r.nodes)
                    held = f"  held: {' '.join(r.held)}" if r.held else ""
                    print(f"{r.subnet:<10} {r.principal or '-':<63} {'running' if r.running else 'stopped':<8} "
                          f"{r.height or 0:>7} {r.certified_height or 0:>9}  {nodes:>5}  {endpoints or '-'}{held}")
                for problem in problems:
                    print("\n".join(problem.lines()))
                if live is not None:
                    print(describe_live_status(live))
                if view is not None:
                    print()
                    print("\n".join(format_view(view)), flush=True)
            if not args.watch:
                return 0
            time.sleep(args.interval)
            rows = status(directory)
    except KeyboardInterrupt:
        return 0
    finally:
        if reader is not None:
            reader.close()


def _logs(args: argparse.Namespace) -> int:
    from replica.processes.lifecycle import log_lines, testnet_directory

    try:
        for line in log_lines(testnet_directory(args.dir), args.node, args.follow):
            print(line, flush=True)
    except KeyboardInterrupt:
        pass
    return 0


def _kill_node(args: argparse.Namespace) -> int:
    from replica.processes.lifecycle import kill_node, testnet_directory

    print(kill_node(testnet_directory(args.dir), args.node, hold=args.hold))
    return 0


def _restart_node(args: argparse.Namespace) -> int:
    from replica.processes.lifecycle import restart_node, testnet_directory

    print(restart_node(testnet_directory(args.dir), args.node))
    return 0


def _run(args: argparse.Namespace) -> int:
    """Create the directory (unless it holds a testnet) and run it in the foreground."""
    from replica.testnet.launcher import TestnetLayout, create_testnet, process_model_of
    from replica.processes.supervisor import launch
    from replica.processes.lifecycle import testnet_directory

    layout = TestnetLayout(testnet_directory(args.dir))
    if layout.manifest.exists():
        manifest = layout.read_manifest()
        existing = process_model_of(manifest)
        if args.process_model is not None and args.process_model != existing:
            print(f"replica testnet run: {layout.root} holds a testnet of process model {existing!r}, not "
                  f"{args.process_model!r}; choose another directory to change it", file=sys.stderr)
            return 2
        if (len(manifest["subnets"]), manifest["nodes"]) != (args.subnets, args.nodes):
            print(f"{layout.root} holds a testnet of {len(manifest['subnets'])} subnets x {manifest['nodes']} "
                  f"nodes; resuming it", file=sys.stderr)
    else:
        seed = hashlib.sha256(args.seed.encode()).digest()
        options = {} if args.process_model is None else {"process_model": args.process_model}
        create_testnet(layout.root, args.subnets, args.nodes, seed=seed, tick_s=args.round_ms / 1000, **options)
    return launch(layout.root, duration_s=args.duration, traffic=not args.no_traffic, restart=not args.no_restart,
                  chaos_kill=args.chaos_kill, chaos_seed=args.chaos_seed)


def _fork_at(values: list[str], subnets: list[str]) -> int | dict[str, int]:
    """``--at HEIGHT`` (every subnet) and/or ``--at SUBNET=HEIGHT`` (that subnet; the others
    take HEIGHT, or without it the highest given)."""
    heights: dict[str, int] = {}
    every = None
    for value in values:
        subnet, sep, height = value.rpartition("=")
        if not height.isdigit():
            raise argparse.ArgumentTypeError(f"--at takes HEIGHT or SUBNET=HEIGHT, not {value!r}")
        if sep:
            heights[subnet] = int(height)
        else:
            every = int(height)
    if not heights:
        return every if every is not None else 0
    return heights if every is None else {subnet: heights.get(subnet, every) for subnet in subnets} | heights


def _fork(args: argparse.Namespace) -> int:
    """Write the fork (``replica.testnet.fork``), then start it unless ``--no-start``."""
    from pathlib import Path

    from replica.processes.lifecycle import up
    from replica.progress import Progress
    from replica.testnet.fork import fork_testnet, started_states
    from replica.testnet.launcher import TestnetLayout

    if args.dir is None:
        print("replica testnet fork: name the new testnet's directory with --dir NEW", file=sys.stderr)
        return 2
    try:
        at = _fork_at(args.at, list(TestnetLayout(Path(args.source)).read_manifest()["subnets"]))
    except argparse.ArgumentTypeError as exc:
        print(f"replica testnet fork: {exc}", file=sys.stderr)
        return 2
    if args.align and not isinstance(at, int):   # only the subnets named: the others align with them
        at = {subnet: height for subnet, height in at.items() if any(v.startswith(f"{subnet}=") for v in args.at)}
    report = fork_testnet(Path(args.source), at, Path(args.dir), nodes=args.nodes, align=args.align,
                          progress=Progress())
    print(f"forked {report.source} into {report.target} in {report.seconds:.2f} s; the fork's registry version "
          f"{report.registry_version} gives every subnet {report.nodes} new nodes and a new threshold key")
    print(f"{'subnet':<10} {'height':>7}  {'from':<16} {'full state hash':<20} certified root")
    for s in report.subnets:
        origin = f"checkpoint {s.checkpoint_height}" if s.checkpoint_height else "genesis"
        print(f"{s.subnet_id:<10} {s.height:>7}  {origin + ' +' + str(s.replayed):<16} {s.full_hash.hex()[:16]:<20} "
              f"{s.certified_root.hex()[:16]}")
    if args.no_start:
        print(f"start it with `replica testnet up --dir {report.target}`")
        return 0
    up(report.target, out=io.StringIO())   # not "resuming": it is the first start
    recorded = {s.subnet_id: (s.height, s.full_hash.hex()) for s in report.subnets}
    for node, (subnet, height, full_hash) in sorted(started_states(report.target).items()):
        same = "= the recorded hash" if (height, full_hash) == recorded[subnet] else "DIFFERS from the recorded hash"
        print(f"{node} started at height {height}, full state hash {full_hash[:16]} {same}")
    print(f"testnet up in {report.target}; stop it with `replica testnet down --dir {report.target}`")
    return 0


def _migrate(args: argparse.Namespace) -> int:
    from replica.client.identities import IdentityStore
    from replica.progress import Progress
    from replica.testnet.http_endpoints import agent_for_testnet
    from replica.processes.lifecycle import testnet_directory
    from replica.testnet.migration import AgentDriver, migrate_canister

    directory = testnet_directory(args.dir)
    store = IdentityStore()
    identity = store.load(args.identity) if args.identity else store.current()
    with agent_for_testnet(directory, identity.key) as agent:
        progress = Progress(f"migrating canister {canister_text(args.canister)} to {args.to}")
        driver = AgentDriver.for_testnet(agent, directory)
        report = migrate_canister(driver, args.canister, args.to, timeout_s=args.timeout, progress=progress)
        progress.finish(f"answering on {report.destination} after {report.rounds} rounds ({report.seconds:.1f} s)")
    print(f"canister {canister_text(report.canister_id)}: {report.source} -> {report.destination}; registry versions "
          f"{', '.join(map(str, report.registry_versions))}; snapshot {report.snapshot_bytes} bytes, "
          f"SHA-256 {report.snapshot_hash.hex()}")
    return 0


def _registry(args: argparse.Namespace) -> int:
    """Show the registry's versions, or publish a new one (the migration's building blocks)."""
    from consensus_stub.registry import InconsistentRegistry, decode_registry
    from replica.testnet.launcher import TestnetLayout, update_registry_file
    from replica.processes.lifecycle import testnet_directory
    from state_manager.routing_table import CanisterIdRange, RoutingTableError

    layout = TestnetLayout(testnet_directory(args.dir))
    if args.action != "show":
        needed = {"route": args.to, "trace": args.along, "untrace": True}[args.action]
        if args.start is None or args.end is None or not needed:
            print(f"replica testnet registry {args.action}: name START END"
                  + {"route": " and --to SUBNET", "trace": " and --along A,B", "untrace": ""}[args.action],
                  file=sys.stderr)
            return 2
        try:
            moved = CanisterIdRange(args.start, args.end)
        except RoutingTableError as exc:
            print(f"replica testnet registry {args.action}: {exc}", file=sys.stderr)
            return 2
        if args.action == "route":
            change = lambda r: r.with_next_version(routing_table=r.latest().routing_table.with_assignment(moved, args.to))  # noqa: E731
        elif args.action == "trace":
            change = lambda r: r.with_next_version(  # noqa: E731
                canister_migrations=r.latest().canister_migrations.with_trace(moved, tuple(args.along.split(","))))
        else:
            change = lambda r: r.with_next_version(canister_migrations=r.latest().canister_migrations.without(moved))  # noqa: E731
        try:
            registry = update_registry_file(layout, change)
        except (InconsistentRegistry, RoutingTableError) as exc:
            print(f"replica testnet registry {args.action}: refused: {exc}", file=sys.stderr)
            return 2
        print(f"registry version {registry.latest_version} published; every subnet adopts it in its next block")
        return 0
    registry = decode_registry(layout.registry.read_bytes())
    versions = [{"version": r.version,
                 "routing_table": [[canister_text(c.start), canister_text(c.end), s] for c, s in r.routing_table.entries],
                 "canister_migrations": [[canister_text(c.start), canister_text(c.end), list(trace)]
                                         for c, trace in r.canister_migrations.entries]}
                for r in registry.records]
    if args.json:
        print(json.dumps(versions, indent=2))
        return 0
    for v in versions:
        routes = ", ".join(f"{a}..{b} -> {s}" for a, b, s in v["routing_table"])
        traces = "; ".join(f"{a}..{b} along {' -> '.join(t)}" for a, b, t in v["canister_migrations"]) or "none"
        print(f"version {v['version']}: {routes}; migrating: {traces}")
    return 0


def _guarded(command):
    """Run ``command``; a testnet error is one line on stderr and exit status 2, not a traceback."""
    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except ReplicaError as exc:
            print(f"replica testnet {args.testnet_command}: {exc}", file=sys.stderr)
            return 2
    return run


def register(sub) -> None:
    """``testnet`` and its subcommands."""
    from replica.processes import lifecycle

    parser = sub.add_parser("testnet", formatter_class=HelpFormatter, description=plain(__doc__),
                            help="a local multi-subnet testnet: up, status, logs, kill-node, restart-node, migrate, registry, fork, down "
                                 "(or a scripted run)")
    commands = parser.add_subparsers(dest="testnet_command", required=True)

    def command(name: str, help_text: str, func) -> argparse.ArgumentParser:
        p = commands.add_parser(name, formatter_class=HelpFormatter, help=help_text, description=help_text)
        p.add_argument("--dir", default=None,
                       help=f"testnet directory (none: $REPLICA_TESTNET, else {lifecycle.DEFAULT_DIRECTORY})")
        p.set_defaults(func=_guarded(func))
        return p

    from replica.processes.chaos import DEFAULT_CHAOS_SEED
    from replica.testnet.launcher import DEFAULT_PROCESS_MODEL, PROCESS_MODELS

    def shape(p: argparse.ArgumentParser) -> None:
        p.add_argument("--subnets", type=int, default=2, help="subnets (new testnets)")
        p.add_argument("--nodes", type=int, default=4, help="nodes per subnet (new testnets)")
        p.add_argument("--round-ms", type=int, default=500, help="milliseconds between heights (new testnets)")
        p.add_argument("--process-model", choices=PROCESS_MODELS, default=None,
                       help=f"one process per subnet or per node (new testnets; none: {DEFAULT_PROCESS_MODEL}; "
                            f"a testnet keeps its own)")
        p.add_argument("--no-restart", action="store_true",
                       help="stop the testnet when a process dies (otherwise it is restarted); deaths asked for "
                            "by kill-node, restart-node or chaos are still restarted")
        p.add_argument("--chaos-kill", type=float, default=0.0, metavar="RATE",
                       help="node model: SIGKILL about RATE random nodes per second across the testnet, never more "
                            "than f = (n-1)//3 of a subnet down at once (0: off)")
        p.add_argument("--chaos-seed", type=int, default=None,
                       help=f"seed of --chaos-kill's choices (none: {DEFAULT_CHAOS_SEED})")

    up = command("up", "start the testnet in the background; return once every subnet certified a block", _up)
    shape(up)
    up.add_argument("--fresh", action="store_true", help="delete the stopped testnet in the directory and start over")
    command("down", "settle and stop every process of the testnet (a no-op if none runs)", _down)
    status = command("status", "subnets (heights, rounds/s) and streams (indices, backlog, rejects, bytes) "
                               "read from certified state", _status)
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--watch", action="store_true", help="repeat every --interval seconds until Ctrl-C")
    status.add_argument("--interval", type=float, default=1.0, help="seconds between reads (rounds/s are measured over it)")
    logs = command("logs", "print a log: the launcher's, a subnet's, or a node's (NODE: a subnet or node id)", _logs)
    logs.add_argument("node", nargs="?", default=None,
                      help="a subnet or node id (none: the launcher; process model node: a node id)")
    logs.add_argument("--follow", "-f", action="store_true", help="keep printing new lines")
    kill = command("kill-node", "SIGKILL one node's process (process model node); the supervisor restarts it "
                                "unless --hold", _kill_node)
    kill.add_argument("node", help="the node id, e.g. subnet-0-node-2")
    kill.add_argument("--hold", action="store_true",
                      help="keep it down (control/hold/NODE) until `replica testnet restart-node NODE`")
    restart = command("restart-node", "remove a node's hold and restart it (SIGTERM if it runs; the supervisor "
                                      "starts it)", _restart_node)
    restart.add_argument("node", help="the node id, e.g. subnet-0-node-2")
    migrate = command("migrate", "move a canister you control to another subnet (same id, same state)", _migrate)
    migrate.add_argument("canister", type=canister_argument, help=f"the canister: {CANISTER_HELP}")
    migrate.add_argument("--to", required=True, help="the subnet to move it to")
    migrate.add_argument("--timeout", type=float, default=120.0, help="seconds each step may take")
    migrate.add_argument("--identity", default=None, help="identity to sign with (none: the one in use; "
                                                          "it must control the canister)")
    registry = command("registry", "show the registry's versions, or publish a new one (route, trace, untrace)",
                       _registry)
    registry.add_argument("action", choices=("show", "route", "trace", "untrace"),
                          help="show; or publish: route START-END to --to, trace it --along A,B, untrace it")
    registry.add_argument("start", type=canister_argument, nargs="?", default=None,
                          help=f"the range's first canister: {CANISTER_HELP}")
    registry.add_argument("end", type=canister_argument, nargs="?", default=None, help="the range's last canister")
    registry.add_argument("--to", default=None, help="route: the subnet the range goes to")
    registry.add_argument("--along", default=None, help="trace: the subnets, source first (A,B)")
    registry.add_argument("--json", action="store_true", help="show: machine-readable output")
    fork = command("fork", "a new testnet (--dir NEW) starting from the recorded state of another at a height",
                   _fork)
    fork.add_argument("--from", dest="source", required=True, help="the testnet directory to fork, stopped or running (only read)")
    fork.add_argument("--at", action="append", required=True, metavar="HEIGHT|SUBNET=HEIGHT",
                      help="the height every subnet forks at, or one subnet's (repeatable)")
    fork.add_argument("--align", action="store_true",
                      help="the subnets --at does not name fork at the moment (block time) of the first it names "
                           "(--at HEIGHT alone: the first subnet's height)")
    fork.add_argument("--nodes", type=int, default=None, help="nodes per subnet (none: as many as the source's)")
    fork.add_argument("--no-start", action="store_true", help="write the fork only; start it with `up`")
    run = command("run", "the scripted foreground run: demo traffic, settle, check, stop", _run)
    shape(run)
    run.add_argument("--duration", type=float, default=None,
                     help="seconds of traffic before settling and stopping (none: until Ctrl-C)")
    run.add_argument("--seed", default="replica-testnet", help="genesis seed text (new testnets)")
    run.add_argument("--no-traffic", action="store_true", help="do not submit demo traffic")
