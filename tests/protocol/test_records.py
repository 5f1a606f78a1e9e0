from __future__ import annotations

import contextlib
import dataclasses
import struct
import time
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from tributary.protocol.compression import Compression
from tributary.protocol.crc32c import crc32c
from tributary.protocol.errors import CorruptRecordError, ProtocolError, UnsupportedMagicError
from tributary.protocol.records import (
    CREATE_TIME,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    BatchBuilder,
    BatchHeader,
    ControlType,
    Marker,
    Record,
    build_batch,
    build_marker_batch,
    complete_prefix_length,
    compute_crc,
    control_type,
    decode_records,
    detach_producer,
    iter_batches,
    iter_records,
    parse_batch_header,
    read_marker,
    rewrite_crc,
    set_base_offset,
    set_partition_leader_epoch,
    stamp_log_append_time,
    validate_batch,
    verify_crc,
)

CODECS = list(Compression)
T0 = 1_700_000_000_000

# Wire offsets of header fields, spelled out independently of the module under test.
BASE_OFFSET_AT, LENGTH_AT, EPOCH_AT, MAGIC_AT, CRC_AT, ATTRIBUTES_AT = 0, 8, 12, 16, 17, 21
PRODUCER_ID_AT, COUNT_AT, LAST_DELTA_AT = 43, 57, 23

RecordTuple = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]

# Null and empty keys and values, headers with null and empty values, a
# non-ASCII header key, and a compressible tail so every codec pays off.
MIXED_RECORDS: list[RecordTuple] = [
    (b"key-0", b"value-0", [], T0),
    (None, b"null key", [], T0 + 1),
    (b"null value", None, [], T0 + 2),
    (None, None, [], T0 + 3),
    (b"", b"", [], T0 + 4),
    (b"k", b"with headers", [("a", b"1"), ("b", None), ("", b""), ("ключ", b"\x00\xff")], T0 + 2),
    (b"\x00" * 300, b"\xff" * 5000, [("h", b"x" * 200)], T0 - 50),
    *[(b"key-%d" % i, b"value %d " % i * 20, [("i", b"%d" % i)], T0 + i) for i in range(7, 200)],
]


def expected_records(records: Sequence[RecordTuple], base_offset: int = 0) -> list[Record]:
    return [
        Record(base_offset + i, ts, key, value, tuple(headers)) for i, (key, value, headers, ts) in enumerate(records)
    ]


