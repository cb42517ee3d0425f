"""``replica demo``: the embedded default, as a user of a local testnet would run it.

1. ``testnet up`` in a fresh directory (``subnets`` x ``nodes``, empty);
2. the example apps installed on every subnet through the management canister, as a user
   installs their own (``example_apps``): a ledger holding one user's tokens, a ping-pong
   player and a counter;
3. signed user traffic through the nodes' ingress HTTP APIs for ``duration_s`` seconds:
   counter increments, cross-subnet pings and cross-subnet ledger transfers, with a live
   progress line; then every call is awaited until its reply (or reject) is certified and
   verified by the agent;
4. the ledgers' total supply is read with queries (balances + escrow) and checked;
5. ``testnet down`` (settle, stop, write the run log), and a Spark determinism audit of the
   recorded run.

Exit status 0 only if every call was answered, the supply held and every replica agreed.
"""

from __future__ import annotations

import hashlib
import random
import shutil
import sys
import time
from pathlib import Path

from examples.ledger import account_of
from replica.client.agent_errors import CallRejected
from replica.client.identity import source_of
from replica.errors import ReplicaError
from replica.ic.textual_ids import canister_text
from replica.progress import Progress

from .example_apps import ExampleApps, initial_supply, install_example_apps
from replica.testnet.http_endpoints import agent_for_testnet
from replica.testnet.launcher import TestnetLayout, user_key
from replica.processes.lifecycle import down, up

__all__ = ["run_demo"]


def _traffic(agent, apps: dict[str, ExampleApps], rng: random.Random) -> list[tuple[bytes, int, str]]:
    """One round of calls from each subnet's user: an increment, a ping and a transfer; each
    with the subnet whose user sent it (a node shows a call's status to its sender only)."""
    sent = []
    for subnet, mine in apps.items():
        agent.identity = user_key(subnet)
        other = rng.choice([s for s in apps if s != subnet] or [subnet])
        theirs = apps[other]
        calls = [(mine.counter, "increment", rng.randint(1, 9)),
                 (mine.pinger, "ping", {"target": theirs.pinger, "rounds": rng.randint(1, 3)}),
                 (mine.ledger, "transfer", {"to_ledger": theirs.ledger, "to": account_of(source_of(user_key(other))),
                                            "amount": rng.randint(1, 100)})]
        for canister, method, arg in calls:
            sent.append((agent.submit_call(canister, method, arg), canister, subnet))
    return sent


def _supply(agent, apps: dict[str, ExampleApps]) -> int:
    total = 0
    for app in apps.values():
        total += sum(amount for _, amount in agent.query_call(app.ledger, "accounts"))
        total += agent.query_call(app.ledger, "escrow")
    return total


def run_demo(out: str = "runs/demo", *, subnets: int = 3, nodes: int = 4, duration_s: float = 20.0,
             replicas: int = 1024, master: str = "local[*]") -> int:
    """Testnet, apps, traffic, supply, audit (module docstring)."""
    from replica.audit.job import AuditOptions
    from replica.audit.run_log import load_run_log
    from replica.audit.session import audit_run_log

    root = Path(out)
    if root.exists():
        if not TestnetLayout(root).manifest.exists():
            print(f"{root} exists and is not a demo testnet directory; choose another --out", file=sys.stderr)
            return 2
        down(root)
        shutil.rmtree(root)  # the demo always starts from a fresh genesis
    print(f"== Local testnet: {subnets} subnets x {nodes} nodes in {root} ==")
    up(root, subnets=subnets, nodes=nodes, seed="replica-demo")
    try:
        names = TestnetLayout(root).read_manifest()["subnets"]
        rng = random.Random(hashlib.sha256(b"replica-demo-traffic").digest())
        with agent_for_testnet(root, user_key(names[0])) as agent:
            print("\n== The example apps, installed through the management canister ==")
            installing = Progress("installing")
            apps = install_example_apps(agent, names, installing)
            installing.finish("; ".join(f"{a.subnet}: counter {canister_text(a.counter)}, ping-pong "
                                        f"{canister_text(a.pinger)}, ledger {canister_text(a.ledger)}"
                                        for a in apps.values()))
            print(f"\n== {duration_s:.0f} s of signed traffic through the ingress API ==")
            progress = Progress("traffic")
            sent: list[tuple[bytes, int, str]] = []
            started = time.monotonic()
            while time.monotonic() - started < duration_s:
                sent += _traffic(agent, apps, rng)
                progress.update(f"{len(sent)} calls submitted")
                time.sleep(0.25)
            progress.finish(f"{len(sent)} calls submitted")
            waiting = Progress("waiting for certified answers", total=len(sent))
            outcomes = {"replied": 0, "rejected": 0}
            for k, (message_id, canister, sender) in enumerate(sent):
                agent.identity = user_key(sender)
                try:
                    agent.wait(message_id, canister, timeout_s=120)
                    outcomes["replied"] += 1
                except CallRejected:
                    outcomes["rejected"] += 1
                waiting.update(f"{outcomes['replied']} replied, {outcomes['rejected']} rejected", done=k + 1)
            waiting.finish(f"{outcomes['replied']} replied, {outcomes['rejected']} rejected (all certified)")
            supply = _supply(agent, apps)
    except ReplicaError as exc:
        print(f"demo: {type(exc).__name__}: {exc}", file=sys.stderr)
        down(root)
        return 1
    expected = initial_supply(apps)
    supply_ok = supply == expected
    print(f"  ledger supply {supply} (initial {expected}): {'invariant holds' if supply_ok else 'INVARIANT BROKEN'}")
    down(root)
    print("\n== Determinism audit of the recorded run ==")
    audited = audit_run_log(load_run_log(root / "run"), run_dir=str(root / "run"), out=root / "audit",
                            options=AuditOptions(replicas=replicas), master=master)
    return 0 if supply_ok and audited == 0 else 1
