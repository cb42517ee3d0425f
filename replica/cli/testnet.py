"""``replica testnet``: create a local testnet directory (or resume one) and launch it."""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

from .help import HelpFormatter, plain

__all__ = ["register", "testnet_command"]


def testnet_command(args: argparse.Namespace) -> int:
    """Create the directory (unless it holds a testnet) and launch it."""
    from replica.testnet.launcher import TestnetLayout, create_testnet, launch

    layout = TestnetLayout(Path(args.dir))
    if layout.manifest.exists():
        manifest = layout.read_manifest()
        if (len(manifest["subnets"]), manifest["nodes"]) != (args.subnets, args.nodes):
            print(f"{layout.root} holds a testnet of {len(manifest['subnets'])} subnets x {manifest['nodes']} "
                  f"nodes; resuming it", file=sys.stderr)
    else:
        seed = hashlib.sha256(args.seed.encode()).digest()
        create_testnet(layout.root, args.subnets, args.nodes, seed=seed, tick_s=args.tick)
    return launch(layout.root, duration_s=args.duration, traffic=not args.no_traffic, restart=not args.no_restart)


def register(sub) -> None:
    """``testnet``."""
    from replica.testnet import launcher

    parser = sub.add_parser(
        "testnet", formatter_class=HelpFormatter,
        help="run a local multi-process testnet: one process per subnet, XNet over 127.0.0.1",
        description=plain(launcher.__doc__.split("\n\n")[0]))
    parser.add_argument("--subnets", type=int, default=2, help="subnets (new testnets)")
    parser.add_argument("--nodes", type=int, default=4, help="nodes per subnet")
    parser.add_argument("--dir", required=True, help="testnet directory (created, or resumed if it holds one)")
    parser.add_argument("--duration", type=float, default=None,
                        help="seconds of traffic before settling and stopping (none: until Ctrl-C)")
    parser.add_argument("--tick", type=float, default=0.5, help="seconds between heights (new testnets)")
    parser.add_argument("--seed", default="replica-testnet", help="genesis seed text (new testnets)")
    parser.add_argument("--no-traffic", action="store_true", help="do not submit demo traffic")
    parser.add_argument("--no-restart", action="store_true",
                        help="stop the testnet when a subnet process dies (otherwise it is restarted)")
    parser.set_defaults(func=testnet_command)
