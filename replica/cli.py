"""The ``replica`` command: one entry point, one subcommand per job."""

from __future__ import annotations

import argparse
import sys

__all__ = ["main", "build_parser"]


def _demo(args: argparse.Namespace) -> int:
    from replica.demo import run_demo
    return run_demo(seed=args.seed, ticks=args.ticks, out=args.out)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="replica", description="Subnet replica with a deterministic message routing core.")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="run the embedded default: a multi-subnet run with the example apps, then audit it")
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--ticks", type=int, default=40)
    demo.add_argument("--out", default="runs/demo", help="directory for the recorded run and reports")
    demo.set_defaults(func=_demo)

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
