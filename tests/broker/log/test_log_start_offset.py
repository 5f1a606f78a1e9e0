"""The log start offset DeleteRecords moves (KIP-107): reads, segments, the checkpoint, followers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tributary.broker.log.checkpoint import read_checkpoint
from tributary.broker.log.config import LogConfig
from tributary.broker.log.errors import OffsetOutOfRangeError
from tributary.broker.log.manager import LOG_START_OFFSET_CHECKPOINT, LogManager

from .helpers import NOW, T0, batch, crash, log_files, open_log, read_all, values

# Three records a batch, four batches a segment (segment.bytes fits four of these batches).
BATCH_BYTES = len(batch(3))


def _log_of_three_segments(path: Path) -> tuple[object, list[int]]:
    log = open_log(path, segment_bytes=4 * BATCH_BYTES)
    for i in range(12):
        log.append(batch(3, tag=i, timestamp=T0 + 10 * i), 0, NOW)
    return log, [s.base_offset for s in log.segments]


def test_deleting_records_moves_the_start_into_a_segment_and_drops_the_segments_below(tmp_path: Path) -> None:
    log, bases = _log_of_three_segments(tmp_path / "t-0")
    assert bases == [0, 12, 24]
    assert log.advance_log_start_offset(17) == 17
    assert log.log_start_offset == 17
    assert [s.base_offset for s in log.segments] == [12, 24]  # the one wholly below is gone
    assert log_files(tmp_path / "t-0", ".log") == [f"{12:020d}.log", f"{24:020d}.log"]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(16, 1 << 20)
    # A read at the start returns the batch holding it (offsets 15-17): the client skips what
    # it did not ask for, as with any fetch into a batch.
    assert values(read_all(log))[0][0] == 15
    assert read_all(log, 17)
    # Lower or equal: nothing changes; past the high watermark: refused, nothing changes.
    assert log.advance_log_start_offset(3) == 17
    with pytest.raises(OffsetOutOfRangeError):
        log.advance_log_start_offset(37)
    assert log.log_start_offset == 17
    # Up to the end: every closed segment goes, the active one stays (empty for readers).
    assert log.advance_log_start_offset(36) == 36
    assert [s.base_offset for s in log.segments] == [24]
    with log.read(36, 1 << 20) as result:
        assert result.size == 0
    log.close()


def test_timestamps_and_appends_respect_the_start(tmp_path: Path) -> None:
    log, _ = _log_of_three_segments(tmp_path / "t-0")
    log.advance_log_start_offset(16)
    # The record stamped T0 (offset 0) is gone: the first at or after it is now offset 16.
    assert log.offset_for_timestamp(T0) == (16, T0 + 50 + 1)
    assert log.offset_of_max_timestamp() == (35, T0 + 110 + 2)
    result = log.append(batch(1), 0, NOW)
    assert result.log_start_offset == 16
    log.close()


def test_the_manager_checkpoints_the_start_and_a_restart_keeps_it(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=4 * BATCH_BYTES)
    manager = LogManager(tmp_path, config, now_ms=NOW)
    log = manager.get_or_create("t", 0)
    for i in range(12):
        log.append(batch(3, tag=i), 0, NOW)
    log.advance_log_start_offset(17)
    assert manager.checkpoint_log_start_offsets()
    assert read_checkpoint(tmp_path / LOG_START_OFFSET_CHECKPOINT) == {("t", 0): 17}
    assert not manager.checkpoint_log_start_offsets()  # unchanged: not written again
    # A crash (no clean close): the checkpoint alone says where the log starts.
    for open_log_ in manager.all_logs().values():
        crash(open_log_)
    again = LogManager(tmp_path, config, now_ms=NOW)
    reopened = again.get_or_create("t", 0)
    assert reopened.log_start_offset == 17
    with pytest.raises(OffsetOutOfRangeError):
        reopened.read(16, 1 << 20)
    again.close()
    # A clean close writes it too, and a log closed to make room keeps it while closed.
    third = LogManager(tmp_path, config, now_ms=NOW, max_open=1)
    assert third.get_or_create("t", 0).log_start_offset == 17
    third.get_or_create("u", 0)  # closes t-0
    assert third.log_start_offsets()[("t", 0)] == 17
    assert third.get_or_create("t", 0).log_start_offset == 17
    third.close()


def test_a_follower_takes_the_leaders_start_as_far_as_its_log_reaches(tmp_path: Path) -> None:
    log, _ = _log_of_three_segments(tmp_path / "t-0")
    log.follow_log_start_offset(20)
    assert log.log_start_offset == 20
    log.follow_log_start_offset(5)  # never back
    assert log.log_start_offset == 20
    log.follow_log_start_offset(100)  # the leader deleted more than this replica holds
    assert log.log_start_offset == log.log_end_offset == 36
    log.close()


def test_truncating_below_the_start_empties_the_log_there(tmp_path: Path) -> None:
    log, _ = _log_of_three_segments(tmp_path / "t-0")
    log.advance_log_start_offset(17)
    log.truncate_to(15)
    assert (log.log_start_offset, log.log_end_offset) == (15, 15)
    log.append(batch(2), 0, NOW)
    assert values(read_all(log)) == [(15, b"00000:000:value"), (16, b"00000:001:value")]
    log.close()


def test_max_timestamp_is_the_first_record_with_the_largest_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    assert log.offset_of_max_timestamp() is None
    log.append(batch(3, timestamp=T0 + 100), 0, NOW)  # 100, 101, 102
    log.append(batch(3, timestamp=T0 + 500), 0, NOW)  # 500, 501, 502: the largest is offset 5
    log.append(batch(2, timestamp=T0), 0, NOW)  # older again
    assert log.offset_of_max_timestamp() == (5, T0 + 502)
    log.hw_follows_log_end = False
    log.high_watermark = 3  # not replicated yet: not visible, Kafka's "unknown"
    assert log.offset_of_max_timestamp() is None
    log.close()
