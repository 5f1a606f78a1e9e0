from __future__ import annotations

import gzip
import os
import struct
import sys
from collections.abc import Callable

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st
from kafka import codec as kafka_codec

from tributary.protocol.compression import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression, compress, decompress
from tributary.protocol.errors import CodecUnavailableError, CorruptRecordError, ProtocolError

CODECS = list(Compression)
COMPRESSED = [c for c in Compression if c is not Compression.NONE]
# Compressible but not trivially so, and larger than one snappy/lz4 block.
SAMPLE = b"".join(b"record-%06d:" % i + os.urandom(8).hex().encode() for i in range(8000))


def test_codec_ids_are_the_batch_attribute_values() -> None:
    expected = [("NONE", 0), ("GZIP", 1), ("SNAPPY", 2), ("LZ4", 3), ("ZSTD", 4)]
    assert [(c.name, c.value) for c in Compression] == expected


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_of_a_large_sample(codec: Compression) -> None:
    compressed = compress(codec, SAMPLE)
    if codec is not Compression.NONE:
        assert len(compressed) < len(SAMPLE)
    assert decompress(codec, compressed) == SAMPLE


@pytest.mark.parametrize("codec", CODECS)
def test_accepts_every_buffer_type(codec: Compression) -> None:
    for data in (bytearray(SAMPLE), memoryview(SAMPLE)):
        compressed = compress(codec, data)
        for blob in (compressed, bytearray(compressed), memoryview(b"-" + compressed)[1:]):
            assert decompress(codec, blob) == SAMPLE


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_of_empty_input(codec: Compression) -> None:
    assert decompress(codec, compress(codec, b"")) == b""


@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=3000), level=st.sampled_from([None, 1]))
def test_round_trip_of_random_input(codec: Compression, data: bytes, level: int | None) -> None:
    assert decompress(int(codec), compress(int(codec), data, level)) == data


def test_none_is_the_identity() -> None:
    assert compress(Compression.NONE, b"abc") == b"abc"
    assert decompress(Compression.NONE, memoryview(b"abc")) == b"abc"


# --- gzip ---------------------------------------------------------------------


def test_gzip_is_standard_gzip_both_ways() -> None:
    assert gzip.decompress(compress(Compression.GZIP, SAMPLE)) == SAMPLE
    assert decompress(Compression.GZIP, gzip.compress(SAMPLE)) == SAMPLE


def test_gzip_reads_concatenated_members() -> None:
    assert decompress(Compression.GZIP, gzip.compress(b"abc") + gzip.compress(b"def")) == b"abcdef"


# --- snappy --------------------------------------------------------------------


def test_snappy_writes_xerial_framing_in_32k_blocks() -> None:
    data = SAMPLE[: 100 * 1024]
    compressed = compress(Compression.SNAPPY, data)
    assert compressed[:16] == b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01"
    blocks = []
    pos = 16
    while pos < len(compressed):
        (length,) = struct.unpack_from(">i", compressed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(compressed[pos + 4 : pos + 4 + length])))
        pos += 4 + length
    assert pos == len(compressed)
    assert [len(b) for b in blocks] == [32768, 32768, 32768, 4096]
    assert b"".join(blocks) == data


def test_snappy_reads_raw_snappy() -> None:
    assert decompress(Compression.SNAPPY, bytes(cramjam.snappy.compress_raw(SAMPLE))) == SAMPLE


def test_snappy_interoperates_with_kafka_python_in_both_framings() -> None:
    assert decompress(Compression.SNAPPY, kafka_codec.snappy_encode(SAMPLE)) == SAMPLE
    assert decompress(Compression.SNAPPY, kafka_codec.snappy_encode(SAMPLE, xerial_compatible=False)) == SAMPLE
    assert kafka_codec.snappy_decode(compress(Compression.SNAPPY, SAMPLE)) == SAMPLE


def test_snappy_ignores_little_endian_xerial_versions() -> None:
    # Redpanda writes the version fields little-endian; Kafka clients read it anyway.
    compressed = compress(Compression.SNAPPY, SAMPLE)
    swapped = compressed[:8] + struct.pack("<ii", 1, 1) + compressed[16:]
    assert decompress(Compression.SNAPPY, swapped) == SAMPLE


# --- lz4 ---------------------------------------------------------------------