def kafka_python_build(
    records: Sequence[RecordTuple],
    codec: int,
    *,
    is_transactional: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=is_transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for offset, (key, value, headers, ts) in enumerate(records):
        assert builder.append(offset, ts, key, value, headers) is not None
    return bytes(builder.build())


def kafka_python_records(data: bytes) -> tuple[Any, list[Record]]:
    batch = DefaultRecordBatch(data)
    assert batch.validate_crc()
    records = [Record(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch]
    return batch, records


# --- layout -------------------------------------------------------------------


def test_header_layout() -> None:
    assert HEADER_SIZE == 61
    assert LOG_OVERHEAD == 12
    data = build_batch([(b"k", b"v", (), T0)], base_offset=7, partition_leader_epoch=3, producer_id=99)
    assert struct.unpack_from(">q", data, BASE_OFFSET_AT)[0] == 7
    assert struct.unpack_from(">i", data, LENGTH_AT)[0] == len(data) - 12
    assert struct.unpack_from(">i", data, EPOCH_AT)[0] == 3
    assert data[MAGIC_AT] == 2
    assert struct.unpack_from(">I", data, CRC_AT)[0] == crc32c(data[ATTRIBUTES_AT:])
    assert struct.unpack_from(">q", data, PRODUCER_ID_AT)[0] == 99
    assert struct.unpack_from(">i", data, COUNT_AT)[0] == 1


def test_single_record_bytes() -> None:
    data = build_batch([(b"k", b"vv", [("h", b"x")], T0)])
    # length 11, attributes 0, timestampDelta 0, offsetDelta 0, key 1 "k", value 2 "vv",
    # 1 header: key 1 "h", value 1 "x" (lengths zig-zag encoded).
    record = bytes([0, 0, 0, 2]) + b"k" + bytes([4]) + b"vv" + bytes([2, 2]) + b"h" + bytes([2]) + b"x"
    assert data[HEADER_SIZE:] == bytes([2 * len(record)]) + record


def test_header_fields_and_properties() -> None:
    builder = BatchBuilder(
        Compression.ZSTD,
        base_offset=1000,
        producer_id=42,
        producer_epoch=3,
        base_sequence=17,
        is_transactional=True,
        partition_leader_epoch=5,
    )
    assert builder.append(b"a", b"1", timestamp=T0 + 10) == 0
    assert builder.append(b"b", b"2", timestamp=T0) == 1
    assert builder.append(b"c", b"3", timestamp=T0 + 5) == 2
    data = builder.build()
    header = validate_batch(data)
    assert header == BatchHeader(
        base_offset=1000,
        batch_length=len(data) - 12,
        partition_leader_epoch=5,
        magic=2,
        crc=compute_crc(data),
        attributes=Compression.ZSTD | 0x10,
        last_offset_delta=2,
        base_timestamp=T0 + 10,
        max_timestamp=T0 + 10,
        producer_id=42,
        producer_epoch=3,
        base_sequence=17,
        record_count=3,
    )
    assert header.compression is Compression.ZSTD
    assert header.timestamp_type == CREATE_TIME
    assert header.is_transactional
    assert not header.is_control
    assert header.last_offset == 1002
    assert header.next_offset == 1003
    assert header.size == len(data)
    assert [(r.offset, r.timestamp) for r in iter_records(data)] == [(1000, T0 + 10), (1001, T0), (1002, T0 + 5)]


# --- round trips ----------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_mixed_records(codec: Compression) -> None:
    data = build_batch(MIXED_RECORDS, compression=codec, base_offset=500)
    header = validate_batch(data)
    assert header.compression is codec
    assert header.record_count == len(MIXED_RECORDS)
    assert header.base_timestamp == T0
    assert header.max_timestamp == T0 + 199
    assert list(iter_records(data)) == expected_records(MIXED_RECORDS, 500)


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_ten_thousand_records(codec: Compression) -> None:
    records: list[RecordTuple] = [
        (b"user-%d" % (i % 97), b"event %d payload " % i * 3, [("seq", b"%d" % i)] if i % 3 == 0 else [], T0 + i // 10)
        for i in range(10_000)
    ]
    data = build_batch(records, compression=codec)
    header = validate_batch(data)
    assert header.record_count == 10_000
    assert header.last_offset_delta == 9_999
    decoded = list(iter_records(data))
    assert len(decoded) == 10_000
    assert decoded == expected_records(records)


@pytest.mark.parametrize("codec", CODECS)
def test_records_decode_from_every_buffer_type(codec: Compression) -> None:
    data = build_batch(MIXED_RECORDS, compression=codec)
    expected = expected_records(MIXED_RECORDS)
    assert list(iter_records(bytearray(data))) == expected
    assert list(iter_records(memoryview(data))) == expected
    framed = b"prefix" + data + b"suffix"
    assert list(iter_records(framed, 6)) == expected
    assert list(iter_records(memoryview(framed), 6)) == expected
    for record in iter_records(memoryview(data)):
        assert record.key is None or type(record.key) is bytes
        assert record.value is None or type(record.value) is bytes


header_values = st.one_of(st.none(), st.binary(max_size=20))
record_tuples = st.tuples(
    st.one_of(st.none(), st.binary(max_size=40)),
    st.one_of(st.none(), st.binary(max_size=300)),
    st.lists(st.tuples(st.text(max_size=10), header_values), max_size=4),
    st.integers(T0 - 10**6, T0 + 10**6),
)


@settings(max_examples=150)
@given(
    records=st.lists(record_tuples, min_size=1, max_size=60),
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(0, 2**62),
)
def test_round_trip_random_records(records: list[RecordTuple], codec: Compression, base_offset: int) -> None:
    data = build_batch(records, compression=codec, base_offset=base_offset)
    header = validate_batch(data)
    assert header.record_count == len(records)
    assert header.base_timestamp == records[0][3]
    assert header.max_timestamp == max(r[3] for r in records)
    assert list(iter_records(data)) == expected_records(records, base_offset)
    assert decode_records(data) == expected_records(records, base_offset)


def test_timestamp_defaults_to_now() -> None:
    before = time.time_ns() // 1_000_000
    data = build_batch([(b"k", b"v", (), None)])
    after = time.time_ns() // 1_000_000
    (record,) = iter_records(data)
    assert before <= record.timestamp <= after


def test_log_append_time_gives_every_record_the_max_timestamp() -> None:
    data = build_batch([(b"a", b"1", (), T0), (b"b", b"2", (), T0 + 9)], timestamp_type=LOG_APPEND_TIME)
    header = validate_batch(data)
    assert header.timestamp_type == LOG_APPEND_TIME
    assert header.attributes & 0x08
    assert [r.timestamp for r in iter_records(data)] == [T0 + 9, T0 + 9]


def test_builder_counts_and_estimates() -> None:
    builder = BatchBuilder()
    assert builder.record_count == 0
    assert builder.estimated_size == HEADER_SIZE
    for i in range(50):
        assert builder.append(b"k%d" % i, b"v" * i, timestamp=T0) == i
    assert builder.record_count == 50
    first = builder.build()
    assert builder.estimated_size == len(first)
    builder.append(b"late", b"record", timestamp=T0)
    second = builder.build()
    assert parse_batch_header(second).record_count == 51
    assert second.startswith(first[:LENGTH_AT])


def test_compressed_estimate_is_an_upper_bound_for_compressible_data() -> None:
    builder = BatchBuilder(Compression.LZ4)
    for i in range(100):
        builder.append(b"key", b"the same value again %d" % (i % 3), timestamp=T0)
    assert len(builder.build()) < builder.estimated_size


def test_builder_refusals() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        BatchBuilder().build()
    with pytest.raises(ValueError, match="timestamp_type"):
        BatchBuilder(timestamp_type=2)


@pytest.mark.parametrize(("key", "value"), [(5, b"v"), (b"k", "text"), ("text", b"v"), (None, 3.5)])
def test_builder_refuses_other_types_and_keeps_its_records(key: Any, value: Any) -> None:
    builder = BatchBuilder()
    builder.append(b"k0", b"v0", timestamp=T0)
    with pytest.raises(TypeError):
        builder.append(key, value, timestamp=T0)
    assert builder.record_count == 1
    assert [r.key for r in iter_records(builder.build())] == [b"k0"]


def test_builder_copies_buffers_the_caller_may_change() -> None:
    # The builder keeps bytes as given (they cannot change) and copies anything else on append.
    key, value, header = bytearray(b"key"), bytearray(b"value"), bytearray(b"header")
    builder = BatchBuilder()
    builder.append(key, value, timestamp=T0)
    builder.append(memoryview(key), memoryview(value), [("h", header)], timestamp=T0)
    builder.append(None, value, timestamp=T0)
    key[:], value[:], header[:] = b"KEY", b"VALUE", b"HEADER"
    assert [(r.key, r.value, r.headers) for r in iter_records(builder.build())] == [
        (b"key", b"value", ()),
        (b"key", b"value", (("h", b"header"),)),
        (None, b"value", ()),
    ]


def test_record_is_frozen_and_compares_by_value() -> None:
    (record,) = iter_records(build_batch([(b"k", b"v", [("h", None)], T0)]))
    assert record == Record(0, T0, b"k", b"v", (("h", None),))
    assert hash(record) == hash(Record(0, T0, b"k", b"v", (("h", None),)))
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.value = b"other"  # type: ignore[misc]


# --- cross-checks with kafka-python ---------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_parse_with_ours(codec: Compression) -> None:
    data = kafka_python_build(
        MIXED_RECORDS, codec, is_transactional=True, producer_id=77, producer_epoch=4, base_sequence=1234
    )
    theirs, their_records = kafka_python_records(data)
    header = validate_batch(data)
    assert header.compression is codec  # kafka-python only compresses when it pays
    assert header.base_offset == theirs.base_offset == 0
    assert header.batch_length + 12 == theirs.size_in_bytes == len(data)
    assert header.partition_leader_epoch == theirs.leader_epoch
    assert header.magic == theirs.magic == 2
    assert header.crc == theirs.crc
    assert header.attributes == theirs.attributes
    assert header.last_offset_delta == theirs.last_offset_delta == len(MIXED_RECORDS) - 1
    assert header.base_timestamp == theirs.first_timestamp
    assert header.max_timestamp == theirs.max_timestamp
    assert header.producer_id == theirs.producer_id == 77
    assert header.producer_epoch == theirs.producer_epoch == 4
    assert header.base_sequence == theirs.base_sequence == 1234
    assert header.record_count == theirs.records_count
    assert header.is_transactional == theirs.is_transactional is True
    assert header.timestamp_type == theirs.timestamp_type
    assert list(iter_records(data)) == their_records == expected_records(MIXED_RECORDS)


@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_parse_with_kafka_python(codec: Compression) -> None:
    data = build_batch(
        MIXED_RECORDS,
        compression=codec,
        base_offset=3000,
        producer_id=5,
        producer_epoch=1,
        base_sequence=10,
        is_transactional=True,
        partition_leader_epoch=8,
    )
    theirs, their_records = kafka_python_records(data)
    assert theirs.compression_type == codec
    assert theirs.base_offset == 3000
    assert theirs.leader_epoch == 8
    assert theirs.size_in_bytes == len(data)
    assert theirs.last_offset_delta == len(MIXED_RECORDS) - 1
    assert theirs.first_timestamp == T0
    assert theirs.max_timestamp == T0 + 199
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (5, 1, 10)
    assert theirs.is_transactional
    assert theirs.records_count == len(MIXED_RECORDS)
    assert their_records == expected_records(MIXED_RECORDS, 3000)


@settings(max_examples=60)
@given(records=st.lists(record_tuples, min_size=1, max_size=30), codec=st.sampled_from(CODECS))
def test_random_batches_agree_with_kafka_python_both_ways(records: list[RecordTuple], codec: Compression) -> None:
    ours = build_batch(records, compression=codec)
    assert kafka_python_records(ours)[1] == expected_records(records)
    theirs = kafka_python_build(records, codec)
    assert list(iter_records(theirs)) == expected_records(records)


def test_uncompressed_batches_are_byte_identical_to_kafka_python() -> None:
    ours = build_batch(MIXED_RECORDS, partition_leader_epoch=0, producer_id=9, producer_epoch=2, base_sequence=3)
    theirs = kafka_python_build(MIXED_RECORDS, 0, producer_id=9, producer_epoch=2, base_sequence=3)
    assert ours == theirs


def test_iter_batches_agrees_with_kafka_python_memory_records() -> None:
    batches = [build_batch(MIXED_RECORDS[:n], compression=n % 5, base_offset=n) for n in (1, 5, 40, 200)]
    stream = b"".join(batches) + batches[0][:30]
    theirs = MemoryRecords(stream)
    their_offsets = []
    while theirs.has_next():
        their_offsets.append(theirs.next_batch().base_offset)
    assert [h.base_offset for _, h in iter_batches(stream)] == their_offsets == [1, 5, 40, 200]
    assert complete_prefix_length(stream) == theirs.valid_bytes() == len(stream) - 30


# --- CRC and in-place rewrites -----------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_any_flipped_byte_inside_the_crc_is_caught(codec: Compression) -> None:
    data = build_batch(MIXED_RECORDS[:20], compression=codec)
    for at in range(ATTRIBUTES_AT, len(data), 7):
        damaged = bytearray(data)
        damaged[at] ^= 0x40
        with pytest.raises(CorruptRecordError):
            validate_batch(damaged)
        with pytest.raises(CorruptRecordError):
            list(iter_records(damaged))


def test_crc_error_names_both_values() -> None:
    data = bytearray(build_batch([(b"k", b"v", (), T0)]))
    stored = struct.unpack_from(">I", data, CRC_AT)[0]
    data[-1] ^= 1
    actual = crc32c(data[ATTRIBUTES_AT:])
    with pytest.raises(CorruptRecordError, match=f"expected {stored:#010x}, computed {actual:#010x}"):
        verify_crc(data)
    assert compute_crc(data) == actual


def test_stored_crc_flip_is_caught() -> None:
    data = bytearray(build_batch([(b"k", b"v", (), T0)]))
    data[CRC_AT] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC"):
        validate_batch(data)


def test_unchecked_iteration_skips_the_crc() -> None:
    data = bytearray(build_batch([(b"k", b"v", (), T0)]))
    data[CRC_AT] ^= 0x01
    assert [r.value for r in iter_records(data, check_crc=False)] == [b"v"]


@pytest.mark.parametrize("codec", CODECS)
def test_rewriting_base_offset_and_leader_epoch_keeps_the_crc(codec: Compression) -> None:
    original = build_batch(MIXED_RECORDS[:10], compression=codec)
    framed = bytearray(b"xyz" + original)
    set_base_offset(framed, 3, 123_456_789)
    set_partition_leader_epoch(memoryview(framed), 3, 42)
    header = validate_batch(framed, 3)
    assert (header.base_offset, header.partition_leader_epoch) == (123_456_789, 42)
    assert header.crc == parse_batch_header(original).crc
    assert framed[3 + ATTRIBUTES_AT :] == original[ATTRIBUTES_AT:]
    assert [r.offset for r in iter_records(framed, 3)] == list(range(123_456_789, 123_456_799))
    assert kafka_python_records(bytes(framed[3:]))[0].base_offset == 123_456_789


def test_rewrite_crc_after_changing_the_producer_id() -> None:
    data = bytearray(build_batch(MIXED_RECORDS[:10], compression=Compression.ZSTD, producer_id=1))
    struct.pack_into(">q", data, PRODUCER_ID_AT, 2)
    with pytest.raises(CorruptRecordError):
        validate_batch(data)
    crc = rewrite_crc(data)
    assert validate_batch(data).producer_id == 2
    assert validate_batch(data).crc == crc
    assert kafka_python_records(bytes(data))[1] == expected_records(MIXED_RECORDS[:10])


def test_control_bit() -> None:
    data = bytearray(build_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", (), T0)]))
    struct.pack_into(">h", data, ATTRIBUTES_AT, 0x20)
    rewrite_crc(data)
    assert validate_batch(data).is_control


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (b"\x00\x00\x00\x00", ControlType.ABORT),
        (b"\x00\x00\x00\x01", ControlType.COMMIT),
        (b"\x00\x00\x00\x07", None),
        (b"\x00", None),
    ],
)
def test_control_type_reads_the_marker_in_the_first_record_key(key: bytes, expected: ControlType | None) -> None:
    data = bytearray(b"pad" + build_batch([(key, b"\x00\x00\x00\x00\x00\x00", (), T0)]))
    struct.pack_into(">h", data, 3 + ATTRIBUTES_AT, 0x20)
    rewrite_crc(data, 3)
    assert control_type(data, 3) is expected


@pytest.mark.parametrize("marker", list(ControlType))
def test_marker_batch_as_kafka_writes_it(marker: ControlType) -> None:
    data = build_marker_batch(marker, producer_id=4001, producer_epoch=3, coordinator_epoch=7, timestamp_ms=T0)
    header = validate_batch(data)
    assert (header.is_control, header.is_transactional, header.compression) == (True, True, Compression.NONE)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4001, 3, -1)
    assert read_marker(data) == Marker(marker, 7)
    assert control_type(data) is marker
    # kafka-python reads it as Kafka's EndTransactionMarker: key (version 0, type), value (version 0, epoch).
    batch, records = kafka_python_records(data)
    assert batch.is_control_batch and batch.is_transactional
    assert [(r.key, r.value, r.timestamp) for r in records] == [
        (struct.pack(">hh", 0, marker), struct.pack(">hi", 0, 7), T0)
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_stamping_log_append_time_sets_type_and_max_timestamp_and_keeps_the_records(codec: Compression) -> None:
    original = build_batch(MIXED_RECORDS[:10], compression=codec)
    framed = bytearray(b"xy" + original)
    stamped = stamp_log_append_time(framed, 2, parse_batch_header(framed, 2), 1_700_000_000_123)
    assert validate_batch(framed, 2) == stamped
    assert (stamped.timestamp_type, stamped.max_timestamp) == (LOG_APPEND_TIME, 1_700_000_000_123)
    assert stamped.compression == codec
    assert framed[2 + HEADER_SIZE :] == original[HEADER_SIZE:]
    assert {r.timestamp for r in iter_records(framed, 2)} == {1_700_000_000_123}
    assert {r.timestamp for r in kafka_python_records(bytes(framed[2:]))[1]} == {1_700_000_000_123}


# --- malformed headers ----------------------------------------------------------------


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_message_sets_raise_unsupported_magic(magic: int) -> None:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    for offset in range(3):
        builder.append(offset, T0, b"key", b"value" * 20)
    legacy = bytes(builder.build())
    assert legacy[MAGIC_AT] == magic
    for check in (parse_batch_header, validate_batch, iter_records):
        with pytest.raises(UnsupportedMagicError) as raised:
            check(legacy)
        assert raised.value.magic == magic
    with pytest.raises(UnsupportedMagicError):
        list(iter_batches(legacy))


@pytest.mark.parametrize("magic", [0, 1])
def test_short_legacy_message_still_reports_its_magic(magic: int) -> None:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    builder.append(0, T0, None, b"")
    legacy = bytes(builder.build())
    assert len(legacy) < HEADER_SIZE
    with pytest.raises(UnsupportedMagicError):
        parse_batch_header(legacy)
    with pytest.raises(UnsupportedMagicError):
        list(iter_batches(legacy))


def _patched(data: bytes, fmt: str, at: int, value: int) -> bytearray:
    out = bytearray(data)
    struct.pack_into(fmt, out, at, value)
    return out


@pytest.mark.parametrize(
    ("fmt", "at", "value", "message"),
    [
        (">b", MAGIC_AT, 3, "unknown magic 3"),
        (">b", MAGIC_AT, -1, "unknown magic -1"),
        (">i", LENGTH_AT, 48, "less than its own header"),
        (">i", LENGTH_AT, -5, "less than its own header"),
        (">h", ATTRIBUTES_AT, 5, "unknown compression codec 5"),
        (">h", ATTRIBUTES_AT, 7, "unknown compression codec 7"),
        (">i", COUNT_AT, -1, "-1 records"),
        (">i", LAST_DELTA_AT, 0, "lastOffsetDelta 0"),
    ],
)
def test_malformed_headers_raise_corrupt_record_error(fmt: str, at: int, value: int, message: str) -> None:
    data = _patched(build_batch([(b"k", b"v", (), T0)] * 3), fmt, at, value)
    with pytest.raises(CorruptRecordError, match=message):
        parse_batch_header(data)


def test_truncated_header_and_batch() -> None:
    data = build_batch([(b"k", b"v" * 100, (), T0)])
    with pytest.raises(CorruptRecordError, match="header at offset 0 is truncated"):
        parse_batch_header(data[:60])
    with pytest.raises(CorruptRecordError, match="truncated"):
        validate_batch(data[:-1])
    with pytest.raises(CorruptRecordError, match="truncated"):
        iter_records(data[:-1], check_crc=False)
    with pytest.raises(CorruptRecordError):
        parse_batch_header(data, len(data))
    with pytest.raises(CorruptRecordError):
        parse_batch_header(data, -1)


def test_compacted_batch_with_gaps_in_offsets_is_accepted() -> None:
    # After compaction lastOffsetDelta can exceed record_count - 1.
    data = _patched(build_batch([(b"k", b"v", (), T0)] * 3), ">i", LAST_DELTA_AT, 10)
    header = parse_batch_header(data)
    assert header.next_offset == 11


# --- malformed records ---------------------------------------------------------------


def test_records_are_decoded_lazily_and_a_missing_record_is_caught() -> None:
    data = build_batch([(b"k%d" % i, b"v", (), T0) for i in range(5)])
    more = _patched(_patched(data, ">i", COUNT_AT, 6), ">i", LAST_DELTA_AT, 5)
    records = iter_records(more, check_crc=False)
    assert [next(records).key for _ in range(5)] == [b"k0", b"k1", b"k2", b"k3", b"k4"]
    with pytest.raises(CorruptRecordError, match="ends inside a record"):
        next(records)
    with pytest.raises(CorruptRecordError, match="ends inside a record"):
        decode_records(more, check_crc=False)


def test_bytes_after_the_last_record_are_caught() -> None:
    data = build_batch([(b"k%d" % i, b"v", (), T0) for i in range(5)])
    fewer = _patched(data, ">i", COUNT_AT, 4)
    records = iter_records(fewer, check_crc=False)
    assert len([next(records) for _ in range(4)]) == 4
    with pytest.raises(CorruptRecordError, match="follow the last"):
        next(records)


def _single_record_batch(body: bytes) -> bytes:
    # A header for one record around a hand-made records section.
    data = bytearray(build_batch([(b"k", b"v", (), T0)]))
    del data[HEADER_SIZE:]
    data += body
    struct.pack_into(">i", data, LENGTH_AT, len(data) - 12)
    rewrite_crc(data)
    return bytes(data)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        # Varints are zig-zag encoded: 2n encodes n, 2n - 1 encodes -n.
        (bytes([16, 0, 0, 0, 3]) + b"k" + bytes([2]) + b"v" + bytes([0]), "key has length -2"),
        (bytes([16, 0, 0, 0, 2]) + b"k" + bytes([3]) + b"v" + bytes([0]), "value has length -2"),
        (bytes([18, 0, 0, 0, 2]) + b"k" + bytes([2]) + b"v" + bytes([0, 0]), "declares 9 bytes but its fields take 8"),
        (bytes([22, 0, 0, 0, 2]) + b"k" + bytes([2]) + b"v" + bytes([2, 2]) + b"\xff" + bytes([0]), "not UTF-8"),
        (bytes([22, 0, 0, 0, 2]) + b"k" + bytes([2]) + b"v" + bytes([2, 1]) + b"h" + bytes([0]), "key has length -1"),
        (bytes([20, 0, 0, 0, 2]) + b"k" + bytes([2]) + b"v" + bytes([2, 0, 3]), "header value has length -2"),
        (bytes([16, 0, 0, 0, 2]) + b"k" + bytes([2]) + b"v" + bytes([100]), "declares 50 headers"),
        (bytes([16, 0, 0, 0, 2]) + b"k" + bytes([2]) + b"v" + bytes([1]), "declares -1 headers"),
        (bytes([0xC8, 0x01, 0]), "record of 100 bytes does not fit"),
        (bytes([0x80] * 11), "varint longer than 10 bytes"),
        (bytes([0]), "record of 0 bytes does not fit"),
    ],
)
def test_malformed_records_raise_corrupt_record_error(body: bytes, message: str) -> None:
    data = _single_record_batch(body)
    validate_batch(data)
    with pytest.raises(CorruptRecordError, match=message):
        list(iter_records(data))


