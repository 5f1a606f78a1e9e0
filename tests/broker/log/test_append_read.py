from __future__ import annotations

import os
import random
import socket
import struct
import sys
from pathlib import Path

import pytest

from tributary.broker.log.config import LogConfig
from tributary.broker.log.errors import InvalidRecordError, LogClosedError, OffsetOutOfRangeError, RecordTooLargeError
from tributary.broker.log.log import PartitionLog
from tributary.protocol.compression import Compression
from tributary.protocol.errors import CorruptRecordError, UnsupportedMagicError
from tributary.protocol.records import (
    LOG_APPEND_TIME,
    build_batch,
    iter_records,
    rewrite_crc,
    set_base_offset,
    set_partition_leader_epoch,
    validate_batch,
)

from .helpers import NOW, T0, batch, headers, log_files, open_log, read_all, value_of, values


@pytest.mark.parametrize("codec", list(Compression))
def test_batches_are_stored_as_received_but_for_offset_and_epoch(tmp_path: Path, codec: Compression) -> None:
    log = open_log(tmp_path / "t-0")
    sent = [batch(3, compression=codec, tag=i) for i in range(3)]
    results = [log.append(b, leader_epoch=7, now_ms=NOW) for b in sent]
    assert [(r.base_offset, r.last_offset, r.record_count) for r in results] == [(0, 2, 3), (3, 5, 3), (6, 8, 3)]
    expected = bytearray()
    for i, b in enumerate(sent):
        copy = bytearray(b)
        set_base_offset(copy, 0, 3 * i)
        set_partition_leader_epoch(copy, 0, 7)
        expected += copy
    stored = read_all(log)
    assert stored == expected
    assert values(stored) == [(3 * i + j, value_of(i, j)) for i in range(3) for j in range(3)]
    assert all(h.partition_leader_epoch == 7 for h in headers(stored))
    log.close()


def test_offsets_run_on_across_appends_and_rolls(tmp_path: Path) -> None:
    rng = random.Random(1)
    log = open_log(tmp_path / "t-0", segment_bytes=1024, index_interval_bytes=128)
    expected_base = 0
    for i in range(300):
        count = rng.randint(1, 5)
        result = log.append(batch(count, tag=i), 0, NOW)
        assert (result.base_offset, result.last_offset) == (expected_base, expected_base + count - 1)
        expected_base += count
    assert log.log_end_offset == expected_base
    assert len(log.segments) > 10
    for segment, following in zip(log.segments, log.segments[1:], strict=False):
        assert segment.next_offset == following.base_offset
        assert segment.size <= 1024
    assert log_files(tmp_path / "t-0", ".log") == [f"{s.base_offset:020d}.log" for s in log.segments]
    stored = read_all(log)
    assert [v for _, v in values(stored)] == [
        value_of(i, j) for i, count in enumerate(_replay_counts(300, 1)) for j in range(count)
    ]
    assert [off for off, _ in values(stored)] == list(range(expected_base))
    log.close()


def _replay_counts(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randint(1, 5) for _ in range(n)]


def test_a_read_starts_at_the_batch_containing_the_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(batch(10, tag=0), 0, NOW)
    log.append(batch(10, tag=1), 0, NOW)
    for offset, first in [(0, 0), (5, 0), (9, 0), (10, 10), (17, 10)]:
        with log.read(offset, 1 << 20) as result:
            assert headers(result.read_bytes())[0].base_offset == first
            assert result.next_offset == 20
    log.close()


def test_max_bytes_returns_whole_batches_and_at_least_one(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=10 * len(batch(2)))
    size = len(batch(2))
    for i in range(25):
        log.append(batch(2, tag=i), 0, NOW)
    with log.read(0, int(2.5 * size)) as result:
        assert result.size == 2 * size
        assert result.next_offset == 4
    with log.read(0, size - 1) as result:
        assert result.size == size  # the first batch regardless
    with log.read(0, size - 1, min_one_batch=False) as result:
        assert result.size == 0
        assert result.regions == ()
    with log.read(0, 0) as result:
        assert result.size == size
    # Across segment boundaries: one region per segment, all whole batches.
    with log.read(14, 15 * size) as result:
        assert [r.size for r in result.regions] == [3 * size, 10 * size, 2 * size]
        assert [h.base_offset for h in headers(result.read_bytes())] == list(range(14, 44, 2))
        assert result.next_offset == 44
    log.close()


