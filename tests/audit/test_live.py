"""The live audit's parts without a testnet: the feed, the recorder's read-only tail of a
node's executed log, the live plan, and replica hosts (kept replicas give the offline
replay's rows, and resume from their snapshots)."""

from __future__ import annotations

import pytest

from message_routing.batch import encode_batch
from replica.audit.errors import RunLogError
from replica.audit.executor import replay_replica
from replica.audit.inputs import prepare_run
from replica.audit.job import AuditOptions, plan_for
from replica.audit.live_feed import FeedContext, FeedReader, FeedWriter, decode_chunk, encode_chunk
from replica.audit import live_host
from replica.audit.live_host import ReplicaHost, read_checkpoint
from replica.audit.perturbation import NONE, parse_fault
from replica.audit.replicas import LIVE_HASH_SEEDS, ReplicaSpec, checkpoint_writers, in_run, plan_live_replicas
from replica.node.node_store import ExecutedLog
from replica.testnet.live_recorder import ExecutedTail

from .runs import recorded_run

H32 = b"\x11" * 32


def _feed(log, root) -> FeedWriter:
    feed = FeedWriter(root)
    feed.write_context(FeedContext(log.subnet_ids(), log.canister_modules, log.limits_name, log.limits,
                                   log.checkpoint_interval, log.topologies, log.build))
    for subnet in log.subnets:
        feed.write_genesis(subnet.subnet_id, subnet.genesis)
        entries = [(h, b, f, c) for b, (h, f, c) in zip(subnet.batches, subnet.hashes)]
        for first in range(0, len(entries), 3):   # chunks of three heights, as a recorder writes them
            feed.append(subnet.subnet_id, entries[first:first + 3])
    return feed


@pytest.fixture(scope="module")
def log():
    return recorded_run(ticks=10, checkpoint_interval=4)


def test_the_feed_keeps_heights_in_order_and_refuses_gaps(log, tmp_path):
    feed = _feed(log, tmp_path / "feed")
    reader = FeedReader(feed.root)
    assert reader.heights() == {s.subnet_id: s.height for s in log.subnets}
    subnet = log.subnets[0]
    assert [e[1] for e in reader.entries(subnet.subnet_id, 2, 7)] == list(subnet.batches[1:7])
    assert reader.context().topologies == log.topologies
    with pytest.raises(RunLogError, match="needs 11"):
        feed.append(subnet.subnet_id, [(12, b"x", H32, H32)])
    with pytest.raises(RunLogError, match="height 3 after 1"):
        decode_chunk(encode_chunk("subnet-a", [(1, b"x", H32, H32), (3, b"y", H32, H32)]))
    assert not any(p.name.startswith(".") for p in reader.chunks.iterdir())   # no partial chunk left behind


def test_the_tail_reads_complete_records_only_and_never_touches_the_file(tmp_path):
    path = tmp_path / "executed.log"
    log = ExecutedLog(path)
    for height in (1, 2, 3):
        log.record(height, b"batch%d" % height, H32, H32)
    log.close()
    whole = path.read_bytes()
    tail = ExecutedTail(path)
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x00\x40\x01\x02")   # a record the node is still appending
    tail.poll(keep_from=1)
    assert sorted(tail.entries) == [1, 2, 3] and tail.entries[2][1] == b"batch2"
    assert path.read_bytes() == whole + b"\x00\x00\x00\x40\x01\x02"   # nothing truncated
    with open(path, "r+b") as f:
        f.truncate(len(whole))
    log = ExecutedLog(path)
    log.record(4, b"batch4", H32, H32)
    log.close()
    tail.poll(keep_from=3)
    assert sorted(tail.entries) == [3, 4]
    path.rename(tmp_path / "executed.log.replaced-1")   # a state sync moves the log aside
    log = ExecutedLog(path)
    log.record(40, b"batch40", H32, H32)
    log.close()
    tail.poll(keep_from=5)
    assert sorted(tail.entries) == [40]


