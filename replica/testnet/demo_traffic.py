"""The demo user's traffic and the status numbers a testnet process writes each tick.

Shared by the subnet process and the node process: ``sub`` is anything with
``submit(envelope)`` (traffic) or ``read``/``latest_certification``/``query`` (status).
``DemoNode`` is the demo's part of a node process (``replica.node.process.Extension``): the
app numbers in its status and, on each subnet's first node, the demo user's traffic.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter

from examples.ledger import account_of
from replica.client import IngressRefused, sign_ingress, source_of
from replica.node.state_status import state_status
from replica.testnet.launcher import COUNTER, LEDGER, PINGER, TestnetLayout, canister_range, has_genesis_apps, user_key

__all__ = ["DemoTraffic", "subnet_status", "app_status", "DemoNode"]

_log = logging.getLogger("replica.testnet.demo_traffic")
_TTL_NS = 120 * 10**9


class DemoTraffic:
    """The subnet's demo user: a ping, a cross-subnet transfer and an increment per tick.
    A refused call is counted by reason (``refused``) and logged; the traffic goes on."""

    def __init__(self, subnet: str, subnets: list[str]) -> None:
        self.subnet = subnet
        self.position = subnets.index(subnet)
        self.others = [(s, i) for i, s in enumerate(subnets) if s != subnet]
        self.user = user_key(subnet)
        self.rng = random.Random(f"traffic/{subnet}")
        self.nonce = time.time_ns()
        self.refused: Counter[str] = Counter()

    def _submit(self, sub, receiver: int, method: str, arg) -> None:
        self.nonce += 1
        envelope = sign_ingress(self.user, receiver, method, arg, self.nonce, time.time_ns() + _TTL_NS)
        try:
            sub.submit(envelope)
        except IngressRefused as refusal:
            self.refused[refusal.reason] += 1
            _log.warning("%s: demo call %s on %d refused (%s, %d so far): %s", self.subnet, method, receiver,
                         refusal.reason, self.refused[refusal.reason], refusal)

    def tick(self, sub) -> None:
        base = canister_range(self.position)[0]
        self._submit(sub, base + COUNTER, "increment", self.rng.randint(1, 9))
        if not self.others:
            return
        other, position = self.rng.choice(self.others)
        other_base = canister_range(position)[0]
        self._submit(sub, base + PINGER, "ping", {"target": other_base + PINGER, "rounds": self.rng.randint(1, 3)})
        self._submit(sub, base + LEDGER, "transfer", {
            "to_ledger": other_base + LEDGER, "to": account_of(source_of(user_key(other))),
            "amount": self.rng.randint(1, 100)})


def subnet_status(sub, position: int, apps: bool) -> dict:
    """The status file of a subnet (or of one node): heights, streams and, with the demo apps,
    their numbers. ``sub`` answers ``read(reader)``, ``latest_certification()`` and ``query``."""
    status = sub.read(state_status)
    certification = sub.latest_certification()
    status["certified_height"] = certification.height if certification else 0
    status["certified_root"] = certification.root.hex() if certification else ""
    if apps:
        status.update(app_status(sub, position))
    return status


def app_status(sub, position: int) -> dict:
    """The example apps' numbers on the subnet at ``position`` (``sub`` answers ``query``)."""
    base = canister_range(position)[0]
    return {
        "balances": sum(amount for _, amount in sub.query(base + LEDGER, "accounts")),
        "escrow": sub.query(base + LEDGER, "escrow"),
        "pings": sub.query(base + PINGER, "stats"),
        "counter": sub.query(base + COUNTER, "get"),
    }


class DemoNode:
    """The demo's part of a node process, called every tick with the ``NodeProcess``: with the
    example apps at genesis, their numbers for its status file, and on each subnet's first
    node the demo user's traffic (unless ``control/traffic-off`` exists)."""

    def __init__(self) -> None:
        self._traffic: DemoTraffic | None = None
        self._started = False

    def __call__(self, process) -> dict:
        manifest = process.manifest
        if not has_genesis_apps(manifest):
            return {}
        subnets = list(manifest["subnets"])
        subnet = process.config.subnet_id
        if not self._started:
            self._started = True
            first = process.registry.get().latest().subnet(subnet).node_ids[0]
            if first == process.config.node_id:
                self._traffic = DemoTraffic(subnet, subnets)
        if self._traffic is not None and not TestnetLayout(process.directory.root).traffic_off.exists():
            self._traffic.tick(process)
        return app_status(process, subnets.index(subnet))