def test_reads_stop_before_max_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for i in range(10):
        log.append(batch(3, tag=i), 0, NOW)
    with log.read(0, 1 << 20, max_offset=9) as result:
        assert [h.base_offset for h in headers(result.read_bytes())] == [0, 3, 6]
    with log.read(0, 1 << 20, max_offset=10) as result:  # 10 lies inside the batch 9-11
        assert [h.base_offset for h in headers(result.read_bytes())] == [0, 3, 6]
    with log.read(4, 1 << 20, max_offset=5) as result:  # the containing batch reaches past it
        assert result.size == 0
    with log.read(30, 1 << 20) as result:
        assert result.size == 0
        assert result.next_offset == 30
    log.close()


def test_offsets_outside_the_log_are_out_of_range(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(batch(3), 0, NOW)
    for offset in (-1, 4, 100):
        with pytest.raises(OffsetOutOfRangeError) as info:
            log.read(offset, 100)
        assert (info.value.log_start_offset, info.value.log_end_offset) == (0, 3)
    log.close()


def test_index_lookups_at_scale_find_exactly_the_containing_batch(tmp_path: Path) -> None:
    rng = random.Random(7)
    templates = [batch(n, value=b"x" * rng.randint(0, 40)) for n in (1, 2, 3, 4)]
    log = open_log(tmp_path / "t-0", segment_bytes=512 * 1024, index_interval_bytes=4096)
    bases: list[int] = []
    while len(bases) < 50_000:
        chosen = [templates[rng.randrange(4)] for _ in range(100)]
        result = log.append(b"".join(chosen), 0, NOW)
        offset = result.base_offset
        for b in chosen:
            bases.append(offset)
            offset += headers(b)[0].record_count
    end = log.log_end_offset
    assert len(log.segments) > 3

    def check(plog: PartitionLog) -> None:
        for offset in rng.sample(range(end), 1500):
            with plog.read(offset, 1) as result:
                (header,) = headers(result.read_bytes())
            i = _bisect_bases(bases, offset)
            assert header.base_offset == bases[i] <= offset <= header.last_offset

    check(log)
    log.close()
    reopened = open_log(tmp_path / "t-0", clean=True, segment_bytes=512 * 1024)
    assert not any(s.index.loaded for s in reopened.segments[:-1])  # sealed: lookups read the files
    check(reopened)
    reopened.close()


def _bisect_bases(bases: list[int], offset: int) -> int:
    lo, hi = 0, len(bases)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if bases[mid] <= offset:
            lo = mid
        else:
            hi = mid
    return lo


def test_regions_serve_sendfile(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=300)
    for i in range(10):
        log.append(batch(2, tag=i), 0, NOW)
    left, right = socket.socketpair()
    with left, right, log.read(0, 1 << 20) as result:
        assert len(result.regions) > 1
        for region in result.regions:
            sent = 0
            while sent < region.size:
                sent += os.sendfile(left.fileno(), region.fd, region.position + sent, region.size - sent)
        received = b""
        while len(received) < result.size:
            received += right.recv(1 << 16)
        assert received == result.read_bytes() == read_all(log)
    log.close()


def _corrupt_crc(b: bytes) -> bytes:
    copy = bytearray(b)
    copy[-1] ^= 0xFF
    return bytes(copy)


def _with_length(b: bytes, length: int) -> bytes:
    return b[:8] + struct.pack(">i", length) + b[12:]


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (_corrupt_crc(batch(2, tag=9)), CorruptRecordError),
        (batch(2)[:-3], CorruptRecordError),
        (_with_length(batch(2), 10), CorruptRecordError),
        (_with_length(batch(2), 1 << 30), CorruptRecordError),
        (bytes(16) + b"\x01" + bytes(60), UnsupportedMagicError),
    ],
)
def test_one_bad_batch_fails_the_whole_append(tmp_path: Path, bad: bytes, error: type[Exception]) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(batch(1), 0, NOW)
    size = os.path.getsize(tmp_path / "t-0" / f"{0:020d}.log")
    with pytest.raises(error):
        log.append(batch(2, tag=1) + bad + batch(2, tag=2), 0, NOW)
    assert log.log_end_offset == 1
    assert os.path.getsize(tmp_path / "t-0" / f"{0:020d}.log") == size
    log.close()


def test_refusals_of_well_formed_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", max_message_bytes=200)
    with pytest.raises(RecordTooLargeError) as too_large:
        log.append(batch(1) + batch(1, value=b"x" * 300), 0, NOW)
    assert too_large.value.error_code == 10
    with pytest.raises(InvalidRecordError):
        log.append(b"", 0, NOW)
    gap = bytearray(batch(2))
    struct.pack_into(">i", gap, 23, 5)  # lastOffsetDelta 5 for 2 records: a compacted batch
    rewrite_crc(gap)
    with pytest.raises(InvalidRecordError):
        log.append(bytes(gap), 0, NOW)
    control = bytearray(batch(1))
    struct.pack_into(">h", control, 21, 0x20)
    rewrite_crc(control)
    with pytest.raises(InvalidRecordError):
        log.append(bytes(control), 0, NOW)
    with pytest.raises(InvalidRecordError):
        log.append(batch(1, producer_id=5, epoch=0, sequence=-1), 0, NOW)
    assert log.log_end_offset == 0
    assert log.size_in_bytes == 0
    log.close()


