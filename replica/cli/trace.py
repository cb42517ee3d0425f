"""``replica trace MESSAGE_ID``: where a call went, hop by hop, and where it is stuck.

Replays every subnet's recorded blocks (``DIR/blocks/``) from genesis with the replica's
own round function and follows the message (``replica.observe.trace``): the block that
carried it, its execution, every call it made (output queue → stream index → induction or
reject signal on the receiving subnet → the callee's execution and calls → the response's
way back → the callback), and its answer. A call that has not finished says where it is
stuck and why. While the testnet runs, the answer's status is also read with a verified
``read_state`` (``certified``). Works on a stopped testnet too (no ``certified`` then).
"""

from __future__ import annotations

from pathlib import Path

import argparse
import json
import sys
import time

from replica.errors import ReplicaError

from .help import HelpFormatter, plain

__all__ = ["register"]


def _certified(directory, trace) -> dict | None:
    """The verified ``request_status`` of the traced message, or ``None`` (testnet stopped)."""
    from replica.node.testnet_dir import TestnetDirectory
    from replica.testnet.http_endpoints import agent_for_testnet

    try:   # as the testnet's operator: a node shows a call's status to its sender and the operator only
        with agent_for_testnet(directory, TestnetDirectory(Path(directory)).operator()) as agent:
            status = agent.request_status(bytes.fromhex(trace.message_id), trace.canister, subnet=trace.subnet)
    except ReplicaError:
        return None
    return {"status": status.status, "height": status.certificate.height}


def _trace(args: argparse.Namespace) -> int:
    from replica.processes.lifecycle import testnet_directory
    from replica.observe.trace import format_trace, trace_message
    from replica.observe.trace_source import testnet_timelines

    try:
        message_id = bytes.fromhex(args.message_id)
    except ValueError:
        print(f"replica trace: {args.message_id!r} is not a hex message id", file=sys.stderr)
        return 2
    directory = testnet_directory(args.dir)
    try:
        timelines, round_s = testnet_timelines(directory, [message_id], quiet=args.json)
        trace = trace_message(message_id, timelines, now_ns=time.time_ns(), round_s=round_s)
        certified = _certified(directory, trace) if trace.found else None
    except ReplicaError as exc:
        print(f"replica trace: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({**trace.as_json(), "certified": certified}, indent=2))
    else:
        print("\n".join(format_trace(trace)))
        if certified is not None:
            print(f"certified: status {certified['status']} (read_state verified at height {certified['height']})")
    return 0 if trace.found else 1


def register(sub) -> None:
    """``trace``."""
    parser = sub.add_parser("trace", formatter_class=HelpFormatter, description=plain(__doc__),
                            help="every hop of a call (and of the calls it made); where it is stuck")
    parser.add_argument("message_id", help="the message id (hex), e.g. from `replica call --async`")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--dir", default=None, help="testnet directory (none: $REPLICA_TESTNET, else .replica/testnet)")
    parser.set_defaults(func=_trace)
