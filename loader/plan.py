"""The plan of a run (made on the driver, persisted before anything is read).

A plan freezes, for every partition the run loads, the range ``[start, end)``
between the last committed offset and the log end seen at planning time, and
splits large ranges into sub-ranges so one hot partition does not serialize
the job. It is a pure function of the committed offsets and the brokers'
offset bounds, so it can be checked without a cluster; the driver fetches
those bounds with :func:`list_bounds`.

Gap check: a committed offset below the earliest offset the log still holds
means retention deleted records that were never loaded. That fails the run,
naming the lost ranges, unless gaps are allowed; then they are recorded.
"""

from __future__ import annotations

import itertools
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tributary.client.blocking import BlockingFetcher
from tributary.client.errors import KafkaError
from tributary.client.raw.batches import READ_COMMITTED
from tributary.loader.errors import LoadError

#: topic -> partition -> offset
Offsets = dict[str, dict[int, int]]
#: topic -> partition -> (earliest, latest)
Bounds = dict[str, dict[int, tuple[int, int]]]


@dataclass(frozen=True, slots=True, order=True)
class Range:
    """Offsets ``[start, end)`` of one partition, read by one Spark task."""

    topic: str
    partition: int
    start: int
    end: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition} [{self.start}, {self.end})"


@dataclass(frozen=True, slots=True, order=True)
class Gap:
    """Offsets ``[start, end)`` of a partition that were deleted before they were loaded."""

    topic: str
    partition: int
    start: int
    end: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition} offsets [{self.start}, {self.end})"


