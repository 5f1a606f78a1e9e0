"""The loader over a compacted aggregate topic, without Spark: its plan names no gap (compaction
never moves a log's start, and a committed offset the cleaner removed is no loss), and its read
tasks load exactly what a reader of the topic gets, however the ranges fall across the offset
gaps, rewritten batches and empty batches the cleaner left."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.fixtures.brokers import module_cluster
from tests.fixtures.compaction import cleaned
from tests.fixtures.zookeeper import ZooKeeperServer
from tributary.client.blocking import BlockingFetcher
from tributary.loader.plan import list_bounds, make_plan
from tributary.loader.read import read_range
from tributary.testing.cluster import Cluster
from tributary.testing.polling import eventually

TOPIC = "east.profiles"
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def cluster(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root: Path = tmp_path_factory.mktemp("loader-compacted")
    yield from module_cluster(zookeeper_server, root, {"log.cleaner.backoff.ms": "100"}, size=1)


def _records(fetcher: BlockingFetcher) -> list[tuple[int, bytes | None, bytes | None]]:
    start, end = fetcher.offset_bounds(TOPIC)[0]
    return [
        (r.offset, r.key, r.value)
        for fetched in fetcher.fetch_range(TOPIC, 0, start, end)
        for r in fetched.iter_records(start, end)
    ]


def test_the_loader_loads_a_compacted_topic_and_names_no_gap(cluster: Cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    configs = {"cleanup.policy": "compact", "segment.bytes": "8192", "min.cleanable.dirty.ratio": "0.01"}
    admin.create_topics([NewTopic(TOPIC, 1, 1, config=configs)])[TOPIC].result(30)
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "compression.type": "zstd", "linger.ms": 5, "batch.size": 2048,
         "enable.idempotence": True}
    )  # fmt: skip
    for i in range(6000):
        producer.produce(TOPIC, key=b"user-%03d" % (i % 150), value=None if i % 89 == 0 else b"profile-%d" % i)
        producer.poll(0)
    assert producer.flush(30) == 0
    with BlockingFetcher(cluster.bootstrap) as fetcher:
        # Compared once the cleaner is done: a later clean would remove records of the snapshot.
        eventually(lambda: cleaned(cluster.brokers[0].data_dir, TOPIC), TIMEOUT, "the topic to be compacted")
        expected = _records(fetcher)
        assert len(expected) < 2500
        removed = next(o for o in range(expected[-1][0]) if o not in {r[0] for r in expected})
        bounds = list_bounds(fetcher, [TOPIC])
        assert bounds[TOPIC][0][0] == 0  # the cleaner never moves the log start
        first = make_plan(run="00000001", previous=None, topics=TOPIC, committed={}, bounds=bounds,
                          allow_gaps=False, max_records_per_range={TOPIC: 97})  # fmt: skip
        assert first.gaps == ()
        # A run committed at an offset the cleaner removed since plans on, naming no gap.
        later = make_plan(run="00000002", previous="00000001", topics=TOPIC, committed={TOPIC: {0: removed}},
                          bounds=bounds, allow_gaps=False, max_records_per_range={TOPIC: 97})  # fmt: skip
        assert later.gaps == ()
        assert min(r.start for r in later.ranges) == removed
        # Ranges of 97 offsets fall anywhere: inside gaps, on removed records, across empty batches.
        loaded: list[tuple[int, bytes | None, bytes | None]] = []
        for r in sorted(first.ranges, key=lambda r: r.start):
            for batch in read_range(fetcher, r):
                columns = batch.to_pydict()
                loaded += zip(columns["offset"], columns["key"], columns["value"], strict=True)
    assert loaded == expected
