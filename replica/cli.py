"""The ``replica`` command: one entry point, one subcommand per job."""

from __future__ import annotations

import argparse
import sys

__all__ = ["main", "build_parser"]


def _demo(args: argparse.Namespace) -> int:
    from replica.demo import run_demo
    return run_demo(args.out, subnets=args.subnets, nodes=args.nodes, duration_s=args.duration,
                    replicas=args.replicas, master=args.master)


def _simulate(args: argparse.Namespace) -> int:
    from replica.demo import run_simulation
    return run_simulation(seed=args.seed, ticks=args.ticks, out=args.out)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="replica", description="Subnet replica with a deterministic message routing core.")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="the embedded default: a local testnet with the example apps, then a Spark audit")
    demo.add_argument("--subnets", type=int, default=3)
    demo.add_argument("--nodes", type=int, default=4, help="nodes per subnet")
    demo.add_argument("--duration", type=float, default=20.0, help="seconds of traffic")
    demo.add_argument("--replicas", type=int, default=1024, help="simulated replicas in the audit")
    demo.add_argument("--master", default="local[*]", help="Spark master for the audit")
    demo.add_argument("--out", default="runs/demo", help="testnet directory (replaced on every run)")
    demo.set_defaults(func=_demo)

    simulate = sub.add_parser("simulate", help="the example apps in the in-process simulation over a hostile network, then audit it")
    simulate.add_argument("--seed", type=int, default=7)
    simulate.add_argument("--ticks", type=int, default=40)
    simulate.add_argument("--out", default="runs/simulation", help="directory for the recorded run and reports")
    simulate.set_defaults(func=_simulate)

    from replica.testnet import add_testnet_command
    add_testnet_command(sub)  # testnet

    from replica.audit.cli import add_audit_commands
    add_audit_commands(sub)  # audit, replay-one
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
