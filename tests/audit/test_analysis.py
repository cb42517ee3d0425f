"""The Spark SQL transforms on hand-made rows (DataFrame equality)."""

from __future__ import annotations

import pytest
from pyspark.testing import assertDataFrameEqual

from replica.audit import analysis as A

pytestmark = pytest.mark.spark

H1, H2, H3, LIVE = (bytes([n]) * 32 for n in (1, 2, 3, 9))
R = b"\x07" * 32  # one certified root for all: only full hashes differ below


BUILD = "b" * 64


def _rows(spark, rows):
    return spark.createDataFrame([r if len(r) == 7 else (*r, BUILD) for r in rows], A.ROW_SCHEMA)


def _specs(spark, specs):
    return spark.createDataFrame(specs, A.SPEC_SCHEMA)


@pytest.fixture(scope="module")
def data(spark):
    # subnet s: heights 0..2. Replicas 0-3 agree except 2 (diverges at 1 with H3, continues) and
    # 3 (fails at 2). At height 1, H1 and H2 tie 2:2 between replicas 0,1 and 4,5?  No: a tie is
    # built at height 2 of subnet t instead.
    rows = [
        (0, "s", 0, H1, R, None), (0, "s", 1, H1, R, None), (0, "s", 2, H1, R, None),
        (1, "s", 0, H1, R, None), (1, "s", 1, H1, R, None), (1, "s", 2, H1, R, None),
        (2, "s", 0, H1, R, None), (2, "s", 1, H3, R, None), (2, "s", 2, H3, R, None),
        (3, "s", 0, H1, R, None), (3, "s", 1, H1, R, None), (3, "s", 2, None, None, "Boom: x"),
        (4, "t", 2, H2, R, None), (5, "t", 2, LIVE, R, None),
    ]
    specs = [
        (0, "s", "none", ["none"], 0, 3, 0), (1, "s", "shuffle:1", ["shuffle"], 0, 3, 0),
        (2, "s", "hashseed:3", ["hashseed"], 0, 3, 1), (3, "s", "restart@1", ["restart"], 0, 3, 1),
        (4, "t", "checkpoint@2", ["checkpoint"], 2, 1, 0), (5, "t", "checkpoint@2+hashseed:1", ["checkpoint", "hashseed"], 2, 1, 1),
        (6, "t", "none", ["none"], 0, 3, 1),
    ]
    recorded = [("s", 1, H1, R), ("s", 2, H1, R), ("t", 1, H2, R), ("t", 2, LIVE, R)]
    rows_df, specs_df = _rows(spark, rows), _specs(spark, specs)
    recorded_df = spark.createDataFrame(recorded, A.RECORDED_SCHEMA)
    groups = A.hash_groups(rows_df)
    majority = A.majority(groups, recorded_df)
    return rows_df, specs_df, recorded_df, groups, majority


def test_hash_groups(spark, data):
    _, _, _, groups, _ = data
    expected = spark.createDataFrame([
        ("s", 0, H1, R, None, 4), ("s", 1, H1, R, None, 3), ("s", 1, H3, R, None, 1), ("s", 2, H1, R, None, 2),
        ("s", 2, H3, R, None, 1), ("s", 2, None, None, "Boom: x", 1), ("t", 2, H2, R, None, 1), ("t", 2, LIVE, R, None, 1),
    ], groups.schema)
    assertDataFrameEqual(groups, expected)


def test_majority_breaks_ties_towards_the_live_run(spark, data):
    _, _, _, _, majority = data
    expected = spark.createDataFrame([
        ("s", 0, H1, R, 4, 4, 1), ("s", 1, H1, R, 3, 4, 2), ("s", 2, H1, R, 2, 4, 3), ("t", 2, LIVE, R, 1, 2, 2),
    ], majority.schema)
    assertDataFrameEqual(majority, expected)


