"""The 61-byte header of a v2 record batch: its layout, reading it, and patching it in place.

Brokers and mirrors work on headers only: they check a batch (:func:`validate_batch`),
walk concatenated batches (:func:`iter_batches`) and rewrite the fields a broker or a
mirror owns (:func:`set_base_offset`, :func:`stamp_log_append_time`,
:func:`detach_producer`) without touching the records, compressed or not. Every read
and write of a header field in Tributary goes through this module.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from tributary.protocol.compression import Compression
from tributary.protocol.crc32c import BytesLike, crc32c
from tributary.protocol.errors import CorruptRecordError, UnsupportedMagicError
from tributary.protocol.records.compiled import MODULE as _COMPILED

MAGIC = 2

# The header layout, field by field; offsets are derived from it so that the
# struct and the offsets cannot disagree.
_HEADER_FIELDS = (
    ("base_offset", "q"),
    ("batch_length", "i"),
    ("partition_leader_epoch", "i"),
    ("magic", "b"),
    ("crc", "I"),
    ("attributes", "h"),
    ("last_offset_delta", "i"),
    ("base_timestamp", "q"),
    ("max_timestamp", "q"),
    ("producer_id", "q"),
    ("producer_epoch", "h"),
    ("base_sequence", "i"),
    ("record_count", "i"),
)
_HEADER = struct.Struct(">" + "".join(code for _, code in _HEADER_FIELDS))


def _field_offset(name: str) -> int:
    names = [field for field, _ in _HEADER_FIELDS]
    return struct.calcsize(">" + "".join(code for _, code in _HEADER_FIELDS[: names.index(name)]))


HEADER_SIZE = _HEADER.size
#: The bytes before the part ``batchLength`` counts (baseOffset, batchLength).
LOG_OVERHEAD = _field_offset("partition_leader_epoch")
_BASE_OFFSET_OFFSET = _field_offset("base_offset")
_LENGTH_OFFSET = _field_offset("batch_length")
_LEADER_EPOCH_OFFSET = _field_offset("partition_leader_epoch")
_MAGIC_OFFSET = _field_offset("magic")
_CRC_OFFSET = _field_offset("crc")
_CRC_START = _field_offset("attributes")
_ATTRIBUTES_OFFSET = _CRC_START
_PRODUCER_ID_OFFSET = _field_offset("producer_id")
_MAX_TIMESTAMP_OFFSET = _field_offset("max_timestamp")
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
# baseOffset, batchLength (written back as it was), partitionLeaderEpoch.
_OFFSET_AND_EPOCH = struct.Struct(">qii")
assert _OFFSET_AND_EPOCH.size == _LEADER_EPOCH_OFFSET + 4 and _BASE_OFFSET_OFFSET == 0

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")
#: producerId, producerEpoch, baseSequence: adjacent in the header.
_PRODUCER_FIELDS = struct.Struct(">qhi")

CODEC_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
#: KIP-534: ``baseTimestamp`` holds the delete horizon, the time after which a log cleaner may
#: remove the batch's tombstones (or, in a control batch, the marker). Set by a cleaner only.
DELETE_HORIZON_BIT = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_MAX_CODEC = max(Compression)
_CODECS = tuple(Compression(codec) for codec in range(_MAX_CODEC + 1))
_LEGACY_MAGICS = (0, 1)


class BatchHeader(NamedTuple):
    """The 61-byte header of a v2 record batch, field for field."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def compression(self) -> Compression:
        codec = self.attributes & CODEC_MASK
        # A table, not the enum's call (every append asks, once per batch); an unknown codec,
        # which parse_batch_header refuses, still raises the enum's ValueError.
        return _CODECS[codec] if codec < len(_CODECS) else Compression(codec)

    @property
    def timestamp_type(self) -> int:
        """:data:`CREATE_TIME` or :data:`LOG_APPEND_TIME`."""
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_BIT else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def delete_horizon_ms(self) -> int | None:
        """When a log cleaner may remove this batch's tombstones or marker (KIP-534), if set."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_BIT else None

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self) -> int:
        """The whole batch's size in bytes, header included."""
        return self.batch_length + LOG_OVERHEAD


