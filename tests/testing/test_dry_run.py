"""``Testnet.dry_run`` (issue 26, part 2): an update executed on a copy of the latest state,
never committed. It answers what the call would do — reply or reject, instructions, the calls
it would make, the state paths it would change — and leaves every hash as it was: a network
that dry-ran calls reaches the same hashes as its twin that did not."""

from __future__ import annotations

from examples.counter import Counter
from examples.ping_pong import PingPong
from replica.testing import Testnet


def _hashes(net: Testnet) -> dict[str, bytes]:
    return {s: net.state_hash(s) for s in net.subnets}


def _scene(net: Testnet) -> tuple[int, int, int]:
    counter = net.install(Counter, subnet=net.subnets[0])
    pinger = net.install(PingPong, subnet=net.subnets[1])
    ponger = net.install(PingPong, subnet=net.subnets[0])
    net.update_call(counter, "increment", 5)
    return counter, pinger, ponger


def test_a_dry_run_answers_and_changes_no_hash() -> None:
    with Testnet(subnets=2, seed=3) as net, Testnet(subnets=2, seed=3) as twin:
        counter, pinger, ponger = _scene(net)
        _scene(twin)
        before = _hashes(net)
        assert before == _hashes(twin)

        dry = net.dry_run(counter, "increment", 7)
        assert (dry.status, dry.reply is not None, dry.instructions > 0, dry.limit_exceeded) == \
            ("replied", True, True, False)
        assert f"/canister_state/{counter}/stable/value" in dry.changed_paths
        assert any(p.startswith("/ingress_history/") for p in dry.changed_paths)   # as a real call's status
        assert dry.calls == ()
        crossing = net.dry_run(pinger, "ping", {"target": ponger, "rounds": 1})
        assert crossing.status == "waiting"
        assert [(c.receiver, c.method) for c in crossing.calls] == [(ponger, "pong")]
        assert f"/canister_state/{pinger}/queues/output/{ponger}" in crossing.changed_paths
        rejected = net.dry_run(counter, "no_such_method")
        assert (rejected.status, rejected.reject_code) == ("rejected", "CANISTER_ERROR")
        assert net.dry_run(counter, "increment", 7) == dry   # the same call on the same state: the same report

        assert _hashes(net) == before and net.query_call(counter, "get") == 5
        net.tick(3)
        twin.tick(3)
        assert _hashes(net) == _hashes(twin)   # nothing of the dry runs reached a block
        assert net.update_call(counter, "increment", 1) == 6


def test_a_dry_run_is_bounded_by_the_update_instruction_limit() -> None:
    source = (
        "from replica.sdk import Canister, update\n\n"
        "class Spin(Canister):\n"
        "    @update\n"
        "    def spin(self):\n"
        "        while True:\n"
        "            pass\n")
    with Testnet(subnets=1, seed=1) as net:
        spin = net.install(source, class_name="Spin")
        before = _hashes(net)
        dry = net.dry_run(spin, "spin")
        assert (dry.status, dry.limit_exceeded) == ("rejected", True)
        assert _hashes(net) == before
