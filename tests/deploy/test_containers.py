"""testcontainers where a Docker engine answers, local processes where none does.

On the project's machines no engine answers: the ZooKeeper fixture runs a local process (see the
pytest header line) and the Apache Kafka test below skips with the reason
"no Docker engine answers at ...; using local processes".
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.containers import KafkaBroker, docker_available, no_docker_reason, use_containers
from tests.fixtures.zookeeper import ZooKeeperHandle, zookeeper_flavour
from tributary.testing.cluster import Cluster

RECORDS = 200


def test_containers_follow_the_engine_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRIBUTARY_USE_CONTAINERS", raising=False)
    assert use_containers() == docker_available()
    monkeypatch.setenv("TRIBUTARY_USE_CONTAINERS", "0")
    assert not use_containers()
    monkeypatch.setenv("TRIBUTARY_USE_CONTAINERS", "1")
    assert use_containers()
    assert no_docker_reason().startswith("no Docker engine answers at ")
    assert no_docker_reason().endswith("; using local processes")


def test_zookeeper_runs_where_the_decision_says(zookeeper: ZooKeeperHandle) -> None:
    expected = "docker container (testcontainers)" if zookeeper_flavour() == "docker" else "local process"
    assert zookeeper.server.kind == expected
    assert zookeeper.server.running()


def test_mirror_copies_from_apache_kafka(kafka_container: KafkaBroker, single_broker: Cluster, tmp_path: Path) -> None:
    """Apache Kafka as a foreign source: its topic arrives in the aggregate as `kafka.<topic>`."""
    from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: PLC0415

    producer = Producer({"bootstrap.servers": kafka_container.bootstrap, "compression.type": "zstd"})
    for i in range(RECORDS):
        producer.produce("activity", json.dumps({"seq": i, "page": f"/p/{i % 7}"}).encode())
    assert producer.flush(30) == 0

    log = (tmp_path / "mirror.log").open("wb")
    mirror = subprocess.Popen(
        [
            sys.executable, "-m", "tributary.deploy.cli", "mirror",
            "--source", kafka_container.bootstrap, "--source-alias", "kafka",
            "--target", single_broker.bootstrap, "--topics", "activity",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    consumer = Consumer({"bootstrap.servers": single_broker.bootstrap, "group.id": "tributary-test-containers"})
    try:
        deadline = time.monotonic() + 120
        copied = 0
        while time.monotonic() < deadline:
            assert mirror.poll() is None, (tmp_path / "mirror.log").read_text()
            topics = consumer.list_topics("kafka.activity", timeout=5).topics
            partitions = topics["kafka.activity"].partitions if "kafka.activity" in topics else {}
            copied = sum(
                consumer.get_watermark_offsets(TopicPartition("kafka.activity", p), timeout=5)[1] for p in partitions
            )
            if copied >= RECORDS:
                break
            time.sleep(0.2)
        assert copied == RECORDS
    finally:
        consumer.close()
        mirror.terminate()
        assert mirror.wait(30) == 0
        log.close()
