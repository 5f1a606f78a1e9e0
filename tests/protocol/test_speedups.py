"""The compiled record loops (protocol/records/_speedups.c) against the Python ones.

The broker's walk (``check_records``) and the consumer's decode (``decode_records``) run the
compiled loops wherever the extension was built, and the Python loops elsewhere; the two must
reach the same decision on every input: the same records, the same count of null keys, and a
refusal of the same batches (messages may word it differently). Honest batches of any shape,
then the same batches with bytes flipped, inserted or removed inside the records section, and
hand-made varints at the 64-bit edge. And the CRC carried over a patched batch start
(``carry_crc``), compiled and in Python, against CRCs computed again from the bytes."""

from __future__ import annotations

import os
import shutil
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tributary.protocol.compression import Compression
from tributary.protocol.errors import CorruptRecordError
from tributary.protocol.primitives import encode_varint
from tributary.protocol.records import (
    HEADER_SIZE,
    LOG_APPEND_TIME,
    BatchBuilder,
    Record,
    attach_producer,
    build_batch,
    builder,
    compute_crc,
    detach_producer,
    parse_batch_header,
    set_producer,
    stamp_log_append_time,
    verify_crc,
)
from tributary.protocol.records import codec as record_codec
from tributary.protocol.records import header as header_module
from tributary.protocol.records.compiled import DISABLE_VARIABLE
from tributary.protocol.records.validate import _Walk

SPEEDUPS = record_codec.SPEEDUPS
T0 = 1_700_000_000_000

needs_speedups = pytest.mark.skipif(SPEEDUPS is None, reason="the compiled loops are not built or turned off")


def test_the_compiled_loops_are_built_wherever_they_can_be() -> None:
    # A machine with a C compiler and Python's headers builds the extension at install
    # (setup.py, optional so that one without them still installs): if it did not,
    # every other test here would skip and prove nothing.
    can_build = shutil.which("cc") is not None and (Path(sysconfig.get_paths()["include"]) / "Python.h").exists()
    if os.environ.get(DISABLE_VARIABLE, "") not in ("", "0"):
        assert SPEEDUPS is None
        assert record_codec.IMPLEMENTATION == "python"
    elif can_build:
        assert SPEEDUPS is not None, "a C compiler and Python.h are here, yet _speedups was not built"
        assert record_codec.IMPLEMENTATION == "compiled"


# --- the decode -----------------------------------------------------------------------------


def _decode(data: bytes, loop: Callable[..., None]) -> tuple[list[Record], str | None]:
    """The records ``loop`` decodes from the uncompressed batch ``data`` and its error (None
    when it decoded all): the records before a bad one count too."""
    header = parse_batch_header(data)
    out: list[Record] = []
    try:
        loop(out, data, HEADER_SIZE, len(data), header, Record)
    except CorruptRecordError as exc:
        return out, str(exc)
    return out, None


def _compiled_decode(  # noqa: PLR0917
    out: list[Any], data: bytes, pos: int, end: int, header: Any, record_type: type
) -> None:
    assert SPEEDUPS is not None
    append_time = header.max_timestamp if header.timestamp_type == LOG_APPEND_TIME else None
    SPEEDUPS.decode_into(
        out, data, pos, end, header.record_count, header.base_offset, header.base_timestamp, append_time, record_type
    )


def _same_decode(data: bytes) -> None:
    python, python_error = _decode(data, record_codec.decode_into_python)
    compiled, compiled_error = _decode(data, _compiled_decode)
    assert compiled == python
    assert (compiled_error is None) == (python_error is None), (python_error, compiled_error)


def _same_walk(data: bytes, cuts: list[int]) -> None:
    """Both walks over the records section of ``data``, fed in pieces cut at ``cuts``."""
    header = parse_batch_header(data)
    outcomes = []
    for name in ("records", "records_python"):
        walk = _Walk(header)
        step = getattr(walk, name)
        pending = bytearray()
        try:
            start = HEADER_SIZE
            for cut in [*sorted(cuts), len(data)]:
                pending += data[start : max(start, cut)]
                start = max(start, cut)
                del pending[: step(pending, 0, len(pending))]
            walk.finish(len(pending))
        except CorruptRecordError:
            outcomes.append(("refused",))
        else:
            outcomes.append(("passed", walk.index, walk.keyless))
    assert outcomes[0] == outcomes[1]


header_lists = st.lists(
    st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))), max_size=3
)  # fmt: skip
records = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=300)),
        header_lists,
        st.integers(min_value=-(2**40), max_value=2**40),
    ),
    min_size=1,
    max_size=30,
)


@needs_speedups
@settings(max_examples=200)
@given(batch=records, base_offset=st.integers(min_value=0, max_value=2**62), append_time=st.booleans())
def test_honest_batches_decode_the_same(
    batch: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    base_offset: int,
    append_time: bool,
) -> None:
    data = bytearray(build_batch([(k, v, h, T0 + t) for k, v, h, t in batch], base_offset=base_offset))
    if append_time:
        data[22] |= 0x08  # attributes, low byte: the timestamp type
    python, _ = _decode(bytes(data), record_codec.decode_into_python)
    assert len(python) == len(batch)
    _same_decode(bytes(data))


