"""``replica call`` and ``replica request-status``: talk to a running testnet's canisters.

An update call returns only once its reply is certified: the agent reads the call's
``/request_status`` with ``read_state`` and verifies the tree against the certification and
the certification against the subnet key in the testnet's registry (``replica.client.agent``).
The reply is printed as JSON; a reject prints its code and message and exits 1.
``--dry-run`` executes the update on a copy of a node's latest certified state and throws it
away (nothing is committed, no hash changes): it prints the reply or reject, the
instructions used, the calls the method would make and the state paths it would change
(``replica.execution.dry_run``; ``--json`` for all of it as one object).

A canister is named by its principal (``rwlgt-iiaaa-aaaaa-aaaaa-cai``, as every command
prints it) or its decimal id. Calls to the management canister (``aaaaa-aa``) name the subnet
that executes them with ``--subnet``; ``replica canister install`` makes those calls for you.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from replica.errors import ReplicaError
from replica.ic.textual_ids import canister_text
from state_manager.messages import MANAGEMENT_CANISTER_ID

from .arguments import CANISTER_HELP, canister_argument
from .help import HelpFormatter, plain

__all__ = ["register", "parse_argument", "to_json"]


def parse_argument(text: str | None) -> Any:
    """The call's argument: JSON text (``None``: no argument). ``0x…`` strings become bytes."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"the argument is not JSON: {exc}") from None
    return _from_json(value)


def _from_json(value: Any) -> Any:
    if isinstance(value, str) and value.startswith("0x"):
        try:
            return bytes.fromhex(value[2:])
        except ValueError:
            return value
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _from_json(v) for k, v in value.items()}
    return value


def to_json(value: Any) -> str:
    """A reply as JSON: bytes as ``0x…`` strings, tuples as lists."""
    def convert(v: Any) -> Any:
        if isinstance(v, (bytes, bytearray)):
            return "0x" + bytes(v).hex()
        if isinstance(v, (list, tuple)):
            return [convert(x) for x in v]
        if isinstance(v, dict):
            return {str(convert(k)) if not isinstance(k, str) else k: convert(x) for k, x in v.items()}
        return v
    return json.dumps(convert(value))


def _agent(args: argparse.Namespace):
    from replica.client.identities import IdentityStore
    from replica.testnet.http_endpoints import agent_for_testnet
    from replica.processes.lifecycle import testnet_directory

    store = IdentityStore()
    identity = store.load(args.identity) if args.identity else store.current()
    return agent_for_testnet(testnet_directory(args.dir), identity.key)


def dry_run_json(result) -> dict:
    """A dry run's result as JSON (the reply decoded; a payload that does not decode as hex)."""
    from replica.sdk import decode_payload

    def value(payload: bytes) -> Any:
        try:
            return json.loads(to_json(decode_payload(payload)))
        except (ReplicaError, ValueError):
            return "0x" + payload.hex()
    return {"height": result.height, "status": result.status,
            "reply": value(result.reply) if result.reply is not None else None,
            "reject_code": result.reject_code, "reject_message": result.reject_message,
            "instructions": result.instructions, "instruction_limit_hit": result.limit_exceeded,
            "calls": [{"receiver": canister_text(c.receiver), "method": c.method, "arg": value(c.payload), "deadline": c.deadline}
                      for c in result.calls],
            "changed_paths": list(result.changed_paths), "more_changed_paths": result.more_paths}


def _print_dry_run(result, as_json: bool) -> int:
    answer = dry_run_json(result)
    if as_json:
        print(json.dumps(answer))
        return 1 if result.status == "rejected" else 0
    if result.status == "replied":
        print(f"reply: {json.dumps(answer['reply'])}")
    elif result.status == "rejected":
        print(f"rejected: {result.reject_code}: {result.reject_message}")
    else:
        print("no answer yet: it waits for the responses to the calls below")
    limit = " (stopped at the instruction limit)" if result.limit_exceeded else ""
    print(f"dry run on the certified state of height {result.height}: {result.instructions} instructions{limit}; "
          f"nothing was committed")
    for call in answer["calls"]:
        print(f"would call {call['receiver']}.{call['method']}({json.dumps(call['arg'])})"
              + (f" bounded-wait, deadline {call['deadline']}" if call["deadline"] else ""))
    more = f" (and {result.more_paths} more)" if result.more_paths else ""
    print(f"would change {len(result.changed_paths)} state paths{more}:")
    for path in result.changed_paths:
        print(f"  {path}")
    return 1 if result.status == "rejected" else 0