def test_the_live_plan_is_fixed_before_the_run_ends_and_offline_can_replay_it(log):
    specs = plan_live_replicas(("subnet-b", "subnet-a"), 40, 7, 10)
    assert specs == plan_live_replicas(("subnet-a", "subnet-b"), 40, 7, 10)
    assert {s.subnet for s in specs[:2]} == {"subnet-a", "subnet-b"} and specs[0].perturbation.text() == "none"
    assert max(s.start for s in specs) <= 40
    assert len({s.perturbation.hash_seed for s in specs if s.perturbation.hash_seed}) <= LIVE_HASH_SEEDS
    reached = in_run(specs, {"subnet-a": 25, "subnet-b": 25}, {"subnet-a": (10, 20), "subnet-b": (10, 20)})
    assert all(s.start in (0, 10, 20) for s in reached) and len(reached) < len(specs)
    offline = plan_for(log, AuditOptions(replicas=12, seed=3, plan="live"), 0)
    heights = {s.subnet_id: s.height for s in log.subnets}
    assert offline == in_run(plan_live_replicas(log.subnet_ids(), 12, 3, 4), heights,
                             {s.subnet_id: s.checkpoint_heights() for s in log.subnets})


def _advance(host, specs, reported, targets, log, sent, audit_dir, writers=None):
    batches = [(s.subnet_id, h, s.batches[h - 1]) for s in log.subnets for h in range(sent + 1, targets + 1)]
    runnable = [s for s in specs if reported[s.replica] < targets and
                (s.start == 0 or (s.start <= targets and read_checkpoint(audit_dir, s.subnet, s.start) is not None))]
    writers = checkpoint_writers(specs) if writers is None else writers
    rows = list(host.advance([(s.replica, s.subnet, s.perturbation.text(), reported[s.replica],
                               writers.get(s.subnet) == s.replica) for s in runnable],
                             {s.subnet_id: targets for s in log.subnets}, batches, log.checkpoint_interval))
    for row in rows:
        reported[row[0]] = max(reported[row[0]], row[2])
    return rows


def test_kept_replicas_give_the_offline_rows_and_resume_from_their_snapshots(log, tmp_path, monkeypatch):
    monkeypatch.setattr(live_host, "SNAPSHOT_EVERY", 1)   # a snapshot at every checkpoint height of this short run
    feed = _feed(log, tmp_path / "feed")
    audit_dir = tmp_path / "audit"
    specs = [s for s in plan_for(log, AuditOptions(replicas=12, seed=3, plan="live"), 0)
             if s.perturbation.hash_seed is None]   # hash seeds need their own process
    host = ReplicaHost(audit_dir, FeedReader(feed.root))
    reported = {s.replica: -1 for s in specs}
    rows, sent = [], 0
    for target in (3, 7, 10, 10):   # the last pass starts the replicas whose checkpoint came last
        rows += _advance(host, specs, reported, target, log, sent, audit_dir)
        sent = target
    assert not [r for r in rows if r[5] is not None]
    live = {(r[0], r[2]): (r[3], r[4]) for r in rows}
    assert len(live) == len(rows)                    # every height reported once
    run = prepare_run(log)
    offline = {(r[0], r[2]): (r[3], r[4]) for s in specs for r in replay_replica(run, s.replica, s.subnet,
                                                                                s.perturbation.text())}
    assert live == offline
    # a new host (the old one is gone) asked for heights after 8: they come from the snapshots at 8
    fresh = ReplicaHost(audit_dir, FeedReader(feed.root))
    behind = {s.replica: 8 for s in specs}
    again = _advance(fresh, specs, behind, 10, log, 8, audit_dir)
    assert {(r[0], r[2]): (r[3], r[4]) for r in again} == {k: v for k, v in offline.items() if k[1] > 8}
    assert any(s.start < 8 for s in specs) and sorted((audit_dir / "replicas").glob("*/*.bin"))


