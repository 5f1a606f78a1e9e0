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
bit 5 control. With a codec, the records section (everything after the count)
is compressed as one unit. Each record::

    length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
    keyLength varint, key, valueLength varint, value,
    headers count varint, [keyLength varint, key utf-8, valueLength varint, value]

where a length of -1 means null. Varints are zig-zag encoded.

Brokers and mirrors work on headers only (:func:`validate_batch`,
:func:`iter_batches`, :func:`set_base_offset`); consumers decode records with
:func:`iter_records`; producers build batches with :class:`BatchBuilder`.
Malformed input raises :class:`CorruptRecordError`; magic 0/1 raises
:class:`UnsupportedMagicError`.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeAlias, TypeVar, overload

from tributary.protocol.compression import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression, compress, decompress
from tributary.protocol.crc32c import BytesLike, crc32c
from tributary.protocol.errors import CorruptRecordError, UnsupportedMagicError
from tributary.protocol.primitives import encode_varint

Header: TypeAlias = tuple[str, bytes | None]
Headers: TypeAlias = tuple[Header, ...]
#: What :meth:`BatchBuilder.append` accepts as keys, values and header values.
Payload: TypeAlias = bytes | bytearray | memoryview

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
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD

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

CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_MAX_CODEC = max(Compression)
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
        return Compression(self.attributes & CODEC_MASK)

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
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self) -> int:
        """The whole batch's size in bytes, header included."""
        return self.batch_length + LOG_OVERHEAD


# --- headers, CRC and in-place rewrites --------------------------------------


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


def rewrite_crc(buf: bytearray | memoryview, pos: int = 0) -> int:
    """Stores the CRC of the batch's current bytes, after a change inside the
    CRC (producer ids, say); returns it. The records are never recompressed."""
    crc = compute_crc(buf, pos)
    _U32.pack_into(buf, pos + _CRC_OFFSET, crc)
    return crc


def detach_producer(buf: bytearray | memoryview, pos: int = 0) -> bool:
    """Makes the batch at ``pos`` an ordinary, non-idempotent one: producerId,
    producerEpoch and baseSequence become "none" and the transactional bit is
    cleared; the CRC is recomputed over the (still compressed) bytes. A mirror
    does this so the target's idempotence and transaction state never sees the
    source's producers. Returns False, changing nothing, when there is nothing to detach."""
    header = parse_batch_header(buf, pos)
    if header.producer_id == NO_PRODUCER_ID and not header.is_transactional:
        return False
    _I16.pack_into(buf, pos + _ATTRIBUTES_OFFSET, header.attributes & ~TRANSACTIONAL_BIT)
    set_producer(buf, pos, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE)
    return True


def set_producer(
    buf: bytearray | memoryview, pos: int, producer_id: int, producer_epoch: int, base_sequence: int
) -> None:
    """Rewrites producerId, producerEpoch and baseSequence in place and recomputes the CRC
    (they lie inside it); the records stay as they are, compressed or not."""
    _PRODUCER_FIELDS.pack_into(buf, pos + _PRODUCER_ID_OFFSET, producer_id, producer_epoch, base_sequence)
    rewrite_crc(buf, pos)


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


# --- records -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record; ``offset`` and ``timestamp`` are absolute."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


R = TypeVar("R", bound=Record)

# A frozen dataclass's __init__ goes through object.__setattr__ per field, at
# about three times the cost of setting the slots directly, which is what the
# decoder does instead.
_new_object = object.__new__
_set_offset = Record.__dict__["offset"].__set__
_set_timestamp = Record.__dict__["timestamp"].__set__
_set_key = Record.__dict__["key"].__set__
_set_value = Record.__dict__["value"].__set__
_set_headers = Record.__dict__["headers"].__set__

