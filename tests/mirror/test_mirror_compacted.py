"""The mirror over a compacted source: the aggregate holds what the source holds, record for
record (key, value, timestamp, headers, order), though the source's cleaner left offset gaps
inside and between batches and empty batches of idempotent producers; the aggregate topic is
compacted as its source is, and the mirror's own offsets topic is compacted.

A batch with gaps inside is renumbered by the mirror (Kafka refuses it from a producer), with
its codec; the others are copied as they are.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.fixtures.compaction import cleaned
from tests.fixtures.mirror import MirrorProcess
from tests.fixtures.zookeeper import ZooKeeperHandle
from tributary.client.blocking import BlockingFetcher
from tributary.client.errors import KafkaError
from tributary.protocol.records import has_gaps
from tributary.testing.cluster import Cluster, start_cluster
from tributary.testing.polling import eventually

from .helpers import read_batches, wait_for

TIMEOUT = 60.0
CLEANER = {"log.cleaner.backoff.ms": "100"}
TOPIC = "profiles"


@pytest.fixture
def source_and_aggregate(zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[tuple[Cluster, Cluster]]:
    (tmp_path / "east").mkdir()
    (tmp_path / "agg").mkdir()
    for east in start_cluster(zookeeper.hosts + "/east", tmp_path / "east", 1, CLEANER):
        for agg in start_cluster(zookeeper.hosts + "/agg", tmp_path / "agg", 1, CLEANER):
            yield east, agg


def _records(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None, object]]:
    out = []
    with BlockingFetcher(bootstrap) as fetcher:
        start, end = fetcher.offset_bounds(topic)[0]
        if start < end:
            for fetched in fetcher.fetch_range(topic, 0, start, end):
                out += [(r.timestamp, r.key, r.value, r.headers) for r in fetched.iter_records(start, end)]
    return out


def _copied(bootstrap: str) -> int:
    try:
        return len(_records(bootstrap, f"east.{TOPIC}"))
    except KafkaError:  # not created yet
        return 0


def test_the_mirror_copies_a_compacted_source_faithfully(
    source_and_aggregate: tuple[Cluster, Cluster], tmp_path: Path
) -> None:
    east, agg = source_and_aggregate
    source_admin = AdminClient({"bootstrap.servers": east.bootstrap})
    configs = {"cleanup.policy": "compact", "segment.bytes": "8192", "min.cleanable.dirty.ratio": "0.01"}
    source_admin.create_topics([NewTopic(TOPIC, 1, 1, config=configs)])[TOPIC].result(30)
    producer = Producer(
        {"bootstrap.servers": east.bootstrap, "compression.type": "zstd", "linger.ms": 5, "batch.size": 2048,
         "enable.idempotence": True}
    )  # fmt: skip
    for i in range(6000):
        key = b"user-%03d" % (i % 150)
        producer.produce(TOPIC, key=key, value=None if i % 97 == 0 else b"profile-%d" % i, headers=[("n", b"%d" % i)])
        producer.poll(0)
    assert producer.flush(30) == 0
    # The source compacts: its closed segments keep a record per key, in batches with gaps. A clean
    # that began while the records were produced covers only the segments closed then: the source
    # is compared once the last one is done (a later clean would leave the snapshot's records
    # that the mirror never saw, and the copy would never reach their count).
    eventually(lambda: cleaned(east.brokers[0].data_dir, TOPIC), TIMEOUT, "the source to be compacted")
    assert len(_records(east.bootstrap, TOPIC)) < 2500
    source_batches = read_batches(east.bootstrap, TOPIC)[0]
    assert any(has_gaps(h) for h, _ in source_batches), "no batch with gaps inside: nothing renumbered"
    source = _records(east.bootstrap, TOPIC)

    mirror = MirrorProcess(east.bootstrap, "east", agg.bootstrap, tmp_path / "mirror.log")
    mirror.start()
    try:
        wait_for(
            lambda: _copied(agg.bootstrap) >= len(source), TIMEOUT, f"the copy of {len(source)} records",
            lambda: f"{_copied(agg.bootstrap)} copied\n{mirror.log_tail()}",
        )  # fmt: skip
        assert mirror.stop() == 0
    finally:
        if mirror.running():
            mirror.kill()
    assert _records(agg.bootstrap, f"east.{TOPIC}") == source
    admin = AdminClient({"bootstrap.servers": agg.bootstrap})
    for topic in (f"east.{TOPIC}", "__tributary_mirror_offsets"):
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        configs = admin.describe_configs([resource])[resource].result(30)
        assert configs["cleanup.policy"].value == "compact", topic
