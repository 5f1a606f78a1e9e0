"""Produce requests and Fetch/Produce responses for raw batches, read and written by hand.

The mirror sends every batch it copies in a Produce request and reads every byte it copies
out of a Fetch response. The generic codec (``protocol/codec.py``) builds an object per
field and copies each records field into bytes of its own; on this path that was a good
part of the mirror's CPU per batch, and of its copies per byte. Here the few fields the raw
client needs are read and written with :mod:`struct`, and a fetched partition's records are
a ``memoryview`` of the response frame: the batches are never copied before the mirror
stamps them (``mirror/batches.py``), and a Produce request is the records joined once.

Only the non-flexible versions the client speaks are written here (Produce v3-8, Fetch v4-11,
``protocol/supported.py``); :class:`~client.raw.client.RawClient` falls back to the generic
codec for any other. ``tests/client/test_raw_wire.py`` checks every version against the
generic codec both ways. The grammar, from Kafka's JSON definitions (strings have an int16
length, arrays and bytes an int32 one, -1 for null)::

    request header v1    api_key:int16 api_version:int16 correlation_id:int32 client_id:nullable string
    ProduceRequest 3-8   transactional_id:nullable string acks:int16 timeout_ms:int32
                         [topic:string [partition:int32 records:nullable bytes]]
    response header v0   correlation_id:int32
    ProduceResponse 3-8  [topic:string [partition:int32 error_code:int16 base_offset:int64
                         log_append_time_ms:int64 log_start_offset:int64 (v5+)
                         [batch_index:int32 batch_index_error_message:nullable string] (v8+)
                         error_message:nullable string (v8+)]] throttle_time_ms:int32
    FetchResponse 4-11   throttle_time_ms:int32 error_code:int16 (v7+) session_id:int32 (v7+)
                         [topic:string [partition:int32 error_code:int16 high_watermark:int64
                         last_stable_offset:int64 log_start_offset:int64 (v5+)
                         aborted_transactions:nullable [producer_id:int64 first_offset:int64]
                         preferred_read_replica:int32 (v11+) records:nullable bytes]]

Every length read from the wire is checked against the bytes present (:class:`ProtocolError`).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import NamedTuple

from tributary.client.wire.metadata import TopicPartition
from tributary.protocol.crc32c import BytesLike
from tributary.protocol.errors import ProtocolError
from tributary.protocol.messages import ApiKey

#: The versions written and read here.
PRODUCE_VERSIONS = range(3, 9)
FETCH_VERSIONS = range(4, 12)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_REQUEST_HEADER = struct.Struct(">ihhi")  # frame length, api key, version, correlation id
_PRODUCE_FIELDS = struct.Struct(">hi")  # acks, timeout_ms
_PARTITION_RECORDS = struct.Struct(">ii")  # partition, records length
_I32_I32 = struct.Struct(">ii")
_PRODUCED = struct.Struct(">ihqq")  # partition, error code, base offset, log append time
_PRODUCED_V5 = struct.Struct(">ihqqq")  # the same and the log start offset (v5+)
_NO_RECORD_ERRORS = struct.Struct(">ih")  # v8+: record errors (0 of them), error message (-1: null)
_FETCHED_V4 = struct.Struct(">ihqq")  # partition, error code, high watermark, last stable offset
_ABORTED = struct.Struct(">qq")  # producer id, first offset
_I64 = struct.Struct(">q")


def _string(value: str | None) -> bytes:
    if value is None:
        return b"\xff\xff"
    data = value.encode()
    return _I16.pack(len(data)) + data


def encode_produce_request(
    version: int,
    correlation_id: int,
    client_id: str | None,
    batches: Mapping[TopicPartition, BytesLike],
    *,
    acks: int,
    timeout_ms: int,
    transactional_id: str | None = None,
) -> bytes:
    """The whole Produce frame (length prefix and header v1 included): the records are
    copied once, into the frame."""
    if version not in PRODUCE_VERSIONS:
        raise ValueError(f"Produce v{version} is not written here (v{PRODUCE_VERSIONS[0]}-{PRODUCE_VERSIONS[-1]})")
    by_topic: dict[str, list[tuple[int, BytesLike]]] = {}
    for tp, records in batches.items():
        by_topic.setdefault(tp.topic, []).append((tp.partition, records))
    parts: list[BytesLike] = [
        b"",  # the length prefix and fixed header, filled in below
        _string(client_id),
        _string(transactional_id),
        _PRODUCE_FIELDS.pack(acks, timeout_ms),
        _I32.pack(len(by_topic)),
    ]
    for topic, partitions in by_topic.items():
        parts.append(_string(topic))
        parts.append(_I32.pack(len(partitions)))
        for partition, records in partitions:
            parts.append(_PARTITION_RECORDS.pack(partition, len(records)))
            parts.append(records)
    size = sum(len(part) for part in parts) + _REQUEST_HEADER.size - 4
    parts[0] = _REQUEST_HEADER.pack(size, ApiKey.PRODUCE, version, correlation_id)
    return b"".join(parts)


class _Reader:
    """Bounds-checked reads from a response frame."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, frame: BytesLike) -> None:
        self.buf = memoryview(frame)
        self.pos = 0
        self.end = len(self.buf)

    def fixed(self, layout: struct.Struct) -> tuple[int, ...]:
        pos = self.pos
        if pos + layout.size > self.end:
            left = self.end - pos
            raise ProtocolError(f"truncated response: {layout.size} bytes needed at offset {pos}, {left} left")
        self.pos = pos + layout.size
        return layout.unpack_from(self.buf, pos)

    def int16(self) -> int:
        return self.fixed(_I16)[0]

    def int32(self) -> int:
        return self.fixed(_I32)[0]

    def int64(self) -> int:
        return self.fixed(_I64)[0]

    def count(self, what: str, item_size: int) -> int:
        """An array's length (-1 for null), refused when its items cannot fit in what is left."""
        n = self.int32()
        if n < -1 or n * item_size > self.end - self.pos:
            raise ProtocolError(f"{what} of {n} items at offset {self.pos - 4} does not fit the response")
        return n

    def take(self, n: int, what: str) -> memoryview:
        if n < 0 or self.pos + n > self.end:
            raise ProtocolError(f"{what} of {n} bytes at offset {self.pos} does not fit the response")
        view = self.buf[self.pos : self.pos + n]
        self.pos += n
        return view

    def string(self, what: str) -> str:
        n = self.int16()
        if n < 0:
            raise ProtocolError(f"{what} is null")
        return str(self.take(n, what), "utf-8", "replace")

    def nullable_string(self, what: str) -> str | None:
        n = self.int16()
        return None if n == -1 else str(self.take(n, what), "utf-8", "replace")


