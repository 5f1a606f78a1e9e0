"""The read tasks write their ranges as Parquet themselves, with pyarrow (``writer = "arrow"``).

Spark's own writer (``writer = "spark"``, stage.py) takes the Arrow batches a task yields, turns
them into JVM rows, sorts them by directory and offset and encodes Parquet in the JVM; then a
second job reads the staged files back to describe them. On the project's 2-core machine that
writer cost 4-5 microseconds of CPU per 200-byte record on top of the 3.3 the whole read, decode
and write take in one plain Python process (bench/bench_loader.py, docs/benchmarks.md). Here the
task that decoded a range writes it straight into the staging area with pyarrow's Parquet writer
(zstd, the columns and types Spark writes), one file per directory ``topic=/source_datacenter=/
event_date=`` it spans, and hands Spark one row per file describing it (rows, first and last
offset, event times, records per UTC hour): what the describing job read back before. Records
arrive in offset order (a range is one partition, read front to back), so no sort is needed.

Each file goes to a temporary name first and is renamed to a name fixed by its range and
directory, so a retried or speculative attempt of the task replaces the file rather than adding
one, and an attempt killed halfway leaves at most a temporary file, which the staging area's
deletion (job.py) takes away. The filesystem is pyarrow's for the staging URI: ``file://`` here;
``hdfs://`` needs libhdfs and Hadoop's classpath on the executors (pyarrow's HadoopFileSystem),
which is why ``writer = "auto"`` chooses this writer for ``file://`` outputs only.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypedDict

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from tributary.client.blocking import BlockingFetcher
from tributary.client.config import ClientConfig
from tributary.client.security.settings import SecurityConfig
from tributary.loader.naming import split_topic
from tributary.loader.plan import Range
from tributary.loader.read import read_range
from tributary.loader.schema import ARROW_SCHEMA, PARTITION_COLUMNS

PARQUET_COMPRESSION = "zstd"
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
#: Buffered bytes of one directory's records that make a row group (Spark's default block is 128 MiB).
ROW_GROUP_BYTES = 64 * 1024 * 1024
_MS_PER_HOUR = 3_600_000
#: The file's columns: the record's, without those its directory names.
FILE_SCHEMA = pa.schema([f for f in ARROW_SCHEMA if f.name not in PARTITION_COLUMNS])


class Written(TypedDict):
    """What a task hands Spark for each file it wrote (stage.py turns it into a StagedFile)."""

    staged: str
    directory: str
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
    hours: str  # JSON: {"<epoch ms of the hour>": records}


# Hive's escaping of directory values, as Spark's writer applies it (ExternalCatalogUtils).
_ESCAPED = frozenset("\"#%'*/:=?\\\x7f{[]^")


def escape_path_name(value: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED or ord(c) < 0x20 else c for c in value)


def directory_name(topic: str, source_datacenter: str | None, event_date: str) -> str:
    dc = HIVE_NULL if source_datacenter is None else escape_path_name(source_datacenter)
    return f"topic={escape_path_name(topic)}/source_datacenter={dc}/event_date={escape_path_name(event_date)}"


@dataclass
class _OpenFile:
    """One directory's file while a range is written: its buffered batches and what it holds."""

    directory: str
    topic: str
    source_datacenter: str | None
    event_date: str
    final: str
    temporary: str
    writer: pq.ParquetWriter | None = None
    buffered: list[pa.RecordBatch] = field(default_factory=list)
    buffered_bytes: int = 0
    rows: int = 0
    first_offset: int = -1
    last_offset: int = -1
    min_ms: int = 0
    max_ms: int = 0
    hours: dict[int, int] = field(default_factory=dict)


