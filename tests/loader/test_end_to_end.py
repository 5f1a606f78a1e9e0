"""A real load: three brokers, mirrored-looking zstd topics, PySpark in local mode, Parquet read back."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer

from tests.deploy.promql import dashboard_metric_names
from tributary.testing.cluster import Cluster

from .conftest import Produced, create_topics, loaded_keys, manifests, produce, read_warehouse, run_load, unique

HOUR_MS = 3_600_000
# 2024-03-01 21:00 UTC: records spread over 30 hours cross two date boundaries.
FIRST_MS = int(datetime(2024, 3, 1, 21, tzinfo=UTC).timestamp() * 1000)


DASHBOARD = Path(__file__).parents[2] / "deploy" / "grafana" / "loader.json"


@dataclass
class FirstLoad:
    tag: str
    topics: list[str]
    counts: list[int]
    produced: list[Produced]
    output: Path
    summary: Path
    metrics: Path
    stdout: str


@pytest.fixture(scope="module")
def first_load(aggregate: Cluster, tmp_path_factory: pytest.TempPathFactory) -> FirstLoad:
    """105,000 zstd records in four topics (three named like mirrored ones) over 30 hours, loaded once."""
    tmp_path = tmp_path_factory.mktemp("load")
    tag = unique("")
    topics = [f"east.clicks{tag}", f"west.clicks{tag}", f"east.orders{tag}", f"local{tag}"]
    counts = [40_000, 30_000, 20_000, 15_000]
    create_topics(aggregate.bootstrap, topics)
    produced = []
    for topic, count in zip(topics, counts, strict=True):
        produced += produce(aggregate.bootstrap, topic, count, first_ms=FIRST_MS, step_ms=30 * HOUR_MS // count)
    output = tmp_path / "warehouse"
    summary_path, metrics_path = tmp_path / "summary.json", tmp_path / "metrics.prom"
    result = run_load(
        aggregate.bootstrap,
        output,
        "--topics", f".*{tag}",
        "--max-records-per-task", "12000",
        "--summary-json", str(summary_path),
        "--metrics-file", str(metrics_path),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return FirstLoad(tag, topics, counts, produced, output, summary_path, metrics_path, result.stdout)


def test_a_load_holds_every_record_once_with_its_columns(first_load: FirstLoad) -> None:
    tag, counts, produced, output = (
        first_load.tag,
        first_load.counts,
        first_load.produced,
        first_load.output,
    )

    table = read_warehouse(output)
    assert table.num_rows == sum(counts)
    rows = table.to_pylist()
    got = {(r["topic"], r["partition"], r["offset"]): r for r in rows}
    assert len(got) == len(rows)  # no record twice
    for p in produced:
        row = got[(p.topic, p.partition, p.offset)]
        dc, _, source_topic = p.topic.partition(".") if p.topic.startswith(("east.", "west.")) else (None, "", p.topic)
        assert row["source_datacenter"] == dc
        assert row["source_topic"] == source_topic
        assert row["key"] == p.key
        assert row["value"] == p.value
        assert row["timestamp"] == datetime.fromtimestamp(p.timestamp / 1000, UTC)
        assert row["event_date"] == row["timestamp"].date().isoformat()
        assert tuple((h["key"], h["value"]) for h in row["headers"]) == p.headers

    # The directories: topic, source datacenter (Hive's null for unmirrored topics), event date.
    dirs = {f.parent.relative_to(output).as_posix() for f in output.rglob("*.parquet") if "_tributary" not in f.parts}
    assert f"topic=east.clicks{tag}/source_datacenter=east/event_date=2024-03-01" in dirs
    assert f"topic=local{tag}/source_datacenter=__HIVE_DEFAULT_PARTITION__/event_date=2024-03-03" in dirs
    for f in output.rglob("*.parquet"):  # each file's name says what it holds
        topic, partition, first, last = f.stem.rsplit("-", 3)
        assert f.parent.parent.parent.name == f"topic={topic}"
        held = pq.ParquetFile(f).read(columns=["partition", "offset"])
        assert set(held["partition"].to_pylist()) == {int(partition)}
        assert held["offset"].to_pylist()[0] == int(first) and held["offset"].to_pylist()[-1] == int(last)


def test_the_manifest_counts_what_was_produced(first_load: FirstLoad) -> None:
    topics, counts, produced, output = first_load.topics, first_load.counts, first_load.produced, first_load.output
    # The manifest counts per (topic, source datacenter, hour) equal what was produced.
    (run,) = manifests(output).values()
    expected = Counter(
        (p.topic, p.topic.split(".")[0] if "." in p.topic else None, p.timestamp // HOUR_MS * HOUR_MS) for p in produced
    )
    counted = Counter(
        {
            (c["topic"], c["source_datacenter"], int(datetime.fromisoformat(c["hour"]).timestamp() * 1000)): c[
                "records"
            ]
            for c in run["counts"]
        }
    )
    assert counted == expected
    assert sum(f["rows"] for f in run["files"]) == sum(counts)
    assert {(r["topic"], r["partition"]) for r in run["ranges"]} == {(t, p) for t in topics for p in range(3)}
    assert max(r["end"] - r["start"] for r in run["ranges"]) <= 12_000


def test_spark_s_writer_loads_the_same_files(
    aggregate: Cluster, first_load: FirstLoad, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # file:// takes the tasks' own pyarrow writer; Spark's (hdfs:// takes it by default) must
    # give the same files with the same rows, counted alike in the manifest.
    output = tmp_path_factory.mktemp("spark-writer") / "warehouse"
    result = run_load(
        aggregate.bootstrap, output, "--topics", f".*{first_load.tag}", "--max-records-per-task", "12000",
        "--writer", "spark",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "(spark writer)" in result.stderr and "staged files described" in result.stderr

    def files(root: Path) -> set[str]:
        return {f.relative_to(root).as_posix() for f in root.rglob("*.parquet") if "_tributary" not in f.parts}

    assert files(output) == files(first_load.output)
    order = [("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")]
    assert read_warehouse(output).sort_by(order).equals(read_warehouse(first_load.output).sort_by(order))
    ((_, ours),), ((_, spark),) = manifests(first_load.output).items(), manifests(output).items()
    assert sorted(ours["counts"], key=json.dumps) == sorted(spark["counts"], key=json.dumps)
    # The files as the manifests describe them (their bytes aside: two Parquet encoders).
    described = [{k: v for k, v in f.items() if k != "bytes"} for f in ours["files"]]
    assert sorted(described, key=json.dumps) == sorted(
        ({k: v for k, v in f.items() if k != "bytes"} for f in spark["files"]), key=json.dumps
    )


def test_summary_table_json_and_metrics(first_load: FirstLoad) -> None:
    tag, topics, counts, output = first_load.tag, first_load.topics, first_load.counts, first_load.output
    summary = json.loads(first_load.summary.read_text())
    assert summary["run"] == "00000001" and summary["records"] == sum(counts)
    assert {(t["topic"], t["records"]) for t in summary["by_topic"]} == set(zip(topics, counts, strict=True))
    assert summary["bytes"] == sum(f.stat().st_size for f in output.rglob("*.parquet"))
    metrics = first_load.metrics.read_text()
    assert "tributary_loader_last_run_success 1" in metrics
    assert f'tributary_loader_last_run_records{{topic="local{tag}",source_datacenter=""}} 15000' in metrics
    assert "RECORDS" in first_load.stdout and "105,000" in first_load.stdout


def test_the_dashboard_queries_only_metrics_a_load_writes(first_load: FirstLoad) -> None:
    written = set(re.findall(r"^(tributary_loader_\w+)", first_load.metrics.read_text(), re.MULTILINE))
    used = dashboard_metric_names(json.loads(DASHBOARD.read_text()))
    assert used, "the dashboard queries nothing"
    assert {name for name in used if name not in written} == set(), "metrics no loader run writes"
    assert written <= set(used)  # and every metric the loader writes is on the dashboard


def test_later_runs_load_only_new_records(aggregate: Cluster, first_load: FirstLoad) -> None:
    tag, topics, counts, produced, output = (
        first_load.tag,
        first_load.topics,
        first_load.counts,
        first_load.produced,
        first_load.output,
    )

    # A second run with nothing new commits nothing; with new records it loads only those.
    again = run_load(aggregate.bootstrap, output, "--topics", f".*{tag}")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "nothing new" in again.stdout
    more = produce(aggregate.bootstrap, topics[0], 5_000, first_ms=FIRST_MS + 40 * HOUR_MS, step_ms=1000, tag="more")
    third = run_load(aggregate.bootstrap, output, "--topics", f".*{tag}")
    assert third.returncode == 0, third.stderr[-3000:]
    second_run = manifests(output)["00000002"]
    assert second_run["totals"]["rows"] == 5_000
    assert {(p.topic, p.partition, p.offset) for p in produced + more} == set(loaded_keys(output))
    assert len(loaded_keys(output)) == sum(counts) + 5_000


def test_only_committed_transactions_are_loaded(aggregate: Cluster, tmp_path: Path) -> None:
    """A topic written by transactions, some committed, some aborted, one still open at load
    time: Hadoop gets the committed records only, and nothing at or past the open transaction's
    first offset until it ends (the run plans to the last stable offset); the next run loads it."""
    topic = f"east.payments{unique('')}"
    create_topics(aggregate.bootstrap, [topic], partitions=2)
    producer = Producer(
        {
            "bootstrap.servers": aggregate.bootstrap,
            "transactional.id": f"pay-{topic}",
            "compression.type": "zstd",
            "linger.ms": 5,
            # The open transaction must outlive a whole load.
            "transaction.timeout.ms": 600_000,
        }
    )
    producer.init_transactions(30)
    committed: list[bytes] = []

    def transaction(tag: str, count: int, *, commit: bool | None) -> list[bytes]:
        values = [f"{tag}-{i}".encode() for i in range(count)]
        producer.begin_transaction()
        for i, value in enumerate(values):
            producer.produce(topic, value=value, partition=i % 2, timestamp=FIRST_MS + i)
        producer.flush(30)
        if commit is True:
            producer.commit_transaction(30)
        elif commit is False:
            producer.abort_transaction(30)
        return values

    for n in range(4):
        committed += transaction(f"commit{n}", 500, commit=True)
        transaction(f"abort{n}", 300, commit=False)
    open_values = transaction("open", 200, commit=None)
    output = tmp_path / "warehouse"
    first = run_load(aggregate.bootstrap, output, "--topics", topic)
    assert first.returncode == 0, first.stderr[-3000:]
    loaded = read_warehouse(output).column("value").to_pylist()
    assert sorted(loaded) == sorted(committed)
    producer.commit_transaction(30)
    producer.close()
    second = run_load(aggregate.bootstrap, output, "--topics", topic)
    assert second.returncode == 0, second.stderr[-3000:]
    loaded = read_warehouse(output).column("value").to_pylist()
    assert sorted(loaded) == sorted(committed + open_values)