# --- reading, checking and patching one header -------------------------------


def parse_batch_header(buf: BytesLike, pos: int = 0) -> BatchHeader:
    """Decodes and sanity-checks the header of the batch at ``pos``.

    Checks magic, length, codec and counts; not the CRC and not whether the
    whole batch is in ``buf`` (see :func:`validate_batch`). Nothing is
    decompressed."""
    available = len(buf) - pos
    if pos < 0 or available < HEADER_SIZE:
        # A v0/v1 message can be shorter than a v2 header; its magic sits at
        # the same offset, and deserves the precise error.
        if pos >= 0 and available > _MAGIC_OFFSET and buf[pos + _MAGIC_OFFSET] in _LEGACY_MAGICS:
            raise UnsupportedMagicError(buf[pos + _MAGIC_OFFSET])
        raise CorruptRecordError(
            f"record batch header at offset {pos} is truncated: {max(available, 0)} of {HEADER_SIZE} bytes"
        )
    header = BatchHeader._make(_HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        if header.magic in _LEGACY_MAGICS:
            raise UnsupportedMagicError(header.magic)
        raise CorruptRecordError(f"record batch at offset {pos} has unknown magic {header.magic}")
    if header.batch_length < _MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"record batch at offset {pos} has batchLength {header.batch_length}, "
            f"less than its own header ({_MIN_BATCH_LENGTH})"
        )
    if header.attributes & CODEC_MASK > _MAX_CODEC:
        raise CorruptRecordError(
            f"record batch at offset {pos} has unknown compression codec {header.attributes & CODEC_MASK}"
        )
    # Offsets deltas are distinct and ascending, so lastOffsetDelta >= count - 1
    # (larger only after compaction). Anything else would move offsets backwards.
    if header.record_count < 0 or header.last_offset_delta < header.record_count - 1:
        raise CorruptRecordError(
            f"record batch at offset {pos} has {header.record_count} records "
            f"but lastOffsetDelta {header.last_offset_delta}"
        )
    return header


def compute_crc(buf: BytesLike, pos: int = 0, header: BatchHeader | None = None) -> int:
    """The CRC-32C the batch at ``pos`` should carry (attributes to end)."""
    if header is None:
        header = parse_batch_header(buf, pos)
    end = pos + header.size
    if end > len(buf):
        raise CorruptRecordError(
            f"record batch at offset {pos} is truncated: {len(buf) - pos} of {header.size} bytes present"
        )
    return crc32c(memoryview(buf)[pos + _CRC_START : end])


def verify_crc(buf: BytesLike, pos: int = 0, header: BatchHeader | None = None) -> None:
    """Raises :class:`CorruptRecordError` unless the batch's stored CRC matches its bytes."""
    if header is None:
        header = parse_batch_header(buf, pos)
    actual = compute_crc(buf, pos, header)
    if actual != header.crc:
        raise CorruptRecordError(
            f"record batch at offset {pos} fails its CRC: expected {header.crc:#010x}, computed {actual:#010x}"
        )


def validate_batch(buf: BytesLike, pos: int = 0) -> BatchHeader:
    """Everything a broker checks before appending: header, length, CRC.

    Records are neither decompressed nor decoded."""
    header = parse_batch_header(buf, pos)
    verify_crc(buf, pos, header)
    return header


