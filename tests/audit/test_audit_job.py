"""The Spark audit end to end on a local session: clean runs are clean, injected faults and a
nondeterministic canister are found, attributed and localized to state paths."""

from __future__ import annotations

import pytest

from replica.audit.faults import batch_messages, destination_of
from replica.audit.inputs import prepare_run
from replica.inprocess.workload import generate_isolated
from replica.audit.job import AuditOptions, analysis_partitions, default_worker_hash_seed, run_audit
from replica.audit.perturbation import Fault
from replica.audit.report import render_html, render_text
from replica.audit.run_log import decode_run_log
from replica.inprocess.workload import NONDETERMINISTIC_FIRST, NONDETERMINISTIC_PERIOD, SUBNET_SPAN, WorkloadConfig
from state_manager.messages import Request

from .runs import recorded_run, small_run

pytestmark = pytest.mark.spark


def test_clean_recorded_run_audits_clean_with_1024_replicas(spark, tmp_path):
    log = recorded_run(ticks=8, checkpoint_interval=2)
    report = run_audit(spark, log, AuditOptions(replicas=1024, seed=3), source="recorded", run_dir=str(tmp_path))
    assert report["verdict"] == "agree" and report["exit_status"] == 0, render_text(report)
    summary = report["summary"]
    assert summary == {"divergent_replicas": 0, "divergent_rows": 0, "error_rows": 0, "incomplete_replicas": 0,
                       "recorded_mismatches": 0, "split_heights": 0, "clusters": 0, "other_build_replicas": 0}
    assert report["audit"]["replicas"] == 1024 and report["recorded"]["agree"]
    assert report["build"]["agree"] and report["build"]["recorded"] == log.build.fingerprint
    # ~9,000 rows: one shuffle partition, however many cores (the analysis is sized to the rows)
    assert report["environment"]["shuffle_partitions"] == analysis_partitions(report["audit"]["rows"]) == 1
    assert set(report["audit"]["perturbations"]) == {"none", "checkpoint", "shuffle", "hashseed", "restart"}
    for subnet in ("subnet-a", "subnet-b"):
        heights = report["heights"][subnet]
        assert (heights["first"], heights["last"], heights["reported"]) == (0, 8, 9)
    assert report["audit"]["rows"] == sum(p["reporting"] for p in report["divergent_per_height"])
    assert render_text(report).startswith("verdict: AGREE")
    assert "<svg" in render_html(report)


def test_analysis_partitions_follow_the_rows_not_the_executors():
    assert [analysis_partitions(n) for n in (0, 1, 50_000, 50_001, 409_600)] == [1, 1, 1, 2, 9]


def _find(batches, start, predicate):
    for batch in batches[start:]:
        for ref in batch_messages(batch):
            if predicate(batch, ref):
                return batch.batch_number, ref
    raise AssertionError("the workload has no such message")


def _same_counter_pair(batch, ref):
    if ref.container != "ingress" or ref.message.method_name != "increment":
        return False
    later = [r for r in batch_messages(batch)[ref.index + 1:] if r.container == "ingress"
             and r.message.receiver == ref.message.receiver and r.message.method_payload != ref.message.method_payload]
    return bool(later)


def test_injected_faults_are_found_and_localized(spark, tmp_path):
    log = small_run()
    run = prepare_run(log)
    b0, b1 = run.subnet("subnet-0").batches, run.subnet("subnet-1").batches
    # flip: an ingress increment of a counter on subnet-1 (replica 5)
    flip_height, flip = _find(b1, 3, lambda b, r: r.container == "ingress" and r.message.method_name == "increment")
    # drop: a ping's XNet request on subnet-0 (replica 6)
    drop_height, drop = _find(b0, 3, lambda b, r: r.container != "ingress" and type(r.message) is Request)
    # swap: two ingress increments of one counter on subnet-1 (replica 9)
    swap_height, swap = _find(b1, 2, _same_counter_pair)
    other = next(r for r in batch_messages(b1[swap_height - 1])[swap.index + 1:]
                 if r.container == "ingress" and r.message.receiver == swap.message.receiver
                 and r.message.method_payload != swap.message.method_payload)
    faults = ((5, Fault("flip", flip_height, flip.index)), (6, Fault("drop", drop_height, drop.index)),
              (9, Fault("swap", swap_height, swap.index, other.index)))
    report = run_audit(spark, log, AuditOptions(replicas=64, seed=2, faults=faults), source="generated",
                       run_dir=str(tmp_path))
    assert report["verdict"] == "divergent" and report["exit_status"] == 1
    assert report["recorded"]["agree"]
    assert report["summary"]["divergent_replicas"] == 3
    clusters = {tuple(c["replicas"]): c for c in report["clusters"]}
    assert set(clusters) == {(5,), (6,), (9,)}
    expected_heights = {(5,): flip_height, (6,): drop_height, (9,): swap_height}
    for replicas, cluster in clusters.items():
        assert cluster["first_height"] == expected_heights[replicas]
        assert any(k.startswith("fault:") for k in cluster["shared_perturbation"])
        assert cluster["reproduce"].startswith("replica replay-one ")
        assert cluster["drilldown"]["paths"], cluster
    paths = {r: [p["path"] for p in clusters[(r,)]["drilldown"]["paths"]] for r in (5, 6, 9)}
    assert f"/canister_state/{destination_of(flip.message)}/stable/value" in paths[5]
    assert any(p.startswith(f"/canister_state/{destination_of(drop.message)}/") for p in paths[6])
    swapped_ids = {"0x" + swap.message.message_id.hex(), "0x" + other.message.message_id.hex()}
    assert any(p.split("/")[2].split("@")[0] in swapped_ids for p in paths[9] if p.startswith("/ingress_history/"))
    flipped_value = next(p for p in clusters[(5,)]["drilldown"]["paths"] if p["path"].endswith("/stable/value"))
    assert flipped_value["minority"] != flipped_value["majority"]


def test_nondeterministic_canister_is_caught_under_the_hash_seed_perturbation(spark, tmp_path):
    config = WorkloadConfig(subnets=2, canisters=6, batches=9, messages=10, seed=4, nondeterministic=True,
                            checkpoint_interval=4)
    log = decode_run_log(generate_isolated(config, default_worker_hash_seed()))
    assert "examples.nondeterministic:SetOrder" in log.canister_modules
    report = run_audit(spark, log, AuditOptions(replicas=96, seed=5, drilldowns=2), source="generated",
                       run_dir=str(tmp_path))
    assert report["verdict"] == "divergent"
    assert report["recorded"]["agree"], "plain replicas reproduce the live run"
    assert report["clusters"]
    record_heights = set(range(NONDETERMINISTIC_FIRST, config.batches + 1, NONDETERMINISTIC_PERIOD))
    for cluster in report["clusters"]:
        assert "hashseed" in cluster["shared_perturbation"]
        assert cluster["first_height"] in record_heights
    assert report["first_divergence"]["height"] == NONDETERMINISTIC_FIRST
    drilled = [c for c in report["clusters"] if c["drilldown"]]
    assert drilled
    for cluster in drilled:
        subnet_index = int(cluster["subnet"].split("-")[1])
        set_order = subnet_index * SUBNET_SPAN + config.canisters
        paths = {p["path"]: p for p in cluster["drilldown"]["paths"]}
        order = paths[f"/canister_state/{set_order}/stable/order"]
        assert sorted(order["minority"]) == sorted(order["majority"]) and order["minority"] != order["majority"]
