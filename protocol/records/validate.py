"""Checking that a batch's records agree with its header, before a broker appends it.

A CRC proves the bytes are the ones the producer wrote, not that the producer wrote a batch that
says what it holds. A header that claims more or fewer records than follow moves the log end by
the claim (phantom offsets), and records that do not decode stop every consumer of the partition
for good. So before an append the records section is walked once, without building a record:

- exactly ``record_count`` records, each of them framed as its length varint says, with offset
  deltas 0, 1, 2, ... (``lastOffsetDelta`` is checked against the count by the header checks);
- key, value and header lengths within the record, header keys present and in UTF-8;
- with create-time timestamps, no record later than the header's ``maxTimestamp`` (the time
  index and retention trust it);
- nothing after the last record.

A compressed section is decompressed in pieces (:func:`~tributary.protocol.compression.
iter_decompressed`) and walked as they come, keeping at most one record and one piece in memory;
output beyond ``max_size`` is refused, so a small batch that inflates to gigabytes costs the
broker no more than ``max_size`` bytes of work and nothing of memory.
"""

from __future__ import annotations

from tributary.protocol.compression import iter_decompressed
from tributary.protocol.crc32c import BytesLike
from tributary.protocol.errors import CorruptRecordError
from tributary.protocol.records.codec import _SMALL_VARINT, SPEEDUPS, read_varint
from tributary.protocol.records.header import CODEC_MASK, HEADER_SIZE, LOG_APPEND_TIME, TIMESTAMP_TYPE_BIT, BatchHeader

#: Decompressed bytes walked at a time.
CHUNK = 64 * 1024
_UNBOUNDED = 2**64  # above any varlong
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_KEY_AND_VALUE = ("key", "value")


class _Walk:
    """The records of one batch, walked in order as their bytes arrive."""

    __slots__ = ("base_timestamp", "count", "index", "keyless", "max_timestamp")

    def __init__(self, header: BatchHeader) -> None:
        self.count = header.record_count
        self.index = 0
        #: Records with a null key (a compacted topic refuses them).
        self.keyless = 0
        self.base_timestamp = header.base_timestamp
        # Log-append-time batches carry the broker's clock in maxTimestamp, not the records'.
        self.max_timestamp = None if header.timestamp_type == LOG_APPEND_TIME else header.max_timestamp

    def records(self, data: BytesLike, pos: int, end: int) -> int:
        """Checks every complete record in ``data[pos:end]``; returns where the first
        incomplete one starts (``end`` when none is)."""
        max_timestamp = self.max_timestamp
        # The largest timestamp delta the header allows (none for log-append-time batches).
        latest = _INT64_MAX if max_timestamp is None else max_timestamp - self.base_timestamp
        # Timestamp deltas are 64-bit: a bound above them is no bound, and one below them all
        # (a hostile header) is left to the Python loop, which refuses the first record.
        if SPEEDUPS is None or latest < _INT64_MIN:
            return self.records_python(data, pos, end)
        pos, self.index, keyless = SPEEDUPS.walk(data, pos, end, self.index, self.count, min(latest, _INT64_MAX))
        self.keyless += keyless
        return pos

    def records_python(self, data: BytesLike, pos: int, end: int) -> int:  # noqa: PLR0912, PLR0915
        """:meth:`records` in Python: what runs without the compiled loop, and its reference."""
        # One flat loop with one-byte varints inline: this runs for every record of every
        # produce, and a call per field would cost as much as the rest of the field.
        small = _SMALL_VARINT
        read = read_varint
        index, count = self.index, self.count
        base, max_timestamp = self.base_timestamp, self.max_timestamp
        # The largest timestamp delta the header allows (none for log-append-time batches).
        latest = _UNBOUNDED if max_timestamp is None else max_timestamp - base
        try:
            while pos < end:
                byte = data[pos]
                if byte < 0x80:
                    length, body = small[byte], pos + 1
                else:
                    try:
                        length, body = read(data, pos)
                    except IndexError:
                        break  # the length itself is cut off: wait for more
                record_end = body + length
                if length <= 0:
                    raise CorruptRecordError(f"record {index} has length {length}")
                if record_end > end:
                    break
                if index >= count:
                    raise CorruptRecordError(f"the batch holds more records than the {count} its header declares")
                p = body + 1  # attributes: none are defined for records
                byte = data[p]
                if byte < 0x80:
                    timestamp_delta = small[byte]
                    p += 1
                else:
                    timestamp_delta, p = read(data, p)
                byte = data[p]
                if byte < 0x80:
                    offset_delta = small[byte]
                    p += 1
                else:
                    offset_delta, p = read(data, p)
                if offset_delta != index:
                    raise CorruptRecordError(f"record {index} has offset delta {offset_delta}")
                if timestamp_delta > latest:
                    raise CorruptRecordError(
                        f"record {index} has timestamp {base + timestamp_delta}, "
                        f"after the batch's maxTimestamp {max_timestamp}"
                    )
                if data[p] == 1:  # the key's length, varint -1: null
                    self.keyless += 1
                for field in _KEY_AND_VALUE:
                    byte = data[p]  # a length: even one-byte varints are 0..63, 1 is null
                    if byte < 0x80:
                        if byte & 1 and byte != 1:
                            raise CorruptRecordError(f"record {index} has a {field} of length {small[byte]}")
                        p += 1 + (byte >> 1) if not byte & 1 else 1
                    else:
                        size, p = read(data, p)
                        if size < -1:
                            raise CorruptRecordError(f"record {index} has a {field} of length {size}")
                        p += max(size, 0)
                if data[p] == 0:
                    p += 1
                else:
                    p = _check_headers(data, p, record_end, index)
                if p != record_end:
                    raise CorruptRecordError(
                        f"record {index} is {record_end - body} bytes long but its fields take {p - body}"
                    )
                index += 1
                pos = record_end
        except IndexError:
            # The record is complete in ``data``: a field that runs past it is corrupt.
            raise CorruptRecordError(f"record {index} runs past the batch") from None
        finally:
            self.index = index
        return pos

    def finish(self, leftover: int) -> None:
        if leftover:
            raise CorruptRecordError(f"the batch ends inside record {self.index} ({leftover} bytes left over)")
        if self.index != self.count:
            raise CorruptRecordError(f"the batch holds {self.index} records, its header declares {self.count}")