def test_divergence(spark, data):
    rows, specs, _, _, majority = data
    assertDataFrameEqual(A.divergent_rows(rows, majority), _rows(spark, [
        (2, "s", 1, H3, R, None), (2, "s", 2, H3, R, None), (3, "s", 2, None, None, "Boom: x"), (4, "t", 2, H2, R, None)]))
    per_height = A.divergent_per_height(A.hash_groups(rows), majority)
    assertDataFrameEqual(per_height, spark.createDataFrame(
        [("s", 0, 4, 0), ("s", 1, 4, 1), ("s", 2, 4, 2), ("t", 2, 2, 1)], per_height.schema))
    first = A.first_divergence(rows, majority)
    assertDataFrameEqual(first, spark.createDataFrame(
        [(2, "s", 1, H3, R, None), (3, "s", 2, None, None, "Boom: x"), (4, "t", 2, H2, R, None)], first.schema))


def test_clusters_and_shared_kinds(spark):
    first = spark.createDataFrame(
        [(1, "s", 4, H2, R, None), (2, "s", 4, H2, R, None), (3, "s", 4, H3, R, None), (4, "s", 5, None, None, "E")],
        "replica int, subnet string, first_height int, full_hash binary, certified_root binary, error string")
    specs = _specs(spark, [
        (1, "s", "checkpoint@2+hashseed:1", ["checkpoint", "hashseed"], 2, 4, 0),
        (2, "s", "hashseed:1", ["hashseed"], 0, 6, 0),
        (3, "s", "shuffle:2", ["shuffle"], 0, 6, 0),
        (4, "s", "none", ["none"], 0, 6, 0),
    ])
    clusters = A.clusters(first, specs)
    expected = spark.createDataFrame([
        ("s", 4, H2, R, None, 2, [1, 2], ["checkpoint@2+hashseed:1", "hashseed:1"], ["hashseed"]),
        ("s", 4, H3, R, None, 1, [3], ["shuffle:2"], ["shuffle"]),
        ("s", 5, None, None, "E", 1, [4], ["none"], ["none"]),
    ], clusters.schema)
    assertDataFrameEqual(clusters, expected)


def test_recorded_agreement(spark, data):
    _, _, recorded, _, majority = data
    agreement = A.recorded_agreement(majority, recorded)
    assertDataFrameEqual(agreement, spark.createDataFrame([
        ("s", 1, True, H1, R, H1, R), ("s", 2, True, H1, R, H1, R), ("t", 1, False, None, None, H2, R),
        ("t", 2, True, LIVE, R, LIVE, R)], agreement.schema))


def test_incomplete_replicas(spark, data):
    rows, specs, _, _, _ = data
    short = rows.where("not (replica = 1 and height = 2)")
    incomplete = A.incomplete_replicas(short, specs)
    assertDataFrameEqual(incomplete, spark.createDataFrame([(1, "s", 3, 2), (6, "t", 3, 0)], incomplete.schema))


def test_split_groups_and_witnesses(spark, data):
    rows, specs, _, groups, majority = data
    split = A.split_groups(groups, majority).select("subnet", "height", "full_hash", "error", "replicas", "is_majority")
    assertDataFrameEqual(split, spark.createDataFrame([
        ("s", 1, H1, None, 3, True), ("s", 1, H3, None, 1, False), ("s", 2, H1, None, 2, True),
        ("s", 2, H3, None, 1, False), ("s", 2, None, "Boom: x", 1, False), ("t", 2, H2, None, 1, False),
        ("t", 2, LIVE, None, 1, True)], split.schema))
    wanted = spark.createDataFrame([("s", 2), ("t", 2)], "subnet string, height int")
    witnesses = A.majority_witnesses(rows, majority, specs, wanted)
    assertDataFrameEqual(witnesses, spark.createDataFrame(
        [("s", 2, 0, "none"), ("t", 2, 5, "checkpoint@2+hashseed:1")], witnesses.schema))