def _call(args: argparse.Namespace) -> int:
    from replica.client.agent_errors import CallRejected

    try:
        with _agent(args) as agent:
            if args.dry_run:
                return _print_dry_run(agent.dry_run(args.canister, args.method, args.arg, timeout_s=args.timeout),
                                      args.json)
            if args.query:
                print(to_json(agent.query_call(args.canister, args.method, args.arg)))
            elif args.async_:
                print(agent.submit_call(args.canister, args.method, args.arg, subnet=args.subnet).hex())
            else:
                print(to_json(agent.update_call(args.canister, args.method, args.arg, timeout_s=args.timeout,
                                                subnet=args.subnet)))
    except CallRejected as exc:
        print(f"rejected: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    except ReplicaError as exc:
        print(f"replica call: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    return 0


def _request_status(args: argparse.Namespace) -> int:
    from replica.sdk import decode_payload

    try:
        message_id = bytes.fromhex(args.message_id)
    except ValueError:
        print(f"replica request-status: {args.message_id!r} is not a hex message id", file=sys.stderr)
        return 2
    try:
        with _agent(args) as agent:
            if args.canister is not None:
                status = agent.request_status(message_id, args.canister, subnet=args.subnet)
            else:   # ask every subnet; each proves the message unknown, or answers for it
                for subnet in ([args.subnet] if args.subnet else [r.subnet_id for r in agent.registry.latest().subnets]):
                    status = agent.request_status(message_id, MANAGEMENT_CANISTER_ID, subnet=subnet)
                    if status.status != "unknown":
                        break
    except ReplicaError as exc:
        print(f"replica request-status: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    answer: dict[str, Any] = {"message_id": args.message_id, "status": status.status,
                              "certified_height": status.certificate.height}
    if status.reply is not None:
        answer["reply"] = json.loads(to_json(decode_payload(status.reply)))
    if status.reject_code is not None:
        answer.update(reject_code=status.reject_code, reject_message=status.reject_message)
    print(json.dumps(answer))
    return 1 if status.status == "rejected" else 0


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", default=None, help="testnet directory (none: $REPLICA_TESTNET, else .replica/testnet)")
    parser.add_argument("--identity", default=None, help="identity to sign with (none: the one in use)")
    parser.add_argument("--subnet", default=None,
                        help="the subnet that executes a call to the management canister (none: the canister's own)")


def register(sub) -> None:
    """``call`` and ``request-status``."""
    call = sub.add_parser("call", formatter_class=HelpFormatter, description=plain(__doc__),
                          help="call a canister on the running testnet; print its certified reply as JSON")
    call.add_argument("canister", type=canister_argument, help=f"the canister: {CANISTER_HELP}")
    call.add_argument("method")
    call.add_argument("arg", nargs="?", type=parse_argument, default=None,
                      help="the argument as JSON (0x-prefixed strings are bytes)")
    mode = call.add_mutually_exclusive_group()
    mode.add_argument("--query", action="store_true", help="a query: run on the latest certified state")
    mode.add_argument("--async", dest="async_", action="store_true", help="print the message id and return")
    mode.add_argument("--dry-run", action="store_true",
                      help="execute the update on a copy of the latest certified state, commit nothing; print the "
                           "reply, instructions, calls it would make and state paths it would change")
    call.add_argument("--json", action="store_true", help="--dry-run: everything as one JSON object")
    call.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a certified answer")
    _common(call)
    call.set_defaults(func=_call)

    status = sub.add_parser("request-status", formatter_class=HelpFormatter,
                            help="the verified status (and answer) of a call made with --async")
    status.add_argument("message_id", help="the message id (hex) `replica call --async` printed")
    status.add_argument("canister", type=canister_argument, nargs="?", default=None,
                        help=f"the canister it was sent to, {CANISTER_HELP} (none: ask every subnet)")
    _common(status)
    status.set_defaults(func=_request_status)
