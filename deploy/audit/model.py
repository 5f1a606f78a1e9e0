"""The audit's arithmetic, sans-IO: offsets at hour boundaries in, per-hour counts and verdicts out.

A partition's time index answers "the first offset whose timestamp is at or after T" (ListOffsets
by timestamp). Asked at consecutive hour boundaries, the differences are the records of each hour,
exactly so while timestamps grow with offsets, as they do for records stamped when produced.
Offsets are what is counted: transaction markers and compaction gaps count as records here.

Per hour and (source datacenter, topic) the stages are:

- ``source``: the source partitions' records of that hour;
- ``mirrored``: those of them below the mirror's checkpoint (its committed source position),
  i.e. what the mirror has copied and recorded;
- ``aggregate``: the aggregate partitions' records of that hour (``<alias>.<topic>``);
- ``hadoop``: what the loader's committed manifests counted for that hour.

Verdicts, in the order they are tried: ``ok`` when all four agree; ``in flight`` when the
aggregate lacks what the mirror has not copied yet; ``retention`` when records left a log
(its start offset passed them) before a later stage took them; ``not loaded yet`` when the
loader's committed offsets stop inside the hour; anything else is a ``MISMATCH``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

HOUR_MS = 3_600_000


class Verdict(StrEnum):
    OK = "ok"
    IN_FLIGHT = "in flight"
    NOT_LOADED = "not loaded yet"
    RETENTION = "retention"
    MISMATCH = "MISMATCH"


def hours(start_ms: int, end_ms: int) -> list[int]:
    """The starts of the hours that overlap ``[start_ms, end_ms)``, in order."""
    first = start_ms - start_ms % HOUR_MS
    return list(range(first, end_ms, HOUR_MS))


@dataclass(frozen=True, slots=True)
class PartitionIndex:
    """One partition's offsets at the hour boundaries of a window, and its log's bounds.

    ``at[i]`` is the first offset with a timestamp at or after ``boundaries[i]`` (the log's end
    offset when there is none); the last boundary is the window's end."""

    boundaries: tuple[int, ...]
    at: tuple[int, ...]
    log_start: int
    log_end: int

    def counts(self, below: int | None = None) -> dict[int, int]:
        """Records per hour start, only those below offset ``below`` when given."""
        cap = self.log_end if below is None else min(below, self.log_end)
        return {
            self.boundaries[i]: max(0, min(self.at[i + 1], cap) - min(self.at[i], cap))
            for i in range(len(self.boundaries) - 1)
        }

    def hour_first_offset(self, hour: int) -> int:
        return self.at[self.boundaries.index(hour)]

    def hour_end_offset(self, hour: int) -> int:
        return self.at[self.boundaries.index(hour) + 1]


def add_counts(total: dict[int, int], counts: Mapping[int, int]) -> None:
    for hour, n in counts.items():
        total[hour] = total.get(hour, 0) + n


@dataclass(slots=True)
class Stream:
    """One mirrored topic of one source datacenter, every partition of it, at every stage."""

    datacenter: str
    topic: str
    source: dict[int, PartitionIndex] = field(default_factory=dict)
    aggregate: dict[int, PartitionIndex] = field(default_factory=dict)
    #: The mirror's checkpoint per partition: the source offset it has copied up to (None: never).
    checkpoints: dict[int, int | None] = field(default_factory=dict)
    #: The loader's committed next offset per aggregate partition (absent: never loaded).
    loaded_up_to: dict[int, int] = field(default_factory=dict)
    #: Records the loader's committed manifests counted, per hour start.
    hadoop: dict[int, int] = field(default_factory=dict)
    #: Whether this stream's aggregate is loaded into Hadoop at all (a load covers it).
    loaded: bool = True


@dataclass(frozen=True, slots=True)
class Row:
    datacenter: str
    topic: str
    hour: int
    source: int
    mirrored: int
    aggregate: int
    hadoop: int | None
    verdict: Verdict
    why: str

    def to_json(self) -> dict[str, object]:
        return {
            "datacenter": self.datacenter,
            "topic": self.topic,
            "hour_ms": self.hour,
            "source": self.source,
            "mirrored": self.mirrored,
            "aggregate": self.aggregate,
            "hadoop": self.hadoop,
            "verdict": str(self.verdict),
            "why": self.why,
        }


