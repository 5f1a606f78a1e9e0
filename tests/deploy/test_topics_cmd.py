"""``tributary topics`` against a live three-broker cluster: every action, in tables and
JSON, with the numbers checked against what was produced and what is on disk."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from tests.fixtures.brokers import module_cluster
from tests.fixtures.zookeeper import ZooKeeperServer
from tributary.testing.cluster import Cluster
from tributary.testing.ports import free_port

from .cli_runner import Result, assert_one_line_error, tributary

TIMEOUT = 30.0


@pytest.fixture(scope="module")
def cluster(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from module_cluster(zookeeper_server, tmp_path_factory.mktemp("topics-cmd"))


def topics(capsys: pytest.CaptureFixture[str], cluster: Cluster, *argv: str) -> Result:
    return tributary(capsys, "topics", "--bootstrap", cluster.bootstrap, *argv)


def new_name() -> str:
    return f"cmd-{uuid.uuid4().hex[:10]}"


def produce(cluster: Cluster, topic: str, counts: dict[int, int], size: int = 200) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5})
    for partition, count in counts.items():
        for i in range(count):
            producer.produce(topic, value=bytes([i % 256]) * size, partition=partition)
    assert producer.flush(TIMEOUT) == 0


def leaders(cluster: Cluster, topic: str) -> dict[int, int]:
    meta = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(topic, timeout=TIMEOUT)
    return {p.id: p.leader for p in meta.topics[topic].partitions.values()}


def on_disk(cluster: Cluster, topic: str, partition: int, leader: int) -> int:
    directory = Path(cluster.brokers[leader - 1].data_dir, f"{topic}-{partition}")
    return sum(f.stat().st_size for f in directory.glob("*.log"))


def test_create_list_describe_alter_delete(capsys: pytest.CaptureFixture[str], cluster: Cluster) -> None:
    topic = new_name()
    created = topics(capsys, cluster, "create", topic, "--partitions", "3", "--config", "retention.ms=3600000")
    assert created.status == 0, created.err
    assert created.out == f"created topic {topic} with 3 partitions\n"

    counts = {0: 5, 1: 0, 2: 12}
    produce(cluster, topic, counts)
    led = leaders(cluster, topic)
    sizes = {p: on_disk(cluster, topic, p, led[p]) for p in range(3)}
    assert sizes[0] > 5 * 200 and sizes[1] == 0 and sizes[2] > 12 * 200

    listed = {row["topic"]: row for row in topics(capsys, cluster, "list", "--output", "json").json()}
    assert listed[topic] == {"topic": topic, "partitions": 3, "size_bytes": sum(sizes.values())}
    assert "__consumer_offsets" not in listed

    (described,) = topics(capsys, cluster, "--output", "json", "describe", topic).json()
    assert described["partitions"] == [
        {
            "partition": p,
            "leader": led[p],
            "leader_epoch": 0,
            "replicas": [led[p]],
            "isr": [led[p]],
            "earliest_offset": 0,
            "latest_offset": counts[p],
            "records": counts[p],
            "size_bytes": sizes[p],
        }
        for p in range(3)
    ]
    assert described["configs"]["retention.ms"] == {"value": "3600000", "source": "topic"}
    assert described["configs"]["segment.bytes"] == {"value": str(1 << 30), "source": "default"}

    table = topics(capsys, cluster, "describe", topic)
    assert table.status == 0
    lines = table.out.splitlines()
    assert lines[0].startswith(f"Topic: {topic}  partitions: 3  records: 17  size: ")
    assert re.fullmatch(r"PARTITION\s+LEADER\s+EPOCH\s+REPLICAS\s+ISR\s+EARLIEST\s+LATEST\s+RECORDS\s+SIZE", lines[1])
    assert re.fullmatch(rf"\s*2\s+{led[2]}\s+0\s+{led[2]}\s+{led[2]}\s+0\s+12\s+12\s+\S+ \S+", lines[4])
    assert re.search(r"^retention\.ms\s+3600000\s+topic$", table.out, re.MULTILINE)
    # What a rolling restart waits for: no partition under-replicated (exit 0, nothing listed).
    healthy = topics(capsys, cluster, "--output", "json", "describe", "--under-replicated-partitions")
    assert (healthy.status, healthy.json()) == (0, [])

    altered = topics(
        capsys,
        cluster,
        "alter",
        topic,
        "--partitions",
        "5",
        "--config",
        "retention.bytes=1000000",
        "--delete-config",
        "retention.ms",
    )
    assert altered.status == 0, altered.err
    assert altered.out.splitlines() == [
        f"topic {topic} now has 5 partitions",
        f"topic {topic}: retention.bytes = 1000000",
        f"topic {topic}: retention.ms reset to its default",
    ]
    # Each broker learns of the new partitions from its own ZooKeeper watch, a moment apart.
    deadline = time.monotonic() + TIMEOUT
    while len(described := topics(capsys, cluster, "describe", topic, "--output", "json").json()[0]["partitions"]) < 5:
        assert time.monotonic() < deadline, described
        time.sleep(0.05)
    assert sorted(leaders(cluster, topic)) == [0, 1, 2, 3, 4]
    (described,) = topics(capsys, cluster, "describe", topic, "--output", "json").json()
    assert [p["latest_offset"] for p in described["partitions"]] == [5, 0, 12, 0, 0]
    assert described["configs"]["retention.bytes"] == {"value": "1000000", "source": "topic"}
    assert described["configs"]["retention.ms"]["source"] == "default"

    deleted = topics(capsys, cluster, "delete", topic)
    assert deleted.status == 0 and deleted.out == f"deleted topic {topic}\n"
    assert topic not in {row["topic"] for row in topics(capsys, cluster, "list", "--output", "json").json()}
    assert_one_line_error(topics(capsys, cluster, "describe", topic), 1, f"no such topic: {topic}")


def test_alter_switches_compaction_on(capsys: pytest.CaptureFixture[str], cluster: Cluster) -> None:
    topic = new_name()
    assert topics(capsys, cluster, "create", topic, "--partitions", "1").status == 0
    altered = topics(
        capsys, cluster, "alter", topic, "--config", "cleanup.policy=compact,delete",
        "--config", "min.cleanable.dirty.ratio=0.1", "--config", "delete.retention.ms=60000",
    )  # fmt: skip
    assert altered.status == 0, altered.err
    (described,) = topics(capsys, cluster, "describe", topic, "--output", "json").json()
    assert described["configs"]["cleanup.policy"] == {"value": "compact,delete", "source": "topic"}
    assert described["configs"]["min.cleanable.dirty.ratio"] == {"value": "0.1", "source": "topic"}
    assert described["configs"]["delete.retention.ms"] == {"value": "60000", "source": "topic"}
    assert_one_line_error(
        topics(capsys, cluster, "alter", topic, "--config", "cleanup.policy=shred"), 1, "cleanup.policy must be"
    )


def test_list_table_and_internal_topics(capsys: pytest.CaptureFixture[str], cluster: Cluster) -> None:
    topic = new_name()
    assert topics(capsys, cluster, "create", topic, "--partitions", "2").status == 0
    produce(cluster, topic, {1: 3}, size=100)
    table = topics(capsys, cluster, "list")
    assert table.out.splitlines()[0].split() == ["TOPIC", "PARTITIONS", "SIZE"]
    row = next(line for line in table.out.splitlines() if line.startswith(topic))
    size = sum(on_disk(cluster, topic, p, leader) for p, leader in leaders(cluster, topic).items())
    assert row.split() == [topic, "2", str(size), "B"]
    # Options may also follow the action.
    after = tributary(capsys, "topics", "list", "--internal", "--bootstrap", cluster.bootstrap, "--output", "json")
    assert {"topic": topic, "partitions": 2, "size_bytes": size} in after.json()


def test_create_if_not_exists_and_refusals(capsys: pytest.CaptureFixture[str], cluster: Cluster) -> None:
    topic = new_name()
    assert topics(capsys, cluster, "create", topic, "--partitions", "2").status == 0
    assert_one_line_error(topics(capsys, cluster, "create", topic, "--partitions", "2"), 1, "TOPIC_ALREADY_EXISTS")
    again = topics(capsys, cluster, "create", topic, "--partitions", "2", "--if-not-exists", "--output", "json")
    assert again.json() == {"topic": topic, "created": True, "partitions": 2, "configs": {}}

    assert_one_line_error(topics(capsys, cluster, "create", new_name(), "--config", "retention.ms"), 2, "KEY=VALUE")
    assert_one_line_error(
        topics(capsys, cluster, "create", new_name(), "--config", "segment.bytes=1"), 1, "INVALID_CONFIG"
    )
    assert_one_line_error(topics(capsys, cluster, "alter", topic, "--partitions", "1"), 1, "INVALID_PARTITIONS")
    assert_one_line_error(topics(capsys, cluster, "alter", topic), 2, "nothing to change")
    assert_one_line_error(topics(capsys, cluster, "alter", new_name(), "--partitions", "3"), 1, "no such topic")
    assert_one_line_error(
        topics(capsys, cluster, "alter", topic, "--config", "no.such=1"), 1, "unknown or unsupported topic config"
    )
    assert_one_line_error(topics(capsys, cluster, "delete", new_name()), 1, "UNKNOWN_TOPIC_OR_PARTITION")
    # Nothing was changed by the refusals.
    (described,) = topics(capsys, cluster, "describe", topic, "--output", "json").json()
    assert len(described["partitions"]) == 2
    assert {k for k, v in described["configs"].items() if v["source"] == "topic"} == set()


def test_bad_bootstrap_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert_one_line_error(tributary(capsys, "topics", "list"), 2, "--bootstrap is required")
    started = time.monotonic()
    unreachable = tributary(capsys, "topics", "--bootstrap", f"127.0.0.1:{free_port()}", "--timeout", "2", "list")
    assert_one_line_error(unreachable, 1, "tributary topics: error:")
    assert time.monotonic() - started < 15
