from __future__ import annotations

import os
import resource
from pathlib import Path

import pytest

from tributary.broker.log.checkpoint import (
    RECOVERY_POINT_CHECKPOINT,
    format_checkpoint,
    parse_checkpoint,
    read_checkpoint,
    write_checkpoint,
)
from tributary.broker.log.config import LogConfig
from tributary.broker.log.manager import (
    CLEAN_SHUTDOWN_MARKER,
    LogManager,
    TopicPartition,
    default_max_open_logs,
    parse_partition_dir_name,
)
from tributary.broker.log.segment import Segment

from .helpers import NOW, T0, batch, read_all, value_of, values

DAY = 24 * 3600 * 1000


def test_checkpoint_file_is_kafkas_format(tmp_path: Path) -> None:
    offsets = {("b-c.d", 12): 7, ("a", 0): 5}
    assert format_checkpoint(offsets) == b"0\n2\na 0 5\nb-c.d 12 7\n"
    path = tmp_path / RECOVERY_POINT_CHECKPOINT
    write_checkpoint(path, offsets)
    assert read_checkpoint(path) == offsets
    assert not (tmp_path / (RECOVERY_POINT_CHECKPOINT + ".tmp")).exists()
    assert read_checkpoint(tmp_path / "missing") == {}
    assert parse_checkpoint(b"0\n0\n") == {}
    for bad in (b"", b"1\n0\n", b"0\n2\na 0 5\n", b"0\n1\na 0\n", b"0\n1\na x 5\n"):
        with pytest.raises(ValueError):
            parse_checkpoint(bad)


def test_partition_directory_names() -> None:
    assert parse_partition_dir_name("my-topic-12") == TopicPartition("my-topic", 12)
    assert parse_partition_dir_name("__consumer_offsets-0") == TopicPartition("__consumer_offsets", 0)
    for name in ("topic", "topic-", "topic-01", "-3", "bad topic-1", "t-1.tmp"):
        assert parse_partition_dir_name(name) is None


