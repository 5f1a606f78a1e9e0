"""The records inside a v2 batch: decoding them, as consumers do.

Each record::

    length varint, attributes int8, timestampDelta varlong, offsetDelta varint,
    keyLength varint, key, valueLength varint, value,
    headers count varint, [keyLength varint, key utf-8, valueLength varint, value]

where a length of -1 means null. Varints are zig-zag encoded. With a codec, the
records section (everything after the header) is compressed as one unit.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar, overload

from tributary.protocol.compression import DEFAULT_MAX_DECOMPRESSED_SIZE, decompress
from tributary.protocol.crc32c import BytesLike
from tributary.protocol.errors import CorruptRecordError
from tributary.protocol.records import compiled
from tributary.protocol.records.header import (
    CODEC_MASK,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    BatchHeader,
    parse_batch_header,
    validate_batch,
)

Header: TypeAlias = tuple[str, bytes | None]
Headers: TypeAlias = tuple[Header, ...]


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

#: The compiled loops (:mod:`.compiled`), or None where the Python ones run.
SPEEDUPS = compiled.load(Record)
#: Which record loops this process runs, for benchmarks and ``tributary`` diagnostics.
IMPLEMENTATION = "compiled" if SPEEDUPS is not None else "python"

_NO_HEADERS: Headers = ()
# The signed value of each one-byte varint, the common case of every field,
# and of each two-byte one, indexed by its 14 payload bits (low 7 bits first).
_SMALL_VARINT = tuple((b >> 1) ^ -(b & 1) for b in range(0x80))
_TWO_BYTE_VARINT = tuple((v >> 1) ^ -(v & 1) for v in range(1 << 14))


def read_varint(data: BytesLike, pos: int) -> tuple[int, int]:
    """The zig-zag varint at ``pos`` and the position after it; IndexError if it runs off ``data``."""
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
        if shift == 63 and data[pos] > 1:  # a tenth byte may carry only bit 63
            raise CorruptRecordError(f"varint longer than 10 bytes or beyond 64 bits at offset {pos - 9}")


@overload
def decode_records(
    buf: BytesLike, pos: int = 0, *, check_crc: bool = True, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> list[Record]: ...


@overload
def decode_records(
    buf: BytesLike,
    pos: int = 0,
    *,
    check_crc: bool = True,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    record_type: type[R],
) -> list[R]: ...


def decode_records(
    buf: BytesLike,
    pos: int = 0,
    *,
    check_crc: bool = True,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    record_type: type[Record] = Record,
) -> list[Any]:
    """Every record of the batch at ``pos``, as a list: what a consumer hands out a batch
    at a time. Raises :class:`CorruptRecordError` if any record does not decode.

    The header (and, unless ``check_crc`` is false, the CRC) is checked, the records
    section decompressed once and walked in one loop that appends each record to the
    list (no generator to resume per record). ``max_size`` bounds the decompressed size.
    ``record_type`` is as for :func:`iter_records`."""
    out: list[Record] = []
    data, start, end, header = _records_section(buf, pos, check_crc, max_size)
    _decode_into(out, data, start, end, header, record_type)
    return out


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
    """The records of the batch at ``pos``, one by one.

    The header (and, unless ``check_crc`` is false, the CRC) is checked and the
    records section decompressed now, once; a decoding error in a record
    surfaces when iteration reaches it, after the records before it. ``max_size``
    bounds the decompressed size. Control batches yield their control records
    like any other.

    ``record_type`` may be a subclass of :class:`Record` that adds no instance
    fields (its ``__slots__`` empty): records are made as instances of it, with
    the five fields set. A consumer uses this to hand out records of its own
    type without building each record twice."""
    data, start, end, header = _records_section(buf, pos, check_crc, max_size)
    return _iterate(data, start, end, header, record_type)


def _iterate(data: bytes, start: int, end: int, header: BatchHeader, record_type: type[Record]) -> Iterator[Record]:
    # The batch is decoded in one go when iteration starts (one loop is much cheaper per
    # record than a generator resumed per record); an error waits until the records
    # before it have been yielded.
    out: list[Record] = []
    try:
        _decode_into(out, data, start, end, header, record_type)
    except CorruptRecordError as exc:
        yield from out
        raise exc from None
    yield from out


def _records_section(buf: BytesLike, pos: int, check_crc: bool, max_size: int) -> tuple[bytes, int, int, BatchHeader]:
    """The checked header of the batch at ``pos`` and its records section, decompressed:
    ``(data, start, end, header)``, the records being ``data[start:end]``."""
    header = validate_batch(buf, pos) if check_crc else parse_batch_header(buf, pos)
    end = pos + header.size
    if end > len(buf):
        raise CorruptRecordError(f"record batch at offset {pos} is truncated")
    start = pos + HEADER_SIZE
    codec = header.attributes & CODEC_MASK
    if codec:
        data = decompress(codec, memoryview(buf)[start:end], max_size)
        return data, 0, len(data), header
    if isinstance(buf, bytes):
        return buf, start, end, header  # slicing bytes already yields the bytes each field needs
    data = bytes(memoryview(buf)[start:end])
    return data, 0, len(data), header


def _decode_into(  # noqa: PLR0917
    out: list[Record], data: bytes, pos: int, end: int, header: BatchHeader, record_type: type[Record]
) -> None:
    if SPEEDUPS is None:
        decode_into_python(out, data, pos, end, header, record_type)
        return
    append_time = header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME else None
    SPEEDUPS.decode_into(
        out, data, pos, end, header.record_count, header.base_offset, header.base_timestamp, append_time, record_type
    )


def decode_into_python(  # noqa: PLR0912, PLR0915, PLR0917
    out: list[Record], data: bytes, pos: int, end: int, header: BatchHeader, record_type: type[Record]
) -> None:
    """The records of ``data[pos:end]`` appended to ``out``: the loop that runs without the
    compiled one (and the reference the compiled one is tested against)."""
    # One flat loop, with one- and two-byte varints decoded inline and no helper
    # calls for the common case: this is the consumer's per-record cost, so it
    # stays long rather than split. Two-byte varints are common (a 200-byte
    # record's length and its value's, offset deltas from 64 on), and a call
    # per field costs as much as the rest of the field. IndexError means a
    # length ran off the data. Records are appended to ``out`` as they are
    # decoded, so that on an error it holds those before the bad one.
    count = header.record_count
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    append_time = header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME else None
    small = _SMALL_VARINT
    two = _TWO_BYTE_VARINT
    read = read_varint
    append = out.append
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
                length, pos = read(data, pos)
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
                timestamp_delta, pos = read(data, pos)
            byte = data[pos]
            if byte < 0x80:
                offset_delta = small[byte]
                pos += 1
            elif data[pos + 1] < 0x80:
                offset_delta = two[(byte & 0x7F) | (data[pos + 1] << 7)]
                pos += 2
            else:
                offset_delta, pos = read(data, pos)

            byte = data[pos]
            if byte < 0x80:
                size = small[byte]
                pos += 1
            else:
                size, pos = read(data, pos)
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
                size, pos = read(data, pos)
            if size >= 0:
                value: bytes | None = data[pos : pos + size]
                pos += size
            elif size == -1:
                value = None
            else:
                raise CorruptRecordError(f"record value has length {size}")

            if data[pos] == 0:
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
            append(record)
    except IndexError:
        raise CorruptRecordError("record batch ends inside a record") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes follow the last of the batch's {count} records")


def _decode_headers(data: bytes, pos: int, record_end: int) -> tuple[Headers, int]:
    count, pos = read_varint(data, pos)
    # Each header takes at least two bytes: a hostile count fails here, not
    # after a long loop.
    if count < 0 or 2 * count > record_end - pos:
        raise CorruptRecordError(f"record declares {count} headers")
    headers = []
    for _ in range(count):
        size, pos = read_varint(data, pos)
        if size < 0:
            raise CorruptRecordError(f"record header key has length {size}")
        try:
            name = str(data[pos : pos + size], "utf-8")
        except UnicodeDecodeError as exc:
            raise CorruptRecordError(f"record header key is not UTF-8: {exc}") from None
        pos += size
        size, pos = read_varint(data, pos)
        if size >= 0:
            value: bytes | None = data[pos : pos + size]
            pos += size
        elif size == -1:
            value = None
        else:
            raise CorruptRecordError(f"record header value has length {size}")
        headers.append((name, value))
    return tuple(headers), pos
