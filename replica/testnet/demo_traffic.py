"""The demo user's traffic and the status numbers a testnet process writes each tick.

Shared by the subnet process and the node process: ``sub`` is anything with
``submit(envelope)`` (traffic) or ``read``/``latest_certification``/``query`` (status).
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter

from examples.ledger import account_of
from replica.client import IngressRefused, sign_ingress
from replica.testnet.launcher import COUNTER, LEDGER, PINGER, canister_range, user_key

__all__ = ["DemoTraffic", "subnet_status"]

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
            "to_ledger": other_base + LEDGER, "to": account_of(user_key(other).source),
            "amount": self.rng.randint(1, 100)})


def subnet_status(sub, position: int, apps: bool) -> dict:
    """The status file of a subnet (or of one node): heights, streams and, with the demo apps,
    their numbers. ``sub`` answers ``read(reader)``, ``latest_certification()`` and ``query``."""
    base = canister_range(position)[0]

    def read(state) -> dict:
        own = state.own_subnet_id
        return {
            "height": state.metadata.batch_number,
            "registry_version": state.metadata.network_topology.registry_version,   # of its latest batch
            "xnet_inducted": state.metadata.counters["xnet_messages_inducted"],
            "critical_errors": state.metadata.counters["critical_errors"],
            "streams": {dst: [s.begin, s.end, s.signals_end] for dst, s in state.streams.items() if dst != own},
            "open_calls": any(c.call_contexts or c.callbacks for c in state.canisters.values()),
        }

    status = sub.read(read)
    certification = sub.latest_certification()
    status["certified_height"] = certification.height if certification else 0
    status["certified_root"] = certification.root.hex() if certification else ""
    if not apps:
        return status
    status["balances"] = sum(amount for _, amount in sub.query(base + LEDGER, "accounts"))
    status["escrow"] = sub.query(base + LEDGER, "escrow")
    status["pings"] = sub.query(base + PINGER, "stats")
    status["counter"] = sub.query(base + COUNTER, "get")
    return status