def test_lz4_writes_a_kafka_style_frame() -> None:
    compressed = compress(Compression.LZ4, SAMPLE)
    assert compressed[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic 0x184D2204
    flg, bd = compressed[4], compressed[5]
    assert flg >> 6 == 0b01  # version
    assert flg & 0x20  # independent blocks
    assert not flg & 0x08  # no content size
    assert not flg & 0x04  # no content checksum
    assert bd == 0x40  # 64 KiB maximum block size
    assert lz4.frame.decompress(compressed) == SAMPLE


def test_lz4_reads_frames_with_content_size_and_checksums() -> None:
    framed = lz4.frame.compress(SAMPLE, store_size=True, content_checksum=True, block_linked=True)
    assert decompress(Compression.LZ4, framed) == SAMPLE
    assert decompress(Compression.LZ4, kafka_codec.lz4_encode(SAMPLE)) == SAMPLE
    assert kafka_codec.lz4_decode(compress(Compression.LZ4, SAMPLE)) == SAMPLE


# --- zstd ---------------------------------------------------------------------


def test_zstd_reads_frames_without_content_size() -> None:
    streamed = zstandard.ZstdCompressor(write_content_size=False, write_checksum=True).compress(SAMPLE)
    assert zstandard.get_frame_parameters(streamed).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(Compression.ZSTD, streamed) == SAMPLE


def test_zstd_reads_several_frames_and_skippable_frames() -> None:
    skippable = struct.pack("<II", 0x184D2A53, 3) + b"xyz"
    blob = compress(Compression.ZSTD, b"abc") + skippable + compress(Compression.ZSTD, b"def")
    assert decompress(Compression.ZSTD, blob) == b"abcdef"


def test_zstd_interoperates_with_kafka_python() -> None:
    assert decompress(Compression.ZSTD, kafka_codec.zstd_encode(SAMPLE)) == SAMPLE
    assert kafka_codec.zstd_decode(compress(Compression.ZSTD, SAMPLE)) == SAMPLE


# --- corruption and bombs ---------------------------------------------------------


def _damaged(codec: Compression) -> list[bytes]:
    good = compress(codec, SAMPLE)
    return [
        b"",
        good[: len(good) // 2],
        good[:-3],
        good[:5],
        good + b"trailing junk",
        b"this is not compressed data at all",
    ]


@pytest.mark.parametrize("codec", COMPRESSED)
def test_damaged_input_raises_corrupt_record_error(codec: Compression) -> None:
    for blob in _damaged(codec):
        with pytest.raises(CorruptRecordError):
            decompress(codec, blob)


def test_damaged_raw_snappy_raises_corrupt_record_error() -> None:
    raw = bytes(cramjam.snappy.compress_raw(SAMPLE))
    for blob in (raw[:-3], raw[: len(raw) // 2], b"\xff\xff\xff\xff\x0f"):
        with pytest.raises(CorruptRecordError):
            decompress(Compression.SNAPPY, blob)


@given(codec=st.sampled_from(COMPRESSED), blob=st.binary(max_size=200))
def test_random_bytes_raise_only_protocol_errors(codec: Compression, blob: bytes) -> None:
    try:
        out = decompress(codec, blob, max_size=1 << 20)
    except ProtocolError:
        return
    assert isinstance(out, bytes)


@given(codec=st.sampled_from(COMPRESSED), data=st.binary(min_size=1, max_size=500), cut=st.integers(1, 500))
def test_truncated_output_of_our_compressor_is_refused(codec: Compression, data: bytes, cut: int) -> None:
    compressed = compress(codec, data)
    cut = min(cut, len(compressed))
    try:
        out = decompress(codec, compressed[:-cut])
    except CorruptRecordError:
        return
    # Only a raw-snappy reading of a cut xerial stream could succeed, and not with the data.
    assert out != data


def test_unknown_codec_ids() -> None:
    with pytest.raises(CorruptRecordError, match="unknown compression codec 5"):
        decompress(5, b"x")
    with pytest.raises(ValueError, match="5"):
        compress(5, b"x")


BOMB_SIZE = 8 * 1024 * 1024
BOMB_WRITERS: dict[str, tuple[Compression, Callable[[bytes], bytes]]] = {
    "gzip": (Compression.GZIP, lambda data: compress(Compression.GZIP, data)),
    "snappy-xerial": (Compression.SNAPPY, lambda data: compress(Compression.SNAPPY, data)),
    "snappy-raw": (Compression.SNAPPY, lambda data: bytes(cramjam.snappy.compress_raw(data))),
    "lz4": (Compression.LZ4, lambda data: compress(Compression.LZ4, data)),
    "zstd-sized": (Compression.ZSTD, lambda data: compress(Compression.ZSTD, data)),
    "zstd-stream": (Compression.ZSTD, lambda data: zstandard.ZstdCompressor(write_content_size=False).compress(data)),
}


@pytest.mark.parametrize("writer", BOMB_WRITERS)
def test_output_is_bounded(writer: str) -> None:
    codec, write = BOMB_WRITERS[writer]
    data = bytes(BOMB_SIZE)
    bomb = write(data)
    assert len(bomb) < BOMB_SIZE // 20
    assert decompress(codec, bomb, max_size=BOMB_SIZE) == data
    for limit in (BOMB_SIZE - 1, 1024):
        with pytest.raises(CorruptRecordError, match="exceed the limit"):
            decompress(codec, bomb, max_size=limit)


def test_default_bound_is_generous_but_finite() -> None:
    assert 64 * 1024 * 1024 <= DEFAULT_MAX_DECOMPRESSED_SIZE <= 1024 * 1024 * 1024


# --- missing packages -------------------------------------------------------------


@pytest.mark.parametrize(
    ("codec", "modules", "package"),
    [
        (Compression.SNAPPY, ["cramjam"], "cramjam"),
        (Compression.LZ4, ["lz4", "lz4.frame"], "lz4"),
        (Compression.ZSTD, ["zstandard"], "zstandard"),
    ],
)
def test_missing_package_raises_codec_unavailable(
    monkeypatch: pytest.MonkeyPatch, codec: Compression, modules: list[str], package: str
) -> None:
    blob = compress(codec, SAMPLE)
    for module in modules:
        # None in sys.modules makes the import fail, as if not installed.
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(CodecUnavailableError) as compressing:
        compress(codec, SAMPLE)
    with pytest.raises(CodecUnavailableError) as decompressing:
        decompress(codec, blob)
    for error in (compressing.value, decompressing.value):
        assert error.package == package
        assert f"'{package}'" in str(error)
        assert not isinstance(error, ProtocolError)
    # The other codecs do not care.
    assert decompress(Compression.GZIP, compress(Compression.GZIP, b"still fine")) == b"still fine"