def set_base_offset(buf: bytearray | memoryview, pos: int, offset: int) -> None:
    """Rewrites baseOffset in place. It lies outside the CRC, which stays valid."""
    _I64.pack_into(buf, pos + _BASE_OFFSET_OFFSET, offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Rewrites partitionLeaderEpoch in place. It lies outside the CRC, which stays valid."""
    _I32.pack_into(buf, pos + _LEADER_EPOCH_OFFSET, epoch)


def assign_offset_and_epoch(
    buf: bytearray | memoryview, pos: int, header: BatchHeader, offset: int, epoch: int
) -> BatchHeader:
    """A leader's append: baseOffset and partitionLeaderEpoch rewritten in place (both outside
    the CRC, which stays valid) with one pack; the header as it now reads."""
    _OFFSET_AND_EPOCH.pack_into(buf, pos, offset, header[1], epoch)
    return tuple.__new__(BatchHeader, (offset, header[1], epoch, *header[3:]))


def rewrite_crc(buf: bytearray | memoryview, pos: int = 0) -> int:
    """Stores the CRC of the batch's current bytes, after a change inside the
    CRC (producer ids, say); returns it. The records are never recompressed."""
    crc = compute_crc(buf, pos)
    _U32.pack_into(buf, pos + _CRC_OFFSET, crc)
    return crc


def carry_crc(buf: bytearray | memoryview, pos: int, start: BytesLike) -> int:
    """Replaces the first ``len(start)`` bytes that the CRC of the batch at ``pos`` covers
    (attributes on) with ``start``, and carries the stored CRC over the change; returns it.

    The CRC is not computed again from the batch's bytes: CRC-32C is linear, so the new one is
    the stored one plus what the change alone contributes, the CRC register of its difference
    carried through the rest of the batch as through zero bytes (a product of a few 32-bit
    polynomials: ``_speedups.carry_crc``, well under a microsecond whatever the batch's size).
    An honest batch gets exactly the CRC :func:`rewrite_crc` would give it, and a damaged one
    keeps a CRC that does not match its bytes, so the damage is still caught downstream (a
    broker refuses the batch with CORRUPT_MESSAGE) instead of being sealed under a fresh CRC.
    Without the compiled module the same CRC comes from two CRCs of the whole region, before
    and after the change."""
    if _COMPILED is not None:
        carried: int = _COMPILED.carry_crc(buf, pos, start)
        return carried
    at = pos + _CRC_START
    end = pos + LOG_OVERHEAD + _I32.unpack_from(buf, pos + _LENGTH_OFFSET)[0]
    if end > len(buf) or end < at + len(start):
        raise CorruptRecordError(f"record batch at offset {pos} is truncated or too short to patch")
    view = memoryview(buf)
    before = crc32c(view[at:end])
    view[at : at + len(start)] = start
    crc: int = _U32.unpack_from(buf, pos + _CRC_OFFSET)[0] ^ before ^ crc32c(view[at:end])
    _U32.pack_into(buf, pos + _CRC_OFFSET, crc)
    return crc


def _covered_start(buf: BytesLike, pos: int, size: int) -> bytearray:
    """A copy of the first ``size`` bytes the CRC of the batch at ``pos`` covers, to patch and
    hand to :func:`carry_crc`."""
    at = pos + _CRC_START
    if at + size > len(buf):
        raise CorruptRecordError(f"record batch at offset {pos} is truncated: its header is not all there")
    return bytearray(buf[at : at + size])


#: What :func:`attach_producer` and :func:`detach_producer` change: attributes through baseSequence.
_PRODUCER_PART = _PRODUCER_ID_OFFSET + _PRODUCER_FIELDS.size - _CRC_START
#: What :func:`stamp_log_append_time` changes: attributes through maxTimestamp.
_TIMESTAMP_PART = _MAX_TIMESTAMP_OFFSET + 8 - _CRC_START


def detach_producer(buf: bytearray | memoryview, pos: int = 0) -> bool:
    """Makes the batch at ``pos`` an ordinary, non-idempotent one: producerId,
    producerEpoch and baseSequence become "none" and the transactional bit is
    cleared; the CRC is carried over the change (:func:`carry_crc`), the records stay as they
    are, compressed or not. A mirror does this so the target's idempotence and transaction
    state never sees the source's producers. Returns False, changing nothing, when there is
    nothing to detach."""
    header = parse_batch_header(buf, pos)
    if header.producer_id == NO_PRODUCER_ID and not header.is_transactional:
        return False
    _stamp_producer(buf, pos, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE, clear_transactional=True)
    return True


def attach_producer(
    buf: bytearray | memoryview, pos: int, producer_id: int, producer_epoch: int, base_sequence: int
) -> None:
    """Makes the batch at ``pos`` an idempotent, non-transactional batch of another producer:
    the transactional bit is cleared and producerId, producerEpoch and baseSequence are set;
    the CRC is carried over the change (:func:`carry_crc`). A mirror does this so the target
    recognises a batch it sends again, while never seeing the source's producers."""
    _stamp_producer(buf, pos, producer_id, producer_epoch, base_sequence, clear_transactional=True)


def set_producer(
    buf: bytearray | memoryview, pos: int, producer_id: int, producer_epoch: int, base_sequence: int
) -> None:
    """Rewrites producerId, producerEpoch and baseSequence in place and carries the CRC over
    the change (:func:`carry_crc`); the attributes and the records stay as they are."""
    _stamp_producer(buf, pos, producer_id, producer_epoch, base_sequence, clear_transactional=False)


def _stamp_producer(
    buf: bytearray | memoryview,
    pos: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    *,
    clear_transactional: bool,
) -> None:
    """The producer fields written, and the transactional bit cleared if asked, the CRC carried
    over both."""
    start = _covered_start(buf, pos, _PRODUCER_PART)
    if clear_transactional:
        _I16.pack_into(start, 0, _I16.unpack_from(start, 0)[0] & ~TRANSACTIONAL_BIT)
    _PRODUCER_FIELDS.pack_into(start, _PRODUCER_ID_OFFSET - _CRC_START, producer_id, producer_epoch, base_sequence)
    carry_crc(buf, pos, start)


def stamp_log_append_time(buf: bytearray | memoryview, pos: int, header: BatchHeader, now_ms: int) -> BatchHeader:
    """Marks the batch at ``pos`` as LogAppendTime with ``now_ms`` as its maxTimestamp,
    what a broker does on append to a topic with ``message.timestamp.type=LogAppendTime``.
    Both fields lie inside the CRC, which is carried over the change (:func:`carry_crc`);
    returns the new header."""
    attributes = header.attributes | TIMESTAMP_TYPE_BIT
    start = _covered_start(buf, pos, _TIMESTAMP_PART)
    _I16.pack_into(start, 0, attributes)
    _I64.pack_into(start, _MAX_TIMESTAMP_OFFSET - _CRC_START, now_ms)
    crc = carry_crc(buf, pos, start)
    return header._replace(attributes=attributes, max_timestamp=now_ms, crc=crc)


def encode_batch_header(
    *,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    record_count: int,
    records: BytesLike,
    last_offset_delta: int | None = None,
) -> bytes:
    """The header for a records section (already compressed if ``attributes`` names a
    codec) holding ``record_count`` records, with its CRC. The records sit at consecutive
    offsets unless ``last_offset_delta`` says where the batch ends (a batch a log cleaner
    rewrote keeps its original offsets, gaps and all)."""
    header = bytearray(
        _HEADER.pack(
            base_offset,
            _MIN_BATCH_LENGTH + len(records),
            partition_leader_epoch,
            MAGIC,
            0,  # the CRC, computed below over the header's tail and the records
            attributes,
            record_count - 1 if last_offset_delta is None else last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            record_count,
        )
    )
    crc = crc32c(records, crc32c(memoryview(header)[_CRC_START:]))
    _U32.pack_into(header, _CRC_OFFSET, crc)
    return bytes(header)


# --- walking concatenated batches ----------------------------------------------


def iter_batches(buf: BytesLike, pos: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """Yields ``(position, header)`` for each complete batch from ``pos`` on.

    A truncated batch at the end ends the walk silently, since fetch
    responses may end that way. Headers are checked (see
    :func:`parse_batch_header`); CRCs are not."""
    end = len(buf)
    while end - pos >= LOG_OVERHEAD:
        (length,) = _I32.unpack_from(buf, pos + _LENGTH_OFFSET)
        if length + LOG_OVERHEAD > end - pos:
            return
        header = parse_batch_header(buf, pos)
        yield pos, header
        pos += header.size


def complete_prefix_length(buf: BytesLike, pos: int = 0) -> int:
    """The length of the run of complete batches starting at ``pos``."""
    end = pos
    for start, header in iter_batches(buf, pos):
        end = start + header.size
    return end - pos