def test_hand_made_record_decodes() -> None:
    body = bytes([22, 0, 0, 0, 2]) + b"k" + bytes([2]) + b"v" + bytes([2, 2]) + b"h" + bytes([1])
    assert list(iter_records(_single_record_batch(body))) == [Record(0, T0, b"k", b"v", (("h", None),))]


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_corrupt_compressed_records_raise_corrupt_record_error(codec: Compression) -> None:
    data = bytearray(build_batch(MIXED_RECORDS[:20], compression=codec))
    del data[-10:]
    struct.pack_into(">i", data, LENGTH_AT, len(data) - 12)
    rewrite_crc(data)
    with pytest.raises(CorruptRecordError):
        list(iter_records(data))


def test_decompression_is_bounded() -> None:
    data = build_batch([(None, bytes(1_000_000), (), T0)], compression=Compression.ZSTD)
    assert len(data) < 1000
    with pytest.raises(CorruptRecordError, match="exceed the limit"):
        iter_records(data, max_size=500_000)
    assert len(next(iter_records(data)).value or b"") == 1_000_000


# --- walking batches -----------------------------------------------------------------


def test_iter_batches_stops_silently_at_any_truncation() -> None:
    batches = [build_batch(MIXED_RECORDS[: 3 + i], compression=i, base_offset=10 * i) for i in range(5)]
    stream = b"".join(batches)
    ends = [sum(len(b) for b in batches[: i + 1]) for i in range(len(batches))]
    starts = [0, *ends[:-1]]
    for cut in range(len(stream) + 1):
        complete = [end for end in ends if end <= cut]
        found = list(iter_batches(stream[:cut]))
        assert [pos for pos, _ in found] == starts[: len(complete)]
        assert [h.base_offset for _, h in found] == [10 * i for i in range(len(complete))]
        assert complete_prefix_length(stream[:cut]) == (complete[-1] if complete else 0)


