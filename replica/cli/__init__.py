"""The ``replica`` command: one entry point, one module per group of subcommands.

Every module in ``COMMANDS`` has ``register(subparsers)``, which adds its subcommands and
sets each one's ``func(args) -> exit status``. ``--help`` shows every default.
"""

from __future__ import annotations

import argparse

from . import audit, call, canister, cluster, demo, identity, load, node, testnet, trace
from .help import HelpFormatter

__all__ = ["main", "build_parser", "COMMANDS"]

#: The modules that register subcommands, in the order ``--help`` lists them.
COMMANDS = (demo, testnet, identity, canister, call, load, trace, audit, cluster, node)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="replica", formatter_class=HelpFormatter,
                                     description="Subnet replica with a deterministic message routing core.")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
