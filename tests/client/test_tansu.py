"""The client against Tansu, a foreign Kafka-compatible broker: negotiation, admin basics,
the raw path and the blocking fetcher.

Tansu's ListOffsets "latest" (and so lag) is not trusted here (see FIELD-NOTES.md):
fetches read until the partition is idle instead.
"""

from __future__ import annotations

import trio

from tests.fixtures.tansu import TansuBroker
from tributary.client.admin.admin import Admin
from tributary.client.blocking import BlockingFetcher
from tributary.client.errors import TopicAlreadyExistsError
from tributary.client.raw.client import RawClient
from tributary.client.wire.cluster import Cluster
from tributary.client.wire.connection import connect
from tributary.client.wire.metadata import TopicPartition
from tributary.protocol.compression import Compression
from tributary.protocol.messages import ApiKey
from tributary.protocol.records import iter_batches

from .conftest import topic_name
from .test_admin import check_group_operations
from .test_raw import same_apart_from_offset_and_epoch, zstd_batches


async def test_negotiation_with_tansu(tansu: TansuBroker) -> None:
    async with connect(*tansu.address) as conn:
        assert conn.versions.api_versions_version == 3
        # Tansu knows newer versions than we speak: ours are the ceiling.
        assert conn.api_version(ApiKey.FETCH) == 11
        assert conn.api_version(ApiKey.PRODUCE) == 8
        assert conn.api_version(ApiKey.METADATA) == 12  # topic ids, for the consumer group protocol


async def test_admin_basics_on_tansu(tansu: TansuBroker) -> None:
    topic = topic_name("tansu-admin")
    async with Cluster(tansu.bootstrap) as cluster:
        admin = Admin(cluster)
        description = await admin.describe_cluster()
        assert [b.address for b in description.brokers] == [tansu.bootstrap]
        await admin.create_topic(topic, 3)
        assert (await admin.list_topics())[topic].partition_count == 3
        try:
            await admin.create_topic(topic, 3)
        except TopicAlreadyExistsError as exc:
            assert exc.topic == topic
        else:
            raise AssertionError("Tansu accepted the same topic twice")
        tps = [TopicPartition(topic, p) for p in range(3)]
        assert await admin.earliest_offsets(tps) == dict.fromkeys(tps, 0)
        await admin.delete_topics([topic])
        assert topic not in await admin.list_topics()


async def read_until_idle(raw: RawClient, topic: str, partition: int) -> list[bytes]:
    """Every batch of a partition, fetched raw until a fetch brings nothing new."""
    stored: list[bytes] = []
    offset = 0
    with trio.fail_after(30):
        while True:
            fetched = await raw.fetch_partition(topic, partition, offset, max_wait_ms=100)
            if not fetched.batches:
                return stored
            stored += [data for _, data in fetched.batch_bytes()]
            offset = fetched.next_offset


async def test_raw_round_trip_on_tansu(tansu: TansuBroker) -> None:
    topic = topic_name("tansu-raw")
    async with Cluster(tansu.bootstrap) as cluster:
        await Admin(cluster).create_topic(topic, 2)
        raw = RawClient(cluster)
        sent = zstd_batches(5, b"tansu")
        offset = 0
        for batch in sent:
            result = await raw.produce_partition(topic, 1, batch)
            assert result.base_offset == offset
            offset += next(iter_batches(batch))[1].record_count
        stored = await read_until_idle(raw, topic, 1)
        assert len(stored) == len(sent)
        for original, copy in zip(sent, stored, strict=True):
            assert same_apart_from_offset_and_epoch(original, copy)
        assert all(next(iter_batches(b))[1].compression is Compression.ZSTD for b in stored)

        # The blocking fetcher reads exact ranges from it too.
        def read(start: int, end: int) -> list[int]:
            with BlockingFetcher(tansu.bootstrap) as fetcher:
                return [r.offset for r in fetcher.records(topic, 1, start, end)]

        assert await trio.to_thread.run_sync(read, 3, 40) == list(range(3, 40))


async def test_group_offsets_on_tansu(tansu: TansuBroker) -> None:
    async with Cluster(tansu.bootstrap) as cluster:
        assert await Admin(cluster).supports_groups()
        await check_group_operations(cluster, check_lag=False)
