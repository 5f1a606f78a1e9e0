"""What stays of one batch when the cleaner rewrites it: Kafka's rules (``LogCleaner.
cleanInto``, ``MemoryRecords.filterTo``), over bytes, sans-IO.

A record stays if it is past what the key map covers, or if it is the latest record of its key
and either has a value or is a tombstone whose batch's delete horizon has not passed (or was
never set). A record without a key goes (a compacted topic refuses them; these came before its
policy changed). Control batches keep their marker unless it may go (see
:mod:`.transactions`) and its delete horizon has passed; an aborted transaction's batches lose
every record.

Then per batch: a batch whose records all stay is written as it was (not even decompressed
again) unless it needs its delete horizon stamped (it holds a tombstone or a marker that may
go, and has none yet: the horizon becomes now + ``delete.retention.ms``); one that keeps some is
rewritten with them (:func:`~tributary.protocol.records.filtered_batch`); one that keeps none
goes, unless it is an active producer's last data batch, which stays empty so that the
producer's sequence numbers still follow on (:func:`~tributary.protocol.records.empty_batch`), or
the marker of a producer that has no data batch left (its epoch fences zombies).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tributary.broker.log.cleaner.offset_map import OffsetMap
from tributary.broker.log.cleaner.transactions import CleanedTransactions
from tributary.protocol.crc32c import BytesLike
from tributary.protocol.records import (
    BatchHeader,
    Record,
    control_type,
    empty_batch,
    filtered_batch,
    iter_records,
)


@dataclass(slots=True)
class FilterStats:
    records_read: int = 0
    records_kept: int = 0
    batches_read: int = 0
    batches_kept: int = 0
    #: The earliest delete horizon among the batches kept with one: when a tombstone or a
    #: marker kept now may go (the next clean worth running for it alone).
    next_horizon_ms: int | None = field(default=None)

    def horizon(self, horizon_ms: int) -> None:
        if self.next_horizon_ms is None or horizon_ms < self.next_horizon_ms:
            self.next_horizon_ms = horizon_ms


class BatchFilter:
    def __init__(
        self,
        offsets: OffsetMap,
        transactions: CleanedTransactions,
        producers_last_offset: Mapping[int, int],
        producers_marker_only: Mapping[int, int],
        *,
        now_ms: int,
        delete_retention_ms: int,
        max_decompressed_bytes: int,
    ) -> None:
        self._offsets = offsets
        self._transactions = transactions
        #: Active producer id -> the last offset of its last data batch (kept, if only empty).
        self._producers = producers_last_offset
        #: Active producers with no data batch -> their epoch: a marker of theirs in that epoch stays.
        self._marker_only = producers_marker_only
        self._now = now_ms
        self._delete_retention_ms = delete_retention_ms
        self._max_size = max_decompressed_bytes
        self.stats = FilterStats()

    def _retained(self, header: BatchHeader, record: Record) -> bool:
        if record.offset > self._offsets.latest_offset:
            return True  # beyond the key map: compacted by a later clean
        if record.key is None:
            return False
        if record.offset < self._offsets.get(record.key):
            return False  # a later record of the key exists
        if record.value is not None:
            return True
        horizon = header.delete_horizon_ms
        return horizon is None or self._now < horizon

    def batch(self, buf: BytesLike, pos: int, header: BatchHeader) -> bytes | None:
        """The bytes to write for the batch at ``pos`` (its own if unchanged), or None."""
        stats = self.stats
        stats.batches_read += 1
        stats.records_read += header.record_count
        records = list(iter_records(buf, pos, max_size=self._max_size)) if header.record_count else []
        if header.is_control:
            marker = control_type(buf, pos) if records else None
            may_go = self._transactions.on_marker(header, marker)
            horizon = header.delete_horizon_ms
            drop_records = may_go and horizon is not None and horizon <= self._now
            marker_may_go = may_go
        else:
            drop_records = self._transactions.on_batch(header)
            marker_may_go = False
        keep_empty = header.producer_id >= 0 and (
            self._producers.get(header.producer_id) == header.last_offset
            or (header.is_control and self._marker_only.get(header.producer_id) == header.producer_epoch)
        )
        if drop_records and not keep_empty:
            return None
        kept: list[Record] = []
        tombstones = False
        for record in records:
            if drop_records:
                continue
            if header.is_control or self._retained(header, record):
                kept.append(record)
                tombstones = tombstones or record.value is None
        stamp = (tombstones or marker_may_go) and header.delete_horizon_ms is None and bool(kept)
        new_horizon = self._now + self._delete_retention_ms if stamp else None
        if kept:
            stats.batches_kept += 1
            stats.records_kept += len(kept)
            horizon = new_horizon if new_horizon is not None else header.delete_horizon_ms
            if horizon is not None and (tombstones or marker_may_go):
                stats.horizon(horizon)
            if len(kept) == len(records) and new_horizon is None:
                return bytes(memoryview(buf)[pos : pos + header.size])
            return filtered_batch(header, kept, delete_horizon_ms=new_horizon)
        if keep_empty:
            stats.batches_kept += 1
            return empty_batch(header)
        return None
