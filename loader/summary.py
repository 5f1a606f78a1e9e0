"""What a load reports: the table on stdout, the summary JSON, the Prometheus textfile."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(slots=True)
class Summary:
    #: the last run this invocation committed (None: nothing new to load)
    run: str | None = None
    #: every run committed by this invocation (a resumed one, then a new one)
    runs: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: [{"topic", "source_datacenter", "source_topic", "records", "bytes"}]
    by_topic: list[dict[str, Any]] = field(default_factory=list)
    gaps: list[dict[str, Any]] = field(default_factory=list)
    success: bool = False
    error: str | None = None
    finished_at: float = 0.0

    @property
    def records(self) -> int:
        return sum(int(t["records"]) for t in self.by_topic)

    @property
    def bytes(self) -> int:
        return sum(int(t["bytes"]) for t in self.by_topic)

    def add(self, rows: Iterable[dict[str, Any]]) -> None:
        merged: dict[tuple[str, str | None], dict[str, Any]] = {
            (t["topic"], t["source_datacenter"]): dict(t) for t in self.by_topic
        }
        for row in rows:
            key = (row["topic"], row["source_datacenter"])
            if key in merged:
                merged[key]["records"] += row["records"]
                merged[key]["bytes"] += row["bytes"]
            else:
                merged[key] = dict(row)
        self.by_topic = [merged[k] for k in sorted(merged, key=lambda k: (k[0], k[1] or ""))]

    def to_json(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "runs": self.runs,
            "success": self.success,
            "error": self.error,
            "records": self.records,
            "bytes": self.bytes,
            "seconds": round(self.seconds, 3),
            "by_topic": self.by_topic,
            "gaps": self.gaps,
        }


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def table(summary: Summary) -> str:
    """The end-of-run table: records and bytes per topic and source datacenter, runtime, rate."""
    headers = ("TOPIC", "SOURCE DC", "SOURCE TOPIC", "RECORDS", "BYTES")
    rows = [
        (t["topic"], t["source_datacenter"] or "-", t["source_topic"], f"{t['records']:,}", _size(t["bytes"]))
        for t in summary.by_topic
    ]
    rows.append(("total", "", "", f"{summary.records:,}", _size(summary.bytes)))
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = []
    for row in (headers, *rows):
        lines.append(
            "  ".join(c.ljust(w) if i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        )
    rate = summary.records / summary.seconds if summary.seconds > 0 else 0.0
    runs = ", ".join(summary.runs) if summary.runs else "none (nothing new to load)"
    lines.append(f"runs committed: {runs}; runtime {summary.seconds:.1f} s; {rate:,.0f} records/s")
    for gap in summary.gaps:
        lines.append(
            f"gap recorded: {gap['topic']}-{gap['partition']} offsets [{gap['start']}, {gap['end']}) were lost"
        )
    return "\n".join(lines)


def _label(value: str | None) -> str:
    return (value or "").replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def metrics_text(summary: Summary) -> str:
    """node_exporter's textfile-collector format (the Prometheus text exposition format)."""
    lines = [
        "# HELP tributary_loader_last_run_timestamp_seconds When the last load finished (Unix time).",
        "# TYPE tributary_loader_last_run_timestamp_seconds gauge",
        f"tributary_loader_last_run_timestamp_seconds {summary.finished_at:.3f}",
        "# HELP tributary_loader_last_run_success Whether the last load succeeded (1) or failed (0).",
        "# TYPE tributary_loader_last_run_success gauge",
        f"tributary_loader_last_run_success {1 if summary.success else 0}",
        "# HELP tributary_loader_last_run_duration_seconds How long the last load ran.",
        "# TYPE tributary_loader_last_run_duration_seconds gauge",
        f"tributary_loader_last_run_duration_seconds {summary.seconds:.3f}",
    ]
    per_topic = (
        ("records", "Records the last load committed, per topic and source datacenter."),
        ("bytes", "Parquet bytes the last load committed, per topic and source DC."),
    )
    for kind, text in per_topic:
        name = f"tributary_loader_last_run_{kind}"
        lines += [f"# HELP {name} {text}", f"# TYPE {name} gauge"]
        for t in summary.by_topic:
            labels = f'topic="{_label(t["topic"])}",source_datacenter="{_label(t["source_datacenter"])}"'
            lines.append(f"{name}{{{labels}}} {t[kind]}")
    lines += [
        "# HELP tributary_loader_last_run_gaps Lost offset ranges the last load found (recorded or failed on).",
        "# TYPE tributary_loader_last_run_gaps gauge",
        f"tributary_loader_last_run_gaps {len(summary.gaps)}",
    ]
    return "\n".join(lines) + "\n"


def write_atomically(path: Path, text: str) -> None:
    """Write a local file so readers (node_exporter, scripts) never see half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    side = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    side.write_text(text)
    os.replace(side, path)


def write_reports(summary: Summary, summary_json: Path | None, metrics_file: Path | None) -> None:
    if summary_json is not None:
        write_atomically(summary_json, json.dumps(summary.to_json(), indent=2) + "\n")
    if metrics_file is not None:
        write_atomically(metrics_file, metrics_text(summary))


def merge_gaps(existing: list[dict[str, Any]], gaps: Iterable[Any]) -> list[dict[str, Any]]:
    by_key: dict[tuple[str, int, int], dict[str, Any]] = defaultdict(dict)
    for g in existing:
        by_key[(g["topic"], g["partition"], g["start"])] = g
    for g in gaps:
        by_key[(g.topic, g.partition, g.start)] = {
            "topic": g.topic,
            "partition": g.partition,
            "start": g.start,
            "end": g.end,
        }
    return [by_key[k] for k in sorted(by_key)]
