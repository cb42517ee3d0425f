"""One fixed scenario, run the same way in this process and in a child process."""

from __future__ import annotations

import json
import sys

from replica.testing import CallRejected, Ed25519Identity, Testnet

from tests.testing.apps import Greeter, Probe


def run_scenario(seed: int | str) -> dict[str, str]:
    """Installs, same- and cross-subnet calls, a reject, time moves; every subnet's state hash."""
    with Testnet(subnets=3, nodes=1, seed=seed) as net:
        a = net.install(Greeter, subnet="subnet-0")
        b = net.install(Greeter, subnet="subnet-1")
        p = net.install(Probe, subnet="subnet-2")
        net.update_call(a, "ask", b)
        ids = [net.submit_call(b, "ask", a, sender=Ed25519Identity.from_seed(bytes([i]))) for i in range(3)]
        net.advance_time(1_500_000_000)
        net.tick(2)
        for mid in ids:
            net.await_call(mid)
        try:
            net.update_call(p, "fail", "deliberately")
        except CallRejected:
            pass
        net.update_call(p, "now")
        net.tick(6)   # let acknowledgements settle
        return {s: net.state_hash(s).hex() for s in net.subnets}


if __name__ == "__main__":
    print(json.dumps(run_scenario(sys.argv[1])))
