"""Which log to clean, how far, and in which groups of segments: decisions over numbers, sans-IO.

Kafka's ``LogCleanerManager`` and ``Cleaner.groupSegmentsBySize``:

- A log's *clean* part runs from its start to the first dirty offset (the
  ``cleaner-offset-checkpoint``, or the log start if it has none); the *dirty* part from there to
  the first uncleanable offset: the active segment, the first segment holding a record younger
  than ``min.compaction.lag.ms``, and anything at or beyond the high watermark (a record not yet
  on every in-sync replica may still be truncated away) are never cleaned.
- The dirty ratio is the dirty part's bytes over the whole cleanable log's; a log is due when it
  reaches ``min.cleanable.dirty.ratio``, or whatever its ratio when its oldest dirty record is
  older than ``max.compaction.lag.ms``, or when a delete horizon it stamped has passed (its
  tombstones and markers may go now). Due logs are cleaned filthiest first, the overdue ones
  before the others.
- The segments of a clean are rewritten in groups: consecutive segments whose sizes add up to no
  more than ``segment.bytes``, whose index entries fit ``segment.index.bytes``, and whose
  offsets fit a segment's int32 relative offsets; each group becomes one segment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tributary.broker.log.config import LogConfig

INT32_MAX = 2**31 - 1
#: A segment of an index entry per this many bytes at most holds this many entries: an offset
#: index entry is 8 bytes, a time index entry 12 (Kafka groups by the larger).
_TIME_INDEX_ENTRY = 12


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    base_offset: int
    next_offset: int
    size: int
    #: The largest batch timestamp (or the file's mtime without any), as retention uses it.
    largest_timestamp: int
    #: The first batch's maximum timestamp, -1 for none.
    first_timestamp: int
    #: Entries in the offset index and time index (for grouping).
    index_entries: int = 0


@dataclass(frozen=True, slots=True)
class Dirt:
    """A log's cleanable extent as the plan sees it."""

    first_dirty: int
    #: Nothing from here on may be cleaned (a segment base, or the log's end).
    uncleanable: int
    clean_bytes: int
    dirty_bytes: int
    #: ``max.compaction.lag.ms`` has passed for the oldest dirty record.
    overdue: bool

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def measure(
    segments: Sequence[SegmentInfo], first_dirty: int | None, high_watermark: int, now_ms: int, config: LogConfig
) -> Dirt:
    """``segments`` are the log's, the active one last."""
    log_start = segments[0].base_offset
    log_end = segments[-1].next_offset
    dirty_from = log_start if first_dirty is None or not log_start <= first_dirty <= log_end else first_dirty
    closed = segments[:-1]
    uncleanable = segments[-1].base_offset
    for segment in closed:
        if segment.next_offset <= dirty_from:
            continue  # wholly clean
        if segment.next_offset > high_watermark or segment.largest_timestamp > now_ms - config.min_compaction_lag_ms:
            uncleanable = segment.base_offset
            break
    clean_bytes = dirty_bytes = 0
    oldest: int | None = None
    for segment in closed:
        if segment.base_offset >= uncleanable:
            break
        if segment.next_offset <= dirty_from:
            clean_bytes += segment.size
        else:
            dirty_bytes += segment.size
            if segment.first_timestamp >= 0 and (oldest is None or segment.first_timestamp < oldest):
                oldest = segment.first_timestamp
    overdue = dirty_bytes > 0 and oldest is not None and now_ms - oldest > config.max_compaction_lag_ms
    return Dirt(dirty_from, max(uncleanable, dirty_from), clean_bytes, dirty_bytes, overdue)


def due(dirt: Dirt, config: LogConfig, horizon_passed: bool = False) -> bool:
    if dirt.dirty_bytes and (dirt.overdue or dirt.ratio >= config.min_cleanable_dirty_ratio):
        return True
    return horizon_passed and dirt.clean_bytes > 0


def priority(dirt: Dirt) -> tuple[bool, float]:
    """Larger first: overdue logs, then the filthiest."""
    return dirt.overdue, dirt.ratio


def group_segments(segments: Sequence[SegmentInfo], max_size: int, max_index_bytes: int) -> list[list[SegmentInfo]]:
    """Consecutive segments grouped so that each group fits one segment (see the module doc)."""
    groups: list[list[SegmentInfo]] = []
    rest = list(segments)
    while rest:
        group = [rest.pop(0)]
        size, entries = group[0].size, group[0].index_entries
        while (
            rest
            and size + rest[0].size <= max_size
            and (entries + rest[0].index_entries) * _TIME_INDEX_ENTRY <= max_index_bytes
            and rest[0].next_offset - 1 - group[0].base_offset <= INT32_MAX
        ):
            segment = rest.pop(0)
            group.append(segment)
            size += segment.size
            entries += segment.index_entries
        groups.append(group)
    return groups