class RangeWriter:
    """The Parquet files of one range under ``root`` (a path of ``filesystem``): batches of the
    range's records in, in offset order; :meth:`close` renames the files into place and
    describes them."""

    def __init__(self, filesystem: pafs.FileSystem, root: str, r: Range, root_uri: str) -> None:
        self.filesystem = filesystem
        self.root = root.rstrip("/")
        self.root_uri = root_uri.rstrip("/")
        self.range = r
        self._files: dict[str, _OpenFile] = {}

    def add(self, batch: pa.RecordBatch) -> None:
        dates = batch.column(ARROW_SCHEMA.get_field_index("event_date"))
        days = pc.unique(dates)
        if len(days) == 1:
            self._add_to(batch, days[0].as_py())
            return
        for day in days.to_pylist():
            self._add_to(batch.filter(pc.equal(dates, pa.scalar(day, pa.date32()))), day)

    def _add_to(self, batch: pa.RecordBatch, day: Any) -> None:
        event_date = day.isoformat()
        topic = self.range.topic
        dc, _ = split_topic(topic)
        directory = directory_name(topic, dc, event_date)
        f = self._files.get(directory)
        if f is None:
            r = self.range
            name = f"{r.topic}-{r.partition}-{r.start}-{r.end}.parquet"
            final = f"{self.root}/{directory}/{name}"
            f = self._files[directory] = _OpenFile(
                directory, topic, dc, event_date, final, f"{final}.{uuid.uuid4().hex}.tmp"
            )
        records = pa.RecordBatch.from_arrays(
            [batch.column(ARROW_SCHEMA.get_field_index(field.name)) for field in FILE_SCHEMA], schema=FILE_SCHEMA
        )
        self._describe(f, records)
        f.buffered.append(records)
        f.buffered_bytes += records.nbytes
        if f.buffered_bytes >= ROW_GROUP_BYTES:
            self._flush(f)

    @staticmethod
    def _describe(f: _OpenFile, records: pa.RecordBatch) -> None:
        offsets = records.column(FILE_SCHEMA.get_field_index("offset"))
        # Microseconds that read.py made from milliseconds: dividing by 1000 is exact.
        millis = pc.divide(records.column(FILE_SCHEMA.get_field_index("timestamp")).cast(pa.int64()), 1000)
        extremes = pc.min_max(millis)
        low, high = extremes["min"].as_py(), extremes["max"].as_py()
        if f.rows == 0:
            f.first_offset, f.min_ms, f.max_ms = offsets[0].as_py(), low, high
        else:
            f.min_ms, f.max_ms = min(f.min_ms, low), max(f.max_ms, high)
        f.last_offset = offsets[-1].as_py()
        f.rows += len(records)
        hour = pc.floor(pc.divide(pc.cast(millis, pa.float64()), float(_MS_PER_HOUR)))
        hours = pc.value_counts(pc.multiply(pc.cast(hour, pa.int64()), _MS_PER_HOUR))
        for hour, count in zip(hours.field(0).to_pylist(), hours.field(1).to_pylist(), strict=True):
            f.hours[hour] = f.hours.get(hour, 0) + count

    def _flush(self, f: _OpenFile) -> None:
        if not f.buffered:
            return
        if f.writer is None:
            self.filesystem.create_dir(f"{self.root}/{f.directory}", recursive=True)
            f.writer = pq.ParquetWriter(
                f.temporary, FILE_SCHEMA, filesystem=self.filesystem, compression=PARQUET_COMPRESSION
            )
        f.writer.write_table(pa.Table.from_batches(f.buffered, schema=FILE_SCHEMA))
        f.buffered, f.buffered_bytes = [], 0

    def close(self) -> list[Written]:
        """Finish every file, rename it into place (replacing an earlier attempt's); one
        description per file."""
        written: list[Written] = []
        for f in self._files.values():
            self._flush(f)
            assert f.writer is not None
            f.writer.close()
            if self.filesystem.get_file_info(f.final).type != pafs.FileType.NotFound:
                self.filesystem.delete_file(f.final)  # an earlier attempt's (a rename onto it fails on HDFS)
            self.filesystem.move(f.temporary, f.final)
            written.append(
                Written(
                    staged=f"{self.root_uri}/{f.directory}/{f.final.rsplit('/', 1)[1]}",
                    directory=f.directory,
                    topic=f.topic,
                    source_datacenter=f.source_datacenter,
                    event_date=f.event_date,
                    partition=self.range.partition,
                    first_offset=f.first_offset,
                    last_offset=f.last_offset,
                    rows=f.rows,
                    bytes=self.filesystem.get_file_info(f.final).size,
                    min_timestamp_ms=f.min_ms,
                    max_timestamp_ms=f.max_ms,
                    hours=json.dumps({str(hour): n for hour, n in sorted(f.hours.items())}),
                )
            )
        self._files.clear()
        return written


def write_range(fetcher: BlockingFetcher, r: Range, root_uri: str) -> list[Written]:
    """Read one range and write its Parquet files under ``root_uri``; their descriptions."""
    filesystem, root = pafs.FileSystem.from_uri(root_uri)
    writer = RangeWriter(filesystem, root, r, root_uri)
    for batch in read_range(fetcher, r):
        writer.add(batch)
    return writer.close()


def write_ranges(
    bootstrap: str, security: SecurityConfig, root_uri: str, ranges: Iterable[tuple[str, int, int, int]]
) -> Iterator[Written]:
    """The function of a Spark task (``RDD.mapPartitions``) for ``writer = "arrow"``: planned
    ranges ``(topic, partition, start, end)`` in, one description per file written under
    ``root_uri`` out (connecting as ``security`` says, like read_ranges).

    A plain RDD task rather than ``mapInArrow``: that ran each task through two Python workers
    (one turning the parallelized rows into a DataFrame's, one for the function), handed rows
    over as Arrow both ways and had Catalyst plan the query, for a handful of rows per task; in
    bench_loader that was 2-3 CPU-seconds per load and tens of milliseconds per task
    (docs/benchmarks.md, Loader)."""
    with BlockingFetcher(bootstrap, ClientConfig(security=security)) as fetcher:
        for topic, partition, start, end in ranges:
            yield from write_range(fetcher, Range(topic, partition, start, end), root_uri)
