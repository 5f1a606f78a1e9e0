"""The mirror over a transactional Tributary source copies only committed data, exactly once.

Transactional producers (confluent-kafka, two transactional ids) commit and abort transactions
interleaved with a plain producer, and leave one transaction open while the mirror copies; the
mirror is killed with -9 and restarted midway. The aggregate then holds, per partition and in
source order, exactly the records a read_committed consumer of the source sees: no record of an
aborted transaction, none of the open one until it commits, none twice, and no transaction
markers or transactional batches (the aggregate's readers need no transactions to read it).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.fixtures.mirror import MirrorProcess
from tests.fixtures.zookeeper import ZooKeeperHandle
from tests.interop.test_transactions import confluent_read
from tributary.client.blocking import BlockingFetcher
from tributary.client.raw.batches import READ_COMMITTED
from tributary.testing.cluster import Cluster, start_cluster

from .helpers import read_batches, records_of, wait_for

TOPIC, PARTITIONS, ALIAS = "payments", 2, "east"
SOURCE_CONFIG = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "transaction.state.log.num.partitions": "3",
    "offsets.topic.num.partitions": "3",
}


@pytest.fixture
def clusters(zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[tuple[Cluster, Cluster]]:
    for name in ("east", "agg"):
        (tmp_path / name).mkdir()
    for east in start_cluster(zookeeper.hosts + "/east", tmp_path / "east", 1, SOURCE_CONFIG):
        for agg in start_cluster(zookeeper.hosts + "/agg", tmp_path / "agg", 1):
            yield east, agg


def committed_source(bootstrap: str) -> dict[int, list[bytes]]:
    """Per partition, in order, what a read_committed consumer of the source sees."""
    out: dict[int, list[bytes]] = {}
    with BlockingFetcher(bootstrap) as fetcher:
        for partition, (start, end) in fetcher.offset_bounds(TOPIC, isolation_level=READ_COMMITTED).items():
            records = fetcher.records(TOPIC, partition, start, end, isolation_level=READ_COMMITTED)
            out[partition] = [r.value for r in records if r.value is not None]
    return out


def aggregate(bootstrap: str) -> dict[int, list[bytes]]:
    batches = read_batches(bootstrap, f"{ALIAS}.{TOPIC}")
    for partition, found in batches.items():
        assert not any(h.is_transactional or h.is_control for h, _ in found), f"partition {partition}"
    return {p: [v for _, v in records_of(found) if v is not None] for p, found in batches.items()}


def transaction(producer: Producer, prefix: str, count: int, *, commit: bool) -> None:
    producer.begin_transaction()
    for i in range(count):
        producer.produce(TOPIC, value=f"{prefix}-{i}".encode(), partition=i % PARTITIONS)
    producer.flush(30)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def test_the_mirror_copies_committed_transactions_exactly_once(
    clusters: tuple[Cluster, Cluster], tmp_path: Path
) -> None:
    east, agg = clusters
    admin = AdminClient({"bootstrap.servers": east.bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    config = {"bootstrap.servers": east.bootstrap, "linger.ms": 2, "compression.type": "zstd"}
    first = Producer({**config, "transactional.id": "east-a"})
    second = Producer({**config, "transactional.id": "east-b"})
    plain = Producer(config)
    first.init_transactions(30)
    second.init_transactions(30)
    mirror = MirrorProcess(east.bootstrap, ALIAS, agg.bootstrap, tmp_path / "mirror.log",
                           extra=["--session-timeout-ms", "2000"])  # fmt: skip
    try:
        mirror.start()
        # The open transaction goes first: the mirror must copy nothing past its start until it ends.
        second.begin_transaction()
        for i in range(40):
            second.produce(TOPIC, value=f"open-{i}".encode(), partition=i % PARTITIONS)
        second.flush(30)
        for round_ in range(6):
            transaction(first, f"commit{round_}", 50, commit=True)
            transaction(first, f"abort{round_}", 30, commit=False)
            for i in range(20):
                plain.produce(TOPIC, value=f"plain{round_}-{i}".encode(), partition=i % PARTITIONS)
            assert plain.flush(30) == 0
            if round_ == 2:
                time.sleep(1)
                mirror.kill()  # between batches or in the middle of one: no loss, no duplicate
                mirror.start()
        time.sleep(2)
        held = aggregate(agg.bootstrap)
        assert not any(b"open-" in v for values in held.values() for v in values)
        # Behind the open transaction, the source's committed data waits: the LSO stays at its start.
        assert sum(len(v) for v in held.values()) == 0
        second.commit_transaction(30)
        expected = committed_source(east.bootstrap)
        total = sum(len(v) for v in expected.values())
        assert total == 6 * 50 + 6 * 20 + 40
        wait_for(lambda: sum(len(v) for v in aggregate(agg.bootstrap).values()) >= total, 60,
                 "the aggregate to hold every committed record", mirror.log_tail)  # fmt: skip
        assert mirror.stop() == 0
    finally:
        if mirror.running():
            mirror.kill()
        for producer in (first, second, plain):
            with contextlib.suppress(KafkaException):
                producer.close()
    assert aggregate(agg.bootstrap) == expected
    # What the source's own read_committed consumers see is what the aggregate now holds.
    copied = sorted(v for values in expected.values() for v in values)
    assert sorted(confluent_read(east.bootstrap, TOPIC, PARTITIONS, "read_committed")) == copied