def test_one_replica_per_subnet_writes_its_checkpoints(log, tmp_path):
    # The live plan has several unperturbed replicas per subnet, spread over hosts (processes).
    # When each wrote the subnet's checkpoints, two hosts replacing one checkpoint through its one
    # temporary file raced: the later rename found the file gone and that replica failed with an
    # error row at a checkpoint height, a divergence long before any fault.
    specs = plan_live_replicas(log.subnet_ids(), 40, 3, log.checkpoint_interval)
    subnet = log.subnets[0].subnet_id
    plain = [s for s in specs if s.subnet == subnet and s.perturbation == NONE]
    assert len(plain) >= 2
    writers = checkpoint_writers(specs)
    assert writers[subnet] == plain[0].replica == min(s.replica for s in specs if s.subnet == subnet)
    # a fault on the baseline: the next unperturbed replica of the subnet writes its checkpoints
    faulted = [ReplicaSpec(plain[0].replica, subnet, plan_live_replicas(
        log.subnet_ids(), 40, 3, log.checkpoint_interval, faults={plain[0].replica: parse_fault("flip@5")}
    )[plain[0].replica].perturbation) if s.replica == plain[0].replica else s for s in specs]
    assert checkpoint_writers(faulted)[subnet] == plain[1].replica

    feed = _feed(log, tmp_path / "feed")
    audit_dir = tmp_path / "audit"
    target = log.subnets[0].height
    other_host = ReplicaHost(audit_dir, FeedReader(feed.root))   # a second unperturbed replica, in its own host
    rows = _advance(other_host, [plain[1]], {plain[1].replica: -1}, target, log, 0, audit_dir, writers)
    assert not [r for r in rows if r[5] is not None] and len(rows) == target + 1
    assert not (audit_dir / "checkpoints").exists()
    baseline_host = ReplicaHost(audit_dir, FeedReader(feed.root))
    rows = _advance(baseline_host, [plain[0]], {plain[0].replica: -1}, target, log, 0, audit_dir, writers)
    assert not [r for r in rows if r[5] is not None]
    recorded = dict(log.subnets[0].checkpoints)
    assert recorded and {h: read_checkpoint(audit_dir, subnet, h) for h in recorded} == recorded


def test_the_status_file_and_metrics_say_verdict_and_lag(tmp_path):
    import json
    import urllib.request

    from replica.audit.live_status import LiveMetrics, describe_live_status, read_live_status

    assert read_live_status(tmp_path) is None
    (tmp_path / "live-audit").mkdir()
    (tmp_path / "live-audit" / "status.json").write_text(json.dumps({"format": "something else"}))
    assert read_live_status(tmp_path) is None
    status = {"format": "replica-live-audit-status", "version": 1, "state": "following", "verdict": "divergent",
              "replicas": 128, "audited": {"subnet-0": 120, "subnet-1": 118}, "testnet": {"subnet-0": 123},
              "lag_rounds": {"subnet-0": 3, "subnet-1": 5}, "micro_batches": 7,
              "first_divergence": {"subnet": "subnet-0", "height": 101}, "report": None}
    (tmp_path / "live-audit" / "status.json").write_text(json.dumps(status))
    line = describe_live_status(read_live_status(tmp_path))
    assert "DIVERGENT" in line and "subnet-1 h118 (lag 5)" in line and "first divergence subnet-0 at height 101" in line
    metrics = LiveMetrics()
    url = metrics.serve()
    try:
        assert url.startswith("http://127.0.0.1:")
        metrics.update(status, divergent_replicas=1)
        text = urllib.request.urlopen(url, timeout=30).read().decode()
        assert 'replica_live_audit_lag_rounds{subnet="subnet-1"} 5.0' in text
        assert "replica_live_audit_divergent 1.0" in text
    finally:
        metrics.stop()