def test_iter_batches_from_an_offset_and_over_memoryview() -> None:
    a = build_batch([(b"a", b"1", (), T0)], base_offset=1)
    b = build_batch([(b"b", b"2", (), T0)], base_offset=2)
    stream = memoryview(b"..." + a + b)
    assert [(pos, h.base_offset) for pos, h in iter_batches(stream, 3)] == [(3, 1), (3 + len(a), 2)]
    assert complete_prefix_length(stream, 3) == len(a) + len(b)


def test_iter_batches_raises_on_a_corrupt_complete_batch() -> None:
    good = build_batch([(b"a", b"1", (), T0)])
    bad = _patched(good, ">b", MAGIC_AT, 7)
    walk = iter_batches(good + bad)
    assert next(walk)[0] == 0
    with pytest.raises(CorruptRecordError, match="unknown magic 7"):
        next(walk)


# --- fuzzing ------------------------------------------------------------------------


def _consume(data: bytes | bytearray, check_crc: bool) -> None:
    # Each entry point on its own: any exception but a ProtocolError fails the test.
    with contextlib.suppress(ProtocolError):
        parse_batch_header(data)
    with contextlib.suppress(ProtocolError):
        validate_batch(data)
    with contextlib.suppress(ProtocolError):
        list(iter_records(data, check_crc=check_crc, max_size=1 << 20))
    with contextlib.suppress(ProtocolError):
        list(iter_batches(data))
    # The two record decoders are one walk: the same records, or the same error.
    assert _decoded(lambda: decode_records(data, check_crc=check_crc, max_size=1 << 20)) == _decoded(
        lambda: list(iter_records(data, check_crc=check_crc, max_size=1 << 20))
    )


