"""check_records: a batch is appended only if its records agree with its header.

Every lie a header can tell about its records (the count, offset deltas, timestamps, framing,
what follows the last record) is refused for every codec, honest batches of any shape pass,
and a compression bomb is refused after at most the limit of output, in small pieces."""

from __future__ import annotations

import contextlib
import tracemalloc
import zlib

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.protocol.compression import Compression, compress, decompress, iter_decompressed
from tributary.protocol.errors import CorruptRecordError
from tributary.protocol.primitives import encode_varint
from tributary.protocol.records import (
    HEADER_SIZE,
    LOG_APPEND_TIME,
    TIMESTAMP_TYPE_BIT,
    build_batch,
    check_records,
    encode_batch_header,
    parse_batch_header,
)

CODECS = list(Compression)
T0 = 1_700_000_000_000
LIMIT = 64 << 20


def records_of(values: list[bytes], *, timestamps: list[int] | None = None) -> bytes:
    """The uncompressed records section of an honest batch of ``values``."""
    stamps = timestamps or [T0 + i for i in range(len(values))]
    return build_batch([(None, v, [], t) for v, t in zip(values, stamps, strict=True)])[HEADER_SIZE:]


def batch_of(
    section: bytes, count: int, codec: Compression = Compression.NONE, *, max_timestamp: int | None = None,
    attributes: int = 0,
) -> bytes:  # fmt: skip
    """A batch whose header claims ``count`` records over ``section`` (compressed as ``codec``),
    with a valid CRC: only the records can tell the lie."""
    payload = compress(codec, section)
    header = encode_batch_header(
        base_offset=0, partition_leader_epoch=-1, attributes=codec.value | attributes, base_timestamp=T0,
        max_timestamp=T0 + 10_000 if max_timestamp is None else max_timestamp, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, record_count=count, records=payload,
    )  # fmt: skip
    return header + payload


def check(data: bytes, limit: int = LIMIT) -> None:
    check_records(data, 0, parse_batch_header(data), max_size=limit)


# --- honest batches pass ----------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_honest_batches_of_every_shape_pass(codec: Compression) -> None:
    records = [
        (b"key", b"value", [("h", b"v"), ("ключ", None)], T0),
        (None, None, [], T0 - 5),
        (b"", b"", [("", b"")], T0 + 3),
        (b"k" * 300, b"v" * 70_000, [], T0 + 1),  # spans several pieces when compressed
        *[(b"%d" % i, b"x" * (i % 50), [], T0 + i) for i in range(500)],
    ]
    check(build_batch(records, compression=codec))


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.binary(max_size=300), min_size=1, max_size=40),
    codec=st.sampled_from(CODECS),
)
def test_any_honest_batch_passes(values: list[bytes], codec: Compression) -> None:
    check(build_batch([(None, v, [("n", v[:3])], T0 + len(v)) for v in values], compression=codec))


def test_log_append_time_batches_are_not_held_to_their_max_timestamp() -> None:
    # The broker's clock sits in maxTimestamp, earlier than a record stamped in the future.
    section = records_of([b"a", b"b"], timestamps=[T0, T0 + 50_000])
    check(batch_of(section, 2, max_timestamp=T0, attributes=TIMESTAMP_TYPE_BIT))
    assert parse_batch_header(batch_of(section, 2, attributes=TIMESTAMP_TYPE_BIT)).timestamp_type == LOG_APPEND_TIME


# --- every lie is refused -----------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize(
    ("lie", "count", "message"),
    [
        pytest.param(lambda: records_of([b"a", b"b", b"c"]), 10, "holds 3 records, its header declares 10", id="more"),
        pytest.param(lambda: records_of([b"a", b"b", b"c"]), 2, "more records than the 2", id="fewer"),
        pytest.param(lambda: records_of([b"a"]), 2**31 - 1, "holds 1 records", id="two-billion"),
        pytest.param(lambda: b"\x00" * 40, 3, "record 0 has length 0", id="zeros"),
        pytest.param(lambda: records_of([b"a", b"b"]) + b"\x02\x00", 2, "more records than the 2", id="trailing"),
        pytest.param(lambda: records_of([b"a", b"b"])[:-1], 2, "ends inside record 1", id="cut-short"),
        pytest.param(lambda: records_of([b"a"]) + records_of([b"b"]), 2, "record 1 has offset delta 0", id="deltas"),
    ],
)
def test_a_header_that_lies_about_its_records_is_refused(
    codec: Compression, lie: object, count: int, message: str
) -> None:
    assert callable(lie)
    with pytest.raises(CorruptRecordError, match=message):
        check(batch_of(lie(), count, codec))


def test_a_record_later_than_the_batch_max_timestamp_is_refused() -> None:
    section = records_of([b"a", b"b"], timestamps=[T0, T0 + 20_000])
    with pytest.raises(CorruptRecordError, match="after the batch's maxTimestamp"):
        check(batch_of(section, 2, max_timestamp=T0 + 10_000))


def _record(body: bytes) -> bytes:
    return encode_varint(len(body)) + body