class PartitionProduced(NamedTuple):
    """One partition's answer to a Produce."""

    topic: str
    partition: int
    error_code: int
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int
    error_message: str | None
    #: ``(batch index, message)`` per record the broker refused (v8+).
    record_errors: tuple[tuple[int, str | None], ...]


def decode_produce_response(version: int, frame: BytesLike) -> tuple[int, list[PartitionProduced]]:
    """(correlation id, each partition's answer) of a Produce response frame (header v0 first).

    Read with :mod:`struct` directly rather than through :class:`_Reader`: a produce answer is
    read once per request the producer and the mirror send, most often one topic and one
    partition, and the reader's calls were most of its cost."""
    if version not in PRODUCE_VERSIONS:
        raise ValueError(f"Produce v{version} is not read here")
    end = len(frame)
    layout = _PRODUCED_V5 if version >= 5 else _PRODUCED
    size = layout.size
    answers: list[PartitionProduced] = []
    try:
        correlation_id, topic_count = _I32_I32.unpack_from(frame, 0)
        pos = 8
        _check_count("topics", topic_count, 6, pos, end)
        for _ in range(topic_count):
            (n,) = _I16.unpack_from(frame, pos)
            pos += 2
            if n < 0:
                raise ProtocolError("topic name is null")
            if pos + n > end:
                raise ProtocolError(f"topic name of {n} bytes at offset {pos} does not fit the response")
            topic = str(frame[pos : pos + n], "utf-8", "replace")
            (count,) = _I32.unpack_from(frame, pos + n)
            pos += n + 4
            _check_count("partitions", count, size, pos, end)
            for _ in range(count):
                fields = layout.unpack_from(frame, pos)
                pos += size
                log_start_offset = fields[4] if version >= 5 else -1
                record_errors: tuple[tuple[int, str | None], ...] = ()
                message = None
                if version >= 8 and _NO_RECORD_ERRORS.unpack_from(frame, pos) == (0, -1):
                    pos += _NO_RECORD_ERRORS.size  # no record errors, no message: the usual answer
                elif version >= 8:
                    r = _Reader(frame)
                    r.pos = pos
                    record_errors = tuple(
                        (r.int32(), r.nullable_string("record error")) for _ in range(r.count("record errors", 6))
                    )
                    message = r.nullable_string("error message")
                    pos = r.pos
                answers.append(
                    PartitionProduced(
                        topic, fields[0], fields[1], fields[2], fields[3], log_start_offset, message, record_errors
                    )
                )
        _I32.unpack_from(frame, pos)  # throttle time: read, so that a frame cut short is refused
    except struct.error as exc:  # fewer bytes than a fixed field needs
        raise ProtocolError(f"truncated response: {exc}") from None
    return correlation_id, answers


