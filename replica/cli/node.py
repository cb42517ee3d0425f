"""``replica node run --config FILE``: run one replica node as this process.

The testnet's launcher starts one such process per node (``replica testnet up``) and
restarts it when it dies; run it by hand only to debug a node of a stopped testnet.
The node and its files are described in ``replica.node.process``; the testnet's demo adds its
traffic and app numbers (``replica.testnet.demo_traffic.DemoNode``).
"""

from __future__ import annotations

import argparse

from .help import HelpFormatter, plain

__all__ = ["register"]


def _run(args: argparse.Namespace) -> int:
    from replica.node.process import main
    from replica.testnet.demo_traffic import DemoNode

    return main(["--config", args.config], extension=DemoNode())


def register(sub) -> None:
    """``node run``."""
    parser = sub.add_parser("node", formatter_class=HelpFormatter, description=plain(__doc__),
                            help="run one replica node (started by the testnet launcher)")
    commands = parser.add_subparsers(dest="node_command", required=True)
    run = commands.add_parser("run", formatter_class=HelpFormatter, help="run the node a config file describes",
                              description=plain(__doc__))
    run.add_argument("--config", required=True, help="the node's config.json (written by the launcher)")
    run.set_defaults(func=_run)
