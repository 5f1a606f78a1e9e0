"""Retention deletes segments the loader never read: the run fails naming the lost range;
with --allow-gaps it loads the rest and records the gap (manifest, commit, summary, metrics)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from tributary.client.blocking import BlockingFetcher
from tributary.testing.cluster import Cluster

from .conftest import create_topics, loaded_keys, manifests, produce, run_load, unique


def wait_for_earliest_above(bootstrap: str, topic: str, offset: int, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    with BlockingFetcher(bootstrap) as fetcher:
        while True:
            earliest = fetcher.offset_bounds(topic)[0][0]
            if earliest > offset:
                return earliest
            assert time.monotonic() < deadline, f"retention kept {topic} from {earliest}"
            time.sleep(0.1)


def test_a_gap_fails_the_run_or_is_recorded(retaining_broker: Cluster, tmp_path: Path) -> None:
    bootstrap = retaining_broker.bootstrap
    topic = unique("east.logs")
    # Only the size limit deletes: the records are stamped in 2024, so the default retention.ms
    # (7 days) would delete every closed segment at once, the first one too when the producer
    # splits the first 500 records over two batches and the log rolls between them (seen under
    # load: the first run then began at the second batch, and its records were missing).
    create_topics(bootstrap, [topic], partitions=1, config={"retention.ms": "-1"})
    output = tmp_path / "warehouse"
    # Incompressible values (hex of random bytes) so the segments fill as planned.
    first = produce(bootstrap, topic, 500, first_ms=1_709_326_800_000, step_ms=1000, noise=150)
    assert run_load(bootstrap, output, "--topics", topic).returncode == 0

    later = []
    for i in range(12):  # ~1.4 MB of zstd-proof values: retention keeps 256 KiB
        later += produce(bootstrap, topic, 400, first_ms=1_709_330_000_000 + i * 4000, step_ms=10, noise=150)
    wait_for_earliest_above(bootstrap, topic, len(first))

    metrics = tmp_path / "metrics.prom"
    failed = run_load(bootstrap, output, "--topics", topic, "--metrics-file", str(metrics))
    assert failed.returncode == 1
    named = re.search(
        rf"retention deleted (\d+) records that were never loaded: {topic}-0 offsets \[500, (\d+)\)", failed.stderr
    )
    assert named, failed.stderr[-2000:]
    earliest = int(named.group(2))
    assert int(named.group(1)) == earliest - 500 > 0
    assert "--allow-gaps" in failed.stderr
    assert "Traceback" not in failed.stderr
    assert "tributary_loader_last_run_success 0" in metrics.read_text()
    assert "tributary_loader_last_run_gaps 1" in metrics.read_text()
    assert len(manifests(output)) == 1

    summary = tmp_path / "summary.json"
    allowed = run_load(bootstrap, output, "--topics", topic, "--allow-gaps", "--summary-json", str(summary),
                       "--metrics-file", str(metrics))  # fmt: skip
    assert allowed.returncode == 0, allowed.stderr[-3000:]
    with BlockingFetcher(bootstrap) as fetcher:
        now_earliest, latest = fetcher.offset_bounds(topic)[0]
    # Retention had settled before the failed run (nothing was produced since): the gap named is exact.
    assert now_earliest == earliest
    kept = {(p.topic, p.partition, p.offset) for p in first + later if p.offset < len(first) or p.offset >= earliest}
    assert set(loaded_keys(output)) == kept
    assert len(loaded_keys(output)) == len(kept) == len(first) + latest - earliest
    gap = {"topic": topic, "partition": 0, "start": 500, "end": earliest}
    assert manifests(output)["00000002"]["gaps"] == [{**gap, "records": earliest - 500}]
    assert json.loads(summary.read_text())["gaps"] == [gap]
    assert "tributary_loader_last_run_gaps 1" in metrics.read_text()
    assert "tributary_loader_last_run_success 1" in metrics.read_text()
    assert f"gap recorded: {topic}-0 offsets [500, {earliest})" in allowed.stdout
