"""The ``replica`` command: one entry point, one module per group of subcommands.

Every module in ``COMMANDS`` has ``register(subparsers)``, which adds its subcommands and
sets each one's ``func(args) -> exit status``. ``--help`` shows every default.
"""

from __future__ import annotations

import argparse
import re

from . import audit, demo, testnet

__all__ = ["main", "build_parser", "COMMANDS", "HelpFormatter", "plain"]

#: The modules that register subcommands, in the order ``--help`` lists them.
COMMANDS = (demo, testnet, audit)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every option's default shown beside it (unless it is none or off); descriptions keep
    their own line breaks."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.option_strings and action.default not in (None, False, [], argparse.SUPPRESS) \
                and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


def plain(text: str) -> str:
    """A docstring as help text: without reStructuredText's double backquotes."""
    return re.sub(r"``([^`]*)``", r"\1", text)


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