@pytest.mark.parametrize(
    ("body", "message"),
    [
        # attributes, timestampDelta, offsetDelta, key length, ..., headers count
        (b"\x00\x00\x00\x03\x01", "key of length -2"),
        (b"\x00\x00\x00\x01\x0a\x00", "runs past the batch"),  # a value of 5 bytes in a record of 6
        (b"\x00\x00\x00\x01\x01\x02\x01\x00", "header key of length -1"),
        (b"\x00\x00\x00\x01\x01\x02\x02\xff\x02", "header key that is not UTF-8"),
        (b"\x00\x00\x00\x01\x01\x7f", "declares -64 headers"),
        (b"\x00\x00\x00\x01\x01\x00\x00\x00", "fields take"),  # bytes after the headers
    ],
)
def test_malformed_fields_inside_a_record_are_refused(body: bytes, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        check(batch_of(_record(body), 1))


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.binary(max_size=40), min_size=1, max_size=8),
    claimed=st.integers(min_value=1, max_value=2**31 - 1),
    cut=st.integers(min_value=0, max_value=400),
    junk=st.binary(max_size=16),
    codec=st.sampled_from(CODECS),
)
def test_a_header_and_records_that_disagree_are_always_refused(
    values: list[bytes], claimed: int, cut: int, junk: bytes, codec: Compression
) -> None:
    honest = records_of(values)
    section = honest[: max(0, len(honest) - cut)] + junk
    if claimed <= len(values) and section == records_of(values[:claimed]):
        # The one combination that tells the truth: a cut (and junk) that happens to leave
        # exactly the first `claimed` records, e.g. one record when the cut falls on its end.
        check(batch_of(section, claimed, codec))
        return
    with pytest.raises(CorruptRecordError):
        check(batch_of(section, claimed, codec))


# --- bombs --------------------------------------------------------------------------------------


def _zstd_bomb(size: int) -> bytes:
    compressor = zstandard.ZstdCompressor(level=3).compressobj()
    zeros = bytes(1 << 20)
    return b"".join([*(compressor.compress(zeros) for _ in range(size >> 20)), compressor.flush()])


def _gzip_bomb(size: int) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(1 << 20)
    return b"".join([*(compressor.compress(zeros) for _ in range(size >> 20)), compressor.flush()])


@pytest.mark.parametrize(("codec", "bomb"), [(Compression.ZSTD, _zstd_bomb), (Compression.GZIP, _gzip_bomb)])
def test_a_bomb_is_refused_at_the_limit_without_holding_its_output(codec: Compression, bomb: object) -> None:
    assert callable(bomb)
    payload = bomb(256 << 20)  # 256 MiB of zeros
    assert len(payload) < 300_000
    header = encode_batch_header(
        base_offset=0, partition_leader_epoch=-1, attributes=codec.value, base_timestamp=T0, max_timestamp=T0,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, record_count=1, records=payload,
    )  # fmt: skip
    data = header + payload
    tracemalloc.start()
    try:
        # The first zero byte reads as a record of length 0: refused after one piece. (A bomb
        # that frames a plausible record instead runs into the limit: the next test.)
        with pytest.raises(CorruptRecordError, match="length 0"):
            check(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"{peak} bytes allocated while checking a {len(payload)}-byte bomb"


@pytest.mark.parametrize("codec", [c for c in CODECS if c is not Compression.NONE])
def test_the_limit_stops_a_record_that_keeps_growing(codec: Compression) -> None:
    # One record whose declared length is 100 MiB, its bytes zeros: only the limit ends the walk.
    section = encode_varint(100 << 20) + bytes(100 << 20)
    data = batch_of(section, 1, codec)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match="exceed the limit of 8388608 bytes"):
            check(data, limit=8 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The pending record grows to the limit, no further (raw snappy: one block, checked first).
    assert peak < 20 << 20


# --- decompressing in pieces --------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(data=st.binary(min_size=1, max_size=200_000), chunk=st.integers(min_value=1, max_value=70_000))
@pytest.mark.parametrize("codec", [c for c in CODECS if c is not Compression.NONE])
def test_pieces_join_to_what_decompress_returns(codec: Compression, data: bytes, chunk: int) -> None:
    compressed = compress(codec, data)
    pieces = list(iter_decompressed(codec, compressed, chunk=chunk))
    assert b"".join(pieces) == decompress(codec, compressed) == data
    if codec is not Compression.SNAPPY:  # snappy's pieces are its 32 KiB blocks
        assert all(len(p) <= chunk for p in pieces)


@pytest.mark.parametrize("codec", [c for c in CODECS if c is not Compression.NONE])
def test_truncated_input_is_corrupt_in_pieces_too(codec: Compression) -> None:
    compressed = compress(codec, bytes(range(256)) * 400)
    with pytest.raises(CorruptRecordError):
        list(iter_decompressed(codec, compressed[: len(compressed) // 2]))


# --- fuzzing the validator ----------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(data=st.data(), codec=st.sampled_from(CODECS))
def test_mutated_batches_raise_only_corrupt_record_error(data: st.DataObject, codec: Compression) -> None:
    # Honest batches with bytes flipped, cut or spliced anywhere, CRC made valid again: the
    # validator either accepts (the mutation kept it honest) or raises CorruptRecordError,
    # never another exception, and never allocates much more than the limit.
    values = data.draw(st.lists(st.binary(max_size=60), min_size=1, max_size=10))
    original = bytearray(
        build_batch([(b"k", v, [("h", v[:2])], T0 + i) for i, v in enumerate(values)], compression=codec)
    )
    section = bytearray(
        decompress(codec, bytes(original[HEADER_SIZE:])) if codec is not Compression.NONE else original[HEADER_SIZE:]
    )
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        if not section:
            break
        at = data.draw(st.integers(min_value=0, max_value=len(section) - 1))
        action = data.draw(st.sampled_from(["flip", "cut", "splice"]))
        if action == "flip":
            section[at] ^= data.draw(st.integers(min_value=1, max_value=255))
        elif action == "cut":
            del section[at:]
        else:
            section[at:at] = data.draw(st.binary(min_size=1, max_size=12))
    header = parse_batch_header(bytes(original))
    lied = batch_of(bytes(section), header.record_count, codec, max_timestamp=header.max_timestamp)
    with contextlib.suppress(CorruptRecordError):
        check(lied, limit=1 << 20)
