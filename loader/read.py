"""The read tasks (Spark executors): fetch planned ranges, decode them into Arrow.

Each task gets its ranges as an Arrow batch (``mapInArrow``), fetches each with
the blocking fetcher (plain sockets, no event loop), and yields Arrow record
batches of a few thousand records built column by column: no Spark ``Row``
per record, no pandas. A range must end exactly at its planned end offset: the
fetcher walks batches until it has passed the end, so offsets missing inside
the range (control records of transactions, records removed by compaction)
simply yield nothing, but a log that no longer holds the whole range fails
the task, naming the range.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from tributary.client.blocking import BlockingFetcher
from tributary.client.config import ClientConfig
from tributary.client.errors import KafkaError
from tributary.client.raw.batches import READ_COMMITTED
from tributary.client.security.settings import SecurityConfig
from tributary.loader.hooks import KILL_ENV, reached_in_task
from tributary.loader.naming import split_topic
from tributary.loader.plan import Range
from tributary.loader.schema import ARROW_SCHEMA, HEADER

#: A batch handed to Spark holds at most this many records, or about this many bytes.
CHUNK_RECORDS = 16_384
CHUNK_BYTES = 16 * 1024 * 1024
_MS_PER_DAY = 86_400_000


class RangeError(Exception):
    """A planned range could not be read in full."""


class _Columns:
    """Record fields gathered into lists, turned into one Arrow batch at a time."""

    def __init__(self, r: Range) -> None:
        self.range = r
        dc, source_topic = split_topic(r.topic)
        self.source_datacenter = dc
        self.source_topic = source_topic
        self.clear()

    def clear(self) -> None:
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.header_ends: list[int] = [0]
        self.header_keys: list[str] = []
        self.header_values: list[bytes | None] = []
        self.size = 0

    def __len__(self) -> int:
        return len(self.offsets)

    def batch(self) -> pa.RecordBatch:
        n = len(self.offsets)
        millis = pa.array(self.timestamps, pa.int64())
        days = pc.floor(pc.divide(pc.cast(millis, pa.float64()), float(_MS_PER_DAY)))
        headers = pa.ListArray.from_arrays(
            pa.array(self.header_ends, pa.int32()),
            pa.StructArray.from_arrays(
                [pa.array(self.header_keys, pa.string()), pa.array(self.header_values, pa.binary())],
                fields=list(HEADER),
            ),
        )
        columns = [
            pa.array([self.range.topic] * n, pa.string()),
            pa.array([self.range.partition] * n, pa.int32()),
            pa.array(self.offsets, pa.int64()),
            pc.multiply(millis, 1000).cast(pa.timestamp("us", tz="UTC")),
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            headers,
            pa.array([self.source_datacenter] * n, pa.string()),
            pa.array([self.source_topic] * n, pa.string()),
            pc.cast(days, pa.int32()).view(pa.date32()),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def read_range(fetcher: BlockingFetcher, r: Range) -> Iterator[pa.RecordBatch]:
    """The records of ``[r.start, r.end)`` as Arrow batches."""
    # What is alive as a range starts (the modules: pyspark's, pyarrow's, ours; what earlier
    # ranges of the process kept) is collected once and moved out of the cyclic garbage
    # collector's sight. The decode makes a Record per record, and the collections they set off,
    # full ones included, walked all of those objects: 7% of a plain process's CPU in a load,
    # more in a Spark Python worker whose heap holds pyspark too; and Spark's daemon collects
    # after every task of a reused worker (pyspark/daemon.py), about 50 ms of CPU a task
    # (docs/benchmarks.md, Loader). The collection first, so that no garbage cycle is frozen:
    # after the first range it walks only what the previous range left. Frozen objects are still
    # freed when their last reference goes.
    gc.collect()
    gc.freeze()
    columns = _Columns(r)
    reached = r.start
    try:
        for fetched in fetcher.fetch_range(r.topic, r.partition, r.start, r.end, isolation_level=READ_COMMITTED):
            for record in fetched.iter_records(r.start, r.end, committed_only=True):
                key, value, headers = record.key, record.value, record.headers
                columns.offsets.append(record.offset)
                columns.timestamps.append(record.timestamp)
                columns.keys.append(key)
                columns.values.append(value)
                columns.size += (len(key) if key else 0) + (len(value) if value else 0)
                if headers:
                    for hkey, hvalue in headers:
                        columns.header_keys.append(hkey)
                        columns.header_values.append(hvalue)
                columns.header_ends.append(len(columns.header_keys))
                if len(columns) >= CHUNK_RECORDS or columns.size >= CHUNK_BYTES:
                    yield columns.batch()
                    columns.clear()
                    _maybe_kill()
            reached = fetched.next_offset
    except KafkaError as exc:
        raise RangeError(f"cannot read {r}: {exc}") from exc
    if reached < r.end:  # the fetcher only stops early by raising; a guard for the plan's promise
        raise RangeError(f"reading {r} stopped at offset {reached}")
    if len(columns):
        yield columns.batch()
        _maybe_kill()


def _maybe_kill() -> None:
    """Test hooks (hooks.py): after handing Spark a chunk, the task named by the hook kills
    the whole load (``read:<task>``, as a power cut would), its own Python worker
    (``worker:<task>``) or pauses (``pause:<task>``)."""
    if not os.environ.get(KILL_ENV):
        return
    from pyspark import TaskContext  # noqa: PLC0415 (only for the test hooks)

    context = TaskContext.get()
    if context is not None:
        reached_in_task(context.partitionId())


def read_ranges(bootstrap: str, security: SecurityConfig, ranges: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow's function: planned ranges in, their records out (over TLS and SASL as
    ``security`` says; it is pickled into the task, secrets included)."""
    with BlockingFetcher(bootstrap, ClientConfig(security=security)) as fetcher:
        for batch in ranges:
            for row in batch.to_pylist():
                yield from read_range(fetcher, Range(row["topic"], row["partition"], row["start"], row["end"]))
