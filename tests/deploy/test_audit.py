"""`tributary audit` against a running appliance: records of three hours counted at the source,
below the mirror's checkpoints and in the aggregate; a stopped mirror shows as in flight, an
unloaded hour as not loaded yet; once the mirror resumes every hour agrees up to Hadoop's stage.
(The demo test covers the loaded case: the demo fails unless every hour is ok at every stage.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from tests.fixtures.prometheus import parse
from tributary.deploy.appliance.topology import load_topology
from tributary.deploy.audit.metrics import hour_label
from tributary.deploy.audit.model import HOUR_MS

from .test_status import poll
from .topologies import running_up, write_topology

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from confluent_kafka import Producer
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )


def audit(topology: Path, start_ms: int, metrics_file: Path | None = None) -> tuple[int, dict[str, Any]]:
    start = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(start_ms / 1000))
    extra = ["--metrics-file", str(metrics_file)] if metrics_file is not None else []
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tributary.deploy.cli",
            "audit",
            "--topology",
            str(topology),
            "--from",
            start,
            "--output",
            "json",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.stderr == "", result.stderr
    return result.returncode, json.loads(result.stdout)


def by_hour(report: dict[str, Any]) -> dict[int, tuple[int, int, int, int | None, str]]:
    return {
        r["hour_ms"]: (r["source"], r["mirrored"], r["aggregate"], r["hadoop"], r["verdict"])
        for r in report["rows"]
        if (r["datacenter"], r["topic"]) == ("east", "pageviews")
    }


def produce(bootstrap: str, per_hour: dict[int, int], tag: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "zstd", "linger.ms": 5})
    for hour, count in sorted(per_hour.items()):
        for i in range(count):
            producer.produce("pageviews", value=b'{"url":"/%s/%d"}' % (tag.encode(), i), timestamp=hour + i)
    assert producer.flush(30) == 0


def test_audit_counts_hours_and_explains_a_stopped_mirror(tmp_path: Path) -> None:
    path = write_topology(tmp_path / "t.toml", mirrors=True)
    topology = load_topology(path)
    now = int(time.time() * 1000)
    h0 = now - now % HOUR_MS - 3 * HOUR_MS
    h1, h2 = h0 + HOUR_MS, h0 + 2 * HOUR_MS
    with running_up(path, tmp_path / "up.out") as up:
        east = topology.clusters["east"].bootstrap
        produce(east, {h0: 300, h1: 200}, "a")

        def settled_mirror() -> dict[str, Any] | None:
            code, report = audit(path, h0)
            rows = by_hour(report)
            done = code == 0 and all(v[4] == "not loaded yet" for v in rows.values()) and len(rows) == 2
            return report if done else None

        # Not loaded yet: every record is mirrored and checkpointed, no load ran.
        report = poll(settled_mirror, 60, "the mirror copying and checkpointing two hours")
        assert by_hour(report) == {
            h0: (300, 300, 300, 0, "not loaded yet"),
            h1: (200, 200, 200, 0, "not loaded yet"),
        }

        # The mirror stopped: what is produced meanwhile is in flight, and the audit says so.
        mirror = up.pids()["mirror/east"]
        os.kill(mirror, signal.SIGSTOP)
        try:
            produce(east, {h1: 50, h2: 100}, "b")
            code, report = audit(path, h0, tmp_path / "audit.prom")
            assert code == 0, report  # explained, not a mismatch
            rows = by_hour(report)
            assert rows[h0] == (300, 300, 300, 0, "not loaded yet")
            assert rows[h1][:3] == (250, 200, 200) and rows[h1][4] == "in flight"
            assert rows[h2][:3] == (100, 0, 0) and rows[h2][4] == "in flight"
        finally:
            os.kill(mirror, signal.SIGCONT)
        # The same counts and verdicts as Prometheus metrics, for node_exporter and Grafana.
        metrics = parse((tmp_path / "audit.prom").read_text()).samples
        east_h1 = {"topic": "pageviews", "source_datacenter": "east", "hour": hour_label(h1)}
        assert metrics[("tributary_audit_records", tuple(sorted({**east_h1, "stage": "source"}.items())))] == 250
        assert metrics[("tributary_audit_records", tuple(sorted({**east_h1, "stage": "mirrored"}.items())))] == 200
        verdict = {**east_h1, "verdict": "in flight"}
        assert metrics[("tributary_audit_hour_verdict", tuple(sorted(verdict.items())))] == 1
        assert metrics[("tributary_audit_unexplained_hours", ())] == 0

        def caught_up() -> dict[str, Any] | None:
            report = audit(path, h0)[1]
            rows = by_hour(report)
            return report if len(rows) == 3 and all(v[4] == "not loaded yet" for v in rows.values()) else None

        report = poll(caught_up, 60, "the resumed mirror copying the rest")
        assert {h: v[:3] for h, v in by_hour(report).items()} == {
            h0: (300, 300, 300),
            h1: (250, 250, 250),
            h2: (100, 100, 100),
        }


def test_records_deleted_by_the_aggregates_retention_are_named_for_their_hour(tmp_path: Path) -> None:
    # The aggregate's copy keeps an hour only: once the records of three hours ago are copied and
    # a later hour rolls the segment, retention deletes them there. The audit names the gap for
    # its hour (retention, not a mismatch) and keeps the recent hour whole.
    path = write_topology(tmp_path / "t.toml", mirrors=True, settings='"log.retention.check.interval.ms" = 500')
    topology = load_topology(path)
    now = int(time.time() * 1000)
    old = now - now % HOUR_MS - 3 * HOUR_MS
    recent = now - now % HOUR_MS
    with running_up(path, tmp_path / "up.out") as up:
        east, aggregate = topology.clusters["east"].bootstrap, topology.clusters["aggregate"].bootstrap
        produce(east, {old: 150}, "a")
        poll(lambda: by_hour(audit(path, old)[1]).get(old, (0,) * 5)[:3] == (150, 150, 150) or None, 60,
             "the old hour copied and checkpointed")  # fmt: skip
        admin = AdminClient({"bootstrap.servers": aggregate})
        entries = [
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in {"retention.ms": str(HOUR_MS), "segment.ms": "60000"}.items()
        ]
        resource = ConfigResource(ResourceType.TOPIC, "east.pageviews", incremental_configs=entries)
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(30)
        # Records of this hour land in a new segment (more than segment.ms of record time after the
        # old ones), so the old segments are closed and retention may take them.
        produce(east, {recent: 80}, "b")

        def deleted() -> dict[str, Any] | None:
            # The recent hour settles too: copied, and below the mirror's next checkpoint.
            code, report = audit(path, old)
            rows = by_hour(report)
            gone = rows.get(old, (0, 0, 0, 0, ""))[4] == "retention"
            settled = rows.get(recent, (0, 0, 0, 0, ""))[:3] == (80, 80, 80)
            return report if code == 0 and gone and settled else None

        report = poll(deleted, 60, "retention deleting the old hour from the aggregate, the recent one copied")
        rows = by_hour(report)
        source, mirrored, in_aggregate, _, verdict = rows[old]
        assert (source, mirrored, verdict) == (150, 150, "retention") and in_aggregate < 150
        why = next(r["why"] for r in report["rows"] if r["hour_ms"] == old and r["datacenter"] == "east")
        assert why == "the aggregate's retention deleted part of the hour"
        assert rows[recent][:3] == (80, 80, 80) and rows[recent][4] == "not loaded yet"
        assert up.proc.poll() is None
