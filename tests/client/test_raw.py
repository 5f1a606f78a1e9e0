"""Raw batches: produce prepared zstd batches, fetch them back byte for byte, copy them on."""

from __future__ import annotations

import trio
import trio.testing

from tributary.client.admin.admin import Admin
from tributary.client.errors import KafkaError, NotLeaderError, OffsetOutOfRangeError
from tributary.client.raw.batches import RawBatches, raw_batches
from tributary.client.raw.client import RawClient
from tributary.client.wire.cluster import Cluster
from tributary.client.wire.metadata import TopicPartition
from tributary.protocol.compression import Compression
from tributary.protocol.messages import FetchResponse
from tributary.protocol.records import BatchBuilder, build_batch, iter_batches
from tributary.testing.cluster import Cluster as Brokers

from .conftest import topic_name

BASE_OFFSET = slice(0, 8)
LEADER_EPOCH = slice(12, 16)


def zstd_batches(count: int, tag: bytes) -> list[bytes]:
    """Batches of various sizes with keys, headers and timestamps, compressed with zstd."""
    out = []
    for b in range(count):
        builder = BatchBuilder(Compression.ZSTD)
        for r in range(1 + b * 7):
            builder.append(
                b"key-%d" % r, tag + b"-%d-%d " % (b, r) * (r + 1), [("h", b"%d" % r)], 1_700_000_000_000 + r
            )
        out.append(builder.build())
    return out


def same_apart_from_offset_and_epoch(sent: bytes, stored: bytes) -> bool:
    masked = bytearray(stored)
    masked[BASE_OFFSET] = sent[BASE_OFFSET]
    masked[LEADER_EPOCH] = sent[LEADER_EPOCH]
    return bytes(masked) == sent


async def fetch_all(raw: RawClient, topic: str, partition: int, end: int) -> list[RawBatches]:
    fetched, offset = [], 0
    while offset < end:
        result = await raw.fetch_partition(topic, partition, offset, max_bytes=4096, max_wait_ms=0)
        assert result.batches, f"nothing at {offset} though the log ends at {end}"
        fetched.append(result)
        offset = result.next_offset
    return fetched


async def test_batches_round_trip_byte_identical_and_copy_unchanged(shared_cluster: Brokers) -> None:
    source, target = topic_name("raw-src"), topic_name("raw-dst")
    async with Cluster(shared_cluster.bootstrap) as cluster:
        admin, raw = Admin(cluster), RawClient(cluster)
        await admin.create_topic(source, 3)
        await admin.create_topic(target, 3)
        sent = {p: zstd_batches(4 + p, b"p%d" % p) for p in range(3)}
        for p, batches in sent.items():
            offset = 0
            for batch in batches:
                result = await raw.produce_partition(source, p, batch)
                assert result.base_offset == offset
                offset += next(iter_batches(batch))[1].record_count

        for p, batches in sent.items():
            end = sum(next(iter_batches(b))[1].record_count for b in batches)
            fetched = await fetch_all(raw, source, p, end)
            stored = [data for f in fetched for _, data in f.batch_bytes()]
            assert len(stored) == len(batches)
            for original, copy in zip(batches, stored, strict=True):
                assert same_apart_from_offset_and_epoch(original, copy)
            headers = [h for f in fetched for _, h in f.batches]
            assert all(h.compression is Compression.ZSTD for h in headers)
            assert [h.base_offset for h in headers] == [0] + [h.next_offset for h in headers[:-1]]
            assert fetched[-1].high_watermark == end and fetched[-1].log_start_offset == 0

            # The mirror's copy: the fetched bytes go out as they came.
            for data in stored:
                await raw.produce_partition(target, p, data)
            copied = [data for f in await fetch_all(raw, target, p, end) for _, data in f.batch_bytes()]
            assert copied == stored  # same offsets, same epoch (0), same everything


async def test_several_fetches_in_flight_on_one_connection(shared_cluster: Brokers) -> None:
    topic = topic_name("raw-pipelined")
    async with Cluster(shared_cluster.bootstrap) as cluster, Cluster(shared_cluster.bootstrap) as producer:
        await Admin(cluster).create_topic(topic, 1)
        raw = RawClient(cluster)
        leader = await cluster.leader_for(topic, 0)
        tp = TopicPartition(topic, 0)
        conn = await cluster.connection(leader)
        results: list[RawBatches | KafkaError] = []

        async def long_poll() -> None:
            results.append((await raw.fetch(leader, {tp: 0}, max_wait_ms=10_000, min_bytes=1))[tp])

        with trio.fail_after(8):  # far below the 4 x 10 s the polls would take without data
            async with trio.open_nursery() as nursery:
                for _ in range(4):
                    nursery.start_soon(long_poll)
                await trio.testing.wait_all_tasks_blocked()
                assert conn.in_flight == 4
                # Each broker learns of the new topic from ZooKeeper on its own: the one the producer
                # asks may not know it yet.
                await producer.wait_for_metadata(lambda m: m.leader(topic, 0) is not None, what=f"{topic}'s leader")
                await RawClient(producer).produce_partition(topic, 0, build_batch([(None, b"wake", (), None)]))
        assert len(results) == 4
        for result in results:
            assert isinstance(result, RawBatches)
            assert [r.value for r in result.iter_records()] == [b"wake"]


