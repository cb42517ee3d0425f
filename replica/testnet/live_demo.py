"""``replica demo``: the embedded default, as a user of a local testnet would run it.

1. ``testnet up`` in a fresh directory (``subnets`` x ``nodes``; every subnet hosts the
   example ledger, ping-pong player and counter, and one user whose tokens live on its ledger);
2. signed user traffic through the nodes' ingress HTTP APIs for ``duration_s`` seconds:
   counter increments, cross-subnet pings and cross-subnet ledger transfers, with a live
   progress line; then every call is awaited until its reply (or reject) is certified and
   verified by the agent;
3. the ledgers' total supply is read with queries (balances + escrow) and checked;
4. ``testnet down`` (settle, stop, write the run log), and a Spark determinism audit of the
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
from replica.errors import ReplicaError
from replica.progress import Progress

from .http_endpoints import agent_for_testnet
from .launcher import COUNTER, INITIAL_BALANCE, LEDGER, PINGER, TestnetLayout, canister_range, user_key
from .lifecycle import down, up

__all__ = ["run_demo"]


def _traffic(agent, subnets: list[str], rng: random.Random) -> list[tuple[bytes, int]]:
    """One round of calls from each subnet's user: an increment, a ping and a transfer."""
    sent = []
    for position, subnet in enumerate(subnets):
        base = canister_range(position)[0]
        agent.identity = user_key(subnet)
        others = [i for i in range(len(subnets)) if i != position] or [position]
        other = rng.choice(others)
        other_base = canister_range(other)[0]
        calls = [(base + COUNTER, "increment", rng.randint(1, 9)),
                 (base + PINGER, "ping", {"target": other_base + PINGER, "rounds": rng.randint(1, 3)}),
                 (base + LEDGER, "transfer", {"to_ledger": other_base + LEDGER,
                                              "to": account_of(user_key(subnets[other]).source),
                                              "amount": rng.randint(1, 100)})]
        for canister, method, arg in calls:
            sent.append((agent.submit_call(canister, method, arg), canister))
    return sent


def _supply(agent, subnets: list[str]) -> int:
    total = 0
    for position in range(len(subnets)):
        ledger = canister_range(position)[0] + LEDGER
        total += sum(amount for _, amount in agent.query_call(ledger, "accounts"))
        total += agent.query_call(ledger, "escrow")
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
            print(f"\n== {duration_s:.0f} s of signed traffic through the ingress API ==")
            progress = Progress("traffic")
            sent: list[tuple[bytes, int]] = []
            started = time.monotonic()
            while time.monotonic() - started < duration_s:
                sent += _traffic(agent, names, rng)
                progress.update(f"{len(sent)} calls submitted")
                time.sleep(0.25)
            progress.finish(f"{len(sent)} calls submitted")
            waiting = Progress("waiting for certified answers", total=len(sent))
            outcomes = {"replied": 0, "rejected": 0}
            for k, (message_id, canister) in enumerate(sent):
                try:
                    agent.wait(message_id, canister, timeout_s=120)
                    outcomes["replied"] += 1
                except CallRejected:
                    outcomes["rejected"] += 1
                waiting.update(f"{outcomes['replied']} replied, {outcomes['rejected']} rejected", done=k + 1)
            waiting.finish(f"{outcomes['replied']} replied, {outcomes['rejected']} rejected (all certified)")
            supply = _supply(agent, names)
    except ReplicaError as exc:
        print(f"demo: {type(exc).__name__}: {exc}", file=sys.stderr)
        down(root)
        return 1
    expected = INITIAL_BALANCE * len(names)
    supply_ok = supply == expected
    print(f"  ledger supply {supply} (initial {expected}): {'invariant holds' if supply_ok else 'INVARIANT BROKEN'}")
    down(root)
    print("\n== Determinism audit of the recorded run ==")
    audited = audit_run_log(load_run_log(root / "run"), run_dir=str(root / "run"), out=root / "audit",
                            options=AuditOptions(replicas=replicas), master=master)
    return 0 if supply_ok and audited == 0 else 1