def test_log_append_time_stamps_batches_inside_a_valid_crc(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", message_timestamp_type="LogAppendTime")
    result = log.append(batch(3, compression=Compression.ZSTD), 0, NOW + 5)
    assert result.log_append_time == NOW + 5
    stored = read_all(log)
    header = validate_batch(stored)
    assert header.timestamp_type == LOG_APPEND_TIME
    assert header.max_timestamp == NOW + 5
    assert {r.timestamp for r in iter_records(stored)} == {NOW + 5}
    assert log.offset_for_timestamp(NOW) == (0, NOW + 5)
    log.close()


def test_offset_for_timestamp_finds_the_first_record_of_the_first_batch_reaching_it(tmp_path: Path) -> None:
    """Kafka's answer: the time index finds the first batch whose maximum timestamp reaches the
    time, and the answer is that batch's first record stamped at or after it."""
    rng = random.Random(3)
    log = open_log(tmp_path / "t-0", segment_bytes=2000, index_interval_bytes=200)
    batches: list[tuple[int, list[tuple[int, int]]]] = []  # (max timestamp, [(offset, timestamp)])
    timestamp = T0
    for i in range(400):
        # Mostly rising, sometimes back in time, as producers' clocks go.
        timestamp += rng.choice([0, 5, 10, 50, -30])
        compression = rng.choice([Compression.NONE, Compression.ZSTD])
        result = log.append(batch(rng.randint(1, 3), timestamp=timestamp, tag=i, compression=compression), 0, NOW)
        stored = read_all(log, result.base_offset)
        batches.append((validate_batch(stored).max_timestamp, [(r.offset, r.timestamp) for r in iter_records(stored)]))

    def expected(ts: int) -> tuple[int, int] | None:
        records = next((records for top, records in batches if top >= ts), None)
        return None if records is None else next((o, t) for o, t in records if t >= ts)

    probes = [T0 - 100, T0, *(rng.randint(T0, timestamp + 10) for _ in range(300)), timestamp + 50]
    for ts in probes:
        assert log.offset_for_timestamp(ts) == expected(ts), ts
    log.close()
    reopened = open_log(tmp_path / "t-0", clean=True)
    for ts in probes:
        assert reopened.offset_for_timestamp(ts) == expected(ts), ts
    reopened.close()


def test_segments_roll_on_record_time(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_ms=1000)
    log.append(batch(1, timestamp=T0), 0, NOW)
    log.append(batch(1, timestamp=T0 + 1000), 0, NOW)
    assert len(log.segments) == 1
    log.append(batch(1, timestamp=T0 + 1001), 0, NOW)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_segments_without_timestamps_roll_on_broker_time(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_ms=1000)
    no_time = build_batch([(None, b"v", (), -1)])
    log.append(no_time, 0, NOW)
    log.append(no_time, 0, NOW + 1000)
    assert len(log.segments) == 1
    log.append(no_time, 0, NOW + 1001)
    assert len(log.segments) == 2
    log.close()


def test_closed_log_refuses_work(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.close()
    log.close()
    with pytest.raises(LogClosedError):
        log.append(batch(1), 0, NOW)
    with pytest.raises(LogClosedError):
        log.read(0, 1)
    log.flush()  # a no-op, as a flush racing a topic deletion needs


def test_config_defaults_and_overrides() -> None:
    config = LogConfig()
    assert (config.segment_bytes, config.index_interval_bytes, config.max_message_bytes) == (1 << 30, 4096, 1048588)
    assert config.retention_ms == 7 * 24 * 3600 * 1000
    assert config.retention_bytes == -1
    assert config.flush_messages == config.flush_ms == sys.maxsize
    changed = config.with_overrides({"retention.ms": "1000", "cleanup.policy": "compact", "min.insync.replicas": "2"})
    assert changed.retention_ms == 1000
    assert not changed.deletes_old_segments
    assert changed.to_kafka()["retention.ms"] == "1000"
    with pytest.raises(ValueError, match=r"segment\.bytes"):
        config.with_overrides({"segment.bytes": "3"})
    with pytest.raises(ValueError, match=r"retention\.ms"):
        config.with_overrides({"retention.ms": "soon"})
    with pytest.raises(ValueError, match=r"message\.timestamp\.type"):
        LogConfig(message_timestamp_type="Now")
