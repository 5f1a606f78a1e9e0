"""One clean's two ends on the broker's side: what to ask of a worker, and putting its result in
place. Both run on the log's own thread (the broker's event loop) and are quick: the reading,
filtering and writing happen in between, in :func:`.clean.clean`, elsewhere.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from tributary.broker.log.cleaner.clean import CleanRequest, CleanResult
from tributary.broker.log.cleaner.config import CleanerConfig
from tributary.broker.log.cleaner.offset_map import ENTRY_BYTES
from tributary.broker.log.cleaner.plan import Dirt, SegmentInfo, due, measure
from tributary.broker.log.errors import LogError
from tributary.broker.log.log import PartitionLog, SwapRefusedError
from tributary.broker.log.segment import Segment
from tributary.broker.log.swap import discard

log = logging.getLogger(__name__)


def segment_infos(plog: PartitionLog) -> tuple[SegmentInfo, ...]:
    return tuple(
        SegmentInfo(
            s.base_offset,
            s.next_offset,
            s.size,
            s.largest_timestamp(),
            s.first_timestamp(),
            max(len(s.index), len(s.time_index)),
        )
        for s in plog.segments
    )


@dataclass(frozen=True, slots=True)
class Planned:
    request: CleanRequest
    #: The log's segments when the request was made: what the cleaned ones must replace.
    segments: tuple[Segment, ...]
    dirt: Dirt


def dirt_of(plog: PartitionLog, first_dirty: int | None, now_ms: int) -> Dirt:
    return measure(segment_infos(plog), first_dirty, plog.high_watermark, now_ms, plog.config)


def plan_clean(
    plog: PartitionLog,
    first_dirty: int | None,
    now_ms: int,
    cleaner: CleanerConfig,
    *,
    horizon_passed: bool = False,
    force: bool = False,
) -> Planned | None:
    """The request for a clean of ``plog`` if it is due (or ``force``), else None."""
    config = plog.config
    infos = segment_infos(plog)
    dirt = measure(infos, first_dirty, plog.high_watermark, now_ms, config)
    if len(infos) < 2 or not (force or due(dirt, config, horizon_passed)):
        return None
    # Kafka's lastRecordsOfActiveProducers: the last data batch of each active producer, or, for
    # one whose entries are all markers, its epoch (its last marker stays, for fencing).
    producers = {pid: entry.batches[-1].last_offset for pid, entry in plog.producer_state if entry.batches}
    marker_only = {pid: entry.epoch for pid, entry in plog.producer_state if not entry.batches}
    per_thread = cleaner.buffer_per_thread
    request = CleanRequest(
        directory=str(plog.directory),
        segments=infos,
        first_dirty=dirt.first_dirty,
        uncleanable=dirt.uncleanable,
        now_ms=now_ms,
        delete_retention_ms=config.delete_retention_ms,
        segment_bytes=config.segment_bytes,
        segment_index_bytes=config.segment_index_bytes,
        index_interval_bytes=config.index_interval_bytes,
        max_decompressed_bytes=config.max_decompressed_bytes,
        producers_last_offset=producers,
        producers_marker_only=marker_only,
        map_capacity=max(1, int(per_thread * cleaner.io_buffer_load_factor) // ENTRY_BYTES),
        io_bytes_per_second=cleaner.io_max_bytes_per_second / cleaner.threads,
    )
    return Planned(request, plog.segments, dirt)


def install(
    plog: PartitionLog,
    planned: Planned,
    result: CleanResult,
    now_ms: int,
    reached: Callable[[str], None] = lambda _phase: None,
) -> bool:
    """Puts the cleaned segments of ``result`` in place, one swap each; True if all went in.
    When the log changed meanwhile (retention, truncation, a close), the rest are discarded
    and False returned: the first dirty offset must not move then."""
    by_base = {segment.base_offset: segment for segment in planned.segments}
    for i, cleaned in enumerate(result.segments):
        old = [by_base[base] for base in cleaned.replaced]
        try:
            plog.replace_segments(old, cleaned.base_offset, now_ms, reached)
        except (SwapRefusedError, LogError) as exc:
            log.info("%s: cleaned segments not installed: %s", plog.directory, exc)
            for rest in result.segments[i:]:
                discard(plog.directory, rest.base_offset)
            return False
    reached("swapped")
    return True
