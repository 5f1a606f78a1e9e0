"""``tributary topics delete-records`` (Kafka's offset JSON) and ``tributary api-versions
--bootstrap`` against a live two-broker cluster."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.fixtures.brokers import module_cluster
from tests.fixtures.zookeeper import ZooKeeperServer
from tests.interop.wire import read_from_beginning, wait_for_topic
from tributary.protocol.supported import CLIENT_VERSIONS, SUPPORTED_VERSIONS
from tributary.testing.cluster import Cluster
from tributary.testing.ports import free_port

from .cli_runner import assert_one_line_error, tributary

TIMEOUT = 30.0


@pytest.fixture(scope="module")
def cluster(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from module_cluster(zookeeper_server, tmp_path_factory.mktemp("records-cmd"), size=2)


def topic_with(cluster: Cluster, partitions: int, records: int) -> str:
    name = f"cmd-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # held until the answer comes
    admin.create_topics([NewTopic(name, partitions, 2)])[name].result(TIMEOUT)
    wait_for_topic(cluster, name, partitions)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for partition in range(partitions):
        for i in range(records):
            producer.produce(name, value=b"%d-%d" % (partition, i), partition=partition)
    assert producer.flush(TIMEOUT) == 0
    return name


def test_delete_records_from_kafkas_offset_json_file(
    capsys: pytest.CaptureFixture[str], cluster: Cluster, tmp_path: Path
) -> None:
    topic = topic_with(cluster, 2, 10)
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({
        "version": 1,
        "partitions": [{"topic": topic, "partition": 0, "offset": 3}, {"topic": topic, "partition": 1, "offset": -1}],
    }))  # fmt: skip
    result = tributary(capsys, "topics", "--bootstrap", cluster.bootstrap, "delete-records",
                       "--offset-json-file", str(offsets))  # fmt: skip
    assert result.status == 0, result.err
    assert result.out.split() == ["TOPIC", "PARTITION", "LOW", "WATERMARK", topic, "0", "3", topic, "1", "10"]
    consumed, watermarks = read_from_beginning(cluster.bootstrap, topic, 2, f"g-{uuid.uuid4().hex[:8]}")
    assert watermarks == {0: (3, 10), 1: (10, 10)}
    assert [m.value() for m in consumed[0]] == [b"0-%d" % i for i in range(3, 10)]
    assert consumed[1] == []

    one = tributary(capsys, "topics", "--bootstrap", cluster.bootstrap, "--output", "json", "delete-records",
                    "--topic", topic, "--partition", "0", "--offset", "5")  # fmt: skip
    assert one.json() == [{"topic": topic, "partition": 0, "low_watermark": 5}]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("not json", "not JSON"),
        ('{"version": 2, "partitions": []}', "version 2"),
        ('{"partitions": []}', "non-empty"),
        ('{"partitions": [{"topic": "t", "partition": 0}]}', "needs a topic, a partition and an offset"),
        ('{"partitions": [{"topic": "t", "partition": 0, "offset": 1}, {"topic": "t", "partition": 0, "offset": 2}]}',
         "twice"),
        ('{"partitions": [{"topic": "t", "partition": 0, "offset": -2}]}', "neither an offset nor -1"),
    ],
)  # fmt: skip
def test_a_bad_offset_file_is_one_line(
    capsys: pytest.CaptureFixture[str], cluster: Cluster, tmp_path: Path, content: str, fragment: str
) -> None:
    offsets = tmp_path / "offsets.json"
    offsets.write_text(content)
    result = tributary(capsys, "topics", "--bootstrap", cluster.bootstrap, "delete-records",
                       "--offset-json-file", str(offsets))  # fmt: skip
    assert_one_line_error(result, 2, fragment)


def test_delete_records_past_the_end_is_refused(capsys: pytest.CaptureFixture[str], cluster: Cluster) -> None:
    topic = topic_with(cluster, 1, 4)
    result = tributary(capsys, "topics", "--bootstrap", cluster.bootstrap, "delete-records",
                       "--topic", topic, "--partition", "0", "--offset", "9")  # fmt: skip
    assert_one_line_error(result, 1, "OFFSET_OUT_OF_RANGE")


def test_api_versions_of_a_live_broker_beside_ours(capsys: pytest.CaptureFixture[str], cluster: Cluster) -> None:
    dead = f"127.0.0.1:{free_port()}"
    result = tributary(capsys, "api-versions", "--bootstrap", f"{dead},{cluster.bootstrap}", "--output", "json")
    answer = result.json()
    assert answer["broker"] in cluster.bootstrap.split(",")  # the first that answered
    rows = {row["api_key"]: row for row in answer["apis"]}
    for key, versions in SUPPORTED_VERSIONS.items():
        row = rows[int(key)]
        assert row["broker"] == row["tributary_broker"] == {"min_version": versions.lo, "max_version": versions.hi}
        client = CLIENT_VERSIONS.get(key)
        assert row["client_uses"] == (None if client is None else client.hi)
    assert rows[1]["name"] == "Fetch" and rows[1]["client_uses"] == 11  # our client: Fetch v11

    table = tributary(capsys, "api-versions", "--bootstrap", cluster.bootstrap)
    assert table.status == 0, table.err
    lines = table.out.splitlines()
    assert lines[0].startswith("broker 127.0.0.1:")
    assert lines[1].split() == ["KEY", "API", "BROKER", "TRIBUTARY", "BROKER", "TRIBUTARY", "CLIENT", "CLIENT", "USES"]
    assert any(line.split()[:5] == ["1", "Fetch", "4-17", "4-17", "4-11"] for line in lines)

    nobody = tributary(capsys, "api-versions", "--bootstrap", dead, "--timeout", "2")
    assert_one_line_error(nobody, 1, "no broker answered")
