"""The Consumer on a real three-broker cluster: assign, seek, pause/resume,
auto.offset.reset, commits (sync, async, auto) and restarts, regex subscriptions,
fetch errors. Group rebalancing is in test_group_membership.py."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest
import trio

from tests.fixtures.zookeeper import ZooKeeperServer, server_chroot
from tributary.client.admin.admin import Admin
from tributary.client.consumer.consumer import Consumer, ConsumerRecord
from tributary.client.consumer.errors import CommitFailedError, IllegalStateError, NoOffsetForPartitionError
from tributary.client.errors import KafkaError, OffsetOutOfRangeError
from tributary.client.group.offsets import OffsetAndMetadata
from tributary.client.raw.client import RawClient
from tributary.client.wire.cluster import Cluster
from tributary.client.wire.metadata import TopicPartition
from tributary.protocol.compression import Compression
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.headers import RequestEnvelope
from tributary.protocol.messages import ApiKey, FetchResponse, ListOffsetsResponse, MetadataResponse
from tributary.protocol.records import build_batch
from tributary.testing.cluster import Cluster as Brokers
from tributary.testing.cluster import start_cluster

from .conftest import topic_name
from .fake_broker import FakeBroker

#: Fast groups: no initial rebalance delay, short sessions allowed, a small offsets topic.
BROKER_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
    "offsets.topic.num.partitions": "3",
}
#: Consumer settings that keep tests quick: rebalances noticed within 100 ms.
FAST: dict[str, Any] = {"session_timeout_ms": 3000, "heartbeat_interval_ms": 100, "fetch_max_wait_ms": 100}
TIMEOUT = 20


@pytest.fixture(scope="module")
def brokers(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brokers]:
    root = tmp_path_factory.mktemp("consumer-brokers")
    yield from start_cluster(server_chroot(zookeeper_server, "client"), root, 3, BROKER_SETTINGS)


def values(prefix: str, count: int) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(count)]


async def produce(
    cluster: Cluster, topic: str, partition: int, payloads: list[bytes], *, per_batch: int = 10,
    compression: Compression = Compression.NONE,
) -> None:  # fmt: skip
    """Append ``payloads`` to a partition in batches of ``per_batch``."""
    raw = RawClient(cluster)
    for start in range(0, len(payloads), per_batch):
        chunk = payloads[start : start + per_batch]
        batch = build_batch([(b"k", v, (), None) for v in chunk], compression=compression)
        await raw.produce_partition(topic, partition, batch)


@asynccontextmanager
async def topic_with_data(
    brokers: Brokers, partitions: int, per_partition: int, prefix: str = "v"
) -> AsyncIterator[tuple[str, Cluster]]:
    name = topic_name("consumer")
    async with Cluster(brokers.bootstrap) as cluster:
        await Admin(cluster).create_topic(name, partitions)
        for p in range(partitions):
            await produce(cluster, name, p, values(f"{prefix}{p}", per_partition))
        yield name, cluster


async def poll_until(consumer: Consumer, count: int, *, timeout: float = TIMEOUT) -> list[ConsumerRecord]:
    """Poll until ``count`` records came (more is a failure)."""
    got: list[ConsumerRecord] = []
    with trio.fail_after(timeout):
        while len(got) < count:
            got += await consumer.poll(1)
    assert len(got) == count, [(r.partition, r.offset) for r in got]
    return got


def by_partition(records: list[ConsumerRecord]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for r in records:
        out.setdefault(r.partition, []).append(r.offset)
    return out


async def test_assign_reads_every_partition_in_order(brokers: Brokers) -> None:
    async with (
        topic_with_data(brokers, 3, 25) as (topic, _),
        Consumer(brokers.bootstrap, auto_offset_reset="earliest", **FAST) as consumer,
    ):
        tps = [TopicPartition(topic, p) for p in range(3)]
        consumer.assign(tps)
        assert consumer.assignment() == set(tps)
        records = await poll_until(consumer, 75)
        assert by_partition(records) == {p: list(range(25)) for p in range(3)}
        assert all(r.value == f"v{r.partition}-{r.offset}".encode() and r.key == b"k" for r in records)
        assert all(r.topic == topic and r.timestamp > 0 and r.leader_epoch >= 0 for r in records)
        for tp in tps:
            assert await consumer.position(tp) == 25
            assert consumer.highwater(tp) == 25
        assert await consumer.poll(0.2) == []


async def test_seek_pause_and_resume(brokers: Brokers) -> None:
    async with (
        topic_with_data(brokers, 2, 20) as (topic, cluster),
        Consumer(brokers.bootstrap, auto_offset_reset="earliest", **FAST) as consumer,
    ):
        p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
        consumer.assign([p0, p1])
        assert by_partition(await poll_until(consumer, 40)) == {0: list(range(20)), 1: list(range(20))}

        # seek: back into the middle of a batch (the batch's earlier records are dropped).
        consumer.seek(p0, 13)
        assert by_partition(await poll_until(consumer, 7)) == {0: list(range(13, 20))}
        consumer.seek_to_beginning([p1])
        assert by_partition(await poll_until(consumer, 20)) == {1: list(range(20))}
        consumer.seek_to_end()
        assert await consumer.position(p0) == 20

        # pause: p1's new records wait until it is resumed; p0's come meanwhile.
        consumer.pause([p1])
        assert consumer.paused() == {p1}
        await produce(cluster, topic, 1, values("late1", 5))
        await produce(cluster, topic, 0, values("late0", 5))
        assert by_partition(await poll_until(consumer, 5)) == {0: list(range(20, 25))}
        assert await consumer.poll(0.3) == []
        consumer.resume([p1])
        late = await poll_until(consumer, 5)
        assert by_partition(late) == {1: list(range(20, 25))}
        assert [r.value for r in late] == values("late1", 5)

        with pytest.raises(IllegalStateError, match="not assigned"):
            consumer.seek(TopicPartition(topic, 7), 0)


async def test_pause_keeps_buffered_records_for_later(brokers: Brokers) -> None:
    """Records already fetched for a paused partition are held back, not lost."""
    async with (
        topic_with_data(brokers, 1, 30) as (topic, _),
        Consumer(brokers.bootstrap, auto_offset_reset="earliest", max_poll_records=10, **FAST) as consumer,
    ):
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        first = await poll_until(consumer, 10)
        consumer.pause([tp])
        assert await consumer.poll(0.2) == []
        consumer.resume([tp])
        rest = await poll_until(consumer, 20)
        assert [r.offset for r in first + rest] == list(range(30))


async def test_auto_offset_reset_policies(brokers: Brokers) -> None:
    async with topic_with_data(brokers, 1, 10) as (topic, cluster):
        tp = TopicPartition(topic, 0)
        async with Consumer(brokers.bootstrap, auto_offset_reset="latest", **FAST) as latest:
            latest.assign([tp])
            assert await latest.position(tp) == 10
            await produce(cluster, topic, 0, values("new", 3))
            assert [r.offset for r in await poll_until(latest, 3)] == [10, 11, 12]
            # Out of range with "latest": back to the end.
            latest.seek(tp, 1000)
            assert await latest.poll(0.5) == []
            assert await latest.position(tp) == 13

        async with Consumer(brokers.bootstrap, auto_offset_reset="earliest", **FAST) as earliest:
            earliest.assign([tp])
            earliest.seek(tp, 1000)  # out of range with "earliest": from the start
            assert [r.offset for r in await poll_until(earliest, 13)] == list(range(13))

        group = topic_name("none-group")
        async with Consumer(brokers.bootstrap, group, auto_offset_reset="none", **FAST) as strict:
            strict.assign([tp])
            with trio.fail_after(TIMEOUT), pytest.raises(NoOffsetForPartitionError, match=str(tp)) as caught:
                await strict.poll()
            assert (caught.value.topic, caught.value.partition) == (topic, 0)
            with pytest.raises(NoOffsetForPartitionError):  # it stays until the application seeks
                await strict.poll(0)
            strict.seek(tp, 11)
            assert [r.offset for r in await poll_until(strict, 2)] == [11, 12]
            strict.seek(tp, 50)
            with trio.fail_after(TIMEOUT), pytest.raises(OffsetOutOfRangeError, match="out of range") as out:
                await strict.poll()
            assert out.value.offset == 50 and out.value.high_watermark == 13


async def test_commits_sync_async_and_resume_after_restart(brokers: Brokers) -> None:
    group = topic_name("commit-group")
    settings: dict[str, Any] = {"auto_offset_reset": "earliest", "enable_auto_commit": False, **FAST}
    async with topic_with_data(brokers, 2, 30) as (topic, _):
        p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
        async with Consumer(brokers.bootstrap, group, **settings) as consumer:
            consumer.assign([p0, p1])
            assert await consumer.committed([p0, p1]) == {p0: None, p1: None}
            got = await poll_until(consumer, 60)
            consumer.seek(p0, 12)
            await consumer.poll(0)  # seeking back does not commit anything by itself
            assert await consumer.committed([p0]) == {p0: None}
            await consumer.commit()  # every position: p0 at 12, p1 at 30
            assert await consumer.committed([p0, p1]) == {p0: 12, p1: 30}

            done = trio.Event()
            results: list[tuple[dict[TopicPartition, OffsetAndMetadata], KafkaError | None]] = []

            def on_commit(offsets: dict[TopicPartition, OffsetAndMetadata], error: KafkaError | None) -> None:
                results.append((offsets, error))
                done.set()

            consumer.commit_async({p1: OffsetAndMetadata(25, "note")}, callback=on_commit)
            with trio.fail_after(TIMEOUT):
                await done.wait()
            assert results == [({p1: OffsetAndMetadata(25, "note")}, None)]
            assert await consumer.committed([p1]) == {p1: 25}
            assert len(got) == 60

        # A new consumer of the group starts exactly at the committed offsets.
        async with Consumer(brokers.bootstrap, group, **settings) as again:
            again.assign([p0, p1])
            resumed = await poll_until(again, 18 + 5)
            assert by_partition(resumed) == {0: list(range(12, 30)), 1: list(range(25, 30))}


async def test_auto_commit_commits_what_was_processed(brokers: Brokers) -> None:
    group = topic_name("auto-group")
    settings: dict[str, Any] = {"auto_offset_reset": "earliest", "auto_commit_interval_ms": 50, **FAST}
    async with topic_with_data(brokers, 1, 40) as (topic, _):
        tp = TopicPartition(topic, 0)
        async with Consumer(brokers.bootstrap, group, max_poll_records=15, **settings) as consumer:
            consumer.subscribe([topic])
            first = await poll_until(consumer, 15)
            assert [r.offset for r in first] == list(range(15))
            # The 15 records are still in the application's hands: nothing is committed
            # until it polls again.
            second = await poll_until(consumer, 15)
            assert second[0].offset == 15
            with trio.fail_after(TIMEOUT):
                while (await consumer.committed([tp]))[tp] != 15:
                    await trio.sleep(0.05)

        # Closing cleanly committed everything returned (30); the next consumer goes on from there.
        async with Consumer(brokers.bootstrap, group, **settings) as again:
            again.subscribe([topic])
            rest = await poll_until(again, 10)
            assert [r.offset for r in rest] == list(range(30, 40))


async def test_closing_after_an_exception_commits_only_processed_records(brokers: Brokers) -> None:
    group = topic_name("crash-group")
    settings: dict[str, Any] = {"auto_offset_reset": "earliest", **FAST}
    async with topic_with_data(brokers, 1, 20) as (topic, _):
        tp = TopicPartition(topic, 0)
        with pytest.raises(RuntimeError, match="record 7"):
            async with Consumer(brokers.bootstrap, group, **settings) as consumer:
                consumer.assign([tp])
                async for record in consumer:
                    if record.offset == 7:
                        raise RuntimeError("processing failed at record 7")
        async with Consumer(brokers.bootstrap, group, **settings) as again:
            assert await again.committed([tp]) == {tp: 7}
            again.assign([tp])
            assert (await poll_until(again, 13))[0].offset == 7


async def test_async_iteration_yields_every_record_once(brokers: Brokers) -> None:
    async with (
        topic_with_data(brokers, 3, 40) as (topic, _),
        Consumer(brokers.bootstrap, auto_offset_reset="earliest", **FAST) as consumer,
    ):
        consumer.assign([TopicPartition(topic, p) for p in range(3)])
        seen: list[ConsumerRecord] = []
        with trio.fail_after(TIMEOUT):
            async for record in consumer:
                seen.append(record)
                if len(seen) == 120:
                    break
        assert by_partition(seen) == {p: list(range(40)) for p in range(3)}
        assert await consumer.poll(0.2) == []


async def test_zstd_batches_decode(brokers: Brokers) -> None:
    topic = topic_name("zstd")
    async with (
        Cluster(brokers.bootstrap) as cluster,
        Consumer(brokers.bootstrap, auto_offset_reset="earliest", **FAST) as consumer,
    ):
        await Admin(cluster).create_topic(topic, 1)
        payloads = [bytes([i % 251]) * 1024 for i in range(300)]
        await produce(cluster, topic, 0, payloads, per_batch=100, compression=Compression.ZSTD)
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek(TopicPartition(topic, 0), 150)
        records = await poll_until(consumer, 150)
        assert [r.value for r in records] == payloads[150:]


async def test_regex_subscription_picks_up_new_topics(brokers: Brokers) -> None:
    prefix = topic_name("rx")
    group = topic_name("rx-group")
    assigned: list[list[TopicPartition]] = []
    async with (
        Cluster(brokers.bootstrap) as cluster,
        Consumer(brokers.bootstrap, group, auto_offset_reset="earliest", metadata_max_age=0.3, **FAST) as consumer,
    ):
        admin = Admin(cluster)
        await admin.create_topic(f"{prefix}-a", 2)
        await admin.create_topic(f"other-{prefix}", 1)  # does not match: whole names only
        await produce(cluster, f"{prefix}-a", 0, values("a", 5))
        await produce(cluster, f"other-{prefix}", 0, values("o", 5))
        await consumer.cluster.refresh_metadata()
        consumer.subscribe(re.compile(re.escape(prefix) + r"-.*"), on_assign=assigned.append)
        first = await poll_until(consumer, 5)
        assert {r.topic for r in first} == {f"{prefix}-a"}
        assert consumer.subscription() == {f"{prefix}-a"}

        await admin.create_topic(f"{prefix}-b", 1)
        await produce(cluster, f"{prefix}-b", 0, values("b", 4))
        later = await poll_until(consumer, 4)
        assert {r.topic for r in later} == {f"{prefix}-b"}
        assert consumer.subscription() == {f"{prefix}-a", f"{prefix}-b"}
        assert consumer.assignment() == {
            TopicPartition(f"{prefix}-a", 0), TopicPartition(f"{prefix}-a", 1), TopicPartition(f"{prefix}-b", 0)
        }  # fmt: skip
        assert TopicPartition(f"{prefix}-b", 0) in [tp for batch in assigned for tp in batch]


async def test_usage_errors(brokers: Brokers) -> None:
    async with Consumer(brokers.bootstrap, **FAST) as plain:
        with pytest.raises(IllegalStateError, match="group_id"):
            plain.subscribe(["x"])
        with pytest.raises(IllegalStateError, match="neither subscribed nor assigned"):
            await plain.poll(0)
        with pytest.raises(IllegalStateError, match="group_id"):
            await plain.commit({TopicPartition("x", 0): 1})
    async with Consumer(brokers.bootstrap, topic_name("g"), **FAST) as grouped:
        grouped.assign([TopicPartition("x", 0)])
        with pytest.raises(IllegalStateError, match="unsubscribe"):
            grouped.subscribe(["x"])
        await grouped.unsubscribe()
        grouped.subscribe(["x"])
        with pytest.raises(IllegalStateError, match="unsubscribe"):
            grouped.assign([TopicPartition("x", 0)])
    with pytest.raises(IllegalStateError, match="closed"):
        await grouped.poll(0)
    with pytest.raises(TypeError, match="unknown consumer settings: bogus"):
        Consumer(brokers.bootstrap, bogus=1)
    with pytest.raises(ValueError, match="unknown assignors"):
        Consumer(brokers.bootstrap, partition_assignment_strategy=("fair",))


async def test_commit_after_losing_the_partitions_fails(brokers: Brokers) -> None:
    """A member that stopped polling longer than max_poll_interval_ms leaves the group; its
    commits are then refused, and it rejoins when it polls again."""
    group = topic_name("slow-group")
    async with topic_with_data(brokers, 1, 5) as (topic, _), Consumer(
        brokers.bootstrap, group, auto_offset_reset="earliest", enable_auto_commit=False,
        max_poll_interval_ms=400, **FAST,
    ) as consumer:  # fmt: skip
        consumer.subscribe([topic])
        await poll_until(consumer, 5)
        member = consumer.group
        assert member is not None
        first_generation = member.generation.generation_id
        with trio.fail_after(TIMEOUT):
            while member.generation.generation_id == first_generation:
                await trio.sleep(0.05)  # the application "works" and never polls
        with pytest.raises(CommitFailedError, match="not part of the current generation"):
            await consumer.commit({TopicPartition(topic, 0): 5})
        # Back in poll: it rejoins, gets the partition again and, nothing having been
        # committed, reads it again from the start.
        again = await poll_until(consumer, 5)
        assert [r.offset for r in again] == list(range(5))
        assert member.generation.generation_id > first_generation
        await consumer.commit()
        assert await consumer.committed([TopicPartition(topic, 0)]) == {TopicPartition(topic, 0): 5}


async def test_not_leader_refreshes_metadata_and_follows_the_new_leader() -> None:
    """Two fake brokers: broker 1 answers the first fetch NOT_LEADER_OR_FOLLOWER (the
    leadership moved to broker 2); the consumer refreshes its metadata and reads
    from broker 2. Our real brokers never move leaders, hence the fakes."""
    topic, leader = "moving", [1]
    ports: dict[int, int] = {}
    batch = build_batch([(None, f"r{i}".encode(), (), None) for i in range(5)])
    fetches: list[tuple[int, int]] = []

    async def metadata(envelope: RequestEnvelope, request: Any) -> MetadataResponse:
        partition = MetadataResponse.MetadataResponsePartition(
            partition_index=0, leader_id=leader[0], replica_nodes=[1, 2], isr_nodes=[1, 2]
        )
        brokers = [MetadataResponse.MetadataResponseBroker(node_id=i, host="127.0.0.1", port=ports[i]) for i in (1, 2)]
        return MetadataResponse(
            brokers=brokers,
            controller_id=1,
            topics=[MetadataResponse.MetadataResponseTopic(name=topic, partitions=[partition])],
        )

    async def list_offsets(envelope: RequestEnvelope, request: Any) -> ListOffsetsResponse:
        answer = ListOffsetsResponse.ListOffsetsPartitionResponse(partition_index=0, offset=0)
        topics = [ListOffsetsResponse.ListOffsetsTopicResponse(name=topic, partitions=[answer])]
        return ListOffsetsResponse(topics=topics)

    def fetch_from(broker_id: int) -> Any:
        async def fetch(envelope: RequestEnvelope, request: Any) -> FetchResponse:
            offset = request.topics[0].partitions[0].fetch_offset
            fetches.append((broker_id, offset))
            data = FetchResponse.PartitionData(partition_index=0, high_watermark=5, log_start_offset=0)
            if broker_id != leader[0] or broker_id == 1:
                leader[0] = 2  # the leadership moves as broker 1 refuses
                data.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            elif offset == 0:
                data.records = batch
            else:
                await trio.sleep(request.max_wait_ms / 1000)
            return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic=topic, partitions=[data])])

        return fetch

    async with trio.open_nursery() as nursery:
        for broker_id in (1, 2):
            fake = FakeBroker(handlers={
                ApiKey.METADATA: metadata, ApiKey.LIST_OFFSETS: list_offsets, ApiKey.FETCH: fetch_from(broker_id)
            })  # fmt: skip
            listeners = await nursery.start(partial(trio.serve_tcp, fake.serve, 0, host="127.0.0.1"))
            ports[broker_id] = listeners[0].socket.getsockname()[1]
        async with Consumer(f"127.0.0.1:{ports[1]}", auto_offset_reset="earliest", retry_backoff=0.01,
                            **FAST) as consumer:  # fmt: skip
            consumer.assign([TopicPartition(topic, 0)])
            records = await poll_until(consumer, 5)
        nursery.cancel_scope.cancel()
    assert [r.value for r in records] == [f"r{i}".encode() for i in range(5)]
    # Broker 1 is asked first; once a fetch reached broker 2 none goes back to broker 1. (A
    # fetch may go to broker 1 again before the metadata refresh that NOT_LEADER started
    # has come back, as with Kafka's consumers: the retry backoff is 10 ms here.)
    assert fetches[0] == (1, 0)
    first_at_2 = fetches.index((2, 0))
    assert all(broker == 1 for broker, _ in fetches[:first_at_2])
    assert all(broker == 2 for broker, _ in fetches[first_at_2:])
