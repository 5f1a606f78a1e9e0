"""Rewriting a stored batch with fewer records, as a log cleaner does (and a mirror must, to
produce what a cleaner left).

A log cleaner keeps, of a batch, only the records that are still the latest for their key.
Kafka's rules for the batch it writes back (``MemoryRecords.filterTo``), which
:func:`filtered_batch` follows:

- the batch keeps its ``baseOffset`` and its ``lastOffsetDelta``, and each kept record its own
  offset: offsets are never reassigned, so gaps appear inside and between batches, and the last
  sequence number of an idempotent producer's batch (``baseSequence + lastOffsetDelta``) stays
  what the producer sent;
- producer id, epoch, base sequence, partition leader epoch, the transactional and control bits,
  the timestamp type and the codec stay; the records are compressed again with that codec;
- ``maxTimestamp`` becomes the largest kept timestamp (the append time stays under
  LogAppendTime);
- KIP-534: a batch holding a tombstone or a transaction marker is stamped, the first time a
  cleaner rewrites it, with the delete horizon (the ``baseTimestamp`` field, attribute bit 6):
  the time from which the cleaner may remove them. Record timestamps are written relative to it,
  so every reader still decodes them unchanged.

A batch whose records all go but which must stay for its producer's sake (the last batch of an
active producer) becomes :func:`empty_batch`: the header alone, zero records, offsets and
sequence as before.

:func:`dense_batch` is the other direction, for a mirror: Kafka refuses a produced batch whose
offsets are not consecutive, so a cleaned batch is renumbered 0, 1, 2... before it is copied.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from tributary.protocol.compression import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression, compress
from tributary.protocol.crc32c import BytesLike
from tributary.protocol.primitives import encode_varint
from tributary.protocol.records.builder import _VARINT_CACHED, _VARINT_TABLE, Payload, _put_headers
from tributary.protocol.records.codec import Record, iter_records
from tributary.protocol.records.header import (
    CODEC_MASK,
    DELETE_HORIZON_BIT,
    LOG_APPEND_TIME,
    BatchHeader,
    encode_batch_header,
    parse_batch_header,
)


def _varint(value: int) -> bytes:
    return _VARINT_TABLE[value] if 0 <= value < _VARINT_CACHED else encode_varint(value)


def _encode_record(out: bytearray, offset_delta: int, timestamp_delta: int, record: Record) -> None:
    body = bytearray(1)  # attributes: none defined
    body += _varint(timestamp_delta)
    body += _varint(offset_delta)
    for field in (record.key, record.value):
        payload: Payload | None = field
        if payload is None:
            body.append(1)  # varint -1
        else:
            body += _varint(len(payload))
            body += payload
    if record.headers:
        _put_headers(body, record.headers)
    else:
        body.append(0)
    out += _varint(len(body))
    out += body


def _assemble(
    header: BatchHeader,
    records: Sequence[Record],
    offset_deltas: Sequence[int],
    *,
    last_offset_delta: int,
    delete_horizon_ms: int | None,
    compression_level: int | None,
) -> bytes:
    log_append_time = header.timestamp_type == LOG_APPEND_TIME
    max_timestamp = header.max_timestamp if log_append_time else max(record.timestamp for record in records)
    attributes = header.attributes & ~DELETE_HORIZON_BIT
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms
        attributes |= DELETE_HORIZON_BIT
    else:
        base_timestamp = records[0].timestamp
    body = bytearray()
    for record, delta in zip(records, offset_deltas, strict=True):
        _encode_record(body, delta, record.timestamp - base_timestamp, record)
    codec = attributes & CODEC_MASK
    payload = compress(codec, body, compression_level) if codec != Compression.NONE else bytes(body)
    head = encode_batch_header(
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        attributes=attributes,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        record_count=len(records),
        records=payload,
        last_offset_delta=last_offset_delta,
    )
    return head + payload


def filtered_batch(
    header: BatchHeader,
    kept: Sequence[Record],
    *,
    delete_horizon_ms: int | None = None,
    compression_level: int | None = None,
) -> bytes:
    """The batch ``header`` heads, holding only ``kept`` (some of its records, decoded, in
    order), each at its own offset; stamped with ``delete_horizon_ms`` if given, else with
    the horizon it already carried, if any. ``kept`` must not be empty (see :func:`empty_batch`)."""
    if not kept:
        raise ValueError("a filtered batch keeps at least one record; use empty_batch")
    base = header.base_offset
    deltas = [record.offset - base for record in kept]
    if deltas[0] < 0 or deltas[-1] > header.last_offset_delta or any(b <= a for a, b in itertools.pairwise(deltas)):
        raise ValueError(f"records kept are not in the batch at {base} in order")
    horizon = delete_horizon_ms if delete_horizon_ms is not None else header.delete_horizon_ms
    return _assemble(
        header,
        kept,
        deltas,
        last_offset_delta=header.last_offset_delta,
        delete_horizon_ms=horizon,
        compression_level=compression_level,
    )


def empty_batch(header: BatchHeader) -> bytes:
    """The batch ``header`` heads with no records: what stays of an active producer's last
    batch once its records are all gone (its offsets and sequence numbers are kept, so the
    producer's next batch still follows on). Uncompressed, stamped with its maximum timestamp."""
    attributes = header.attributes & ~(CODEC_MASK | DELETE_HORIZON_BIT)
    return encode_batch_header(
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        attributes=attributes,
        base_timestamp=header.max_timestamp,
        max_timestamp=header.max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        record_count=0,
        records=b"",
        last_offset_delta=header.last_offset_delta,
    )


def has_gaps(header: BatchHeader) -> bool:
    """Whether the batch spans more offsets than it holds records: a cleaner removed some."""
    return header.last_offset_delta != header.record_count - 1


def dense_batch(
    buf: BytesLike,
    pos: int = 0,
    *,
    compression_level: int | None = None,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """The batch at ``pos`` with its records at consecutive offsets from its base (what a
    producer may send): the records, timestamps, producer fields, codec and any delete horizon
    stay. A batch without gaps comes back as its own bytes; an empty one raises ValueError."""
    header = parse_batch_header(buf, pos)
    if not has_gaps(header):
        return bytes(memoryview(buf)[pos : pos + header.size])
    records = list(iter_records(buf, pos, max_size=max_size))
    if not records:
        raise ValueError(f"the batch at offset {header.base_offset} holds no records")
    return _assemble(
        header,
        records,
        range(len(records)),
        last_offset_delta=len(records) - 1,
        delete_horizon_ms=header.delete_horizon_ms,
        compression_level=compression_level,
    )