def _decoded(decode: Any) -> tuple[Any, ...]:
    try:
        return ("records", decode())
    except ProtocolError as exc:
        return (type(exc), str(exc))


@given(st.binary(max_size=300))
def test_random_bytes_raise_only_protocol_errors(data: bytes) -> None:
    _consume(data, check_crc=False)


@given(st.binary(min_size=HEADER_SIZE - 12, max_size=300), st.sampled_from(CODECS), st.integers(0, 20))
def test_random_bodies_behind_a_plausible_header_raise_only_protocol_errors(
    body: bytes, codec: Compression, count: int
) -> None:
    header = struct.pack(">qiibIhiqqqhii", 0, 49 + len(body), 0, 2, 0, codec, count, T0, T0, -1, -1, -1, count)
    data = bytearray(header + body)
    rewrite_crc(data)
    _consume(data, check_crc=True)


@settings(max_examples=300)
@given(
    records=st.lists(record_tuples, min_size=1, max_size=8),
    codec=st.sampled_from(CODECS),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), min_size=1, max_size=4),
)
def test_damaged_valid_batches_raise_only_protocol_errors(
    records: list[RecordTuple], codec: Compression, flips: list[tuple[int, int]]
) -> None:
    data = bytearray(build_batch(records, compression=codec))
    for at, mask in flips:
        data[at % len(data)] ^= mask
    _consume(data, check_crc=False)
    with contextlib.suppress(ProtocolError):
        rewrite_crc(data)
    _consume(data, check_crc=True)


