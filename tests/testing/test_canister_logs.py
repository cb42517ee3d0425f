"""Canister logs and ``raw_rand`` through ``replica.testing`` (deterministic mode), as an app
developer sees them: ``Testnet.canister_logs`` and a canister drawing randomness."""

from __future__ import annotations

import pytest

from replica.testing import CallRejected, CanisterLogRecord, Ed25519Identity, Testnet

from .logging_apps import Diary, Diary2


def _contents(net: Testnet, cid: int) -> list[str]:
    return [r.content for r in net.canister_logs(cid)]


def test_logs_are_read_by_the_controller_traps_included(testnet):
    cid = testnet.install(Diary, arg="hi")
    testnet.advance_time(5 * 10**9)
    assert testnet.update_call(cid, "write", "hello") == 5
    with pytest.raises(CallRejected) as trapped:
        testnet.update_call(cid, "fail", "boom")
    assert "refused boom" in trapped.value.message
    records = testnet.canister_logs(cid)
    assert all(isinstance(r, CanisterLogRecord) for r in records)
    assert [r.index for r in records] == [0, 1, 2]
    assert [r.content for r in records][:2] == ["init hi", "hello"]
    assert records[2].content.startswith("trapped: Trap: refused boom (") and "instructions)" in records[2].content
    assert records[0].timestamp_nanos < records[1].timestamp_nanos <= records[2].timestamp_nanos <= testnet.get_time()
    with pytest.raises(CallRejected) as refused:
        testnet.canister_logs(cid, sender=Ed25519Identity.from_seed(b"not the controller"))
    assert refused.value.code == "CANISTER_ERROR" and "only the controller" in refused.value.message


def test_logs_stay_bounded_survive_upgrades_and_go_with_reinstalls(testnet):
    cid = testnet.install(Diary)
    for n in range(30):
        testnet.submit_call(cid, "write_many", [f"{n:03d}:" + "x" * 96] * 2)   # 116 bytes a record
    testnet.tick(3)
    records = testnet.canister_logs(cid)
    assert records[-1].index == 60 and records[-1].content.startswith("029:")
    assert len(records) == 4096 // 116 and [r.index for r in records] == list(range(61 - len(records), 61))
    testnet.install(Diary2, mode="upgrade", canister_id=cid, arg="v2")
    assert _contents(testnet, cid)[-2:] == [records[-1].content, "upgraded v2"]
    testnet.install(Diary, mode="reinstall", canister_id=cid, arg="fresh")
    assert [(r.index, r.content) for r in testnet.canister_logs(cid)] == [(62, "init fresh")]


def test_a_migrated_canister_keeps_its_log(testnet):
    cid = testnet.install(Diary, subnet=testnet.subnets[0], arg="home")
    testnet.update_call(cid, "write", "before")
    before = testnet.canister_logs(cid)
    testnet.migrate(cid, testnet.subnets[1])
    assert testnet.get_subnet(cid) == testnet.subnets[1]
    testnet.update_call(cid, "write", "after")
    assert testnet.canister_logs(cid) == before + testnet.canister_logs(cid)[len(before):]
    assert _contents(testnet, cid)[-1] == "after"


def _draws(seed: int, nodes: int, wait_ns: int = 0) -> tuple:
    with Testnet(subnets=1, nodes=nodes, seed=seed) as net:
        cid = net.install(Diary)
        net.advance_time(wait_ns)
        first = net.update_call(cid, "draw", 3)          # answered by the first draw's callback
        net.tick(2)
        draws = net.query_call(cid, "draws")
        assert draws[0] == first
        net.run_log(checkpoint_interval=3)                # replays every height to the recorded hashes
        return draws, net.state_hash(net.subnets[0]), [r.content for r in net.canister_logs(cid)]


def test_raw_rand_draws_32_different_bytes_per_call_the_same_on_every_replica_and_replay():
    draws, state_hash, log = _draws(seed=3, nodes=4)    # four replicas certify the state together
    assert len(draws) == 3 and all(type(d) is bytes and len(d) == 32 for d in draws)
    assert len(set(draws)) == 3
    assert log == ["init None"] + [f"drew {d.hex()}" for d in draws]
    assert _draws(seed=3, nodes=4) == (draws, state_hash, log)     # another run: the same bytes
    # The tape is a hash of the finalized block: other blocks (here: another batch time) give
    # other bytes. (Another seed alone changes only keys, which blocks do not hold.)
    other, _, _ = _draws(seed=3, nodes=4, wait_ns=1)
    assert not set(other) & set(draws)
