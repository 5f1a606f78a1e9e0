"""The mirror between replicated clusters rides out a leader killed on either side.

Source and aggregate have three brokers each, replication factor 3 and min.insync.replicas 2.
While an idempotent librdkafka producer streams zstd batches into the source and the mirror
copies them, the leader of a partition is killed with -9 in the source, then in the aggregate,
each restarted at once. Afterwards the aggregate holds every source batch exactly once, in
order, byte for byte: no acknowledged source record was lost by the failover, and the mirror
neither lost nor repeated a batch across the aggregate's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.mirror import MirrorProcess
from tests.fixtures.zookeeper import ZooKeeperHandle
from tributary.protocol.messages import MetadataRequest
from tributary.testing.cluster import METADATA_VERSION, Cluster, start_cluster
from tributary.testing.wire import request

from .helpers import assert_exact_copy, copied_everything, end_offsets, produce_zstd, wait_for

RECORDS = 120_000
TOPIC = "activity"
REPLICATED = {
    "zookeeper.session.timeout.ms": "3000",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "replica.lag.time.max.ms": "3000",
}
SOURCE_CONFIG = {
    **REPLICATED,
    "num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
}


@pytest.fixture
def clusters(zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[tuple[Cluster, Cluster]]:
    for name in ("east", "agg"):
        (tmp_path / name).mkdir()
    for east in start_cluster(zookeeper.hosts + "/east", tmp_path / "east", 3, SOURCE_CONFIG):
        for agg in start_cluster(zookeeper.hosts + "/agg", tmp_path / "agg", 3, REPLICATED):
            yield east, agg


def leader_of(cluster: Cluster, topic: str, partition: int) -> int:
    metadata = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
    )
    for broker in cluster.brokers:
        if broker.proc is None or broker.proc.poll() is not None:
            continue
        (found,) = request(broker.address, metadata, METADATA_VERSION).topics
        leaders = {p.partition_index: p.leader_id for p in found.partitions}
        if leaders.get(partition, -1) >= 0:
            return leaders[partition]
    raise AssertionError(f"{topic}-{partition} has no leader")


def kill_leader_and_restart(cluster: Cluster, topic: str, partition: int) -> None:
    victim = cluster.broker(leader_of(cluster, topic, partition))
    victim.kill()
    victim.start()  # at once: it waits for its old registration to expire, then follows
    victim.wait_ready(expected_brokers=3)


def test_mirror_rides_out_leader_kills_in_source_and_aggregate(
    clusters: tuple[Cluster, Cluster], tmp_path: Path
) -> None:
    east, agg = clusters
    errors: list[BaseException] = []

    def produce() -> None:
        try:
            for start in range(0, RECORDS, 20_000):
                produce_zstd(east.bootstrap, TOPIC, 20_000, start=start, source="east")
        except BaseException as exc:
            errors.append(exc)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    mirror = MirrorProcess(east.bootstrap, "east", agg.bootstrap, tmp_path / "mirror.log",
                           extra=["--session-timeout-ms", "3000"])  # fmt: skip
    mirror.start()
    try:
        # The first kill lands mid-stream: once the source holds a sixth of the records.
        wait_for(lambda: _source_holds(east, RECORDS // 6), 60, "the stream to start")
        kill_leader_and_restart(east, TOPIC, 0)
        wait_for(lambda: _aggregate_has(agg), 60, "the aggregate topic", mirror.log_tail)
        kill_leader_and_restart(agg, f"east.{TOPIC}", 1)
        producer.join(timeout=300)
        assert not errors, errors
        wait_for(lambda: copied_everything(east.bootstrap, agg.bootstrap, "east", TOPIC), 240,
                 "the aggregate to catch up", mirror.log_tail)  # fmt: skip
        assert mirror.stop() == 0
    finally:
        if mirror.running():
            mirror.kill()
    assert assert_exact_copy(east.bootstrap, agg.bootstrap, "east", TOPIC) == RECORDS


def _source_holds(east: Cluster, count: int) -> bool:
    try:
        return sum(end_offsets(east.bootstrap, TOPIC).values()) >= count
    except Exception:  # the topic may not exist yet
        return False


def _aggregate_has(agg: Cluster) -> bool:
    try:
        return leader_of(agg, f"east.{TOPIC}", 1) >= 0
    except (AssertionError, ValueError, OSError):
        return False