# --- detach_producer: what the mirror rewrites under the CRC ---------------------


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.ZSTD])
def test_detach_producer_clears_producer_fields_and_keeps_records_byte_identical(codec: Compression) -> None:
    records = [(b"k%d" % i, b"value-%d" % i * 20, (("h", b"v"),), 1_700_000_000_000 + i) for i in range(50)]
    original = build_batch(records, compression=codec, producer_id=4242, producer_epoch=3,
                           base_sequence=100, is_transactional=True)  # fmt: skip
    buf = bytearray(original)
    assert detach_producer(buf) is True
    header = validate_batch(buf)  # the recomputed CRC is valid
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (-1, -1, -1)
    assert not header.is_transactional
    assert header.compression == codec
    before = parse_batch_header(original)
    assert header.crc != before.crc
    # Everything else is untouched: timestamps, counts, and the compressed records themselves.
    assert header._replace(crc=0, attributes=0, producer_id=0, producer_epoch=0, base_sequence=0) == before._replace(
        crc=0, attributes=0, producer_id=0, producer_epoch=0, base_sequence=0
    )
    assert bytes(buf[HEADER_SIZE:]) == original[HEADER_SIZE:]
    assert [(r.key, r.value, r.headers) for r in iter_records(bytes(buf))] == [(k, v, h) for k, v, h, _ in records]


def test_detach_producer_leaves_plain_batches_alone() -> None:
    original = build_batch([(None, b"x", (), None)])
    buf = bytearray(original)
    assert detach_producer(buf) is False
    assert bytes(buf) == original
