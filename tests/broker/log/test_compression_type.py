"""compression.type: every value Kafka accepts; ``producer`` stores batches untouched, a codec
recompresses batches in another one on append."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import bench_recompression
from tributary.broker.log.config import LogConfig
from tributary.broker.log.errors import RecordTooLargeError
from tributary.broker.topics import topic_config_error
from tributary.protocol.compression import Compression
from tributary.protocol.errors import CorruptRecordError
from tributary.protocol.records import HEADER_SIZE, iter_records, rewrite_crc

from .helpers import NOW, batch, headers, open_log, read_all, values

KAFKA_VALUES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")


def test_every_kafka_value_is_a_valid_topic_config_and_nothing_else() -> None:
    for value in KAFKA_VALUES:
        assert topic_config_error({"compression.type": value}) is None
        assert LogConfig().with_overrides({"compression.type": value}).compression_type == value
    assert "compression.type must be one of" in str(topic_config_error({"compression.type": "brotli"}))
    with pytest.raises(ValueError, match=r"compression\.type"):
        LogConfig(compression_type="ZSTD")


def test_producer_keeps_every_batch_byte_for_byte(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    sent = [batch(50, compression=codec, tag=i) for i, codec in enumerate(Compression)]
    for b in sent:
        log.append(b, 0, NOW)
    stored = read_all(log)
    assert [h.compression for h in headers(stored)] == list(Compression)
    # Only the base offset and the partition leader epoch (outside the CRC) differ from what was sent.
    assert [stored_batch[16:] for stored_batch in _split(stored)] == [b[16:] for b in sent]
    log.close()


@pytest.mark.parametrize("stored", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_a_named_codec_recompresses_on_append(tmp_path: Path, stored: str) -> None:
    log = open_log(tmp_path / "t-0", compression_type=stored)
    target = Compression.NONE if stored == "uncompressed" else Compression[stored.upper()]
    sent = [batch(50, compression=codec, tag=i, producer_id=7, epoch=0, sequence=50 * i) for i, codec in
            enumerate(Compression)]  # fmt: skip
    for b in sent:
        log.append(b, 0, NOW)
    stored_bytes = read_all(log)
    assert [h.compression for h in headers(stored_bytes)] == [target] * len(sent)
    expected = [(50 * i + j, b"%05d:%03d:value" % (i, j)) for i in range(len(sent)) for j in range(50)]
    assert values(stored_bytes) == expected
    # The producer's sequence numbers survive: a retry of the last batch is still recognised.
    assert log.append(sent[-1], 0, NOW).duplicate
    log.close()


def test_a_recompressed_batch_is_held_to_the_size_limit_again(tmp_path: Path) -> None:
    data = batch(200, value=b"a" * 500, compression=Compression.ZSTD)  # small compressed, 100 KB plain
    assert len(data) < 2000
    log = open_log(tmp_path / "t-0", compression_type="uncompressed", max_message_bytes=50_000)
    with pytest.raises(RecordTooLargeError):
        log.append(data, 0, NOW)
    assert log.log_end_offset == 0
    log.close()


def test_header_only_validation_still_refuses_what_does_not_decompress(tmp_path: Path) -> None:
    data = bytearray(batch(20, value=b"b" * 100, compression=Compression.LZ4))
    data[HEADER_SIZE + 8 :] = bytes(len(data) - HEADER_SIZE - 8)
    rewrite_crc(data)
    log = open_log(tmp_path / "t-0", compression_type="zstd", record_validation="header")
    with pytest.raises(CorruptRecordError):
        log.append(bytes(data), 0, NOW)
    log.close()


def test_the_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    bench_recompression.main(["--quick", "--repeat", "2"])
    out = capsys.readouterr().out
    assert "time/producer" in out
    assert out.count("zstd") >= 4


def _split(data: bytes) -> list[bytes]:
    out = []
    pos = 0
    for h in headers(data):
        out.append(data[pos : pos + h.size])
        pos += h.size
    return out


def test_records_read_back_through_any_codec(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", compression_type="snappy")
    log.append(batch(3, compression=Compression.GZIP), 0, NOW)
    assert [r.offset for r in iter_records(read_all(log))] == [0, 1, 2]
    log.close()
