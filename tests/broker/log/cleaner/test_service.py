"""The broker's cleaner service over a LogManager: both isolations clean the same, the first
dirty offset is kept in cleaner-offset-checkpoint across restarts, a truncated log is dirty again
from the truncation, logs that are not compacted are left alone."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from tributary.broker.log.checkpoint import read_checkpoint
from tributary.broker.log.cleaner.config import PROCESS, THREAD, CleanerConfig
from tributary.broker.log.cleaner.service import CLEANER_CHECKPOINT, LogCleaner
from tributary.broker.log.config import LogConfig
from tributary.broker.log.manager import LogManager, TopicPartition

from ..helpers import NOW
from .helpers import keyed, latest, records

COMPACT = {
    "cleanup.policy": "compact",
    "segment.bytes": "600",
    "min.cleanable.dirty.ratio": "0.01",
}


def _fill(manager: LogManager, topic: str, count: int = 300) -> dict[bytes, bytes]:
    plog = manager.get_or_create(topic, 0, COMPACT if topic.startswith("c") else {"segment.bytes": "600"})
    model: dict[bytes, bytes] = {}
    for i in range(0, count, 3):
        pairs = [(b"k%d" % ((i + j) % 9), b"v%d" % (i + j)) for j in range(3)]
        plog.append(keyed(pairs), 0, NOW)
        model.update(pairs)
    return model


@pytest.mark.parametrize("isolation", [PROCESS, THREAD])
async def test_a_due_log_is_cleaned_and_its_checkpoint_kept(tmp_path: Path, isolation: str) -> None:
    manager = LogManager(tmp_path, LogConfig())
    model = _fill(manager, "compacted")
    _fill(manager, "plain")
    cleaner = LogCleaner(manager, CleanerConfig(backoff_ms=50, isolation=isolation, dedupe_buffer_size=4 << 20))
    async with trio.open_nursery() as nursery:
        await nursery.start(cleaner.run)
        with trio.fail_after(30):
            await cleaner.cleaned.wait()
        nursery.cancel_scope.cancel()
    compacted = manager.get("compacted", 0)
    assert compacted is not None
    assert latest(compacted) == model
    assert len(records(compacted)) < 300
    plain = manager.get("plain", 0)
    assert plain is not None and len(records(plain)) == 300  # cleanup.policy=delete: untouched
    first_dirty = cleaner.first_dirty_offset(TopicPartition("compacted", 0))
    assert first_dirty is not None and first_dirty > 0
    assert read_checkpoint(tmp_path / CLEANER_CHECKPOINT) == {("compacted", 0): first_dirty}
    assert cleaner.stats.cleans >= 1 and cleaner.stats.records_kept < cleaner.stats.records_read
    manager.close()
    # A new cleaner (a restart) starts from the checkpoint.
    again = LogCleaner(LogManager(tmp_path, LogConfig()), CleanerConfig())
    assert again.first_dirty_offset(TopicPartition("compacted", 0)) == first_dirty


async def test_a_truncated_log_is_dirty_again_from_the_truncation(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, LogConfig())
    _fill(manager, "compacted")
    cleaner = LogCleaner(manager, CleanerConfig(backoff_ms=50, isolation=THREAD))
    async with trio.open_nursery() as nursery:
        await nursery.start(cleaner.run)
        with trio.fail_after(30):
            await cleaner.cleaned.wait()
        nursery.cancel_scope.cancel()
    tp = TopicPartition("compacted", 0)
    first_dirty = cleaner.first_dirty_offset(tp)
    assert first_dirty is not None
    plog = manager.get("compacted", 0)
    assert plog is not None
    active = plog.segments[-1].base_offset
    plog.truncate_to(active, NOW)  # a follower told to cut its log back
    cleaner._grab(NOW)  # its look at the logs notices the truncation
    assert cleaner.first_dirty_offset(tp) == min(first_dirty, active)
    manager.close()


def test_bad_checkpoint_files_mean_dirty_from_the_start(tmp_path: Path) -> None:
    (tmp_path / CLEANER_CHECKPOINT).write_text("garbage\n")
    cleaner = LogCleaner(LogManager(tmp_path, LogConfig()), CleanerConfig())
    assert cleaner.first_dirty_offset(TopicPartition("x", 0)) is None
