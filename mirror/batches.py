"""What the mirror does to a source batch, sans-IO: pick, rewrite, compare.

- :func:`copyable` walks one partition's fetched batches in order and yields
  those to copy: control batches (transaction markers) never, and batches of
  aborted transactions never, following the aborted-transaction list a
  READ_COMMITTED fetch returns (the same algorithm as Kafka's consumer).
- :func:`for_target` turns a source batch into the bytes produced: unchanged,
  unless it came from an idempotent or transactional producer, whose fields
  are cleared and the CRC recomputed (the records stay compressed, untouched).
- :func:`same_batch` tells whether an aggregate batch is the copy of a source
  batch, which is how recovery recognises what is already in the aggregate.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from tributary.client.raw.batches import RawBatches
from tributary.protocol.records import (
    HEADER_SIZE,
    NO_PRODUCER_ID,
    BatchHeader,
    detach_producer,
    iter_records,
    parse_batch_header,
)

_CONTROL_KEY = struct.Struct(">hh")  # version, type
_ABORT = 0


def _is_abort_marker(data: bytes) -> bool:
    """Whether a control batch holds an ABORT marker. Control batches are never
    compressed; the first record's key is ``version int16, type int16``."""
    for record in iter_records(data):
        if record.key is not None and len(record.key) >= _CONTROL_KEY.size:
            marker_type: int = _CONTROL_KEY.unpack_from(record.key)[1]
            return marker_type == _ABORT
        break
    return False


def copyable(fetched: RawBatches, start: int) -> Iterator[tuple[BatchHeader, bytes]]:
    """The batches of ``fetched`` to copy, from source offset ``start`` on."""
    pending = sorted(fetched.aborted_transactions, key=lambda t: t[1])
    aborted: set[int] = set()
    i = 0
    for header, data in fetched.batch_bytes():
        while i < len(pending) and pending[i][1] <= header.last_offset:
            aborted.add(pending[i][0])
            i += 1
        if header.is_control:
            if header.producer_id in aborted and _is_abort_marker(data):
                aborted.discard(header.producer_id)
            continue
        if header.is_transactional and header.producer_id in aborted:
            continue
        if header.next_offset <= start:
            continue  # a batch before the position: the broker returns the whole batch holding it
        yield header, data


def for_target(data: bytes) -> bytes:
    """The bytes to produce for a source batch: the same object unless producer fields must go
    (a plain batch, the common case, is not copied)."""
    header = parse_batch_header(data)
    if header.producer_id == NO_PRODUCER_ID and not header.is_transactional:
        return data
    buf = bytearray(data)
    detach_producer(buf)
    return bytes(buf)


def same_batch(aggregate: BatchHeader, aggregate_data: bytes, source: BatchHeader, source_data: bytes) -> bool:
    """Whether an aggregate batch is the copy of a source batch: same offsets
    span, count, first timestamp, codec, and byte-identical compressed records.
    (Not the CRC: a LogAppendTime topic rewrites maxTimestamp, and producer fields differ.)"""
    return (
        aggregate.last_offset_delta == source.last_offset_delta
        and aggregate.record_count == source.record_count
        and aggregate.base_timestamp == source.base_timestamp
        and aggregate.compression == source.compression
        and aggregate.size == source.size
        and aggregate_data[HEADER_SIZE:] == source_data[HEADER_SIZE:]
    )


__all__ = ["copyable", "for_target", "same_batch"]