def test_logs_survive_a_clean_restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manager = LogManager(tmp_path, LogConfig(), now_ms=NOW)
    for topic, partition in [("orders", 0), ("orders", 1), ("east.page-views", 7)]:
        log = manager.get_or_create(topic, partition)
        log.append(batch(partition + 1, tag=partition), 0, NOW)
    (tmp_path / "lost+found").mkdir()
    (tmp_path / "meta.properties").write_text("broker.id=1\n")
    manager.close()
    assert (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()
    assert read_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {
        ("orders", 0): 1,
        ("orders", 1): 2,
        ("east.page-views", 7): 8,
    }
    # After a clean shutdown only the active segment is verified, and nothing is cut.
    verify = Segment.recover

    def verify_only(self: Segment, interval: int, flushed_until: int = 0) -> int:
        removed = verify(self, interval, flushed_until)
        assert removed == 0, f"{self} lost {removed} bytes after a clean shutdown"
        return removed

    monkeypatch.setattr(Segment, "recover", verify_only)
    reopened = LogManager(tmp_path, LogConfig(), now_ms=NOW)
    assert not (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()
    assert sorted(reopened.partitions()) == [("east.page-views", 7), ("orders", 0), ("orders", 1)]
    views = reopened.get("east.page-views", 7)
    assert views is not None
    assert values(read_all(views))[-1] == (7, b"00007:007:value")
    reopened.close()


def test_after_a_crash_logs_recover_from_their_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manager = LogManager(tmp_path, LogConfig(segment_bytes=500), now_ms=NOW)
    log = manager.get_or_create("t", 0)
    for i in range(20):
        log.append(batch(2, tag=i), 0, NOW)
    for due in manager.flush_due(NOW):
        due.flush()
    assert manager.checkpoint_recovery_points()
    assert not manager.checkpoint_recovery_points()  # unchanged: not rewritten
    assert log.recovery_point == 40
    log.append(batch(2), 0, NOW)  # rolls: segment 40 holds what the checkpoint does not cover
    bases = [s.base_offset for s in log.segments]
    assert bases[-2:] == [32, 40]
    for segment in log.segments:  # the process dies
        segment.retire()
    recovered: list[int] = []
    original = Segment.recover

    def spy(self: Segment, interval: int, flushed_until: int = 0) -> int:
        recovered.append(self.base_offset)
        return original(self, interval, flushed_until)

    monkeypatch.setattr(Segment, "recover", spy)
    reopened = LogManager(tmp_path, LogConfig(segment_bytes=500), now_ms=NOW)
    assert recovered == [bases[-1]]
    plog = reopened.get("t", 0)
    assert plog is not None and plog.log_end_offset == 42
    reopened.close()


def test_topic_overrides_apply_to_new_and_existing_logs(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(), now_ms=NOW)
    first = manager.get_or_create("t", 0, {"retention.ms": "1000"})
    assert first.config.retention_ms == 1000
    second = manager.get_or_create("t", 1)
    assert second.config.retention_ms == 1000
    manager.get_or_create("t", 0, {"retention.ms": "2000", "segment.bytes": "4096"})
    assert (first.config.retention_ms, second.config.segment_bytes) == (2000, 4096)
    assert manager.get_or_create("other", 0).config == LogConfig()
    with pytest.raises(ValueError):
        manager.get_or_create("bad topic", 0)
    manager.close()
    reopened = LogManager(tmp_path, LogConfig(), topic_configs={"t": {"retention.ms": "5"}}, now_ms=NOW)
    log = reopened.get("t", 1)
    assert log is not None and log.config.retention_ms == 5
    reopened.close()


def test_delete_partition_removes_its_directory(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(), now_ms=NOW)
    manager.get_or_create("t", 0).append(batch(1), 0, NOW)
    assert manager.delete_partition("t", 0)
    assert not manager.delete_partition("t", 0)
    assert not (tmp_path / "t-0").exists()
    assert manager.partitions() == []
    assert manager.all_logs() == {}
    manager.close()
    assert read_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {}


def test_flush_due_and_retention_across_logs(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(flush_messages=3, retention_ms=DAY, segment_ms=DAY // 2), now_ms=NOW)
    busy = manager.get_or_create("busy", 0)
    quiet = manager.get_or_create("quiet", 0)
    busy.append(batch(3), 0, NOW)
    quiet.append(batch(1), 0, NOW)
    assert manager.flush_due(NOW) == [busy]
    for day in range(3):
        quiet.append(batch(1, timestamp=T0 + day * DAY), 0, NOW)
    assert quiet in manager.flush_due(NOW)  # rolled segments are flushed whatever the policy
    assert manager.apply_retention(T0 + 2 * DAY + 10) == 2
    assert quiet.log_start_offset == 3
    assert set(manager.all_logs()) == {("busy", 0), ("quiet", 0)}
    manager.close()


def test_a_damaged_checkpoint_means_full_recovery(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(), now_ms=NOW)
    manager.get_or_create("t", 0).append(batch(1), 0, NOW)
    manager.close()
    os.unlink(tmp_path / CLEAN_SHUTDOWN_MARKER)
    (tmp_path / RECOVERY_POINT_CHECKPOINT).write_bytes(b"garbage\n")
    reopened = LogManager(tmp_path, LogConfig(), now_ms=NOW)
    log = reopened.get("t", 0)
    assert log is not None and log.log_end_offset == 1
    reopened.close()


def test_at_most_max_open_logs_stay_open_and_closed_ones_come_back_whole(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig(), now_ms=NOW, max_open=2)
    offsets = manager.get_or_create("__consumer_offsets", 0)
    offsets.append(batch(1, tag=99), 0, NOW)
    for i in range(4):
        manager.get_or_create("t", i).append(batch(2, tag=i), 0, NOW)
    # Two open (the offsets log, never closed to make room, and the most recent), the rest closed.
    assert set(manager.all_logs()) == {("__consumer_offsets", 0), ("t", 3)}
    assert sorted(manager.partitions()) == [("__consumer_offsets", 0), *(("t", i) for i in range(4))]
    assert manager.recovery_points() == {("__consumer_offsets", 0): 0, **{("t", i): 2 for i in range(3)}, ("t", 3): 0}
    sizes = manager.sizes()
    assert len(sizes) == 5 and sizes[("t", 0)] == sizes[("t", 3)] > 0
    # A closed log opens again as it was, and appends go on from its end.
    again = manager.get_or_create("t", 0)
    assert again.log_end_offset == 2
    assert values(read_all(again)) == [(0, value_of(0, 0)), (1, value_of(0, 1))]
    assert again.append(batch(1, tag=5), 0, NOW).base_offset == 2
    assert ("t", 3) not in manager.all_logs()
    # Deleting a closed log deletes its directory.
    assert manager.delete_partition("t", 1)
    assert not (tmp_path / "t-1").exists()
    manager.close()
    reopened = LogManager(tmp_path, LogConfig(), now_ms=NOW, max_open=2)
    assert sorted(reopened.partitions()) == [("__consumer_offsets", 0), ("t", 0), ("t", 2), ("t", 3)]
    assert reopened.get_or_create("t", 0).log_end_offset == 3
    assert len(reopened.all_logs()) == 2
    reopened.close()


def test_the_default_keeps_room_for_sockets_below_the_descriptor_limit() -> None:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    expected = max(16, (soft - min(1024, soft // 2)) // 3)
    assert default_max_open_logs() == expected
