"""What the mirror does to a source batch, sans-IO: pick, rewrite, compare.

- :func:`copyable` yields the fetched batches to copy: those a committed-only
  reader sees (the rule lives with the client's raw batches), from the
  mirror's position on.
- :func:`for_target` turns a source batch into the bytes produced: the
  source's producer fields are replaced by the mirror's own producer id, epoch
  and sequence (:class:`Stamp`) and the CRC recomputed (the records stay
  compressed, untouched). Without a stamp the source's producer fields are
  cleared, and a plain batch is passed on as it is.
- :func:`same_batch` tells whether an aggregate batch is the copy of a source
  batch, which is how recovery recognises what is already in the aggregate.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from tributary.client.raw.batches import RawBatches
from tributary.protocol.crc32c import BytesLike
from tributary.protocol.records import (
    HEADER_SIZE,
    NO_PRODUCER_ID,
    BatchHeader,
    attach_producer,
    detach_producer,
)


class Stamp(NamedTuple):
    """The mirror's idempotent producer fields for one batch it produces."""

    producer_id: int
    producer_epoch: int
    base_sequence: int


def copyable(fetched: RawBatches, start: int) -> Iterator[tuple[BatchHeader, BytesLike]]:
    """The batches of ``fetched`` to copy, from source offset ``start`` on: what a
    committed-only reader sees (:meth:`RawBatches.committed_batch_bytes`), less any batch
    wholly before ``start`` (the broker returns the whole batch holding the position)."""
    for header, data in fetched.committed_batch_bytes():
        if header.next_offset > start:
            yield header, data


def for_target(header: BatchHeader, data: BytesLike, stamp: Stamp | None = None) -> BytesLike:
    """The bytes to produce for a source batch (``header`` is its parsed header): stamped
    with the mirror's producer fields, or without ``stamp`` with the source's cleared (the
    same object then for a plain batch). A changed batch is the one copy the mirror makes of
    it before the Produce request (``data`` is usually a view of the fetch response)."""
    if stamp is not None:
        stamped = bytearray(data)
        attach_producer(stamped, 0, *stamp)
        return stamped
    if header.producer_id == NO_PRODUCER_ID and not header.is_transactional:
        return data
    buf = bytearray(data)
    detach_producer(buf)
    return buf


def same_batch(aggregate: BatchHeader, aggregate_data: BytesLike, source: BatchHeader, source_data: BytesLike) -> bool:
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


__all__ = ["Stamp", "copyable", "for_target", "same_batch"]
