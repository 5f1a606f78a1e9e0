"""The console's one page, rendered from what the console last saw: sans-IO, so it is tested
on its own and served as it is. Plain HTML and inline SVG; the page reloads itself every few
seconds (a meta refresh: no script at all)."""

from __future__ import annotations

import html
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from tributary.deploy.appliance.status import Endpoint, Status
from tributary.deploy.audit.model import Row, Verdict

REFRESH_SECONDS = 5
CHART_WIDTH, CHART_HEIGHT = 720, 180
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
.up { color: #1a7f37; font-weight: bold; } .down { color: #cf222e; font-weight: bold; }
.verdict-ok { background: #dafbe1; } .verdict-MISMATCH { background: #ffcecb; font-weight: bold; }
.verdict-in-flight, .verdict-not-loaded-yet, .verdict-retention { background: #fff8c5; }
.muted { color: #777; }
"""


@dataclass(frozen=True)
class AuditView:
    """The last audit the console ran: its rows and window, or why it could not run."""

    rows: Sequence[Row]
    start_ms: int
    end_ms: int
    ran_at: float
    error: str = ""


def _e(value: object) -> str:
    return html.escape(str(value))


def _clock(unix: float) -> str:
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _state(up: bool) -> str:
    return '<span class="up">up</span>' if up else '<span class="down">down</span>'


def _endpoint_cell(endpoint: Endpoint) -> str:
    title = f' title="{_e(endpoint.error)}"' if endpoint.error else ""
    # ZooKeeper endpoints are named by their address already.
    address = "" if endpoint.address in endpoint.name else f" <span class=muted>{_e(endpoint.address)}</span>"
    name = f"{_e(endpoint.name)}{address}"
    return f"<td{title}>{name}</td><td class=state>{_state(endpoint.up)}</td>"


def _topology(status: Status) -> str:
    parts = ["<h2>Clusters</h2>", "<table><tr><th>datacenter</th><th>cluster</th><th>process</th><th>state</th></tr>"]
    for cluster in status.clusters:
        for endpoint in cluster.zookeeper + cluster.brokers:
            parts.append(
                f"<tr class=endpoint data-name='{_e(cluster.name)} {_e(endpoint.name)}'><td>{_e(cluster.datacenter)}"
                f"</td><td>{_e(cluster.name)}</td>{_endpoint_cell(endpoint)}</tr>"
            )
    parts.append("</table>")
    return "".join(parts)


def _mirrors(status: Status) -> str:
    if not status.mirrors:
        return ""
    parts = ["<h2>Mirrors</h2>", "<table><tr><th>mirror</th><th>from</th><th>to</th><th>state</th>"
             "<th>lag (records)</th><th>lag (seconds)</th><th>records copied</th></tr>"]  # fmt: skip
    for m in status.mirrors:
        cells = [m.alias, m.source, m.target]
        numbers = [m.lag_records, m.lag_seconds, m.copied_records]
        shown = ["-" if n is None else f"{n:,.0f}" for n in numbers]
        parts.append(
            "<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + f"<td>{_state(m.up)}</td>"
            + "".join(f"<td>{s}</td>" for s in shown) + "</tr>"
        )  # fmt: skip
    parts.append("</table>")
    return "".join(parts)


def lag_chart(series: dict[str, list[tuple[float, float]]], now: float, window: float) -> str:
    """An SVG line per mirror: lag in seconds over the last ``window`` seconds."""
    top = max([lag for points in series.values() for _, lag in points] + [1.0])
    left, bottom = 50, CHART_HEIGHT - 20
    width, height = CHART_WIDTH - left - 10, bottom - 10
    out = [
        f'<svg id=lag-chart width="{CHART_WIDTH}" height="{CHART_HEIGHT}" role="img" '
        f'aria-label="mirror lag over the last hour" xmlns="http://www.w3.org/2000/svg">',
        f'<line x1="{left}" y1="{bottom}" x2="{left + width}" y2="{bottom}" stroke="#999"/>',
        f'<line x1="{left}" y1="10" x2="{left}" y2="{bottom}" stroke="#999"/>',
        f'<text x="{left - 5}" y="15" text-anchor="end" font-size="11">{top:,.0f} s</text>',
        f'<text x="{left - 5}" y="{bottom}" text-anchor="end" font-size="11">0</text>',
        f'<text x="{left}" y="{CHART_HEIGHT - 5}" font-size="11">-{window / 60:.0f} min</text>',
        f'<text x="{left + width}" y="{CHART_HEIGHT - 5}" text-anchor="end" font-size="11">now</text>',
    ]
    for i, (alias, points) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        coords = " ".join(
            f"{left + width * (1 - (now - t) / window):.1f},{bottom - height * lag / top:.1f}" for t, lag in points
        )
        if coords:
            out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{coords}"/>')
        out.append(f'<text x="{left + 10 + 120 * i}" y="25" fill="{colour}" font-size="12">{_e(alias)}</text>')
    out.append("</svg>")
    return "".join(out)


def _loads(status: Status) -> str:
    if not status.loads:
        return ""
    parts = ["<h2>Loads</h2>", "<table><tr><th>load</th><th>last run</th><th>result</th><th>records</th>"
             "<th>gaps</th></tr>"]  # fmt: skip
    for load in status.loads:
        if load.error or not load.ran:
            parts.append(f"<tr><td>{_e(load.name)}</td><td colspan=4 class=muted>{_e(load.error or 'no run yet')}"
                         "</td></tr>")  # fmt: skip
            continue
        when = _clock(load.last_run) if load.last_run else "-"
        result = '<span class="up">succeeded</span>' if load.success else '<span class="down">failed</span>'
        records = "-" if load.records is None else f"{load.records:,.0f}"
        gaps = "-" if load.gaps is None else f"{load.gaps:,.0f}"
        parts.append(f"<tr><td>{_e(load.name)}</td><td>{when}</td><td>{result}</td><td>{records}</td>"
                     f"<td>{gaps}</td></tr>")  # fmt: skip
    parts.append("</table>")
    return "".join(parts)


def _audit(view: AuditView | None) -> str:
    parts = ["<h2>Audit</h2>"]
    if view is None:
        return parts[0] + "<p class=muted>the first audit is running</p>"
    if view.error:
        return parts[0] + f"<p class=down>the audit could not run: {_e(view.error)}</p>"
    unexplained = sum(1 for r in view.rows if r.verdict is Verdict.MISMATCH)
    summary = (
        f'<p id=audit-summary>{len(view.rows)} topic-hours from {_clock(view.start_ms / 1000)} to '
        f"{_clock(view.end_ms / 1000)}, audited {_clock(view.ran_at)}: "
        + ('<span class="up">every difference explained</span>' if not unexplained
           else f'<span class="down">{unexplained} unexplained</span>')
        + "</p>"
    )  # fmt: skip
    parts.append(summary)
    parts.append("<table id=audit><tr><th>datacenter</th><th>topic</th><th>hour (UTC)</th><th>source</th>"
                 "<th>mirrored</th><th>aggregate</th><th>Hadoop</th><th>verdict</th><th>why</th></tr>")  # fmt: skip
    for r in view.rows:
        hour = datetime.fromtimestamp(r.hour / 1000, UTC).strftime("%Y-%m-%d %H:00")
        verdict_class = "verdict-" + str(r.verdict).replace(" ", "-")
        hadoop = "-" if r.hadoop is None else f"{r.hadoop:,}"
        parts.append(
            f"<tr class='{verdict_class}'><td>{_e(r.datacenter)}</td><td>{_e(r.topic)}</td><td>{hour}</td>"
            f"<td>{r.source:,}</td><td>{r.mirrored:,}</td><td>{r.aggregate:,}</td><td>{hadoop}</td>"
            f"<td class=verdict>{_e(r.verdict)}</td><td>{_e(r.why)}</td></tr>"
        )
    parts.append("</table>")
    return "".join(parts)


def render(
    status: Status | None,
    lag: dict[str, list[tuple[float, float]]],
    audit: AuditView | None,
    *,
    title: str,
    now: float | None = None,
    window: float = 3600.0,
) -> str:
    now = time.time() if now is None else now
    body = [f"<h1>Tributary: {_e(title)}</h1>"]
    if status is None:
        body.append("<p class=muted>looking at the appliance...</p>")
    else:
        overall = "everything up" if status.all_up else "something is down"
        body.append(f"<p id=overall>{_state(status.all_up)} {overall}, checked {_clock(status.checked_at)}</p>")
        body.append(_topology(status))
        body.append(_mirrors(status))
        body.append("<h2>Mirror lag, last hour</h2>" + lag_chart(lag, now, window))
        body.append(_loads(status))
    body.append(_audit(audit))
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">'
        f"<title>Tributary: {_e(title)}</title><style>{_STYLE}</style></head><body>" + "".join(body) + "</body></html>"
    )
