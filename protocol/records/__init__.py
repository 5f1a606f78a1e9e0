"""Record batches in message format v2 (magic 2), the only format Tributary speaks.

A batch is a 61-byte header followed by its records::

    baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8,
    crc uint32, attributes int16, lastOffsetDelta int32, baseTimestamp int64,
    maxTimestamp int64, producerId int64, producerEpoch int16, baseSequence int32,
    records count int32, records...

``batchLength`` counts everything after itself. The CRC-32C covers everything
from ``attributes`` to the end, so the two fields a broker rewrites on append
(``baseOffset`` and ``partitionLeaderEpoch``) leave it valid. Attributes:
bits 0-2 codec, bit 3 timestamp type (log append time), bit 4 transactional,
bit 5 control, bit 6 delete horizon (KIP-534: ``baseTimestamp`` is the time a log
cleaner may remove the batch's tombstones or marker). With a codec, the records section (everything after the count)
is compressed as one unit. Each record::

    length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
    keyLength varint, key, valueLength varint, value,
    headers count varint, [keyLength varint, key utf-8, valueLength varint, value]

where a length of -1 means null. Varints are zig-zag encoded.

The package is split by job: :mod:`.header` (the layout, reading, checking and
patching headers: what brokers and mirrors use), :mod:`.codec` (decoding records:
:func:`decode_records` and :func:`iter_records`, what consumers use) and :mod:`.builder` (:class:`BatchBuilder`,
what producers use), :mod:`.control` (transaction markers), :mod:`.validate`
(whether a batch's records agree with its header, what brokers check before
appending), :mod:`.recompress` (a batch's records in another codec, for topics
whose ``compression.type`` asks for one) and :mod:`.rewrite` (a batch with fewer records,
what a log cleaner writes, and renumbered, what a mirror copies of it). Their public names
are re-exported here.
Malformed input raises :class:`CorruptRecordError`; magic 0/1 raises
:class:`UnsupportedMagicError`.
"""

from __future__ import annotations

from tributary.protocol.compression import Compression
from tributary.protocol.records.builder import (
    BatchBuilder,
    Payload,
    append_record,
    append_record_at,
    build_batch,
    finish_batch,
)
from tributary.protocol.records.codec import Header, Headers, Record, decode_records, iter_records
from tributary.protocol.records.control import ControlType, Marker, build_marker_batch, control_type, read_marker
from tributary.protocol.records.header import (
    CODEC_MASK,
    CONTROL_BIT,
    CREATE_TIME,
    DELETE_HORIZON_BIT,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    assign_offset_and_epoch,
    attach_producer,
    carry_crc,
    complete_prefix_length,
    compute_crc,
    detach_producer,
    encode_batch_header,
    iter_batches,
    parse_batch_header,
    rewrite_crc,
    set_base_offset,
    set_partition_leader_epoch,
    set_producer,
    stamp_log_append_time,
    validate_batch,
    verify_crc,
)
from tributary.protocol.records.recompress import recompress_batch
from tributary.protocol.records.rewrite import dense_batch, empty_batch, filtered_batch, has_gaps
from tributary.protocol.records.validate import check_records

__all__ = [
    "CODEC_MASK",
    "CONTROL_BIT",
    "CREATE_TIME",
    "DELETE_HORIZON_BIT",
    "HEADER_SIZE",
    "LOG_APPEND_TIME",
    "LOG_OVERHEAD",
    "MAGIC",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "TIMESTAMP_TYPE_BIT",
    "TRANSACTIONAL_BIT",
    "BatchBuilder",
    "BatchHeader",
    "ControlType",
    "Marker",
    "Compression",
    "Header",
    "Headers",
    "Payload",
    "Record",
    "append_record",
    "append_record_at",
    "build_batch",
    "build_marker_batch",
    "check_records",
    "complete_prefix_length",
    "compute_crc",
    "control_type",
    "decode_records",
    "dense_batch",
    "empty_batch",
    "filtered_batch",
    "finish_batch",
    "has_gaps",
    "assign_offset_and_epoch",
    "attach_producer",
    "carry_crc",
    "detach_producer",
    "encode_batch_header",
    "iter_batches",
    "iter_records",
    "parse_batch_header",
    "read_marker",
    "recompress_batch",
    "rewrite_crc",
    "set_base_offset",
    "set_partition_leader_epoch",
    "set_producer",
    "stamp_log_append_time",
    "validate_batch",
    "verify_crc",
]
