"""The cluster: bootstrap, metadata refreshes, leaders, the connection pool across restarts."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing

from tests.fixtures.zookeeper import ZooKeeperHandle
from tributary.client.admin.admin import Admin
from tributary.client.config import ClientConfig
from tributary.client.errors import (
    KafkaConnectionError,
    LeaderNotAvailableError,
    NoBrokersAvailableError,
    NotLeaderError,
    UnknownTopicOrPartitionError,
)
from tributary.client.raw.client import RawClient
from tributary.client.wire.cluster import Cluster, parse_bootstrap
from tributary.client.wire.metadata import ClusterMetadata
from tributary.protocol.messages import MetadataRequest
from tributary.protocol.records import build_batch
from tributary.testing.cluster import Cluster as Brokers
from tributary.testing.cluster import start_cluster
from tributary.testing.ports import free_port
from tributary.testing.wire import request as wire_request

from .conftest import topic_name

SESSION_TIMEOUT_MS = "2000"


def test_bootstrap_lists_parse() -> None:
    assert parse_bootstrap("a:1, b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap(["[::1]:9092"]) == [("::1", 9092)]
    with pytest.raises(ValueError, match="not host:port"):
        parse_bootstrap("nohost")


async def test_bootstrap_skips_unreachable_servers_and_learns_the_cluster(shared_cluster: Brokers) -> None:
    dead = f"127.0.0.1:{free_port()}"
    async with Cluster(f"{dead},{shared_cluster.brokers[1].bootstrap}") as cluster:
        metadata = cluster.metadata
        assert sorted(metadata.brokers) == [1, 2, 3]
        assert {b.address for b in metadata.brokers.values()} == {b.bootstrap for b in shared_cluster.brokers}
        assert metadata.controller_id in (1, 2, 3)
        assert metadata.cluster_id


async def test_no_reachable_bootstrap_server_is_a_clear_error() -> None:
    port = free_port()
    with pytest.raises(NoBrokersAvailableError, match=rf"127.0.0.1:{port}"):
        async with Cluster(f"127.0.0.1:{port}", ClientConfig(connect_timeout=2)):
            pass


async def test_leaders_of_unknown_topics_and_partitions_are_named(shared_cluster: Brokers) -> None:
    topic = topic_name("leaders")
    async with Cluster(shared_cluster.bootstrap) as cluster:
        with pytest.raises(UnknownTopicOrPartitionError, match=f"topic '{topic}' is not in the cluster metadata"):
            await cluster.leader_for(topic, 0)
        await Admin(cluster).create_topic(topic, 3)
        leaders = {p: await cluster.leader_for(topic, p) for p in range(3)}
        assert sorted(leaders.values()) == [1, 2, 3]  # spread round robin
        with pytest.raises(UnknownTopicOrPartitionError, match=f"topic '{topic}' has no partition 3") as caught:
            await cluster.leader_for(topic, 3)
        assert (caught.value.topic, caught.value.partition) == (topic, 3)
    # An error leaves the `async with` as itself, not wrapped in an ExceptionGroup.
    with pytest.raises(UnknownTopicOrPartitionError):
        async with Cluster(shared_cluster.bootstrap) as cluster:
            await cluster.leader_for(topic, 7)


async def test_metadata_is_refreshed_periodically(shared_cluster: Brokers) -> None:
    topic = topic_name("periodic")
    config = ClientConfig(metadata_max_age=0.3)
    async with Cluster(shared_cluster.bootstrap, config) as cluster, Cluster(shared_cluster.bootstrap) as other:
        assert topic not in cluster.metadata.topics
        await Admin(other).create_topic(topic, 2)
        with trio.fail_after(10):
            while topic not in (await cluster.next_metadata()).topics:
                pass


async def test_stale_metadata_errors_schedule_a_refresh(shared_cluster: Brokers) -> None:
    async with Cluster(shared_cluster.bootstrap) as cluster:  # metadata_max_age: 300 s
        before = cluster.metadata
        with trio.fail_after(5):
            cluster.note_error(NotLeaderError("moved", topic="t", partition=0, broker=1))
            after = await cluster.next_metadata()
        assert after is not before
        # Errors that say nothing about metadata schedule nothing.
        with trio.move_on_after(0.5) as waiting:
            cluster.note_error(ValueError("unrelated"))
            await cluster.next_metadata()
        assert waiting.cancelled_caught


async def test_concurrent_refreshes_share_one_request(shared_cluster: Brokers) -> None:
    async with Cluster(shared_cluster.bootstrap) as cluster:
        results: list[ClusterMetadata] = []

        async def refresh() -> None:
            results.append(await cluster.refresh_metadata())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(refresh)
            await trio.testing.wait_all_tasks_blocked()  # its Metadata request is on the wire
            for _ in range(9):
                nursery.start_soon(refresh)
        # Nine callers asked while the first refresh ran: its answer may predate their
        # reasons, so they wait for one more refresh, and share it.
        assert len(results) == 10
        assert len({id(m) for m in results[1:]}) == 1
        assert results[1] is not results[0]


@pytest.fixture
def restartable(zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[Brokers]:
    yield from start_cluster(zookeeper.hosts, tmp_path, 1)


async def test_reconnects_after_a_broker_restart_with_backoff(restartable: Brokers) -> None:
    broker = restartable.brokers[0]
    config = ClientConfig(reconnect_backoff=0.05, reconnect_backoff_max=0.4)
    async with Cluster(broker.bootstrap, config) as cluster:
        await cluster.send(1, MetadataRequest(topics=None))
        first = await cluster.connection(1)

        await trio.to_thread.run_sync(broker.stop)
        with pytest.raises(KafkaConnectionError) as caught:
            await cluster.send(1, MetadataRequest(topics=None))
        assert caught.value.broker == 1
        assert first.closed
        # While the broker is down, each attempt waits out a backoff that doubles
        # (0.05, 0.1, 0.2, 0.4 s, +-20%; the cluster's own refreshes may add failures)
        # up to the maximum, and fails. Only the lower bound is asserted here: a loaded
        # machine makes every wait longer, never shorter (the cap is test_backoff's).
        waits = []
        for _ in range(4):
            started = trio.current_time()
            with pytest.raises(
                KafkaConnectionError, match=r"cannot connect to broker 1 \(127.0.0.1:\d+\): Connection refused"
            ):
                await cluster.send(1, MetadataRequest(topics=None))
            waits.append(trio.current_time() - started)
        assert sum(waits) >= (0.05 + 0.1 + 0.2) * 0.8

        await trio.to_thread.run_sync(broker.start)
        await trio.to_thread.run_sync(broker.wait_ready)
        response = await cluster.send(1, MetadataRequest(topics=None))
        assert [b.node_id for b in response.brokers] == [1]
        second = await cluster.connection(1)
        assert second is not first and not second.closed


@pytest.fixture
def three_brokers(zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[Brokers]:
    yield from start_cluster(zookeeper.hosts, tmp_path, 3, {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS})


async def test_metadata_follows_leadership_when_a_broker_dies_and_returns(three_brokers: Brokers) -> None:
    topic = topic_name("leadership")
    async with Cluster(three_brokers.bootstrap) as cluster:
        admin, raw = Admin(cluster), RawClient(cluster)
        await admin.create_topic(topic, 3)
        controller = cluster.metadata.controller_id
        victim_partition = next(p for p in range(3) if cluster.metadata.leader(topic, p) != controller)
        victim_id = await cluster.leader_for(topic, victim_partition)
        victim = three_brokers.brokers[victim_id - 1]
        assert (
            await raw.produce_partition(topic, victim_partition, build_batch([(None, b"a", (), None)]))
        ).base_offset == 0

        await trio.to_thread.run_sync(victim.stop, signal.SIGKILL)
        with pytest.raises(KafkaConnectionError, match=f"broker {victim_id}"):
            await raw.produce_partition(topic, victim_partition, build_batch([(None, b"b", (), None)]))

        # Its session expires; the controller takes leadership away: nobody else holds a replica.
        await cluster.wait_for_metadata(lambda m: m.leader(topic, victim_partition) is None, timeout=30)
        assert victim_id not in cluster.metadata.brokers
        with pytest.raises(LeaderNotAvailableError, match=f"{topic}-{victim_partition} has no leader") as caught:
            await cluster.leader_for(topic, victim_partition)
        assert caught.value.retriable
        # The other partitions stay served.
        others = [p for p in range(3) if p != victim_partition]
        for p in others:
            batch = build_batch([(None, b"c", (), None)])
            assert (await raw.produce_partition(topic, p, batch)).base_offset == 0

        await trio.to_thread.run_sync(victim.start)
        await trio.to_thread.run_sync(victim.wait_ready, 3)
        await cluster.wait_for_metadata(lambda m: m.leader(topic, victim_partition) == victim_id, timeout=30)
        # Another broker may learn of the election before the victim does (each follows
        # ZooKeeper on its own): produce once the victim itself names itself leader.
        ask = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False
        )
        with trio.fail_after(30):
            while True:
                answer = await trio.to_thread.run_sync(wire_request, victim.address, ask, 4)
                if {p.partition_index: p.leader_id for p in answer.topics[0].partitions}[victim_partition] == victim_id:
                    break
                await trio.sleep(0.05)
        result = await raw.produce_partition(topic, victim_partition, build_batch([(None, b"d", (), None)]))
        assert result.base_offset == 1