def _check_count(what: str, n: int, item_size: int, pos: int, end: int) -> None:
    """An array's length (-1 for null), refused when its items cannot fit in what is left."""
    if n < -1 or n * item_size > end - pos:
        raise ProtocolError(f"{what} of {n} items at offset {pos - 4} does not fit the response")


class PartitionFetched(NamedTuple):
    """One partition's share of a Fetch response; ``records`` is a view of the frame."""

    topic: str
    partition: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: tuple[tuple[int, int], ...]
    records: bytes | memoryview


def decode_fetch_response(version: int, frame: BytesLike) -> tuple[int, int, list[PartitionFetched]]:
    """(correlation id, top-level error code, each partition's share) of a Fetch response frame."""
    if version not in FETCH_VERSIONS:
        raise ValueError(f"Fetch v{version} is not read here")
    r = _Reader(frame)
    correlation_id = r.int32()
    r.int32()  # throttle time
    error_code = 0
    if version >= 7:
        error_code = r.int16()
        r.int32()  # session id
    shares: list[PartitionFetched] = []
    empty = memoryview(b"")
    for _ in range(r.count("topics", 6)):
        topic = r.string("topic name")
        for _ in range(r.count("partitions", _FETCHED_V4.size + 8)):
            partition, code, high_watermark, last_stable = r.fixed(_FETCHED_V4)
            log_start = r.int64() if version >= 5 else -1
            n = r.count("aborted transactions", _ABORTED.size)
            aborted = tuple(r.fixed(_ABORTED) for _ in range(n)) if n > 0 else ()
            if version >= 11:
                r.int32()  # preferred read replica
            size = r.int32()
            records = empty if size == -1 else r.take(size, "records")
            shares.append(
                PartitionFetched(
                    topic, partition, code, high_watermark, last_stable, log_start,
                    aborted,  # type: ignore[arg-type]  # pairs of int64, as _ABORTED reads them
                    records,
                )
            )  # fmt: skip
    return correlation_id, error_code, shares


__all__ = [
    "FETCH_VERSIONS",
    "PRODUCE_VERSIONS",
    "PartitionFetched",
    "PartitionProduced",
    "decode_fetch_response",
    "decode_produce_response",
    "encode_produce_request",
]
