"""Read the planned ranges and write them as Parquet into the run's staging area, and describe
every staged file (its rows, offsets, event times, hours).

Two writers (the ``writer`` setting): ``arrow``, where each read task writes its range's files
with pyarrow and reports them (write.py), and ``spark``, Spark's own Parquet writer, after which
a second job describes the staged files by reading back only the small columns. ``auto`` (the
default) takes ``arrow`` for ``file://`` outputs and ``spark`` for the others (``hdfs://``
through pyarrow needs libhdfs and Hadoop's classpath on every executor)."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tributary.client.security.settings import PLAINTEXT, SecurityConfig
from tributary.loader.errors import LoadError
from tributary.loader.hadoop import HadoopFS
from tributary.loader.plan import Plan
from tributary.loader.read import read_ranges
from tributary.loader.schema import PARTITION_COLUMNS, RANGE_SCHEMA, SPARK_SCHEMA
from tributary.loader.write import HIVE_NULL, PARQUET_COMPRESSION, Written, write_ranges

_HIVE_NULL = HIVE_NULL
_MS_PER_HOUR = 3_600_000


@dataclass(slots=True)
class StagedFile:
    """One Parquet file of the run: where Spark wrote it, where it is published, what it holds."""

    staged: str
    published: str
    directory: str  # topic=.../source_datacenter=.../event_date=...
    topic: str
    source_datacenter: str | None
    event_date: str
    partition: int
    first_offset: int
    last_offset: int
    rows: int
    bytes: int
    min_timestamp_ms: int
    max_timestamp_ms: int
    #: records per UTC hour (epoch milliseconds of the hour's start, as a string)
    hours: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StagedFile:
        return cls(**data)


def data_uri(staging: str) -> str:
    return f"{staging}/data"


def resolve_writer(writer: str, output: str) -> str:
    """``arrow`` or ``spark`` for the ``writer`` setting and the output URI (``auto``: arrow for file://)."""
    if writer != "auto":
        return writer
    return "arrow" if urlparse(output).scheme == "file" else "spark"


def write_staging(
    spark: SparkSession,
    plan: Plan,
    bootstrap: str,
    staging: str,
    fs: HadoopFS,
    *,
    writer: str,
    security: SecurityConfig = PLAINTEXT,
) -> list[StagedFile] | None:
    """One Spark job: a task per range, fetched and decoded in executors, written as Parquet.
    With the ``arrow`` writer, the staged files (the tasks describe what they wrote); with
    ``spark``, None: :func:`describe_staging` then reads them back."""
    rows = [(r.topic, r.partition, r.start, r.end) for r in plan.ranges]
    if writer == "arrow":
        # A plain RDD: one Python worker per task runs the read and the write, and hands back
        # a few descriptions (write.write_ranges says why not a DataFrame).
        spark.sparkContext.setJobDescription(f"tributary load {plan.run}: read {len(rows)} ranges into staging")
        root = data_uri(staging)
        tasks = spark.sparkContext.parallelize(rows, len(rows))
        written: list[Written] = tasks.mapPartitions(
            functools.partial(write_ranges, bootstrap, security, root)
        ).collect()
        return staged_files(fs, written)
    ranges = spark.createDataFrame(spark.sparkContext.parallelize(rows, len(rows)), RANGE_SCHEMA)
    records = ranges.mapInArrow(functools.partial(read_ranges, bootstrap, security), SPARK_SCHEMA)
    spark.sparkContext.setJobDescription(f"tributary load {plan.run}: read {len(rows)} ranges into staging")
    (
        # Sorted so each file holds its partition's records in offset order (the
        # writer needs them grouped by directory anyway).
        records.sortWithinPartitions(*PARTITION_COLUMNS, "offset")
        .write.mode("overwrite")
        .partitionBy(*PARTITION_COLUMNS)
        .option("compression", PARQUET_COMPRESSION)
        .parquet(data_uri(staging))
    )
    return None


def staged_files(fs: HadoopFS, written: Sequence[Written]) -> list[StagedFile]:
    """The StagedFiles of what the arrow writer's tasks wrote, with their published names."""
    files = []
    for w in written:
        f = StagedFile(
            staged=str(w["staged"]), published="", directory=str(w["directory"]), topic=str(w["topic"]),
            source_datacenter=w["source_datacenter"], event_date=str(w["event_date"]), partition=int(w["partition"]),
            first_offset=int(w["first_offset"]), last_offset=int(w["last_offset"]), rows=int(w["rows"]),
            bytes=int(w["bytes"]), min_timestamp_ms=int(w["min_timestamp_ms"]),
            max_timestamp_ms=int(w["max_timestamp_ms"]), hours=json.loads(w["hours"]),
        )  # fmt: skip
        f.published = fs.uri(f"{f.directory}/{published_name(f)}")
        files.append(f)
    return sorted(files, key=lambda f: f.published)


def _directory_values(directory: str) -> dict[str, str | None]:
    values: dict[str, str | None] = {}
    for part in directory.split("/"):
        name, _, value = part.partition("=")
        values[name] = None if value == _HIVE_NULL else unquote(value)
    return values


def published_name(f: StagedFile) -> str:
    """The file's name in the warehouse: topic, partition and offset range, so a
    retry overwrites rather than duplicates."""
    return f"{f.topic}-{f.partition}-{f.first_offset}-{f.last_offset}.parquet"


def describe_staging(spark: SparkSession, fs: HadoopFS, staging: str) -> list[StagedFile]:
    """Every staged Parquet file with its statistics, from a scan of partition, offset and timestamp."""
    root = data_uri(staging)
    listed = {urlparse(s.uri).path: s for s in fs.list_files(root) if s.name.endswith(".parquet")}
    if not listed:
        return []
    spark.sparkContext.setJobDescription("tributary load: describe the staged files")
    rows = (
        spark.read.option("basePath", root)
        .parquet(root)
        .select(
            F.input_file_name().alias("file"),
            "partition",
            "offset",
            F.unix_micros("timestamp").alias("micros"),
        )
        .groupBy("file", F.floor(F.col("micros") / (_MS_PER_HOUR * 1000)).alias("hour"))
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.min("partition").alias("min_partition"),
            F.max("partition").alias("max_partition"),
            F.min("offset").alias("first_offset"),
            F.max("offset").alias("last_offset"),
            F.min("micros").alias("min_micros"),
            F.max("micros").alias("max_micros"),
        )
        .collect()
    )
    root_path = urlparse(fs.qualify(root)).path.rstrip("/")
    files: dict[str, StagedFile] = {}
    for row in rows:
        path = unquote(urlparse(row["file"]).path)
        status = listed.get(path)
        if status is None:
            raise LoadError(f"staged file {row['file']} is not in the staging listing of {root}")
        if row["min_partition"] != row["max_partition"]:
            raise LoadError(f"staged file {row['file']} mixes partitions: the writer broke its promise")
        directory = path[len(root_path) + 1 :].rsplit("/", 1)[0]
        hour = str(int(row["hour"]) * _MS_PER_HOUR)
        f = files.get(path)
        if f is None:
            values = _directory_values(directory)
            f = files[path] = StagedFile(
                staged=status.uri,
                published="",
                directory=directory,
                topic=str(values["topic"]),
                source_datacenter=values["source_datacenter"],
                event_date=str(values["event_date"]),
                partition=int(row["min_partition"]),
                first_offset=int(row["first_offset"]),
                last_offset=int(row["last_offset"]),
                rows=0,
                bytes=status.length,
                min_timestamp_ms=int(row["min_micros"]) // 1000,
                max_timestamp_ms=int(row["max_micros"]) // 1000,
            )
        f.rows += int(row["rows"])
        f.first_offset = min(f.first_offset, int(row["first_offset"]))
        f.last_offset = max(f.last_offset, int(row["last_offset"]))
        f.min_timestamp_ms = min(f.min_timestamp_ms, int(row["min_micros"]) // 1000)
        f.max_timestamp_ms = max(f.max_timestamp_ms, int(row["max_micros"]) // 1000)
        f.hours[hour] = f.hours.get(hour, 0) + int(row["rows"])
    empty = set(listed) - set(files)
    if empty:  # Spark writes no empty files for partitioned output; a stray one would be published silently
        raise LoadError(f"staged files without rows: {', '.join(sorted(empty))}")
    for f in files.values():
        f.published = fs.uri(f"{f.directory}/{published_name(f)}")
    return sorted(files.values(), key=lambda f: f.published)