def check_records(buf: BytesLike, pos: int, header: BatchHeader, *, max_size: int) -> int:
    """Raises :class:`CorruptRecordError` unless the records of the batch at ``pos`` (whose
    checked header is ``header``, its bytes all in ``buf``) agree with the header. Returns how
    many of them have a null key (which a compacted topic refuses)."""
    start, end = pos + HEADER_SIZE, pos + header.size
    if not header.attributes & CODEC_MASK:
        if SPEEDUPS is not None and not header.attributes & TIMESTAMP_TYPE_BIT:
            # The common case in one call (what _Walk.records does, without the walk object).
            latest = header.max_timestamp - header.base_timestamp
            if latest >= _INT64_MIN:
                stop, index, keyless = SPEEDUPS.walk(buf, start, end, 0, header.record_count, min(latest, _INT64_MAX))
                if stop == end and index == header.record_count:
                    return int(keyless)
        walk = _Walk(header)
        walk.finish(end - walk.records(buf, start, end))
        return walk.keyless
    walk = _Walk(header)
    # Records that end inside a piece are walked in the piece itself; only the start of one
    # that spans pieces waits in ``pending`` for the rest (a bytearray: appends and cuts
    # from the front are cheap, so a record over many pieces is not copied over and over).
    pending = bytearray()
    for piece in iter_decompressed(header.compression, memoryview(buf)[start:end], max_size, CHUNK):
        if pending:
            pending += piece
            del pending[: walk.records(pending, 0, len(pending))]
        else:
            pending += memoryview(piece)[walk.records(piece, 0, len(piece)) :]
    walk.finish(len(pending))
    return walk.keyless


def _check_headers(data: BytesLike, pos: int, end: int, index: int) -> int:
    """Walks record ``index``'s headers from ``pos``; returns where they end."""
    count, pos = read_varint(data, pos)
    # Each header takes two bytes at least: a hostile count fails here, not after a long loop.
    if count < 0 or 2 * count > end - pos:
        raise CorruptRecordError(f"record {index} declares {count} headers")
    for _ in range(count):
        size, pos = read_varint(data, pos)
        if size < 0 or pos + size > end:
            raise CorruptRecordError(f"record {index} has a header key of length {size}")
        try:
            str(memoryview(data)[pos : pos + size], "utf-8")
        except UnicodeDecodeError:
            raise CorruptRecordError(f"record {index} has a header key that is not UTF-8") from None
        pos += size
        size, pos = read_varint(data, pos)
        if size < -1:
            raise CorruptRecordError(f"record {index} has a header value of length {size}")
        if size > 0:
            pos += size
    return pos
