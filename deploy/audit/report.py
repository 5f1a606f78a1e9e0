"""The audit as people and scripts read it: one table per topic, a row per hour, and a verdict."""

from __future__ import annotations

import time
from collections.abc import Sequence
from itertools import groupby

from tributary.deploy.audit.model import HOUR_MS, Row, Verdict, settled
from tributary.deploy.tables import render_table


def _hour(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:00", time.gmtime(ms / 1000))


def _n(value: int | None) -> str | None:
    return None if value is None else f"{value:,}"


def render(rows: Sequence[Row], start_ms: int, end_ms: int) -> str:
    first = start_ms - start_ms % HOUR_MS
    last = end_ms - end_ms % HOUR_MS + HOUR_MS
    lines = [f"audit from {_hour(first)} to {_hour(last)} UTC, per topic and hour of the records' timestamps"]
    if not rows:
        return "\n".join([*lines, "", "no records in the window"])
    for (datacenter, topic), group in groupby(rows, key=lambda r: (r.datacenter, r.topic)):
        table = render_table(
            ("HOUR (UTC)", "SOURCE", "MIRRORED", "AGGREGATE", "HADOOP", "VERDICT", "WHY"),
            [
                (_hour(r.hour), _n(r.source), _n(r.mirrored), _n(r.aggregate), _n(r.hadoop), str(r.verdict), r.why)
                for r in group
            ],
            right=("SOURCE", "MIRRORED", "AGGREGATE", "HADOOP"),
        )
        lines += ["", f"{datacenter} {topic}", table]
    counts = {v: sum(1 for r in rows if r.verdict is v) for v in Verdict}
    summary = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    mismatched = sorted({f"{r.datacenter} {r.topic}" for r in rows if r.verdict is Verdict.MISMATCH})
    verdict = (
        "every stage agrees or the difference is explained"
        if settled(rows)
        else (f"MISMATCH in {', '.join(mismatched)}")
    )
    return "\n".join([*lines, "", f"{len(rows)} topic-hours: {summary}; {verdict}"])