@dataclass(frozen=True, slots=True)
class Plan:
    run: str
    previous: str | None
    topics: str
    created: float
    #: The committed offsets once this run commits: the frozen end of every
    #: loaded partition, and the previous commit's offsets of all others.
    end_offsets: Offsets
    ranges: tuple[Range, ...]
    gaps: tuple[Gap, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "previous": self.previous,
            "topics": self.topics,
            "created": self.created,
            "end_offsets": offsets_to_json(self.end_offsets),
            "ranges": [[r.topic, r.partition, r.start, r.end] for r in self.ranges],
            "gaps": [[g.topic, g.partition, g.start, g.end] for g in self.gaps],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Plan:
        return cls(
            run=str(data["run"]),
            previous=data["previous"],
            topics=str(data["topics"]),
            created=float(data["created"]),
            end_offsets=offsets_from_json(data["end_offsets"]),
            ranges=tuple(Range(str(t), int(p), int(s), int(e)) for t, p, s, e in data["ranges"]),
            gaps=tuple(Gap(str(t), int(p), int(s), int(e)) for t, p, s, e in data["gaps"]),
        )


def offsets_to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    return {t: {str(p): o for p, o in sorted(parts.items())} for t, parts in sorted(offsets.items())}


def offsets_from_json(data: Mapping[str, Mapping[str, Any]]) -> Offsets:
    return {str(t): {int(p): int(o) for p, o in parts.items()} for t, parts in data.items()}


def split_range(topic: str, partition: int, start: int, end: int, max_records: int) -> list[Range]:
    """``[start, end)`` in near-equal sub-ranges of at most ``max_records`` offsets."""
    count = max(1, math.ceil((end - start) / max_records))
    bounds = [start + (end - start) * i // count for i in range(count + 1)]
    return [Range(topic, partition, lo, hi) for lo, hi in itertools.pairwise(bounds) if lo < hi]


def make_plan(
    *,
    run: str,
    previous: str | None,
    topics: str,
    committed: Offsets,
    bounds: Bounds,
    allow_gaps: bool,
    max_records_per_range: Mapping[str, int],
    now: float | None = None,
) -> Plan:
    """Freeze the ranges of a run.

    A partition without a committed offset starts at its earliest offset on the
    first run ever (``committed`` empty); later, a new partition or topic is
    expected to start at 0, so a topic created and trimmed between two runs is
    a gap too."""
    first_run = previous is None
    end_offsets: Offsets = {t: dict(parts) for t, parts in committed.items()}
    ranges: list[Range] = []
    gaps: list[Gap] = []
    for topic, partitions in sorted(bounds.items()):
        for partition, (earliest, latest) in sorted(partitions.items()):
            done = committed.get(topic, {}).get(partition)
            if done is None:
                done = earliest if first_run else 0
            if done > latest:
                raise LoadError(
                    f"{topic}-{partition}: the committed offset {done} is past the log end {latest}; "
                    "was the topic deleted and re-created? Move its offsets out of the state directory to reload it"
                )
            start = done
            if done < earliest:
                gaps.append(Gap(topic, partition, done, earliest))
                start = earliest
            end_offsets.setdefault(topic, {})[partition] = latest
            if start < latest:
                ranges.extend(split_range(topic, partition, start, latest, max_records_per_range[topic]))
    if gaps and not allow_gaps:
        lost = sum(g.end - g.start for g in gaps)
        raise LoadError(
            f"retention deleted {lost} records that were never loaded: "
            + ", ".join(str(g) for g in gaps)
            + " (rerun with --allow-gaps to load the rest and record the gap)"
        )
    # Largest first: the longest tasks start first and the job ends sooner.
    ranges.sort(key=lambda r: (r.start - r.end, r))
    return Plan(
        run=run,
        previous=previous,
        topics=topics,
        created=time.time() if now is None else now,
        end_offsets=end_offsets,
        ranges=tuple(ranges),
        gaps=tuple(gaps),
    )


def matching_topics(fetcher: BlockingFetcher, pattern: re.Pattern[str]) -> list[str]:
    """The cluster's non-internal topics that the pattern matches in full. Names starting
    with ``__`` are internal by convention too (the mirror's ``__tributary_mirror_offsets``)."""
    metadata = fetcher.refresh_metadata()
    topics = sorted(n for n, info in metadata.topics.items() if not info.is_internal and not n.startswith("__"))
    matched = [t for t in topics if pattern.fullmatch(t)]
    if not matched:
        known = ", ".join(topics) if topics else "none"
        raise LoadError(f"no topic matches --topics {pattern.pattern!r} (the cluster's topics: {known})")
    return matched


def list_bounds(fetcher: BlockingFetcher, topics: list[str]) -> Bounds:
    """Earliest and latest offsets of every partition of ``topics``. Latest is the last stable
    offset: a run never plans past a transaction not yet decided (the loader reads committed
    data only, so a range ending inside an open transaction could never be read whole)."""
    try:
        return {topic: fetcher.offset_bounds(topic, isolation_level=READ_COMMITTED) for topic in topics}
    except KafkaError as exc:
        raise LoadError(f"cannot list the offsets of the aggregate's partitions: {exc}") from None


#: Records of one fetch from the start of a pending range serve to estimate
#: the bytes a record takes, to size files toward the target.
SAMPLE_FETCH_BYTES = 256 * 1024


def records_per_range(
    fetcher: BlockingFetcher,
    pending: Mapping[str, Mapping[int, tuple[int, int]]],
    *,
    max_records: int,
    target_bytes: int,
) -> dict[str, int]:
    """Per topic, how many offsets one range (one task, about one file) should span:
    ``target_bytes`` over the bytes per record of a sample batch, at most ``max_records``."""
    caps: dict[str, int] = {}
    for topic, partitions in pending.items():
        sample_bytes = sample_records = 0
        for partition, (start, end) in partitions.items():
            if start >= end:
                continue
            try:
                fetched = fetcher.fetch(topic, partition, start, max_bytes=SAMPLE_FETCH_BYTES)
            except KafkaError:
                continue  # only an estimate: the read itself will name the problem
            for _, header in fetched.batches:
                sample_bytes += header.size
                sample_records += header.record_count
            break
        per_record = sample_bytes / sample_records if sample_records else 1.0
        caps[topic] = max(1, min(max_records, int(target_bytes / max(per_record, 1.0))))
    return caps
