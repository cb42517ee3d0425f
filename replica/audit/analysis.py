"""The audit's pure transforms, in Spark SQL: DataFrames in, DataFrames out.

Inputs (schemas below): replay ``rows`` (one per replica and height, with the fingerprint of
the build that replayed it), replica ``specs``
and the ``recorded`` hashes of the live run. A *hash* below is the pair
``(full_hash, certified_root)``; a row with ``error`` set has no hash. Comparisons are
null-safe, so an error row never equals a hash.

* ``hash_groups``        per (subnet, height, hash): how many replicas computed it;
* ``majority``           per (subnet, height): the hash most replicas computed (ties: the
                         live run's, then the smallest), with the number reporting and of groups;
* ``divergent_rows``     rows whose hash is not the majority's;
* ``divergent_per_height`` per (subnet, height), from the groups: reporting and divergent replicas;
* ``first_divergence``   per divergent replica: its first divergent height and hash there;
* ``clusters``           replicas with the same first divergence (subnet, height, hash,
                         error), their perturbations and the perturbation kinds all share;
* ``recorded_agreement`` per recorded (subnet, height): does the majority match the live run;
* ``incomplete_replicas`` replicas that reported fewer heights than they should;
* ``split_groups``       the hash groups of the (subnet, height)s with more than one group;
* ``majority_witnesses`` per (subnet, height) asked: one replica that computed the majority
                         hash, the least perturbed first (what the drill-down replays);
* ``replay_builds``      per build fingerprint: the replicas and rows it replayed.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType, BinaryType, IntegerType, LongType, StringType, StructField, StructType,
)

__all__ = [
    "ROW_SCHEMA", "SPEC_SCHEMA", "RECORDED_SCHEMA", "hash_groups", "majority", "divergent_rows",
    "divergent_per_height", "first_divergence", "clusters", "recorded_agreement", "incomplete_replicas",
    "majority_witnesses", "split_groups", "replay_builds", "BUILD_SAMPLE",
]

ROW_SCHEMA = StructType([
    StructField("replica", IntegerType(), False),
    StructField("subnet", StringType(), False),
    StructField("height", IntegerType(), False),
    StructField("full_hash", BinaryType(), True),
    StructField("certified_root", BinaryType(), True),
    StructField("error", StringType(), True),
    StructField("build", StringType(), True),    # None: the replay failed before a build answered
])

SPEC_SCHEMA = StructType([
    StructField("replica", IntegerType(), False),
    StructField("subnet", StringType(), False),
    StructField("perturbation", StringType(), False),
    StructField("kinds", ArrayType(StringType(), False), False),
    StructField("start_height", IntegerType(), False),
    StructField("expected_rows", IntegerType(), False),
    StructField("partition", IntegerType(), False),
])

RECORDED_SCHEMA = StructType([
    StructField("subnet", StringType(), False),
    StructField("height", IntegerType(), False),
    StructField("full_hash", BinaryType(), False),
    StructField("certified_root", BinaryType(), False),
])

_KEY = ["subnet", "height"]
_HASH = ["full_hash", "certified_root"]


def _same_hash(left: DataFrame, right: DataFrame) -> Column:
    return left["full_hash"].eqNullSafe(right["full_hash"]) & left["certified_root"].eqNullSafe(right["certified_root"])


def hash_groups(rows: DataFrame) -> DataFrame:
    """``(subnet, height, full_hash, certified_root, error, replicas)``; errors form their own groups."""
    return rows.groupBy(*_KEY, *_HASH, "error").agg(F.count("*").cast(LongType()).alias("replicas"))


def majority(groups: DataFrame, recorded: DataFrame) -> DataFrame:
    """``(subnet, height, full_hash, certified_root, replicas, reporting, groups)`` — one row
    per (subnet, height); error groups never win against a hash."""
    live = recorded.select(*_KEY, F.col("full_hash").alias("live_full"), F.col("certified_root").alias("live_root"))
    ranked = groups.join(live, _KEY, "left").withColumn(
        "is_live", (F.col("full_hash") == F.col("live_full")) & (F.col("certified_root") == F.col("live_root")))
    by_key = Window.partitionBy(*_KEY)
    order = Window.partitionBy(*_KEY).orderBy(
        F.col("error").isNotNull().asc(), F.col("replicas").desc(), F.coalesce(F.col("is_live"), F.lit(False)).desc(),
        F.col("full_hash").asc_nulls_last(), F.col("certified_root").asc_nulls_last())
    return (ranked
            .withColumn("reporting", F.sum("replicas").over(by_key))
            .withColumn("groups", F.count("*").over(by_key).cast(LongType()))
            .withColumn("rank", F.row_number().over(order))
            .where(F.col("rank") == 1)
            .where(F.col("error").isNull())
            .select(*_KEY, *_HASH, "replicas", "reporting", "groups"))


def divergent_rows(rows: DataFrame, majority_: DataFrame) -> DataFrame:
    """Rows (same columns) whose hash differs from the majority at their (subnet, height)."""
    m = majority_.select(*_KEY, F.col("full_hash").alias("m_full"), F.col("certified_root").alias("m_root"))
    joined = rows.join(m, _KEY, "left")
    same = F.col("full_hash").eqNullSafe(F.col("m_full")) & F.col("certified_root").eqNullSafe(F.col("m_root"))
    return joined.where(~same | F.col("error").isNotNull()).select(*rows.columns)


def divergent_per_height(groups: DataFrame, majority_: DataFrame) -> DataFrame:
    """``(subnet, height, reporting, divergent)`` for every reported (subnet, height), from the
    hash groups: everyone reporting minus those who computed the majority hash."""
    reporting = groups.groupBy(*_KEY).agg(F.sum("replicas").cast(LongType()).alias("reporting"))
    agreeing = majority_.select(*_KEY, F.col("replicas").alias("agreeing"))
    return (reporting.join(agreeing, _KEY, "left")
            .select(*_KEY, "reporting",
                    (F.col("reporting") - F.coalesce(F.col("agreeing"), F.lit(0))).cast(LongType()).alias("divergent")))


def first_divergence(rows: DataFrame, majority_: DataFrame) -> DataFrame:
    """``(replica, subnet, first_height, full_hash, certified_root, error)`` per divergent replica."""
    first = Window.partitionBy("replica").orderBy(F.col("height").asc())
    return (divergent_rows(rows, majority_)
            .withColumn("rank", F.row_number().over(first))
            .where(F.col("rank") == 1)
            .select("replica", "subnet", F.col("height").alias("first_height"), *_HASH, "error"))


def clusters(first: DataFrame, specs: DataFrame) -> DataFrame:
    """``(subnet, first_height, full_hash, certified_root, error, size, replicas, perturbations,
    shared_kinds)``: replicas with the same first divergence, sorted lists."""
    key = ["subnet", "first_height", *_HASH, "error"]
    members = first.join(specs.select("replica", "perturbation", "kinds"), "replica")
    grouped = members.groupBy(*key).agg(
        F.count("*").cast(LongType()).alias("size"),
        F.array_sort(F.collect_list("replica")).alias("replicas"),
        F.array_sort(F.collect_set("perturbation")).alias("perturbations"),
    )
    kind_counts = (members.select(*key, "replica", F.explode("kinds").alias("kind"))
                   .groupBy(*key, "kind").agg(F.countDistinct("replica").alias("holders")))
    sizes = grouped.select(*key, "size")
    shared = (kind_counts.join(sizes, [kind_counts[c].eqNullSafe(sizes[c]) for c in key])
              .where(F.col("holders") == F.col("size"))
              .select(*[kind_counts[c] for c in key], "kind")
              .groupBy(*key).agg(F.array_sort(F.collect_list("kind")).alias("shared_kinds")))
    joined = grouped.join(shared, [grouped[c].eqNullSafe(shared[c]) for c in key], "left")
    return joined.select(*[grouped[c] for c in key], "size", "replicas", "perturbations",
                         F.coalesce(F.col("shared_kinds"), F.array().cast(ArrayType(StringType()))).alias("shared_kinds"))


def recorded_agreement(majority_: DataFrame, recorded: DataFrame) -> DataFrame:
    """``(subnet, height, agrees, majority_full, majority_root, recorded_full, recorded_root)``
    for every recorded (subnet, height); a height no replica reported does not agree."""
    m = majority_.select(*_KEY, F.col("full_hash").alias("majority_full"), F.col("certified_root").alias("majority_root"))
    r = recorded.select(*_KEY, F.col("full_hash").alias("recorded_full"), F.col("certified_root").alias("recorded_root"))
    agrees = (F.col("majority_full") == F.col("recorded_full")) & (F.col("majority_root") == F.col("recorded_root"))
    return (r.join(m, _KEY, "left")
            .select(*_KEY, F.coalesce(agrees, F.lit(False)).alias("agrees"),
                    "majority_full", "majority_root", "recorded_full", "recorded_root"))


def incomplete_replicas(rows: DataFrame, specs: DataFrame) -> DataFrame:
    """``(replica, subnet, expected_rows, reported_rows)`` of replicas that reported nothing,
    or fewer heights than they should without an error row explaining why."""
    per_replica = rows.groupBy("replica").agg(
        F.count("*").cast(LongType()).alias("reported_rows"),
        F.max(F.col("error").isNotNull().cast(IntegerType())).alias("failed"))
    short = (F.col("failed") == 0) & (F.col("reported_rows") < F.col("expected_rows"))
    return (specs.select("replica", "subnet", "expected_rows")
            .join(per_replica, "replica", "left")
            .where(F.col("reported_rows").isNull() | short)
            .select("replica", "subnet", "expected_rows",
                    F.coalesce(F.col("reported_rows"), F.lit(0).cast(LongType())).alias("reported_rows")))


def majority_witnesses(rows: DataFrame, majority_: DataFrame, specs: DataFrame, wanted: DataFrame) -> DataFrame:
    """``(subnet, height, replica, perturbation)``: for each wanted (subnet, height), the
    replica with the fewest perturbation kinds (then the lowest id) that computed the majority hash."""
    m = majority_.join(wanted.select(*_KEY).distinct(), _KEY)
    agreeing = rows.join(m.select(*_KEY, F.col("full_hash").alias("m_full"), F.col("certified_root").alias("m_root")), _KEY) \
        .where((F.col("full_hash") == F.col("m_full")) & (F.col("certified_root") == F.col("m_root")))
    ranked = agreeing.join(specs.select("replica", "perturbation", "kinds"), "replica").withColumn(
        "weight", F.when(F.array_contains("kinds", "none"), F.lit(0)).otherwise(F.size("kinds")))
    order = Window.partitionBy(*_KEY).orderBy(F.col("weight").asc(), F.col("replica").asc())
    return (ranked.withColumn("rank", F.row_number().over(order)).where(F.col("rank") == 1)
            .select(*_KEY, "replica", "perturbation"))


def split_groups(groups: DataFrame, majority_: DataFrame) -> DataFrame:
    """``(subnet, height, full_hash, certified_root, error, replicas, is_majority)`` for every
    group at a (subnet, height) where replicas computed more than one hash (or failed)."""
    count = F.count("*").over(Window.partitionBy(*_KEY))
    m = majority_.select(*_KEY, F.col("full_hash").alias("m_full"), F.col("certified_root").alias("m_root"))
    is_majority = (F.col("error").isNull() & F.col("full_hash").eqNullSafe(F.col("m_full"))
                   & F.col("certified_root").eqNullSafe(F.col("m_root")))
    return (groups.withColumn("n", count).where(F.col("n") > 1).join(m, _KEY, "left")
            .select(*_KEY, *_HASH, "error", "replicas", is_majority.alias("is_majority")))


#: Replicas listed per build (the rest are counted).
BUILD_SAMPLE = 20


def replay_builds(rows: DataFrame) -> DataFrame:
    """``(build, replicas, rows, sample)``: per build fingerprint, how many replicas and rows it
    replayed, and the first ``BUILD_SAMPLE`` replica ids."""
    return rows.groupBy("build").agg(
        F.countDistinct("replica").cast(LongType()).alias("replicas"),
        F.count("*").cast(LongType()).alias("rows"),
        F.slice(F.array_sort(F.collect_set("replica")), 1, BUILD_SAMPLE).alias("sample"))
