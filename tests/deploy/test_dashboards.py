"""The Grafana dashboards in deploy/grafana/ query only metrics that exist: the broker's
on a live broker's endpoint, the mirror's in the registry the mirror fills. Also the
PromQL name extractor those checks rely on, and the JSON shape Grafana 10 imports."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from tests.deploy.promql import (
    dashboard_exprs,
    dashboard_metric_names,
    dashboard_variable_queries,
    metric_names,
    variable_query_names,
)
from tests.fixtures.prometheus import exposed_names, parse, scrape
from tests.fixtures.zookeeper import ZooKeeperHandle
from tributary.deploy.audit.metrics import metrics_text
from tributary.deploy.audit.model import HOUR_MS, Row, Verdict
from tributary.mirror.metrics import MirrorMetrics
from tributary.testing.cluster import Cluster, start_cluster

GRAFANA = Path(__file__).resolve().parents[2] / "deploy" / "grafana"
OURS = ("broker.json", "mirror.json", "audit.json")


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GRAFANA / name).read_text())
    return data


# --- the extractor -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("up", {"up"}),
        ('rate(x_total{job="a", path=~"/b.*"}[5m])', {"x_total"}),
        (
            'histogram_quantile(0.99, sum by (le, api) (rate(d_seconds_bucket{api!="Fetch"}[$__rate_interval])))',
            {"d_seconds_bucket"},
        ),
        ("sum(rate(a_sum[1m])) by (api) / sum without (instance) (rate(a_count[1m]))", {"a_sum", "a_count"}),
        ("a * on(instance) group_left(version, api) b_info", {"a", "b_info"}),
        ("x > bool 1e3 and y unless z or w", {"x", "y", "z", "w"}),
        ("max_over_time(q[1h:5m] offset 1d) @ end()", {"q"}),
        ("time() - last_copy_timestamp_seconds", {"last_copy_timestamp_seconds"}),
        ('label_replace(m, "dst", "$1", "src", "(.*)")', {"m"}),
        ('{__name__="named", job="j"}', {"named"}),
        ('topk(20, max by (source, topic, partition) (lag{topic=~"${topic}"}))', {"lag"}),
        ("ns:recorded:rate5m * Inf + NaN - 0x1f", {"ns:recorded:rate5m"}),
        ("count(rate(by_label[$__interval])) > $threshold", {"by_label"}),
    ],
)
def test_metric_names_extracts_exactly_the_selected_series(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("label_values(tributary_broker_controller, job)", {"tributary_broker_controller"}),
        ('label_values(m{job=~"$job", a="x,y"}, instance)', {"m"}),
        ("label_values(instance)", set()),
        ("query_result(topk(5, rate(q_total[5m])))", {"q_total"}),
        ("metrics(tributary_.*)", set()),
    ],
)
def test_variable_query_names(query: str, names: set[str]) -> None:
    assert variable_query_names(query) == names


def test_dashboard_walk_finds_targets_in_collapsed_rows_and_variables() -> None:
    dashboard = {
        "panels": [
            {"type": "timeseries", "targets": [{"expr": "a"}, {"expr": ""}]},
            {"type": "row", "collapsed": True, "panels": [{"targets": [{"expr": "rate(b_total[1m])"}]}]},
        ],
        "templating": {
            "list": [
                {"type": "datasource", "query": "prometheus"},
                {"type": "query", "query": {"query": "label_values(c, instance)"}},
                {"type": "query", "query": 'label_values(d{x="1"}, topic)'},
            ]
        },
    }
    assert dashboard_exprs(dashboard) == ["a", "rate(b_total[1m])"]
    assert set(dashboard_metric_names(dashboard)) == {"a", "b_total", "c", "d"}


# --- the dashboards' shape -------------------------------------------------------------------


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


@pytest.mark.parametrize("name", OURS)
def test_dashboard_is_importable_grafana_json(name: str) -> None:
    dashboard = load(name)
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    panels = list(_panels(dashboard["panels"]))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        # Every query goes to the data source the user picks, never to a hard-wired uid.
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}"
            assert metric_names(target["expr"]), f"{panel['title']}: {target['expr']} selects no metric"
    for query in dashboard_variable_queries(dashboard):
        assert variable_query_names(query), query


# --- the metrics exist where they are served ----------------------------------------------------


@pytest.fixture
def broker(zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[Cluster]:
    yield from start_cluster(zookeeper.hosts, tmp_path, 1, metrics=True)


def test_broker_dashboard_queries_only_metrics_a_live_broker_serves(broker: Cluster) -> None:
    port = broker.brokers[0].metrics_port
    assert port is not None
    # Families are announced (HELP/TYPE) even before any labelled child exists, so a
    # fresh broker lists them all; the names a family exposes follow from its type.
    served = exposed_names(scrape(port).types)
    used = dashboard_metric_names(load("broker.json"))
    assert len(used) >= 10
    missing = {name: sorted(exprs) for name, exprs in used.items() if name not in served}
    assert missing == {}
    # The dashboard covers every family the broker serves (the _created series aside).
    unused = {n for n in served if n.startswith("tributary_broker_") and not n.endswith("_created")} - set(used)
    histogram_parts = {n for n in unused if n.endswith(("_sum", "_count", "_bucket"))}
    assert unused - histogram_parts == set()


def test_mirror_dashboard_queries_only_metrics_the_mirror_registers() -> None:
    registry = CollectorRegistry()
    MirrorMetrics(registry, source="east")
    served = exposed_names(parse(generate_latest(registry).decode()).types)
    used = dashboard_metric_names(load("mirror.json"))
    missing = {name: sorted(exprs) for name, exprs in used.items() if name not in served}
    assert missing == {}
    # Every metric interfaces.md names for the mirror is on the dashboard.
    assert {
        "tributary_mirror_lag_records",
        "tributary_mirror_lag_seconds",
        "tributary_mirror_copied_bytes_total",
        "tributary_mirror_copied_batches_total",
        "tributary_mirror_copied_records_total",
        "tributary_mirror_errors_total",
        "tributary_mirror_last_copy_timestamp_seconds",
        "tributary_mirror_seconds_since_last_copy",
        "tributary_mirror_assigned_partitions",
        "tributary_mirror_link_up",
    } <= set(used)


def test_audit_dashboard_queries_only_metrics_the_audit_writes() -> None:
    hour = 1_764_000_000_000 - 1_764_000_000_000 % HOUR_MS
    rows = [
        Row("east", "clicks", hour, 10, 10, 10, 10, Verdict.OK, ""),
        Row("west", "clicks", hour, 7, 5, 5, None, Verdict.IN_FLIGHT, "the mirror is 2 records behind"),
    ]
    text = metrics_text(rows, hour, 1_764_003_600.0)
    served = exposed_names(parse(text).types)
    used = dashboard_metric_names(load("audit.json"))
    assert set(used) == served  # every family on the dashboard, nothing the audit does not write
    samples = parse(text).samples
    labels = {"topic": "clicks", "source_datacenter": "west", "hour": "2025-11-24T16:00Z", "stage": "mirrored"}
    assert samples[("tributary_audit_records", tuple(sorted(labels.items())))] == 5
    assert not any(name == "tributary_audit_records" and ("stage", "hadoop") in labels and
                   ("source_datacenter", "west") in labels for name, labels in samples)  # fmt: skip
    assert samples[("tributary_audit_unexplained_hours", ())] == 0
