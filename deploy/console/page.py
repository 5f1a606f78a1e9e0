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


def _table(title: str, headers: Sequence[str], rows: Sequence[str], table_id: str = "") -> str:
    """A section: its heading and a table of ``rows`` (each already a ``<tr>...</tr>``)."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    ident = f" id={table_id}" if table_id else ""
    heading = f"<h2>{_e(title)}</h2>" if title else ""
    return f"{heading}<table{ident}><tr>{head}</tr>{''.join(rows)}</table>"


def _cells(*values: object) -> str:
    return "".join(f"<td>{_e(v)}</td>" for v in values)


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _topology(status: Status) -> str:
    rows = [
        f"<tr class=endpoint>{_cells(cluster.datacenter, cluster.name)}{_endpoint_cell(endpoint)}</tr>"
        for cluster in status.clusters
        for endpoint in cluster.zookeeper + cluster.brokers
    ]
    return _table("Clusters", ("datacenter", "cluster", "process", "state"), rows)


def _mirrors(status: Status) -> str:
    rows = [
        f"<tr>{_cells(m.alias, m.source, m.target)}<td>{_state(m.up)}</td>"
        f"{_cells(_number(m.lag_records), _number(m.lag_seconds), _number(m.copied_records))}</tr>"
        for m in status.mirrors
    ]
    headers = ("mirror", "from", "to", "state", "lag (records)", "lag (seconds)", "records copied")
    return _table("Mirrors", headers, rows) if rows else ""


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
    rows = []
    for load in status.loads:
        if load.error or not load.ran:
            rows.append(f"<tr>{_cells(load.name)}<td colspan=4 class=muted>{_e(load.error or 'no run yet')}</td></tr>")
            continue
        when = _clock(load.last_run) if load.last_run else "-"
        result = '<span class="up">succeeded</span>' if load.success else '<span class="down">failed</span>'
        rows.append(
            f"<tr>{_cells(load.name, when)}<td>{result}</td>{_cells(_number(load.records), _number(load.gaps))}</tr>"
        )
    return _table("Loads", ("load", "last run", "result", "records", "gaps"), rows) if rows else ""


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
    rows = []
    for r in view.rows:
        hour = datetime.fromtimestamp(r.hour / 1000, UTC).strftime("%Y-%m-%d %H:00")
        verdict_class = "verdict-" + str(r.verdict).replace(" ", "-")
        hadoop = "-" if r.hadoop is None else f"{r.hadoop:,}"
        counts = _cells(f"{r.source:,}", f"{r.mirrored:,}", f"{r.aggregate:,}", hadoop)
        rows.append(
            f"<tr class='{verdict_class}'>{_cells(r.datacenter, r.topic, hour)}{counts}"
            f"<td class=verdict>{_e(r.verdict)}</td>{_cells(r.why)}</tr>"
        )
    headers = ("datacenter", "topic", "hour (UTC)", "source", "mirrored", "aggregate", "Hadoop", "verdict", "why")
    return parts[0] + summary + _table("", headers, rows, "audit")


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
