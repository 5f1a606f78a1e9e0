from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tributary.broker.log.errors import OffsetOutOfRangeError
from tributary.protocol.compression import Compression

from .helpers import NOW, T0, batch, crash, headers, log_files, open_log, read_all, values

DAY = 24 * 3600 * 1000


def _three_days(path: Path, **config: object) -> list[int]:
    """One segment per day (segment.ms is half a day); returns the bases."""
    log = open_log(path, segment_ms=DAY // 2, **config)  # type: ignore[arg-type]
    for day in range(3):
        for i in range(5):
            log.append(batch(2, timestamp=T0 + day * DAY + 1 + i, tag=day * 10 + i), 0, NOW)
    bases = [s.base_offset for s in log.segments]
    log.close()
    return bases


def test_retention_by_time_deletes_old_segments_but_never_the_active_one(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    assert _three_days(path) == [0, 10, 20]
    log = open_log(path, clean=True, retention_ms=DAY)
    assert log.delete_old_segments(T0 + DAY) == 0  # nothing older than a day yet
    assert log.delete_old_segments(T0 + DAY + 10) == 1
    assert log.log_start_offset == 10
    assert log_files(path, ".log") == [f"{10:020d}.log", f"{20:020d}.log"]
    assert log_files(path, ".index") == [f"{10:020d}.index", f"{20:020d}.index"]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(9, 100)
    assert log.delete_old_segments(T0 + 100 * DAY) == 1
    assert [s.base_offset for s in log.segments] == [20]  # the active one stays, however old
    assert log.delete_old_segments(T0 + 100 * DAY) == 0
    assert values(read_all(log))[0] == (20, b"00020:000:value")
    log.close()


def test_retention_by_size_keeps_at_least_retention_bytes(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    _three_days(path)
    log = open_log(path, clean=True, retention_ms=-1)
    sizes = [s.size for s in log.segments]
    log.config = log.config.with_overrides({"retention.bytes": sizes[1] + sizes[2] + 1})
    assert log.delete_old_segments(NOW) == 0  # deleting the first would leave less than that
    log.config = log.config.with_overrides({"retention.bytes": sizes[2]})
    assert log.delete_old_segments(NOW) == 2
    assert log.log_start_offset == 20
    log.config = log.config.with_overrides({"retention.bytes": 0})
    assert log.delete_old_segments(NOW) == 0
    log.close()


def test_compacted_topics_are_not_deleted(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    _three_days(path)
    log = open_log(path, clean=True, retention_ms=1, retention_bytes=0, cleanup_policy="compact")
    assert log.delete_old_segments(T0 + 100 * DAY) == 0
    log.close()


def test_a_pinned_read_survives_deletion_of_its_segment(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    _three_days(path)
    log = open_log(path, clean=True, retention_ms=DAY)
    first = log.segments[0]
    expected = read_all(log)[: first.size]
    result = log.read(0, first.size)
    assert result.regions[0].fd == first.fd
    assert log.delete_old_segments(T0 + 100 * DAY) == 2
    assert not os.path.exists(path / f"{0:020d}.log")
    assert not first.closed
    assert result.read_bytes() == expected
    assert os.pread(result.regions[0].fd, first.size, 0) == expected
    result.close()
    assert first.closed
    result.close()  # idempotent
    with pytest.raises(ValueError, match="after close"):
        result.read_bytes()
    log.close()


def test_retention_forgets_producers_whose_batches_are_gone(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_ms=DAY, retention_ms=DAY)
    log.append(batch(1, timestamp=T0, producer_id=1, epoch=0, sequence=0), 0, NOW)
    log.append(batch(1, timestamp=T0 + 2 * DAY, producer_id=2, epoch=0, sequence=0), 0, NOW)
    assert len(log.producer_state) == 2
    assert log.delete_old_segments(T0 + 2 * DAY) == 1
    assert log.producer_state.get(1) is None
    assert log.producer_state.get(2) is not None
    log.close()


def test_flush_after_flush_messages(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", flush_messages=10)
    log.append(batch(9), 0, NOW)
    assert not log.needs_flush(NOW)
    log.append(batch(1), 0, NOW)
    assert log.needs_flush(NOW)
    assert log.recovery_point == 0
    log.flush()
    assert not log.needs_flush(NOW)
    assert log.recovery_point == 10
    log.close()


def test_flush_after_flush_ms(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", flush_ms=1000)
    assert not log.needs_flush(NOW + 10**6)  # nothing to flush
    log.append(batch(1), 0, NOW)
    log.append(batch(1), 0, NOW + 500)
    assert not log.needs_flush(NOW + 999)
    assert log.needs_flush(NOW + 1000)
    log.flush()
    assert not log.needs_flush(NOW + 5000)
    log.close()


def test_by_default_only_rolls_are_flushed(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=500)
    for i in range(20):
        log.append(batch(2, tag=i), 0, NOW)
        assert not log.needs_flush(NOW + 10**9)
    assert log.rolled_unflushed
    log.flush()
    assert not log.rolled_unflushed
    assert log.recovery_point == log.log_end_offset
    assert not any(s.dirty for s in log.segments)
    log.close()


def test_flushes_in_threads_race_appends_retention_and_reads(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=2000, retention_bytes=6000, retention_ms=-1)
    stop = threading.Event()
    errors: list[BaseException] = []

    def flusher() -> None:
        try:
            while not stop.is_set():
                log.flush()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=flusher) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for i in range(400):
            log.append(batch(3, tag=i, compression=Compression.ZSTD), 0, NOW)
            log.delete_old_segments(NOW)
            with log.read(log.log_start_offset, 3000) as result:
                assert headers(result.read_bytes())[0].base_offset == log.log_start_offset
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors
    log.flush()
    assert log.recovery_point == log.log_end_offset == 1200
    log.close()


def test_truncate_to_a_batch_boundary(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=600)
    for i in range(30):
        log.append(batch(2, tag=i), 0, NOW)
    log.flush()
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 4
    everything = read_all(log)
    cut = bases[2] + 4
    with pytest.raises(ValueError, match="boundary"):
        log.truncate_to(cut + 1)
    assert log.log_end_offset == 60
    log.truncate_to(cut, now_ms=NOW)
    assert log.log_end_offset == cut
    assert [s.base_offset for s in log.segments] == bases[:3]
    assert log.recovery_point == cut
    assert read_all(log) == everything[: len(read_all(log))]
    assert log.append(batch(2, tag=99), 0, NOW).base_offset == cut
    assert values(read_all(log, cut)) == [(cut, b"00099:000:value"), (cut + 1, b"00099:001:value")]
    log.truncate_to(bases[2])  # a segment's base: that segment goes entirely
    assert [s.base_offset for s in log.segments] == bases[:2]
    assert log.log_end_offset == bases[2]
    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset, log.size_in_bytes) == (0, 0, 0)
    log.append(batch(1), 0, NOW)
    log.close()
    reopened = open_log(path)
    assert reopened.log_end_offset == 1
    reopened.close()


def test_truncation_forgets_producer_batches_past_the_cut(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(batch(1, producer_id=3, epoch=0, sequence=0), 0, NOW)
    log.append(batch(1, producer_id=3, epoch=0, sequence=1), 0, NOW)
    log.truncate_to(1)
    # Sequence 1 is no longer in the log: the retry is appended, not answered as a duplicate.
    result = log.append(batch(1, producer_id=3, epoch=0, sequence=1), 0, NOW)
    assert (result.base_offset, result.duplicate) == (1, False)
    log.close()


def test_delete_removes_the_directory_but_not_pinned_bytes(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    log.append(batch(2), 0, NOW)
    expected = read_all(log)
    with log.read(0, 100) as result:
        log.delete()
        assert not path.exists()
        assert result.read_bytes() == expected
    log.flush()  # a flush racing the deletion does nothing


def test_a_crash_loses_nothing_flushed(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, flush_messages=1)
    for i in range(5):
        log.append(batch(1, tag=i), 0, NOW)
        log.flush()
    point = log.recovery_point
    crash(log)
    reopened = open_log(path, point)
    assert reopened.log_end_offset == 5
    assert reopened.recovery_point == 5
    reopened.close()
