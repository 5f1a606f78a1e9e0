"""Cleaning a log in the test's own thread: plan, clean, install, as the broker's cleaner does."""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tributary.broker.log.cleaner.clean import CleanResult, clean
from tributary.broker.log.cleaner.config import CleanerConfig
from tributary.broker.log.cleaner.cycle import install, plan_clean
from tributary.broker.log.config import LogConfig
from tributary.broker.log.log import PartitionLog
from tributary.protocol.records import (
    CONTROL_BIT,
    HEADER_SIZE,
    TRANSACTIONAL_BIT,
    Record,
    build_batch,
    encode_batch_header,
    iter_batches,
    iter_records,
    set_base_offset,
)

from ..helpers import NOW, T0

CLEANER = CleanerConfig(dedupe_buffer_size=4 * 1024 * 1024)


def compacted_config(**overrides: Any) -> LogConfig:
    settings: dict[str, Any] = {
        "cleanup_policy": "compact",
        "segment_bytes": 600,
        "index_interval_bytes": 100,
        "min_cleanable_dirty_ratio": 0.0,
        "retention_ms": -1,
        **overrides,
    }
    return LogConfig(**settings)


def open_compacted(path: Path, **overrides: Any) -> PartitionLog:
    return PartitionLog.open(path, compacted_config(**overrides), now_ms=NOW)


def keyed(pairs: Sequence[tuple[bytes | None, bytes | None]], timestamp: int = T0, **options: Any) -> bytes:
    return build_batch([(k, v, (), timestamp + i) for i, (k, v) in enumerate(pairs)], **options)


def compact(
    plog: PartitionLog,
    first_dirty: int | None = None,
    now_ms: int = NOW,
    *,
    cleaner: CleanerConfig = CLEANER,
    reached: Callable[[str], None] = lambda _phase: None,
    force: bool = True,
) -> CleanResult | None:
    """One clean; the result (its ``cleaned_to`` is the next first dirty offset), or None if
    nothing was due."""
    planned = plan_clean(plog, first_dirty, now_ms, cleaner, force=force)
    if planned is None:
        return None
    result = clean(planned.request, reached=reached)
    assert install(plog, planned, result, now_ms, reached)
    return result


def records(plog: PartitionLog) -> list[Record]:
    with plog.read(plog.log_start_offset, 1 << 40) as result:
        data = result.read_bytes()
    return [record for pos, _ in iter_batches(data) for record in iter_records(data, pos)]


def latest(plog: PartitionLog) -> dict[bytes, bytes]:
    """Key -> value as a reader from the start ends up seeing it (deleted keys left out)."""
    seen: dict[bytes, bytes | None] = {}
    for record in records(plog):
        assert record.key is not None
        seen[record.key] = record.value
    return {k: v for k, v in seen.items() if v is not None}


def at(base: int, data: bytes) -> bytes:
    """``data`` (one batch) with its base offset set, as a leader would have stored it."""
    stored = bytearray(data)
    set_base_offset(stored, 0, base)
    return bytes(stored)


def txn_batch(base: int, producer_id: int, sequence: int, pairs: Sequence[tuple[bytes | None, bytes | None]]) -> bytes:
    data = keyed(pairs, producer_id=producer_id, producer_epoch=0, base_sequence=sequence, is_transactional=True)
    return at(base, data)


def marker(base: int, producer_id: int, commit: bool) -> bytes:
    """A transaction marker (control batch) as a coordinator writes it: key (version, type),
    value (version, coordinator epoch)."""
    section = keyed([(struct.pack(">hh", 0, 1 if commit else 0), struct.pack(">hi", 0, 0))])[HEADER_SIZE:]
    return encode_batch_header(
        base_offset=base, partition_leader_epoch=0, attributes=TRANSACTIONAL_BIT | CONTROL_BIT, base_timestamp=T0,
        max_timestamp=T0, producer_id=producer_id, producer_epoch=0, base_sequence=-1, record_count=1,
        records=section,
    ) + section  # fmt: skip