@dataclass(frozen=True, slots=True)
class HourCounts:
    source: int
    mirrored: int
    aggregate: int
    #: None when no load covers the stream.
    hadoop: int | None


Judgement = tuple[Verdict, str]


def _retention(indexes: Mapping[int, PartitionIndex], hour: int) -> bool:
    """Whether retention may have deleted records of the hour: a log lost its beginning, and
    the hour starts at its start offset (the time index knows nothing of deleted records, so
    an hour partly or wholly deleted begins where the log now begins)."""
    return any(p.log_start > 0 and p.hour_first_offset(hour) <= p.log_start for p in indexes.values())


def _judge_mirror(stream: Stream, hour: int, c: HourCounts) -> Judgement | None:
    """The source against the aggregate; None when they agree."""
    if c.aggregate < c.source:
        # The aggregate may hold more than the checkpoint says: copied, not yet recorded.
        if c.mirrored < c.source:
            return Verdict.IN_FLIGHT, f"the mirror has recorded {c.mirrored} of {c.source} as copied"
        if _retention(stream.aggregate, hour):
            return Verdict.RETENTION, "the aggregate's retention deleted part of the hour"
        return Verdict.MISMATCH, f"the aggregate holds {c.aggregate} of the {c.source} records of the source"
    if c.aggregate > c.source:
        return _more_downstream(stream.source, hour, "the aggregate", c.aggregate - c.source, "the source")
    if c.mirrored < c.source:
        return Verdict.IN_FLIGHT, "copied; the mirror's next checkpoint records it"
    return None


def _judge_load(stream: Stream, hour: int, c: HourCounts) -> Judgement | None:
    """The aggregate against Hadoop; None when they agree or no load covers the stream."""
    if c.hadoop is None or c.hadoop == c.aggregate:
        return None
    if c.hadoop < c.aggregate:
        behind = [
            n for n, p in stream.aggregate.items() if stream.loaded_up_to.get(n, p.log_start) < p.hour_end_offset(hour)
        ]
        if behind:
            return Verdict.NOT_LOADED, f"the loader's last commit ends inside the hour on {len(behind)} partition(s)"
        return Verdict.MISMATCH, f"Hadoop holds {c.hadoop} of the {c.aggregate} records of the aggregate"
    return _more_downstream(stream.aggregate, hour, "Hadoop", c.hadoop - c.aggregate, "the aggregate")


def _more_downstream(
    upstream: Mapping[int, PartitionIndex], hour: int, stage: str, extra: int, upstream_name: str
) -> Judgement:
    """A later stage holds more than an earlier one: explained only by the earlier log's retention."""
    if _retention(upstream, hour):
        return Verdict.RETENTION, f"{upstream_name}'s retention deleted part of the hour after {stage} took it"
    return Verdict.MISMATCH, f"{stage} holds {extra} more records than {upstream_name}"


def audit(streams: Sequence[Stream]) -> list[Row]:
    """One row per stream and hour in which any stage saw a record."""
    rows: list[Row] = []
    for stream in sorted(streams, key=lambda s: (s.datacenter, s.topic)):
        source: dict[int, int] = {}
        mirrored: dict[int, int] = {}
        aggregate: dict[int, int] = {}
        for n, index in stream.source.items():
            add_counts(source, index.counts())
            add_counts(mirrored, index.counts(below=stream.checkpoints.get(n) or 0))
        for index in stream.aggregate.values():
            add_counts(aggregate, index.counts())
        for hour in sorted(set(source) | set(aggregate) | set(stream.hadoop)):
            s, m, a = source.get(hour, 0), mirrored.get(hour, 0), aggregate.get(hour, 0)
            h = stream.hadoop.get(hour, 0) if stream.loaded else None
            if s == m == a == (h or 0) == 0:
                continue
            counts = HourCounts(s, m, a, h)
            verdict, why = _judge_mirror(stream, hour, counts) or _judge_load(stream, hour, counts) or (Verdict.OK, "")
            rows.append(Row(stream.datacenter, stream.topic, hour, s, m, a, h, verdict, why))
    return rows


def settled(rows: Sequence[Row]) -> bool:
    """Whether nothing disagrees in a way the audit cannot explain."""
    return all(r.verdict is not Verdict.MISMATCH for r in rows)
