"""``replica canister install PATH.py:ClassName``: put your own canister on the running testnet;
``replica canister logs ID``: read its log.

The module's source travels in an ingress message to the management canister: first
``create_canister`` on ``--subnet`` (unless ``--canister`` names one you control), then
``install_code`` with the source, the class name, ``--mode`` and ``--arg``. Both answers are
certified and verified (as for ``replica call``). The canister id (its textual principal) is
printed on stdout.

Every node of the subnet loads the same source from its replicated state, and
``/canister/<id>/module_hash`` is the SHA-256 of it; nothing reads your file after the
install, and audits replay the canister from the recorded state. The code runs as it is on
the replicas (no sandbox): install only your own code. Upgrades (``--mode upgrade``) keep
``self.stable`` and run the new class's ``post_upgrade(arg)`` if it has one; ``reinstall``
wipes it and runs ``init(arg)`` again. A module that does not load is rejected with the reason.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone

from replica.errors import ReplicaError
from replica.ic.textual_ids import canister_text

from .arguments import CANISTER_HELP, canister_argument
from .call import parse_argument
from .help import HelpFormatter, plain

__all__ = ["register"]


def _install(args: argparse.Namespace) -> int:
    from replica.client.agent_errors import CallRejected
    from replica.client.identities import IdentityStore
    from replica.client.management import create_canister, install_code, read_module
    from replica.testnet.http_endpoints import agent_for_testnet
    from replica.processes.lifecycle import testnet_directory

    created = None
    try:
        source, class_name, path = read_module(args.module)
        store = IdentityStore()
        identity = store.load(args.identity) if args.identity else store.current()
        with agent_for_testnet(testnet_directory(args.dir), identity.key) as agent:
            canister_id = args.canister
            if canister_id is None:
                if args.mode != "install":
                    print(f"replica canister install: --mode {args.mode} needs --canister ID", file=sys.stderr)
                    return 2
                subnet = args.subnet or agent.registry.latest().subnet_ids()[0]
                canister_id = created = create_canister(agent, subnet, timeout_s=args.timeout)
                print(f"created canister {canister_text(canister_id)} on {subnet}", file=sys.stderr)
            elif args.subnet is not None and agent.subnet_of(canister_id) != args.subnet:
                print(f"replica canister install: canister {canister_text(canister_id)} is not on {args.subnet}",
                      file=sys.stderr)
                return 2
            digest = install_code(agent, canister_id, source, class_name, args.arg, mode=args.mode,
                                  timeout_s=args.timeout)
    except CallRejected as exc:
        print(f"rejected: {exc.code}: {exc.message}", file=sys.stderr)
        _left_empty(created)
        return 1
    except ReplicaError as exc:
        print(f"replica canister install: {type(exc).__name__}: {exc}", file=sys.stderr)
        _left_empty(created)
        return 2
    print(f"{args.mode}: {class_name} from {path} on canister {canister_text(canister_id)} "
          f"(module hash {digest.hex()})", file=sys.stderr)
    print(canister_text(canister_id))
    return 0


def _left_empty(created: int | None) -> None:
    if created is not None:
        text = canister_text(created)
        print(f"canister {text} was created and is empty: install into it with --canister {text}", file=sys.stderr)


_LOGS_DOC = """``replica canister logs ID``: print the canister's log, oldest record first, one line each:
``[index] time text`` (time: the batch time the record was logged at, UTC, to the nanosecond).

The log holds what the canister's code logged (``self.log(text)``) in messages that did not
trap, and a ``trapped: ...`` record for each message that did. It keeps the newest 4 KiB,
across upgrades; a reinstall empties it. It is read with ``fetch_canister_logs``, an update
call to the management canister whose answer is certified and verified like any call's; only
the canister's controller may read it (sign with ``--identity`` if that is not you).
"""


def format_log_time(timestamp_nanos: int) -> str:
    """``2026-11-27T02:06:48.123456789Z``: a batch time in UTC, to the nanosecond."""
    seconds, nanos = divmod(timestamp_nanos, 1_000_000_000)
    moment = datetime.fromtimestamp(seconds, tz=timezone.utc)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{nanos:09d}Z"


def _logs(args: argparse.Namespace) -> int:
    from replica.client.agent_errors import CallRejected
    from replica.client.identities import IdentityStore
    from replica.client.management import fetch_canister_logs
    from replica.testnet.http_endpoints import agent_for_testnet
    from replica.processes.lifecycle import testnet_directory

    try:
        store = IdentityStore()
        identity = store.load(args.identity) if args.identity else store.current()
        with agent_for_testnet(testnet_directory(args.dir), identity.key) as agent:
            records = fetch_canister_logs(agent, args.canister_id, timeout_s=args.timeout)
    except CallRejected as exc:
        print(f"rejected: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    except ReplicaError as exc:
        print(f"replica canister logs: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    for record in records:
        print(f"[{record.index}] {format_log_time(record.timestamp_nanos)} {record.content}")
    return 0


def register(sub) -> None:
    """``canister install``, ``canister logs``."""
    canister = sub.add_parser("canister", formatter_class=HelpFormatter, help="install your own canisters, read their logs",
                              description=plain(__doc__))
    commands = canister.add_subparsers(dest="canister_command", required=True)
    install = commands.add_parser("install", formatter_class=HelpFormatter, description=plain(__doc__),
                                  help="install PATH.py:ClassName on the running testnet; print the canister id")
    install.add_argument("module", metavar="PATH.py:ClassName", help="the module's file and the Canister class in it")
    install.add_argument("--subnet", default=None,
                         help="the subnet to create the canister on (none: the registry's first subnet)")
    install.add_argument("--arg", type=parse_argument, default=None,
                         help="the argument of init (install, reinstall) or post_upgrade (upgrade), as JSON")
    install.add_argument("--mode", choices=("install", "reinstall", "upgrade"), default="install",
                         help="install on a new canister, or replace the code of --canister")
    install.add_argument("--canister", type=canister_argument, default=None,
                         help=f"install on this existing canister (you must be its controller): {CANISTER_HELP}")
    install.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for each certified answer")
    install.add_argument("--dir", default=None, help="testnet directory (none: $REPLICA_TESTNET, else .replica/testnet)")
    install.add_argument("--identity", default=None, help="identity to sign with (none: the one in use)")
    install.set_defaults(func=_install)
    logs = commands.add_parser("logs", formatter_class=HelpFormatter, description=plain(_LOGS_DOC),
                               help="print a canister's log: [index] time text")
    logs.add_argument("canister_id", metavar="ID", type=canister_argument,
                      help=f"the canister (you must be its controller): {CANISTER_HELP}")
    logs.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the certified answer")
    logs.add_argument("--dir", default=None, help="testnet directory (none: $REPLICA_TESTNET, else .replica/testnet)")
    logs.add_argument("--identity", default=None, help="identity to sign with (none: the one in use)")
    logs.set_defaults(func=_logs)
