"""What the mirror does to a source batch, sans-IO: pick, rewrite, compare.

- :func:`copyable` yields the fetched batches to copy: those a committed-only
  reader sees (the rule lives with the client's raw batches), from the
  mirror's position on, less the empty ones a log cleaner leaves (no record).
- :func:`prepare` makes a source batch producible: one a log cleaner rewrote
  has offset gaps inside, which Kafka refuses from a producer, so its records
  are renumbered from its base (the one case where the mirror decompresses and
  recompresses, with the batch's own codec); and it says which source offsets
  land where in the aggregate, run by run, for exact translation.
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
from tributary.protocol.records import (
    HEADER_SIZE,
    NO_PRODUCER_ID,
    BatchHeader,
    attach_producer,
    dense_batch,
    detach_producer,
    has_gaps,
    iter_records,
    parse_batch_header,
)


class Stamp(NamedTuple):
    """The mirror's idempotent producer fields for one batch it produces."""

    producer_id: int
    producer_epoch: int
    base_sequence: int


def copyable(fetched: RawBatches, start: int) -> Iterator[tuple[BatchHeader, bytes]]:
    """The batches of ``fetched`` to copy, from source offset ``start`` on: what a
    committed-only reader sees (:meth:`RawBatches.committed_batch_bytes`), less any batch
    wholly before ``start`` (the broker returns the whole batch holding the position)."""
    for header, data in fetched.committed_batch_bytes():
        if header.next_offset > start and header.record_count > 0:
            yield header, data


class Run(NamedTuple):
    """Source offsets ``first..last`` (consecutive) landed at ``position``, ``position + 1``, ...
    of the produced batch."""

    first: int
    last: int
    position: int


class SourceBatch(NamedTuple):
    """A source batch as the mirror produces it."""

    source: BatchHeader
    #: The header and bytes to produce (before the mirror's producer fields are stamped).
    header: BatchHeader
    data: bytes
    runs: tuple[Run, ...]

    @property
    def renumbered(self) -> bool:
        return self.header is not self.source


def prepare(header: BatchHeader, data: bytes) -> SourceBatch:
    """``header``/``data`` ready to produce (see the module doc)."""
    if not has_gaps(header):
        return SourceBatch(header, header, data, (Run(header.base_offset, header.last_offset, 0),))
    offsets = [record.offset for record in iter_records(data)]
    dense = dense_batch(data)
    runs: list[Run] = []
    for index, offset in enumerate(offsets):
        if runs and runs[-1].last + 1 == offset:
            runs[-1] = runs[-1]._replace(last=offset)
        else:
            runs.append(Run(offset, offset, index))
    return SourceBatch(header, parse_batch_header(dense), dense, tuple(runs))


def for_target(header: BatchHeader, data: bytes, stamp: Stamp | None = None) -> bytes:
    """The bytes to produce for a source batch (``header`` is its parsed header): stamped
    with the mirror's producer fields, or without ``stamp`` with the source's cleared (the
    same object then for a plain batch)."""
    if stamp is not None:
        stamped = bytearray(data)
        attach_producer(stamped, 0, *stamp)
        return bytes(stamped)
    if header.producer_id == NO_PRODUCER_ID and not header.is_transactional:
        return data
    buf = bytearray(data)
    detach_producer(buf)
    return bytes(buf)


def same_batch(
    aggregate: BatchHeader, aggregate_data: bytes, source: BatchHeader, source_data: bytes, *, renumbered: bool = False
) -> bool:
    """Whether an aggregate batch is the copy of a source batch (as :func:`prepare` made it):
    same offsets span, count, first timestamp, codec, and byte-identical compressed records.
    (Not the CRC: a LogAppendTime topic rewrites maxTimestamp, and producer fields differ.)
    A renumbered batch was compressed by the mirror, whose codec library may have changed since:
    its records are compared decoded."""
    if renumbered:
        return (
            aggregate.record_count == source.record_count
            and aggregate.compression == source.compression
            and _contents(aggregate_data) == _contents(source_data)
        )
    return (
        aggregate.last_offset_delta == source.last_offset_delta
        and aggregate.record_count == source.record_count
        and aggregate.base_timestamp == source.base_timestamp
        and aggregate.compression == source.compression
        and aggregate.size == source.size
        and aggregate_data[HEADER_SIZE:] == source_data[HEADER_SIZE:]
    )


def _contents(data: bytes) -> list[tuple[int, bytes | None, bytes | None, object]]:
    return [(r.timestamp, r.key, r.value, r.headers) for r in iter_records(data)]


__all__ = ["Run", "SourceBatch", "Stamp", "copyable", "for_target", "prepare", "same_batch"]