async def test_fetch_errors_name_partition_broker_and_bounds(shared_cluster: Brokers) -> None:
    topic = topic_name("raw-errors")
    async with Cluster(shared_cluster.bootstrap) as cluster:
        await Admin(cluster).create_topic(topic, 1)
        raw = RawClient(cluster)
        await raw.produce_partition(topic, 0, build_batch([(None, b"x", (), None)] * 3))
        leader = await cluster.leader_for(topic, 0)
        try:
            await raw.fetch_partition(topic, 0, 50)
        except OffsetOutOfRangeError as exc:
            error = exc
        else:
            raise AssertionError("no OffsetOutOfRangeError")
        assert str(error) == (f"fetch offset 50 of {topic}-0 is out of range on broker {leader}: the log holds [0, 3)")
        assert (error.topic, error.partition, error.broker) == (topic, 0, leader)
        assert (error.offset, error.log_start_offset, error.high_watermark) == (50, 0, 3)

        other = next(b for b in cluster.metadata.brokers if b != leader)
        results = await raw.produce(other, {TopicPartition(topic, 0): build_batch([(None, b"y", (), None)])})
        wrong = results[TopicPartition(topic, 0)]
        assert isinstance(wrong, NotLeaderError)
        assert (wrong.topic, wrong.partition, wrong.broker) == (topic, 0, other)
        assert f"({topic}-0 on broker {other})" in str(wrong)


async def test_fetch_many_and_acks(shared_cluster: Brokers) -> None:
    topic = topic_name("raw-many")
    async with Cluster(shared_cluster.bootstrap) as cluster:
        await Admin(cluster).create_topic(topic, 3)
        raw = RawClient(cluster)
        tps = [TopicPartition(topic, p) for p in range(3)]
        for tp in tps:
            leader = await cluster.leader_for(tp.topic, tp.partition)
            batch = build_batch([(None, b"%d" % tp.partition, (), None)])
            assert (await raw.produce(leader, {tp: batch}, acks=0))[tp].base_offset == -1
            assert (await raw.produce(leader, {tp: batch}, acks=1))[tp].base_offset == 1
        results = await raw.fetch_many(dict.fromkeys(tps, 0), max_wait_ms=0)
        for tp in tps:
            result = results[tp]
            assert isinstance(result, RawBatches)
            assert [r.offset for r in result.iter_records()] == [0, 1]
            assert [r.value for r in result.iter_records(start=1)] == [b"%d" % tp.partition]


def test_a_truncated_trailing_batch_is_dropped() -> None:
    batches = [build_batch([(None, b"%d" % i, (), None)] * 5, base_offset=5 * i) for i in range(3)]
    records = b"".join(batches)
    cut = records[: len(records) - 7]
    result = raw_batches("t", FetchResponse.PartitionData(partition_index=2, high_watermark=15, records=cut), 0)
    assert result.records == b"".join(batches[:2])
    assert [h.base_offset for _, h in result.batches] == [0, 5]
    assert result.truncated_bytes == len(batches[2]) - 7
    assert result.next_offset == 10
    assert [r.offset for r in result.iter_records(3, 7)] == [3, 4, 5, 6]

    only_partial = raw_batches("t", FetchResponse.PartitionData(partition_index=2, records=batches[0][:30]), 0)
    assert only_partial.batches == () and only_partial.records == b""
    assert only_partial.truncated_bytes == 30 and only_partial.next_offset == 0


async def test_large_fetches_arrive_in_writable_buffers_used_again_only_when_free(shared_cluster: Brokers) -> None:
    """A Fetch response larger than a chunk is received straight into a pooled buffer that the
    caller may write (the mirror stamps batches in place); a later fetch never lands in a
    buffer whose bytes are still held, and lands in a freed one."""
    topic = topic_name("raw-large")
    async with Cluster(shared_cluster.bootstrap) as cluster:
        await Admin(cluster).create_topic(topic, 2)
        raw = RawClient(cluster)
        sent: dict[int, list[bytes]] = {}
        for p in range(2):
            sent[p] = [build_batch([(None, bytes([p, b]) * 50_000, (), None)]) for b in range(6)]  # 100 kB each
            for batch in sent[p]:
                await raw.produce_partition(topic, p, batch)

        async def fetch(partition: int) -> RawBatches:
            result = await raw.fetch_partition(topic, partition, 0, max_bytes=16 * 1024 * 1024, max_wait_ms=0)
            stored = [bytes(data) for _, data in result.batch_bytes()]
            assert len(stored) == 6
            assert all(same_apart_from_offset_and_epoch(a, b) for a, b in zip(sent[partition], stored, strict=True))
            return result

        first = await fetch(0)
        view = memoryview(first.records)
        assert not view.readonly  # received into a buffer of its own, not bytes
        held = view[:100]
        before = bytes(held)
        owner = id(view.obj)
        del first, view
        second = await fetch(1)  # the first buffer is still held: a buffer of its own
        second_owner = id(memoryview(second.records).obj)
        assert second_owner != owner and bytes(held) == before
        del held, second
        third = await fetch(1)  # both free now: one of them serves
        assert id(memoryview(third.records).obj) in {owner, second_owner}
