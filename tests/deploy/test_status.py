"""`tributary status` against a running `tributary up` (with a mirror), and against nothing."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

from tributary.deploy.appliance.topology import load_topology
from tributary.testing.polling import eventually

from .topologies import running_up, write_topology

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from confluent_kafka import Producer


def status(topology: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tributary.deploy.cli", "status", "--topology", str(topology), *extra],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def status_json(topology: Path) -> tuple[int, dict[str, Any]]:
    result = status(topology, "--output", "json")
    assert result.stderr == "", result.stderr
    return result.returncode, json.loads(result.stdout)


def topic(report: dict[str, Any], cluster: str, name: str) -> dict[str, Any] | None:
    clusters = {c["name"]: c for c in report["clusters"]}
    return next((t for t in clusters[cluster]["topics"] if t["name"] == name), None)


def poll(condition: Any, timeout: float, what: str) -> Any:
    return eventually(condition, timeout, what, interval=0.5)


def test_status_shows_everything_up_mirror_lag_and_a_restarted_mirror(tmp_path: Path) -> None:
    path = write_topology(tmp_path / "t.toml", mirrors=True)
    topology = load_topology(path)
    with running_up(path, tmp_path / "up.out") as up:
        code, report = status_json(path)
        assert code == 0, report
        assert report["all_up"] is True
        assert [c["name"] for c in report["clusters"]] == ["east", "aggregate"]
        assert all(b["up"] for c in report["clusters"] for b in c["brokers"])
        assert all(z["up"] for c in report["clusters"] for z in c["zookeeper"])
        mirror = report["mirrors"][0]
        assert (mirror["alias"], mirror["up"], mirror["lag_records"]) == ("east", True, 0)
        assert report["loads"][0]["ran"] is False

        producer = Producer({"bootstrap.servers": topology.clusters["east"].bootstrap, "compression.type": "zstd"})
        for i in range(1000):
            producer.produce("pageviews", value=b'{"url":"/p/%d"}' % i, key=b"u%d" % (i % 37))
        assert producer.flush(30) == 0

        def mirrored() -> dict[str, Any] | None:
            _, report = status_json(path)
            copy = topic(report, "aggregate", "east.pageviews")
            mirror = report["mirrors"][0]
            # The aggregate serves the records once they are acknowledged; the mirror counts
            # them when the acknowledgement reaches it, a moment later.
            done = copy is not None and copy["records"] == 1000 and mirror["lag_records"] == 0
            return report if done and mirror["copied_records"] == 1000 else None

        report = poll(mirrored, 60, "the mirror copying 1000 records")
        healthy = {"under_replicated": [], "offline": []}
        assert topic(report, "east", "pageviews") == {"name": "pageviews", "partitions": 2, "records": 1000, **healthy}
        assert topic(report, "aggregate", "east.pageviews") == {
            "name": "east.pageviews",
            "partitions": 2,
            "records": 1000,
            **healthy,
        }
        assert report["mirrors"][0]["copied_records"] == 1000
        assert report["mirrors"][0]["lag_seconds"] == 0
        assert report["mirrors"][0]["links_up"] is True

        # The table: one row per component, the mirror's lag among them.
        table = status(path)
        assert table.returncode == 0
        assert re.search(r"^mirror +east +127\.0\.0\.1:\d+ +up +east -> aggregate: lag 0 records / 0\.0 s, "
                         r"copied 1,000 records$", table.stdout, re.MULTILINE), table.stdout  # fmt: skip
        assert re.search(r"^topic +aggregate/east\.pageviews +2 partitions, 1,000 records$", table.stdout, re.MULTILINE)
        assert re.search(r"^load +nightly +file://\S+ +never +no run recorded yet$", table.stdout, re.MULTILINE)
        assert table.stdout.rstrip().endswith("everything is up")

        # kill -9 the mirror: noticed and restarted; it copies what came meanwhile, once.
        old = up.pids()["mirror/east"]
        since = len(up.output())
        os.kill(old, signal.SIGKILL)
        up.wait_for(r"mirror/east: pid \d+ killed by SIGKILL", since=since, timeout=10)
        new = int(up.wait_for(r"mirror/east: started \(pid (\d+)\)", since=since, timeout=30)[1])
        assert new != old
        for i in range(500):
            producer.produce("pageviews", value=b'{"url":"/q/%d"}' % i)
        assert producer.flush(30) == 0

        def caught_up() -> bool:
            copy = topic(status_json(path)[1], "aggregate", "east.pageviews")
            return copy is not None and copy["records"] == 1500

        poll(caught_up, 90, "the restarted mirror copying the next 500 records")
        code, report = status_json(path)
        assert code == 0 and report["all_up"]
    # Everything stopped: every row is down with its reason, exit status 3, no traceback.
    down = status(path, "--timeout", "1")
    assert down.returncode == 3
    assert "Traceback" not in down.stdout + down.stderr
    rows = [line for line in down.stdout.splitlines() if re.match(r"^(zookeeper|broker|mirror) ", line)]
    assert len(rows) == 5
    assert all(" DOWN " in row and "refused" in row.lower() for row in rows), rows
    assert down.stdout.rstrip().endswith("something is DOWN")


def test_status_of_a_bad_topology_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text("[datacenters.x]\n[clusters.c]\ndatacenter = 'y'\n")
    result = status(path)
    assert result.returncode == 2
    assert result.stderr == f"tributary status: {path}: cluster 'c' names unknown datacenter 'y' (line 3)\n"
