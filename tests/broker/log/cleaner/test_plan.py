"""The cleaner's decisions over numbers: dirty ratio, compaction lags, the high watermark,
grouping, the I/O throttle, the key map's bound."""

from __future__ import annotations

import pytest

from tributary.broker.log.cleaner.offset_map import ENTRY_BYTES, OffsetMap
from tributary.broker.log.cleaner.plan import SegmentInfo, due, group_segments, measure, priority
from tributary.broker.log.cleaner.throttle import Throttle, delay
from tributary.broker.log.config import LogConfig

NOW = 1_000_000
COMPACT = LogConfig(cleanup_policy="compact")


def _segments(*sizes: int, age_ms: int = 10_000, step: int = 100) -> list[SegmentInfo]:
    """Segments of ``step`` offsets each, written ``age_ms`` ago; the last is the active one."""
    return [
        SegmentInfo(i * step, (i + 1) * step, size, NOW - age_ms, NOW - age_ms - 1, size // 100)
        for i, size in enumerate(sizes)
    ]


def test_the_dirty_ratio_counts_closed_segments_from_the_first_dirty_offset() -> None:
    segments = _segments(1000, 1000, 1000, 1000, 50)
    dirt = measure(segments, 200, 10**9, NOW, COMPACT)
    assert (dirt.first_dirty, dirt.uncleanable) == (200, 400)
    assert (dirt.clean_bytes, dirt.dirty_bytes, dirt.ratio) == (2000, 2000, 0.5)
    assert due(dirt, COMPACT)
    assert not due(dirt, LogConfig(cleanup_policy="compact", min_cleanable_dirty_ratio=0.6))
    # A first dirty offset inside a segment makes that segment dirty.
    assert measure(segments, 250, 10**9, NOW, COMPACT).dirty_bytes == 2000
    # None, or one outside the log (the log was truncated or deleted under it): the log start.
    assert measure(segments, None, 10**9, NOW, COMPACT).first_dirty == 0
    assert measure(segments, 10**6, 10**9, NOW, COMPACT).first_dirty == 0


def test_nothing_at_or_beyond_the_high_watermark_or_younger_than_the_min_lag_is_cleanable() -> None:
    segments = _segments(1000, 1000, 1000, 1000, 50)
    assert measure(segments, 0, 250, NOW, COMPACT).uncleanable == 200  # the segment holding 250 is not on every replica
    young = [*_segments(1000, 1000, age_ms=60_000)[:2], *_segments(1000, 1000, 1000, 50)[2:]]
    lagged = LogConfig(cleanup_policy="compact", min_compaction_lag_ms=30_000)
    dirt = measure(young, 0, 10**9, NOW, lagged)
    assert dirt.uncleanable == 200 and dirt.dirty_bytes == 2000


def test_max_compaction_lag_makes_a_log_due_whatever_its_ratio() -> None:
    segments = _segments(1000, 1000, 1000, 1000, 50, age_ms=120_000)
    lazy = LogConfig(cleanup_policy="compact", min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=60_000)
    dirt = measure(segments, 300, 10**9, NOW, lazy)
    assert dirt.ratio == 0.25 and dirt.overdue
    assert due(dirt, lazy)
    patient = LogConfig(cleanup_policy="compact", min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=600_000)
    assert not due(measure(segments, 300, 10**9, NOW, patient), patient)
    assert priority(dirt) > priority(measure(segments, 0, 10**9, NOW, COMPACT))  # overdue first


def test_a_passed_delete_horizon_makes_a_clean_log_due() -> None:
    segments = _segments(1000, 1000, 50)
    dirt = measure(segments, 200, 10**9, NOW, COMPACT)
    assert dirt.dirty_bytes == 0 and not due(dirt, COMPACT)
    assert due(dirt, COMPACT, horizon_passed=True)


def test_groups_fit_a_segment() -> None:
    segments = _segments(400, 300, 300, 900, 100, 100, 100)
    groups = group_segments(segments, max_size=1000, max_index_bytes=10**6)
    assert [[s.base_offset for s in g] for g in groups] == [[0, 100, 200], [300, 400], [500, 600]]
    by_index = group_segments(segments, max_size=10**6, max_index_bytes=12 * 5)
    assert [len(g) for g in by_index] == [1, 1, 1, 1, 3]  # 4, 3, 3, 9 and 1+1+1 entries of at most 5


def test_the_throttle_sleeps_to_fit_the_rate() -> None:
    assert delay(1000, 0.5, 1000.0) == 0.5
    assert delay(1000, 2.0, 1000.0) == 0.0
    assert delay(10**9, 0.0, float("inf")) == 0.0
    clock = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    throttle = Throttle(1000.0, clock=lambda: clock[0], sleep=sleep)
    for _ in range(20):
        clock[0] += 0.05
        throttle(500)
    assert throttle.total_bytes == 10_000
    assert clock[0] == pytest.approx(10.0, abs=0.6)  # 10,000 bytes at 1,000 a second


def test_the_key_map_is_bounded_by_its_memory() -> None:
    offsets = OffsetMap.for_memory(ENTRY_BYTES * 10, load_factor=1.0)
    assert offsets.capacity == 10
    for i in range(10):
        assert offsets.put(b"k%d" % i, i)
    assert offsets.full
    assert not offsets.put(b"new", 11)
    assert offsets.put(b"k3", 12)  # a key it holds is updated
    assert (offsets.get(b"k3"), offsets.get(b"new"), len(offsets)) == (12, -1, 10)