@needs_speedups
@settings(max_examples=300)
@given(
    batch=records,
    edits=st.lists(
        st.tuples(
            st.integers(min_value=0), st.sampled_from(["flip", "insert", "delete"]), st.binary(min_size=1, max_size=3)
        ),
        min_size=1,
        max_size=4,
    ),
    cuts=st.lists(st.integers(min_value=HEADER_SIZE), max_size=4),
)
def test_damaged_records_are_refused_alike(
    batch: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    edits: list[tuple[int, str, bytes]],
    cuts: list[int],
) -> None:
    data = bytearray(build_batch([(k, v, h, T0 + t) for k, v, h, t in batch]))
    for where, how, what in edits:
        at = HEADER_SIZE + where % max(1, len(data) - HEADER_SIZE)
        if how == "flip":
            data[at] ^= what[0]
        elif how == "insert":
            data[at:at] = what
        else:
            del data[at : at + len(what)]
    _same_decode(bytes(data))
    _same_walk(bytes(data), [HEADER_SIZE + c % max(1, len(data) - HEADER_SIZE + 1) for c in cuts])


@needs_speedups
@settings(max_examples=200)
@given(batch=records, cuts=st.lists(st.integers(min_value=0), max_size=6))
def test_honest_batches_walk_the_same_in_any_pieces(
    batch: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]], cuts: list[int]
) -> None:
    data = build_batch([(k, v, h, T0 + abs(t) % 1000) for k, v, h, t in batch])
    _same_walk(data, [HEADER_SIZE + c % (len(data) - HEADER_SIZE + 1) for c in cuts])


def _one_record_batch(body: bytes, *, count: int = 1) -> bytes:
    data = bytearray(build_batch([(b"k", b"v", (), T0)]))
    del data[HEADER_SIZE:]
    data += encode_varint(len(body)) + body
    data[57:61] = count.to_bytes(4, "big")
    data[8:12] = (len(data) - 12).to_bytes(4, "big")
    return bytes(data)


@needs_speedups
@pytest.mark.parametrize(
    "varint",
    [
        bytes([0xFF] * 9 + [0x01]),  # the largest 64-bit varint: -2**63 after zig-zag
        bytes([0xFE] + [0xFF] * 8 + [0x01]),  # 2**63 - 1
        bytes([0x80] * 9 + [0x02]),  # bit 64: beyond 64 bits
        bytes([0x80] * 9 + [0x7F]),
        bytes([0x80] * 10 + [0x00]),  # eleven bytes
        bytes([0x80, 0x00]),  # zero, padded: legal
    ],
)
@pytest.mark.parametrize("field", ["timestamp", "offset", "key", "value"])
def test_varints_at_the_64_bit_edge_are_read_alike(varint: bytes, field: str) -> None:
    fields = {"timestamp": b"\x00", "offset": b"\x00", "key": b"\x02k", "value": b"\x02v"}
    fields[field] = varint
    body = b"\x00" + fields["timestamp"] + fields["offset"] + fields["key"] + fields["value"] + b"\x00"
    for attributes in (0, 0x08):  # create time, then log-append time (no timestamp bound)
        data = bytearray(_one_record_batch(body))
        data[22] |= attributes
        _same_decode(bytes(data))
        _same_walk(bytes(data), [])


# --- the encoder ----------------------------------------------------------------------------

payloads = st.one_of(
    st.none(), st.binary(max_size=300), st.binary(max_size=300).map(bytearray), st.binary(max_size=300).map(memoryview)
)


@needs_speedups
@settings(max_examples=300)
@given(
    records=st.lists(
        st.tuples(
            payloads,
            payloads,
            st.integers(min_value=-(2**63), max_value=2**63 - 1),
            st.integers(min_value=0, max_value=2**31 - 1),
        ),
        min_size=1,
        max_size=10,
    )
)
def test_records_encode_to_the_same_bytes(records: list[tuple[Any, Any, int, int]]) -> None:
    assert SPEEDUPS is not None
    compiled, python = bytearray(b"prefix"), bytearray(b"prefix")
    for key, value, timestamp_delta, offset_delta in records:
        SPEEDUPS.append_record(compiled, key, value, timestamp_delta, offset_delta)
        builder._append_record_python(python, key, value, (), timestamp_delta, offset_delta)
    assert compiled == python


