"""The audit as Prometheus metrics, in node_exporter's textfile format (as the loader writes its
runs): ``tributary audit --metrics-file PATH`` on a timer, node_exporter's textfile collector
beside it, and deploy/grafana/audit.json over them.

Every family is a gauge of the last audit (an audit re-counts its window; nothing accumulates):

- ``tributary_audit_records{topic, source_datacenter, hour, stage}``: records of that hour at
  the ``source``, below the mirror's checkpoints (``mirrored``), in the ``aggregate`` and in
  ``hadoop`` (absent when no load covers the stream);
- ``tributary_audit_hour_verdict{topic, source_datacenter, hour, verdict}``: 1 for the hour's
  verdict (ok, in flight, not loaded yet, retention, MISMATCH);
- ``tributary_audit_unexplained_hours``: hours with a difference the audit cannot explain;
- ``tributary_audit_last_run_timestamp_seconds`` and ``tributary_audit_window_start_seconds``.

``hour`` is the hour's start in UTC, ``2026-11-24T10:00Z``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from tributary.deploy.audit.model import HOUR_MS, Row, Verdict

STAGES = ("source", "mirrored", "aggregate", "hadoop")


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def hour_label(hour_ms: int) -> str:
    return datetime.fromtimestamp(hour_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%MZ")


def metrics_text(rows: Sequence[Row], start_ms: int, finished_at: float) -> str:
    lines = [
        "# HELP tributary_audit_records Records of one hour at one stage (last audit).",
        "# TYPE tributary_audit_records gauge",
    ]
    for row in rows:
        base = f'topic="{_label(row.topic)}",source_datacenter="{_label(row.datacenter)}",hour="{hour_label(row.hour)}"'
        counts = {"source": row.source, "mirrored": row.mirrored, "aggregate": row.aggregate, "hadoop": row.hadoop}
        for stage in STAGES:
            value = counts[stage]
            if value is not None:
                lines.append(f'tributary_audit_records{{{base},stage="{stage}"}} {value}')
    lines += [
        "# HELP tributary_audit_hour_verdict 1 for the verdict of one hour of one stream (last audit).",
        "# TYPE tributary_audit_hour_verdict gauge",
    ]
    for row in rows:
        labels = (
            f'topic="{_label(row.topic)}",source_datacenter="{_label(row.datacenter)}",'
            f'hour="{hour_label(row.hour)}",verdict="{row.verdict}"'
        )
        lines.append(f"tributary_audit_hour_verdict{{{labels}}} 1")
    unexplained = sum(1 for row in rows if row.verdict is Verdict.MISMATCH)
    lines += [
        "# HELP tributary_audit_unexplained_hours Hours whose counts differ for no reason the audit knows.",
        "# TYPE tributary_audit_unexplained_hours gauge",
        f"tributary_audit_unexplained_hours {unexplained}",
        "# HELP tributary_audit_last_run_timestamp_seconds When the last audit finished (Unix time).",
        "# TYPE tributary_audit_last_run_timestamp_seconds gauge",
        f"tributary_audit_last_run_timestamp_seconds {finished_at:.3f}",
        "# HELP tributary_audit_window_start_seconds Start of the last audit's window (Unix time).",
        "# TYPE tributary_audit_window_start_seconds gauge",
        f"tributary_audit_window_start_seconds {(start_ms - start_ms % HOUR_MS) / 1000:.0f}",
    ]
    return "\n".join(lines) + "\n"
