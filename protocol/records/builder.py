"""Building a v2 record batch, as a producer does: records encoded as they are appended,
compressed once, the header put in front."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any, TypeAlias

from tributary.protocol.compression import Compression, compress
from tributary.protocol.crc32c import BytesLike
from tributary.protocol.primitives import encode_varint
from tributary.protocol.records.codec import SPEEDUPS
from tributary.protocol.records.header import (
    CONTROL_BIT,
    CREATE_TIME,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    encode_batch_header,
)

#: What :meth:`BatchBuilder.append` accepts as keys, values and header values.
Payload: TypeAlias = bytes | bytearray | memoryview


# The varints of 0..8191: two bytes at most, and most lengths, offset deltas
# and timestamp deltas within a batch.
_VARINT_CACHED = 8192
_VARINT_TABLE = tuple(encode_varint(value) for value in range(_VARINT_CACHED))


_NO_ATTRIBUTES = b"\x00"
_NULL = b"\x01"  # varint -1: a null key or value
_NO_HEADERS = b"\x00"


def _put_bytes(out: bytearray, data: Payload | None) -> None:
    """A length-prefixed key or value (length -1 for null)."""
    if data is None:
        out += _NULL
    else:
        size = len(data)
        out += _VARINT_TABLE[size] if size < _VARINT_CACHED else encode_varint(size)
        out += data


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


def _append_record_python(  # noqa: PLR0917 (the signature of the compiled one, plus headers)
    records: bytearray,
    key: Payload | None,
    value: Payload | None,
    headers: Sequence[tuple[str, Payload | None]],
    timestamp_delta: int,
    offset_delta: int,
) -> None:
    """One record at the end of ``records``: what the compiled ``append_record`` does for a
    record without headers, and what runs for one with headers."""
    table = _VARINT_TABLE
    record = bytearray(_NO_ATTRIBUTES)
    record += table[timestamp_delta] if 0 <= timestamp_delta < _VARINT_CACHED else encode_varint(timestamp_delta)
    record += table[offset_delta] if offset_delta < _VARINT_CACHED else encode_varint(offset_delta)
    _put_bytes(record, key)
    _put_bytes(record, value)
    if headers:
        _put_headers(record, headers)
    else:
        record += _NO_HEADERS
    size = len(record)
    records += table[size] if size < _VARINT_CACHED else encode_varint(size)
    records += record


# The compiled encoder of a record without headers (``_speedups.c``), or None.
_append_record = SPEEDUPS.append_record if SPEEDUPS is not None else None

#: The producer's per-record encoder, compiled (``_speedups.c``), or None where it was not built:
#: ``append_record_at(records, key, value, timestamp, base_timestamp, offset_delta)`` writes a
#: record without headers at the end of the bytearray ``records``, its timestamp delta taken from
#: ``base_timestamp`` (0 for offset delta 0), ``timestamp`` ms since the epoch or None for now,
#: and returns the timestamp it used. A key or value of another type than a buffer or None
#: raises TypeError, a timestamp or delta beyond 64 bits OverflowError, and ``records`` is then
#: left as it was. ``client/producer/accumulator.py`` calls it per record, and
#: :func:`append_record` for what it does not take (headers).
append_record_at = getattr(SPEEDUPS, "append_record_at", None)  # None too from an older build


def append_record(  # noqa: PLR0917 (the compiled encoder's signature, plus headers)
    records: bytearray,
    key: Payload | None,
    value: Payload | None,
    headers: Sequence[tuple[str, Payload | None]],
    timestamp_delta: int,
    offset_delta: int,
) -> None:
    """One record at the end of ``records``: by the compiled encoder when it can, else in Python.
    A key, value or header value of another type than bytes, bytearray, memoryview or None raises
    TypeError, and adds nothing."""
    if _append_record is not None and not headers:
        try:
            _append_record(records, key, value, timestamp_delta, offset_delta)
        except OverflowError:  # a delta beyond 64 bits: the Python encoder says what is wrong
            _append_record_python(records, key, value, headers, timestamp_delta, offset_delta)
    else:
        _append_record_python(records, key, value, headers, timestamp_delta, offset_delta)


class BatchBuilder:
    """Accumulates records into one v2 batch, as a producer does.

    Each record is encoded as it is appended, at the end of one buffer (by the compiled
    encoder where it was built, compiled.py) that :meth:`build` compresses once and prefixes
    with the header."""

    __slots__ = (
        "_base_timestamp",
        "_count",
        "_max_timestamp",
        "_records",
        "base_offset",
        "base_sequence",
        "compression",
        "compression_level",
        "is_control",
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
        is_control: bool = False,
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
        #: A control batch (transaction markers): only a broker writes one.
        self.is_control = is_control
        self.partition_leader_epoch = partition_leader_epoch
        self.timestamp_type = timestamp_type
        #: The encoded records, back to back.
        self._records = bytearray()
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
        return HEADER_SIZE + len(self._records)

    def append(
        self,
        key: Payload | None,
        value: Payload | None,
        headers: Sequence[tuple[str, Payload | None]] = (),
        timestamp: int | None = None,
    ) -> int:
        """Adds a record; returns its offset delta. ``timestamp`` is in ms since the epoch,
        now by default. Keys and values are copied, so the caller may reuse its buffers.
        Anything but bytes, bytearray, memoryview or None raises TypeError, and adds nothing."""
        if timestamp is None:
            timestamp = time.time_ns() // 1_000_000
        offset_delta = count = self._count
        delta = timestamp - (timestamp if count == 0 else self._base_timestamp)
        append_record(self._records, key, value, headers, delta, offset_delta)
        # Only once the record is in: a refused one leaves the builder as it was.
        if count == 0:
            self._base_timestamp = self._max_timestamp = timestamp
        elif timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        self._count = count + 1
        return offset_delta

    def build(self) -> bytes:
        """The finished batch. The builder stays usable; building again after
        more appends yields the larger batch."""
        return finish_batch(
            self._records,
            self._count,
            self._base_timestamp,
            self._max_timestamp,
            compression=self.compression,
            compression_level=self.compression_level,
            base_offset=self.base_offset,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=self.base_sequence,
            is_transactional=self.is_transactional,
            partition_leader_epoch=self.partition_leader_epoch,
            timestamp_type=self.timestamp_type,
            is_control=self.is_control,
        )


def finish_batch(
    records: BytesLike,
    count: int,
    base_timestamp: int,
    max_timestamp: int,
    *,
    compression: Compression = Compression.NONE,
    compression_level: int | None = None,
    base_offset: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    timestamp_type: int = CREATE_TIME,
    is_control: bool = False,
) -> bytes:
    """A batch of ``count`` records encoded back to back in ``records`` (by :func:`append_record`,
    offset deltas from 0, timestamp deltas from ``base_timestamp``): compressed once, the header
    put in front. What :meth:`BatchBuilder.build` does, for a producer that encodes its records
    itself."""
    if not count:
        raise ValueError("a record batch needs at least one record")
    payload: BytesLike = records
    if compression is not Compression.NONE:
        payload = compress(compression, payload, compression_level)
    attributes = compression.value
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_BIT
    if is_transactional:
        attributes |= TRANSACTIONAL_BIT
    if is_control:
        attributes |= CONTROL_BIT
    header = encode_batch_header(
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=attributes,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        record_count=count,
        records=payload,
    )
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