@needs_speedups
@settings(max_examples=300)
@given(
    base=st.integers(min_value=-(2**61), max_value=2**61),
    records=st.lists(
        st.tuples(payloads, payloads, st.integers(min_value=-(2**61), max_value=2**61)), min_size=1, max_size=10
    ),
)
def test_the_producers_encoder_writes_what_the_python_one_does(base: int, records: list[tuple[Any, Any, int]]) -> None:
    """append_record_at (the producer's accumulator): the record append_record writes, its
    timestamp delta taken from the base (0 for the first record), the timestamp returned."""
    assert builder.append_record_at is not None
    compiled, python = bytearray(b"prefix"), bytearray(b"prefix")
    for offset_delta, (key, value, timestamp) in enumerate(records):
        assert builder.append_record_at(compiled, key, value, timestamp, base, offset_delta) == timestamp
        delta = timestamp - base if offset_delta else 0
        builder._append_record_python(python, key, value, (), delta, offset_delta)
    assert compiled == python


@needs_speedups
def test_the_producers_encoder_stamps_now_and_refuses_what_does_not_fit() -> None:
    assert builder.append_record_at is not None
    records = bytearray()
    before = time.time_ns() // 1_000_000
    stamped = builder.append_record_at(records, None, b"v", None, 0, 0)
    assert before <= stamped <= time.time_ns() // 1_000_000
    expected = bytearray()
    builder._append_record_python(expected, None, b"v", (), 0, 0)
    assert records == expected
    for args in [
        (b"k", b"v", 2**63, 0, 1),  # a timestamp beyond 64 bits
        (b"k", b"v", 2**62, -(2**62), 1),  # a delta beyond 64 bits
    ]:
        with pytest.raises(OverflowError):
            builder.append_record_at(records, *args)
    with pytest.raises(TypeError):
        builder.append_record_at(records, "text", b"v", None, 0, 1)
    with pytest.raises(TypeError):
        builder.append_record_at(bytes(records), b"k", b"v", None, 0, 1)
    assert records == expected  # nothing added by a refused record


@needs_speedups
@pytest.mark.parametrize(("key", "value"), [("text", b"v"), (b"k", "text"), (b"k", 5), (object(), None)])
def test_a_record_of_the_wrong_types_is_refused_and_adds_nothing(key: object, value: object) -> None:
    built = BatchBuilder()
    built.append(b"k", b"v", timestamp=T0)
    before = built.build()
    with pytest.raises(TypeError):
        built.append(key, value, timestamp=T0 + 1)  # type: ignore[arg-type]
    assert built.record_count == 1
    assert built.build() == before


# --- the CRC carried over a change at a batch's start ----------------------------------------------


codecs = st.sampled_from([Compression.NONE, Compression.GZIP, Compression.ZSTD])


def _batch(values: list[bytes], codec: Compression, transactional: bool) -> bytearray:
    built = BatchBuilder(compression=codec, producer_id=7, producer_epoch=1, base_sequence=3,
                         is_transactional=transactional)  # fmt: skip
    for i, value in enumerate(values):
        built.append(None, value, timestamp=T0 + i)
    return bytearray(built.build())


def _patches() -> list[Callable[[bytearray], object]]:
    return [
        lambda buf: attach_producer(buf, 0, 42, 9, 1000),
        detach_producer,
        lambda buf: set_producer(buf, 0, 2**62, 2**14, 2**31 - 1),
        lambda buf: stamp_log_append_time(buf, 0, parse_batch_header(buf), T0 + 99),
    ]


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
@settings(max_examples=100)
@given(
    values=st.lists(st.binary(max_size=3000), min_size=1, max_size=20),
    codec=codecs,
    transactional=st.booleans(),
    damage=st.one_of(st.none(), st.tuples(st.integers(min_value=0), st.integers(min_value=1, max_value=255))),
)
def test_a_carried_crc_is_the_crc_of_the_batch_or_keeps_its_damage(
    compiled: bool, values: list[bytes], codec: Compression, transactional: bool, damage: tuple[int, int] | None
) -> None:
    if compiled and header_module._COMPILED is None:
        pytest.skip("the compiled module is not built or turned off")
    original = header_module._COMPILED
    header_module._COMPILED = original if compiled else None
    try:
        for patch in _patches():
            buf = _batch(values, codec, transactional)
            if damage is not None:  # a flipped byte in the records: the stored CRC no longer matches
                at, flip = damage
                buf[HEADER_SIZE + at % (len(buf) - HEADER_SIZE)] ^= flip
            syndrome = parse_batch_header(buf).crc ^ compute_crc(buf)
            patch(buf)
            # Exactly the CRC of the patched bytes, plus whatever damage it had before.
            assert parse_batch_header(buf).crc ^ compute_crc(buf) == syndrome
            if damage is None:
                verify_crc(buf)
            else:
                with pytest.raises(CorruptRecordError):
                    verify_crc(buf)
    finally:
        header_module._COMPILED = original


def test_a_patch_past_the_batchs_end_is_refused() -> None:
    buf = _batch([b"v"], Compression.NONE, False)
    with pytest.raises(CorruptRecordError):
        attach_producer(buf[: HEADER_SIZE - 30], 0, 1, 1, 1)