_NO_HEADERS: Headers = ()
# The signed value of each one-byte varint, the common case of every field,
# and of each two-byte one, indexed by its 14 payload bits (low 7 bits first).
_SMALL_VARINT = tuple((b >> 1) ^ -(b & 1) for b in range(0x80))
_TWO_BYTE_VARINT = tuple((v >> 1) ^ -(v & 1) for v in range(1 << 14))


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    # Lengths of typical keys and values take two bytes: worth a fast path.
    byte = data[pos]
    if byte < 0x80:
        return _SMALL_VARINT[byte], pos + 1
    value = byte & 0x7F
    byte = data[pos + 1]
    if byte < 0x80:
        value |= byte << 7
        return (value >> 1) ^ -(value & 1), pos + 2
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError(f"varint longer than 10 bytes at offset {pos - 10}")


@overload
def iter_records(
    buf: BytesLike, pos: int = 0, *, check_crc: bool = True, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> Iterator[Record]: ...


@overload
def iter_records(
    buf: BytesLike,
    pos: int = 0,
    *,
    check_crc: bool = True,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    record_type: type[R],
) -> Iterator[R]: ...


def iter_records(
    buf: BytesLike,
    pos: int = 0,
    *,
    check_crc: bool = True,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    record_type: type[Record] = Record,
) -> Iterator[Record]:
    """The records of the batch at ``pos``, decoded one by one as iterated.

    The header (and, unless ``check_crc`` is false, the CRC) is checked and the
    records section decompressed now, once; a decoding error in a record
    surfaces when iteration reaches it. ``max_size`` bounds the decompressed
    size. Control batches yield their control records like any other.

    ``record_type`` may be a subclass of :class:`Record` that adds no instance
    fields (its ``__slots__`` empty): records are made as instances of it, with
    the five fields set. A consumer uses this to hand out records of its own
    type without building each record twice."""
    header = validate_batch(buf, pos) if check_crc else parse_batch_header(buf, pos)
    end = pos + header.size
    if end > len(buf):
        raise CorruptRecordError(f"record batch at offset {pos} is truncated")
    start = pos + HEADER_SIZE
    codec = header.attributes & CODEC_MASK
    if codec:
        data = decompress(codec, memoryview(buf)[start:end], max_size)
        start, end = 0, len(data)
    elif isinstance(buf, bytes):
        data = buf  # slicing bytes already yields the bytes each field needs
    else:
        data = bytes(memoryview(buf)[start:end])
        start, end = 0, len(data)
    return _decode(data, start, end, header, record_type)


def _decode(  # noqa: PLR0912, PLR0915
    data: bytes, pos: int, end: int, header: BatchHeader, record_type: type[Record]
) -> Iterator[Record]:
    # One flat loop, with one- and two-byte varints decoded inline and no helper
    # calls for the common case: this is the consumer's per-record cost, so it
    # stays long rather than split. Two-byte varints are common (a 200-byte
    # record's length and its value's, offset deltas from 64 on), and a call
    # per field costs as much as the rest of the field. IndexError means a
    # length ran off the data.
    count = header.record_count
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    append_time = header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME else None
    small = _SMALL_VARINT
    two = _TWO_BYTE_VARINT
    read_varint = _read_varint
    new, set_offset, set_timestamp, set_key, set_value, set_headers = (
        _new_object,
        _set_offset,
        _set_timestamp,
        _set_key,
        _set_value,
        _set_headers,
    )
    try:
        for _ in range(count):
            byte = data[pos]
            if byte < 0x80:
                length = small[byte]
                pos += 1
            elif data[pos + 1] < 0x80:
                length = two[(byte & 0x7F) | (data[pos + 1] << 7)]
                pos += 2
            else:
                length, pos = read_varint(data, pos)
            record_end = pos + length
            if length <= 0 or record_end > end:
                raise CorruptRecordError(f"record of {length} bytes does not fit its batch")
            pos += 1  # record attributes: none are defined

            byte = data[pos]
            if byte < 0x80:
                timestamp_delta = small[byte]
                pos += 1
            elif data[pos + 1] < 0x80:
                timestamp_delta = two[(byte & 0x7F) | (data[pos + 1] << 7)]
                pos += 2
            else:
                timestamp_delta, pos = read_varint(data, pos)
            byte = data[pos]
            if byte < 0x80:
                offset_delta = small[byte]
                pos += 1
            elif data[pos + 1] < 0x80:
                offset_delta = two[(byte & 0x7F) | (data[pos + 1] << 7)]
                pos += 2
            else:
                offset_delta, pos = read_varint(data, pos)

            byte = data[pos]
            if byte < 0x80:
                size = small[byte]
                pos += 1
            else:
                size, pos = read_varint(data, pos)
            if size >= 0:
                key: bytes | None = data[pos : pos + size]
                pos += size
            elif size == -1:
                key = None
            else:
                raise CorruptRecordError(f"record key has length {size}")

            byte = data[pos]
            if byte < 0x80:
                size = small[byte]
                pos += 1
            elif data[pos + 1] < 0x80:
                size = two[(byte & 0x7F) | (data[pos + 1] << 7)]
                pos += 2
            else:
                size, pos = read_varint(data, pos)
            if size >= 0:
                value: bytes | None = data[pos : pos + size]
                pos += size
            elif size == -1:
                value = None
            else:
                raise CorruptRecordError(f"record value has length {size}")

            byte = data[pos]
            if byte == 0:
                headers = _NO_HEADERS
                pos += 1
            else:
                headers, pos = _decode_headers(data, pos, record_end)

            if pos != record_end:
                raise CorruptRecordError(
                    f"record declares {length} bytes but its fields take {pos - record_end + length}"
                )
            record = new(record_type)
            set_offset(record, base_offset + offset_delta)
            set_timestamp(record, base_timestamp + timestamp_delta if append_time is None else append_time)
            set_key(record, key)
            set_value(record, value)
            set_headers(record, headers)
            yield record
    except IndexError:
        raise CorruptRecordError("record batch ends inside a record") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes follow the last of the batch's {count} records")


def _decode_headers(data: bytes, pos: int, record_end: int) -> tuple[Headers, int]:
    count, pos = _read_varint(data, pos)
    # Each header takes at least two bytes: a hostile count fails here, not
    # after a long loop.
    if count < 0 or 2 * count > record_end - pos:
        raise CorruptRecordError(f"record declares {count} headers")
    headers = []
    for _ in range(count):
        size, pos = _read_varint(data, pos)
        if size < 0:
            raise CorruptRecordError(f"record header key has length {size}")
        try:
            name = str(data[pos : pos + size], "utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptRecordError(f"record header key is not UTF-8: {exc}") from None
        pos += size
        size, pos = _read_varint(data, pos)
        if size >= 0:
            value: bytes | None = data[pos : pos + size]
            pos += size
        elif size == -1:
            value = None
        else:
            raise CorruptRecordError(f"record header value has length {size}")
        headers.append((name, value))
    return tuple(headers), pos


# --- building --------------------------------------------------------------------


# The varints of 0..8191: two bytes at most, and most lengths, offset deltas
# and timestamp deltas within a batch.
_VARINT_CACHED = 8192
_VARINT_TABLE = tuple(encode_varint(value) for value in range(_VARINT_CACHED))


def _put_headers(out: bytearray, headers: Sequence[tuple[str, Payload | None]]) -> None:
    out += encode_varint(len(headers))
    for name, value in headers:
        encoded = name.encode()
        out += encode_varint(len(encoded))
        out += encoded
        if value is None:
            out.append(1)  # varint -1
        else:
            out += encode_varint(len(value))
            out += value


class BatchBuilder:
    """Accumulates records into one v2 batch, as a producer does.

    Records are encoded into a single buffer as they are appended; :meth:`build`
    compresses that buffer once and prepends the header."""

    __slots__ = (
        "_base_timestamp",
        "_body",
        "_count",
        "_max_timestamp",
        "base_offset",
        "base_sequence",
        "compression",
        "compression_level",
        "is_transactional",
        "partition_leader_epoch",
        "producer_epoch",
        "producer_id",
        "timestamp_type",
    )

    def __init__(
        self,
        compression: Compression | int = Compression.NONE,
        *,
        base_offset: int = 0,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
        timestamp_type: int = CREATE_TIME,
        compression_level: int | None = None,
    ) -> None:
        if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise ValueError(f"timestamp_type must be {CREATE_TIME} or {LOG_APPEND_TIME}, not {timestamp_type}")
        self.compression = Compression(compression)
        self.compression_level = compression_level
        self.base_offset = base_offset
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.partition_leader_epoch = partition_leader_epoch
        self.timestamp_type = timestamp_type
        self._body = bytearray()
        self._count = 0
        self._base_timestamp = 0
        self._max_timestamp = 0

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def estimated_size(self) -> int:
        """The batch's size if built now without compression: an upper bound
        on the compressed size for all but incompressible records."""
        return HEADER_SIZE + len(self._body)

    def append(
        self,
        key: Payload | None,
        value: Payload | None,
        headers: Sequence[tuple[str, Payload | None]] = (),
        timestamp: int | None = None,
    ) -> int:
        """Adds a record; returns its offset delta. ``timestamp`` is in ms
        since the epoch, now by default."""
        if timestamp is None:
            timestamp = time.time_ns() // 1_000_000
        offset_delta = self._count
        if offset_delta == 0:
            self._base_timestamp = self._max_timestamp = timestamp
        elif timestamp > self._max_timestamp:
            self._max_timestamp = timestamp

        # Encodings come from a table for the usual small values: a lookup
        # instead of a varint loop per field.
        cached = _VARINT_CACHED
        table = _VARINT_TABLE
        record = bytearray(1)  # attributes: none defined
        delta = timestamp - self._base_timestamp
        record += table[delta] if 0 <= delta < cached else encode_varint(delta)
        record += table[offset_delta] if offset_delta < cached else encode_varint(offset_delta)
        if key is None:
            record.append(1)  # varint -1
        else:
            size = len(key)
            record += table[size] if size < cached else encode_varint(size)
            record += key
        if value is None:
            record.append(1)
        else:
            size = len(value)
            record += table[size] if size < cached else encode_varint(size)
            record += value
        if headers:
            _put_headers(record, headers)
        else:
            record.append(0)

        body = self._body
        size = len(record)
        body += table[size] if size < cached else encode_varint(size)
        body += record
        self._count = offset_delta + 1
        return offset_delta

    def build(self) -> bytes:
        """The finished batch. The builder stays usable; building again after
        more appends yields the larger batch."""
        count = self._count
        if not count:
            raise ValueError("a record batch needs at least one record")
        codec = self.compression
        payload: BytesLike = self._body
        if codec is not Compression.NONE:
            payload = compress(codec, payload, self.compression_level)
        attributes = codec.value
        if self.timestamp_type == LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_BIT
        if self.is_transactional:
            attributes |= TRANSACTIONAL_BIT
        header = bytearray(
            _HEADER.pack(
                self.base_offset,
                _MIN_BATCH_LENGTH + len(payload),
                self.partition_leader_epoch,
                MAGIC,
                0,  # the CRC, computed below over the header's tail and the payload
                attributes,
                count - 1,
                self._base_timestamp,
                self._max_timestamp,
                self.producer_id,
                self.producer_epoch,
                self.base_sequence,
                count,
            )
        )
        crc = crc32c(payload, crc32c(memoryview(header)[_CRC_START:]))
        _U32.pack_into(header, _CRC_OFFSET, crc)
        return b"".join((header, payload))


def build_batch(
    records: Iterable[tuple[Payload | None, Payload | None, Sequence[tuple[str, Payload | None]], int | None]],
    **options: Any,
) -> bytes:
    """One batch of ``(key, value, headers, timestamp)`` records; ``options``
    are :class:`BatchBuilder`'s."""
    builder = BatchBuilder(**options)
    append = builder.append
    for key, value, headers, timestamp in records:
        append(key, value, headers, timestamp)
    return builder.build()


__all__ = [
    "CODEC_MASK",
    "CONTROL_BIT",
    "CREATE_TIME",
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
    "Compression",
    "Header",
    "Headers",
    "Payload",
    "Record",
    "build_batch",
    "complete_prefix_length",
    "compute_crc",
    "detach_producer",
    "iter_batches",
    "iter_records",
    "parse_batch_header",
    "rewrite_crc",
    "set_base_offset",
    "set_partition_leader_epoch",
    "set_producer",
    "validate_batch",
    "verify_crc",
]
