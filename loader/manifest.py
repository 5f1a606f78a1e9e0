"""The manifest of a run: what it published and counted, written before the commit."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from tributary.loader.naming import split_topic
from tributary.loader.plan import Plan
from tributary.loader.stage import StagedFile


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def by_topic(files: Sequence[StagedFile]) -> list[dict[str, Any]]:
    """Records and bytes per (topic, source datacenter)."""
    totals: dict[tuple[str, str | None], list[int]] = defaultdict(lambda: [0, 0])
    for f in files:
        entry = totals[(f.topic, f.source_datacenter)]
        entry[0] += f.rows
        entry[1] += f.bytes
    return [
        {
            "topic": topic,
            "source_datacenter": dc,
            "source_topic": split_topic(topic)[1],
            "records": records,
            "bytes": size,
        }
        for (topic, dc), (records, size) in sorted(totals.items(), key=lambda item: (item[0][0], item[0][1] or ""))
    ]


def build_manifest(plan: Plan, files: Sequence[StagedFile], output: str, *, resumed: bool) -> dict[str, Any]:
    hours: dict[tuple[str, str | None, int], int] = defaultdict(int)
    for f in files:
        for hour, count in f.hours.items():
            hours[(f.topic, f.source_datacenter, int(hour))] += count
    return {
        "run": plan.run,
        "previous": plan.previous,
        "output": output,
        "topics": plan.topics,
        "planned_at": plan.created,
        "published_at": time.time(),
        "resumed": resumed,
        "ranges": [{"topic": r.topic, "partition": r.partition, "start": r.start, "end": r.end} for r in plan.ranges],
        "gaps": [
            {"topic": g.topic, "partition": g.partition, "start": g.start, "end": g.end, "records": g.end - g.start}
            for g in plan.gaps
        ],
        "files": [
            {
                "path": f.published[len(output) + 1 :] if f.published.startswith(output + "/") else f.published,
                "topic": f.topic,
                "source_datacenter": f.source_datacenter,
                "event_date": f.event_date,
                "partition": f.partition,
                "first_offset": f.first_offset,
                "last_offset": f.last_offset,
                "rows": f.rows,
                "bytes": f.bytes,
                "min_event_time": _iso(f.min_timestamp_ms),
                "max_event_time": _iso(f.max_timestamp_ms),
            }
            for f in files
        ],
        "counts": [
            {"topic": topic, "source_datacenter": dc, "hour": _iso(hour), "records": count}
            for (topic, dc, hour), count in sorted(
                hours.items(), key=lambda item: (item[0][0], item[0][1] or "", item[0][2])
            )
        ],
        "by_topic": by_topic(files),
        "totals": {"files": len(files), "rows": sum(f.rows for f in files), "bytes": sum(f.bytes for f in files)},
    }
