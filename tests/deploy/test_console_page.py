"""The console's page and lag history, sans-IO: what an operator reads, from given state."""

from __future__ import annotations

import re

from tributary.deploy.appliance.status import ClusterStatus, Endpoint, LoadStatus, MirrorStatus, Status
from tributary.deploy.audit.model import HOUR_MS, Row, Verdict
from tributary.deploy.console.history import LagHistory
from tributary.deploy.console.page import AuditView, lag_chart, render

NOW = 1_764_003_600.0
HOUR = int(NOW * 1000) - int(NOW * 1000) % HOUR_MS - HOUR_MS


def _status() -> Status:
    east = ClusterStatus(
        "east", "east",
        zookeeper=[Endpoint("zookeeper 127.0.0.1:2181", "127.0.0.1:2181", up=True)],
        brokers=[Endpoint("broker 1", "127.0.0.1:9092", up=True),
                 Endpoint("broker 2", "127.0.0.1:9093", up=False, error="connection refused")],
        controller=1,
    )  # fmt: skip
    mirror = MirrorStatus("east", "east", "aggregate", [Endpoint("instance 1", "127.0.0.1:9400", up=True)],
                          lag_records=1234, lag_seconds=12.5, copied_records=99_000)  # fmt: skip
    load = LoadStatus("nightly", "aggregate", "file:///w", "/tmp/m.prom", ran=True, last_run=NOW - 60, success=True,
                      records=5000, gaps=0)  # fmt: skip
    return Status("t.toml", [east], [mirror], [load], checked_at=NOW)


def test_the_page_shows_who_is_down_the_lag_the_loads_and_the_audit() -> None:
    rows = [
        Row("east", "clicks", HOUR, 10, 10, 10, 10, Verdict.OK, ""),
        Row("east", "clicks", HOUR + HOUR_MS, 7, 5, 5, 0, Verdict.IN_FLIGHT, "the mirror is 2 records behind"),
    ]
    page = render(_status(), {"east": [(NOW - 60, 3.0), (NOW, 12.5)]}, AuditView(rows, HOUR, HOUR + 2 * HOUR_MS, NOW),
                  title="demo", now=NOW)  # fmt: skip
    assert "<title>Tributary: demo</title>" in page
    assert re.search(r"something is down", page)
    assert re.search(
        r"broker 2 <span class=muted>127.0.0.1:9093</span></td><td class=state><span class=\"down\">down", page
    )
    assert re.search(
        r"broker 1 <span class=muted>127.0.0.1:9092</span></td><td class=state><span class=\"up\">up", page
    )
    assert "1,234" in page and "99,000" in page  # the mirror's lag and copies
    assert "succeeded" in page and "5,000" in page  # the last load
    assert "every difference explained" in page
    assert page.count("class=verdict>") == 2 and "in flight" in page and "the mirror is 2 records behind" in page
    assert '<meta http-equiv="refresh" content="5">' in page
    assert "<script" not in page and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_a_mismatch_and_a_failed_audit_are_plain_to_see() -> None:
    rows = [Row("east", "clicks", HOUR, 10, 10, 9, 9, Verdict.MISMATCH, "1 record missing from the aggregate")]
    page = render(_status(), {}, AuditView(rows, HOUR, HOUR + HOUR_MS, NOW), title="t", now=NOW)
    assert '<span class="down">1 unexplained</span>' in page and "verdict-MISMATCH" in page
    failed = render(_status(), {}, AuditView((), HOUR, HOUR, NOW, error="no route to east"), title="t", now=NOW)
    assert "the audit could not run: no route to east" in failed
    assert "the first audit is running" in render(None, {}, None, title="t", now=NOW)


def test_names_from_the_topology_are_escaped() -> None:
    status = _status()
    status.clusters[0].name = "<script>alert(1)</script>"
    assert "<script>" not in render(status, {}, None, title="<b>", now=NOW)


def test_the_chart_draws_each_mirror_over_the_last_hour() -> None:
    svg = lag_chart({"east": [(NOW - 3600, 0.0), (NOW - 1800, 10.0), (NOW, 5.0)], "west": []}, NOW, 3600.0)
    (points,) = re.findall(r'<polyline[^>]*points="([^"]+)"', svg)
    xs = [float(p.split(",")[0]) for p in points.split()]
    ys = [float(p.split(",")[1]) for p in points.split()]
    assert xs[0] < xs[1] < xs[2] and ys[1] < ys[2] < ys[0]  # the peak is highest (smallest y)
    assert ">10 s<" in svg and ">east<" in svg and ">west<" in svg


def test_the_history_keeps_one_hour() -> None:
    history = LagHistory(window=3600)
    history.add(0.0, {"east": 1.0, "west": None})
    history.add(1800.0, {"east": 2.0, "west": 4.0})
    history.add(3700.0, {"east": 3.0, "west": 5.0})
    assert history.series() == {"east": [(1800.0, 2.0), (3700.0, 3.0)], "west": [(1800.0, 4.0), (3700.0, 5.0)]}
