"""Building batches and inspecting logs in the log's tests."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tributary.broker.log.config import LogConfig
from tributary.broker.log.log import PartitionLog
from tributary.broker.log.reads import ReadResult
from tributary.protocol.compression import Compression
from tributary.protocol.records import BatchHeader, build_batch, iter_batches, iter_records

T0 = 1_700_000_000_000
NOW = T0 + 1_000


def batch(
    count: int = 1,
    *,
    value: bytes = b"value",
    timestamp: int = T0,
    compression: Compression = Compression.NONE,
    producer_id: int = -1,
    epoch: int = -1,
    sequence: int = -1,
    tag: int = 0,
) -> bytes:
    """A batch of ``count`` records whose values carry ``tag`` and their index."""
    records = [(b"key", value_of(tag, i, value), (), timestamp + i) for i in range(count)]
    return build_batch(
        records, compression=compression, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence
    )


def value_of(tag: int, index: int, value: bytes = b"value") -> bytes:
    # Fixed width, so that batches of the same shape have the same size.
    return b"%05d:%03d:" % (tag, index) + value


def open_log(path: Path, recovery_point: int = 0, *, clean: bool = False, **config: Any) -> PartitionLog:
    return PartitionLog.open(path, LogConfig(**config), recovery_point, clean_shutdown=clean, now_ms=NOW)


def crash(log: PartitionLog) -> None:
    """Drops the log as a killed process would: no flush, no snapshot, no marker."""
    for segment in log.segments:
        segment.retire()


def headers(data: bytes) -> list[BatchHeader]:
    return [header for _, header in iter_batches(data)]


def read_all(log: PartitionLog, offset: int | None = None) -> bytes:
    with log.read(log.log_start_offset if offset is None else offset, 1 << 40) as result:
        return result.read_bytes()


def values(result: ReadResult | bytes) -> list[tuple[int, bytes | None]]:
    data = result if isinstance(result, bytes) else result.read_bytes()
    return [(r.offset, r.value) for pos, _ in iter_batches(data) for r in iter_records(data, pos)]


def log_files(path: Path, suffix: str) -> list[str]:
    return sorted(name for name in os.listdir(path) if name.endswith(suffix))
