"""``replica demo`` and ``replica simulate``: the embedded default runs (``replica.demo.simulate``)."""

from __future__ import annotations

import argparse

from .help import HelpFormatter

__all__ = ["register"]


def _demo(args: argparse.Namespace) -> int:
    from replica.demo.live_demo import run_demo
    return run_demo(args.out, subnets=args.subnets, nodes=args.nodes, duration_s=args.duration,
                    replicas=args.replicas, master=args.master)


def _simulate(args: argparse.Namespace) -> int:
    from replica.demo.simulate import run_simulation
    return run_simulation(seed=args.seed, ticks=args.ticks, out=args.out)


def register(sub) -> None:
    """``demo`` and ``simulate``."""
    demo = sub.add_parser("demo", formatter_class=HelpFormatter,
                          help="the embedded default: a local testnet with the example apps, then a Spark audit")
    demo.add_argument("--subnets", type=int, default=3, help="subnets of the testnet")
    demo.add_argument("--nodes", type=int, default=4, help="nodes per subnet")
    demo.add_argument("--duration", type=float, default=20.0, help="seconds of traffic")
    demo.add_argument("--replicas", type=int, default=1024, help="simulated replicas in the audit")
    demo.add_argument("--master", default="local[*]", help="Spark master for the audit")
    demo.add_argument("--out", default="runs/demo", help="testnet directory (replaced on every run)")
    demo.set_defaults(func=_demo)

    simulate = sub.add_parser(
        "simulate", formatter_class=HelpFormatter,
        help="the example apps in the in-process simulation over a hostile network, then audit it")
    simulate.add_argument("--seed", type=int, default=7, help="seed of the hostile network and the traffic")
    simulate.add_argument("--ticks", type=int, default=40, help="ticks of traffic before settling")
    simulate.add_argument("--out", default="runs/simulation", help="directory for the recorded run and reports")
    simulate.set_defaults(func=_simulate)
