"""The producer against real brokers: offsets, partitioning, acks, batching, idempotent retries,
backpressure, broker restarts and failover, flush and close, errors; and against Tansu.

Records are read back raw (``RawClient``: batch headers and decoded records) and, in one
test, with confluent-kafka's consumer. Faults the brokers cannot be made to produce on cue (a
lost answer, a corrupted batch on the wire) are injected at the connection.
"""

from __future__ import annotations

import functools
import itertools
import struct
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from confluent_kafka import Consumer, Message
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentTopicPartition

from tests.fixtures.tansu import TansuBroker
from tests.fixtures.zookeeper import ZooKeeperHandle
from tributary.client.admin.admin import Admin
from tributary.client.errors import (
    KafkaConnectionError,
    KafkaError,
    MessageTooLargeError,
    UnknownTopicOrPartitionError,
)
from tributary.client.producer import accumulator
from tributary.client.producer.accumulator import RECORD_OVERHEAD
from tributary.client.producer.config import ProducerConfig, split_settings
from tributary.client.producer.errors import DeliveryTimeoutError, ProducerClosedError
from tributary.client.producer.idempotence import restamp
from tributary.client.producer.partitioner import StickyPartitioner
from tributary.client.producer.producer import Producer, RecordHandle
from tributary.client.producer.sender import Sender
from tributary.client.raw.client import RawClient
from tributary.client.wire.cluster import Cluster
from tributary.client.wire.connection import BrokerConnection
from tributary.protocol.compression import Compression
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.errors import CodecUnavailableError
from tributary.protocol.framing import FrameDecoder
from tributary.protocol.messages import ApiKey, ProduceRequest
from tributary.protocol.murmur2 import partition_for_key
from tributary.protocol.records import BatchBuilder, BatchHeader, Record, validate_batch
from tributary.testing.cluster import BrokerProcess, start_cluster
from tributary.testing.cluster import Cluster as Brokers
from tributary.testing.ports import free_ports

from .conftest import topic_name

TIMEOUT = 30.0


# --- reading back ------------------------------------------------------------------------------


async def read_partition(cluster: Cluster, topic: str, partition: int) -> tuple[list[BatchHeader], list[Record]]:
    """Every stored batch header and record of a partition, up to its high watermark."""
    raw = RawClient(cluster)
    headers: list[BatchHeader] = []
    records: list[Record] = []
    offset = 0
    with trio.fail_after(TIMEOUT):
        while True:
            fetched = await raw.fetch_partition(topic, partition, offset, max_wait_ms=0)
            headers += [h for _, h in fetched.batches]
            records += list(fetched.iter_records())
            offset = fetched.next_offset
            if offset >= fetched.high_watermark:
                return headers, records


async def read_topic(cluster: Cluster, topic: str) -> dict[int, list[Record]]:
    partitions = cluster.metadata.partitions_for(topic)
    return {p: (await read_partition(cluster, topic, p))[1] for p in partitions}


def confluent_read(bootstrap: str, topic: str, partitions: int) -> dict[int, list[tuple[int, bytes | None, bytes]]]:
    """partition -> [(offset, key, value)] from offset 0 to the end, through librdkafka."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "producer-test", "enable.partition.eof": True,
         "enable.auto.commit": False}
    )  # fmt: skip
    out: dict[int, list[tuple[int, bytes | None, bytes]]] = {p: [] for p in range(partitions)}
    try:
        consumer.assign([ConfluentTopicPartition(topic, p, 0) for p in range(partitions)])
        at_end: set[int] = set()
        deadline = time.monotonic() + TIMEOUT
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"confluent consumer stuck: {at_end}"
            message: Message | None = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                assert error.code() == error._PARTITION_EOF, error
                at_end.add(message.partition())
                continue
            out[message.partition()].append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    return out


# --- unit level ------------------------------------------------------------------------------


def test_settings_split_and_validation() -> None:
    producer, client = split_settings({"acks": "all", "linger_ms": 20, "request_timeout": 3.0, "max_in_flight": 2})
    assert producer.required_acks == -1 and producer.idempotent and producer.codec is Compression.ZSTD
    assert client.request_timeout == 3.0 and client.max_in_flight == 2
    assert not ProducerConfig(acks=1).idempotent
    assert ProducerConfig(compression="lz4").codec is Compression.LZ4
    with pytest.raises(TypeError, match="unknown producer settings: lingerms"):
        split_settings({"lingerms": 5})
    with pytest.raises(ValueError, match="idempotence needs acks"):
        ProducerConfig(acks=1, enable_idempotence=True)
    with pytest.raises(ValueError, match="at most 5 requests in flight"):
        split_settings({"max_in_flight": 6})
    with pytest.raises(ValueError, match="acks must be"):
        ProducerConfig(acks=2)


def test_sticky_partitioner_moves_to_another_available_partition() -> None:
    sticky = StickyPartitioner()
    seen = [sticky.next(6, [0, 2, 4])]
    for _ in range(50):
        seen.append(sticky.next(6, [0, 2, 4]))
        assert seen[-1] != seen[-2]
    assert set(seen) == {0, 2, 4}
    assert sticky.next(6, []) in range(6)  # no leader anywhere: any partition
    assert StickyPartitioner().next(1, [0]) == 0


def test_restamp_rewrites_producer_fields_and_keeps_the_crc_valid() -> None:
    builder = BatchBuilder(Compression.ZSTD, producer_id=7, producer_epoch=0, base_sequence=40)
    for i in range(5):
        builder.append(b"k", b"value %d" % i, [("h", b"x")], 1_700_000_000_000 + i)
    batch = builder.build()
    again = restamp(batch, 99, 3, 0)
    header = validate_batch(again)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (99, 3, 0)
    assert again[61:] == batch[61:]  # the compressed records, untouched


# --- offsets, data, partitioning --------------------------------------------------------------


async def test_send_returns_dense_offsets_and_the_data_reads_back(shared_cluster: Brokers) -> None:
    topic = topic_name("p-dense")
    sent: list[tuple[RecordHandle, bytes, bytes | None, list[tuple[str, bytes | None]], int]] = []
    async with Producer(shared_cluster.bootstrap, linger_ms=2) as producer:
        await Admin(producer.cluster).create_topic(topic, 3)
        first = await producer.send(topic, b"first", key=b"k0", headers=[("h", b"1")], timestamp=1_700_000_000_000)
        assert first.offset == 0 and first.timestamp == 1_700_000_000_000
        assert first.partition == partition_for_key(b"k0", 3)
        for i in range(1, 600):
            key = b"k%d" % (i % 37) if i % 5 else None
            headers = [("n", b"%d" % i), ("empty", None)] if i % 3 == 0 else []
            value = b"value-%d-" % i + b"x" * (i % 50)
            handle = await producer.enqueue(topic, value, key=key, headers=headers, timestamp=1_700_000_000_000 + i)
            sent.append((handle, value, key, headers, 1_700_000_000_000 + i))
        await producer.flush()
        stored = await read_topic(producer.cluster, topic)

    by_partition: dict[int, list[int]] = {}
    for handle, value, key, headers, timestamp in sent:
        meta = handle.result()
        by_partition.setdefault(meta.partition, []).append(meta.offset)
        assert meta.timestamp == timestamp
        record = stored[meta.partition][meta.offset]
        assert (record.offset, record.value, record.key, record.timestamp) == (meta.offset, value, key, timestamp)
        assert list(record.headers) == headers
    by_partition.setdefault(first.partition, []).insert(0, 0)
    for partition, offsets in by_partition.items():
        assert offsets == list(range(len(stored[partition]))), f"partition {partition}: offsets not dense"

    # librdkafka reads the same records back.
    theirs = await trio.to_thread.run_sync(confluent_read, shared_cluster.bootstrap, topic, 3)
    ours = {p: [(r.offset, r.key, r.value) for r in records] for p, records in stored.items()}
    assert theirs == ours


async def test_keys_land_where_murmur2_and_librdkafka_put_them(shared_cluster: Brokers) -> None:
    topic = topic_name("p-keys")
    keys = [b"user-%d" % i for i in range(200)] + [b"", b"\xff" * 7]
    async with Producer(shared_cluster.bootstrap) as producer:
        await Admin(producer.cluster).create_topic(topic, 5)
        handles = [await producer.enqueue(topic, b"v", key=key) for key in keys]
        ours = [(await handle).partition for handle in handles]
    assert ours == [partition_for_key(key, 5) for key in keys]

    def theirs() -> list[int]:
        delivered: dict[bytes, int] = {}
        producer = ConfluentProducer({"bootstrap.servers": shared_cluster.bootstrap, "partitioner": "murmur2_random"})
        for key in keys:
            producer.produce(
                topic, b"v", key=key, on_delivery=lambda e, m: delivered.__setitem__(m.key(), m.partition())
            )
        assert producer.flush(TIMEOUT) == 0
        return [delivered[key] for key in keys]

    assert await trio.to_thread.run_sync(theirs) == ours


async def test_null_keys_stick_to_a_partition_until_its_batch_is_full(shared_cluster: Brokers) -> None:
    topic = topic_name("p-sticky")
    value = b"s" * 100
    async with Producer(shared_cluster.bootstrap, batch_bytes=2000, linger_ms=10_000, compression="none") as producer:
        await Admin(producer.cluster).create_topic(topic, 6)
        # send_nowait does not yield: every batch fills before anything is sent.
        handles = [producer.send_nowait(topic, value) for _ in range(150)]
        await producer.flush()
    partitions = [h.result().partition for h in handles]
    runs: list[tuple[int, int]] = []  # (partition, how many in a row)
    for p in partitions:
        if runs and runs[-1][0] == p:
            runs[-1] = (p, runs[-1][1] + 1)
        else:
            runs.append((p, 1))
    per_batch = (2000 - 61) // (100 + 8)  # about what a 2000-byte batch holds
    assert len(runs) >= 6, runs
    assert all(abs(count - per_batch) <= 2 for _, count in runs[:-1]), runs
    assert all(a[0] != b[0] for a, b in itertools.pairwise(runs))
    assert len(set(partitions)) > 2


# --- acks, batching, compression ----------------------------------------------------------------


@pytest.mark.parametrize("acks", [0, 1, "all"])
async def test_acks(shared_cluster: Brokers, acks: int | str) -> None:
    topic = topic_name("p-acks")
    async with Producer(shared_cluster.bootstrap, acks=acks) as producer:
        await Admin(producer.cluster).create_topic(topic, 1)
        assert producer.idempotent == (acks == "all")
        assert (producer.producer_id >= 0) == (acks == "all")
        results = [await producer.send(topic, b"a%d" % i) for i in range(3)]
        handles = [await producer.enqueue(topic, b"b%d" % i) for i in range(200)]
        await producer.flush()
        offsets = [r.offset for r in results] + [h.result().offset for h in handles]
        with trio.fail_after(TIMEOUT):
            # With acks=0, flush returns once the requests are written, maybe before the appends.
            while len(records := (await read_partition(producer.cluster, topic, 0))[1]) < 203:
                await trio.sleep(0.05)
    assert [r.value for r in records] == [b"a%d" % i for i in range(3)] + [b"b%d" % i for i in range(200)]
    if acks == 0:
        assert offsets == [-1] * 203  # nobody answers: written is all anyone knows
    else:
        assert offsets == list(range(203))


async def test_linger_gathers_concurrent_sends_into_few_compressed_batches(shared_cluster: Brokers) -> None:
    topic = topic_name("p-linger")
    async with Producer(shared_cluster.bootstrap, linger_ms=200, batch_bytes=1 << 20) as producer:
        await Admin(producer.cluster).create_topic(topic, 1)
        results: list[int] = []

        async def one(i: int) -> None:
            results.append((await producer.send(topic, b'{"event": %d, "pad": "%s"}' % (i, b"z" * 200))).offset)

        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            for i in range(500):
                nursery.start_soon(one, i)
        elapsed = trio.current_time() - start
        headers, records = await read_partition(producer.cluster, topic, 0)
        producer_id = producer.producer_id
    assert sorted(results) == list(range(500))
    assert len(headers) <= 3, [h.record_count for h in headers]
    assert sum(h.record_count for h in headers) == len(records) == 500
    assert all(h.compression is Compression.ZSTD for h in headers)
    assert all(h.size < 500 * 200 / 4 for h in headers)  # stored compressed (about 25x here)
    # Idempotent batches: the producer's id, sequences counting records from 0.
    assert [h.producer_id for h in headers] == [producer_id] * len(headers)
    assert [h.base_sequence for h in headers] == [sum(x.record_count for x in headers[:i]) for i in range(len(headers))]
    assert elapsed < 5


async def test_flush_sends_without_waiting_out_the_linger_and_close_flushes(shared_cluster: Brokers) -> None:
    topic = topic_name("p-flush")
    async with Producer(shared_cluster.bootstrap, linger_ms=60_000) as producer:
        await Admin(producer.cluster).create_topic(topic, 2)
        handles = [await producer.enqueue(topic, b"%d" % i, partition=i % 2) for i in range(10)]
        with trio.fail_after(5):
            await producer.flush()
        assert all(h.done() for h in handles)
        assert sorted(h.result().offset for h in handles) == sorted(list(range(5)) * 2)
        late = [await producer.enqueue(topic, b"late-%d" % i) for i in range(10)]
        assert not any(h.done() for h in late)
    # Leaving the block flushed them.
    assert all(h.done() for h in late)
    assert {h.result().partition for h in late} != set() and all(h.result().offset >= 5 for h in late)
    with pytest.raises(ProducerClosedError, match="after the producer closed"):
        await producer.send(topic, b"too late")


async def test_cancelled_block_fails_what_was_not_acknowledged(shared_cluster: Brokers) -> None:
    topic = topic_name("p-cancel")
    async with Cluster(shared_cluster.bootstrap) as cluster:
        await Admin(cluster).create_topic(topic, 1)
    with trio.move_on_after(1):
        async with Producer(shared_cluster.bootstrap, linger_ms=60_000) as producer:
            handle = await producer.enqueue(topic, b"never sent")
            await trio.sleep_forever()
    with pytest.raises(ProducerClosedError, match=f"before 1 records for {topic}-0 were acknowledged"):
        handle.result()


async def test_a_shared_cluster_and_send_nowait_backpressure(shared_cluster: Brokers) -> None:
    topic = topic_name("p-shared")
    async with Cluster(shared_cluster.bootstrap) as cluster:
        await Admin(cluster).create_topic(topic, 1)
        with pytest.raises(TypeError, match="belong to the shared Cluster"):
            Producer(cluster, request_timeout=1.0)
        async with Producer(cluster, buffer_memory=10_000, linger_ms=60_000, compression="none") as producer:
            handles = []
            with pytest.raises(trio.WouldBlock):
                while True:
                    handles.append(producer.send_nowait(topic, b"x" * 1000))
            assert 8 <= len(handles) <= 10 and producer.buffer_used <= 10_000
            with pytest.raises(trio.WouldBlock):
                producer.send_nowait("not-there-yet", b"x")
            # enqueue waits instead: the full buffer is sent at once, and room comes back.
            with trio.fail_after(5):
                late = await producer.enqueue(topic, b"y" * 1000)
            await producer.flush()
            assert [h.result().offset for h in [*handles, late]] == list(range(len(handles) + 1))
        # The shared cluster stays open for its owner.
        assert cluster.metadata.leader(topic, 0) is not None
        _, records = await read_partition(cluster, topic, 0)
        assert len(records) == len(handles) + 1


# --- errors ------------------------------------------------------------------------------------


async def test_errors_name_topic_partition_and_broker(shared_cluster: Brokers) -> None:
    topic, small = topic_name("p-err"), topic_name("p-small")
    async with Producer(shared_cluster.bootstrap, max_block_ms=300, compression="none", linger_ms=50) as producer:
        admin = Admin(producer.cluster)
        await admin.create_topic(topic, 2)
        await admin.create_topic(small, 1, {"max.message.bytes": "2000"})
        with pytest.raises(UnknownTopicOrPartitionError, match="'nope-topic' is not in the cluster metadata") as info:
            await producer.send("nope-topic", b"x")
        assert info.value.topic == "nope-topic"
        with pytest.raises(UnknownTopicOrPartitionError, match="has no partition 7 \\(it has 2\\)"):
            await producer.send(topic, b"x", partition=7)
        with pytest.raises(MessageTooLargeError, match="larger than max_request_size"):
            await producer.send(topic, b"x" * (1024 * 1024))

        # The broker refuses a batch over the topic's max.message.bytes: every record of it fails.
        handles = [await producer.enqueue(small, b"%03d" % i + b"." * 100) for i in range(40)]
        await producer.flush()
        leader = producer.cluster.metadata.leader(small, 0)
        for handle in handles:
            with pytest.raises(MessageTooLargeError, match=f"MESSAGE_TOO_LARGE \\({small}-0 on broker {leader}\\)"):
                handle.result()
        error = handles[0]._batch.error
        assert isinstance(error, KafkaError) and (error.topic, error.partition, error.broker) == (small, 0, leader)
        old_id = producer.producer_id
        # The failed batch was numbered: the partition goes on under a new producer id from 0.
        after = await producer.send(small, b"fits")
        assert after.offset == 0
        headers, _ = await read_partition(producer.cluster, small, 0)
    assert headers[0].producer_id != old_id and headers[0].base_sequence == 0


async def test_a_batch_that_cannot_be_built_fails_alone(
    shared_cluster: Brokers, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = topic_name("p-build")
    finish = accumulator.finish_batch  # what finishes (compresses) a producer's batch
    calls = 0

    def fail_first(*args: Any, **options: Any) -> bytes:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise CodecUnavailableError("zstd", "zstandard")
        return finish(*args, **options)

    async with Producer(shared_cluster.bootstrap) as producer:
        await Admin(producer.cluster).create_topic(topic, 1)
        monkeypatch.setattr(accumulator, "finish_batch", fail_first)
        with pytest.raises(CodecUnavailableError):
            await producer.send(topic, b"lost", partition=0)
        after = await producer.send(topic, b"kept", partition=0)
        headers, records = await read_partition(producer.cluster, topic, 0)
    assert after.offset == 0 and [r.value for r in records] == [b"kept"]
    assert headers[0].base_sequence == 0  # the failed batch left no gap in the sequence


# --- idempotence: retries that do not duplicate -------------------------------------------------


@pytest.mark.parametrize("idempotent", [True, False])
async def test_a_lost_answer_is_retried_without_duplicates(
    shared_cluster: Brokers, monkeypatch: pytest.MonkeyPatch, idempotent: bool
) -> None:
    """The broker writes a batch but its answer is 'lost': the retry is recognised (idempotent)
    or written again (not idempotent, which shows the test can see a duplicate)."""
    topic = topic_name("p-lost")
    settle = Sender._settle
    answers = lost = 0

    def lose_second_answer(self: Sender, broker: int, batches: list[Any], outcome: Any) -> None:
        nonlocal answers, lost
        if isinstance(outcome, dict) and batches[0].queue.tp.topic == topic:  # the answer, per partition
            answers += 1
            if answers == 2:
                lost += 1
                outcome = KafkaConnectionError("answer lost (injected by the test)", broker=broker)
        settle(self, broker, batches, outcome)

    monkeypatch.setattr(Sender, "_settle", lose_second_answer)
    settings: dict[str, Any] = {"acks": "all", "enable_idempotence": idempotent, "batch_bytes": 1024}
    async with Producer(shared_cluster.bootstrap, linger_ms=1, **settings) as producer:
        await Admin(producer.cluster).create_topic(topic, 1)
        handles = [await producer.enqueue(topic, b"%04d" % i + b"-" * 60) for i in range(100)]
        await producer.flush()
        _, records = await read_partition(producer.cluster, topic, 0)
    assert lost == 1
    values = [r.value for r in records]
    expected = [b"%04d" % i + b"-" * 60 for i in range(100)]
    if idempotent:
        assert values == expected
        assert [h.result().offset for h in handles] == list(range(100))
    else:
        assert len(values) > 100 and sorted(set(values)) == expected  # a duplicated batch


async def test_out_of_order_behind_a_failed_batch_is_retried_in_order(
    shared_cluster: Brokers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second of several pipelined batches reaches the broker corrupted (CORRUPT_MESSAGE,
    retriable): the broker then refuses the batches behind it as out of order, and the
    producer resends all of them in order."""
    topic = topic_name("p-ooo")
    request = BrokerConnection.request
    produced = 0
    errors: list[int] = []

    async def corrupt_second(self: BrokerConnection, body: Any, **kwargs: Any) -> Any:
        nonlocal produced
        if isinstance(body, ProduceRequest) and body.topic_data[0].name == topic:
            produced += 1
            if produced == 2:
                data = body.topic_data[0].partition_data[0]
                assert data.records is not None
                damaged = bytearray(data.records)
                damaged[-1] ^= 0xFF  # inside the CRC
                body = ProduceRequest(
                    transactional_id=None, acks=body.acks, timeout_ms=body.timeout_ms,
                    topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=[
                        ProduceRequest.PartitionProduceData(index=data.index, records=bytes(damaged))])],
                )  # fmt: skip
        return await request(self, body, **kwargs)

    failed = Sender._failed

    def record_error(self: Sender, batch: Any, error: KafkaError) -> None:
        errors.append(int(error.error_code))
        failed(self, batch, error)

    monkeypatch.setattr(BrokerConnection, "request", corrupt_second)
    monkeypatch.setattr(Sender, "_failed", record_error)
    async with Producer(shared_cluster.bootstrap, batch_bytes=1024, linger_ms=10_000, compression="none") as producer:
        await Admin(producer.cluster).create_topic(topic, 1)
        handles = [producer.send_nowait(topic, b"%04d" % i + b"-" * 60) for i in range(120)]
        await producer.flush()
        headers, records = await read_partition(producer.cluster, topic, 0)
    assert errors[0] == ErrorCode.CORRUPT_MESSAGE
    assert ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER in errors
    assert [r.value for r in records] == [b"%04d" % i + b"-" * 60 for i in range(120)]
    assert [h.result().offset for h in handles] == list(range(120))
    assert all(h.producer_id == headers[0].producer_id for h in headers)


# --- two answers in one read ---------------------------------------------------------------------


class CoalescingProxy:
    """A TCP proxy in front of one broker: bytes pass both ways as they come, except a
    connection's first two answers to Produce requests, held until both are in and then written
    to the client together, in one write (so the client reads them in one read)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        #: Set once a Produce request has gone through to the broker.
        self.produce_seen = trio.Event()
        #: Set once two Produce answers went to the client in one write.
        self.coalesced = trio.Event()

    async def serve(self, client: trio.SocketStream) -> None:
        async with await trio.open_tcp_stream(*self.upstream) as upstream, trio.open_nursery() as nursery:
            produce_ids: set[int] = set()
            nursery.start_soon(self._requests, client, upstream, produce_ids)
            nursery.start_soon(self._answers, upstream, client, produce_ids)

    async def _requests(self, client: trio.SocketStream, upstream: trio.SocketStream, produce_ids: set[int]) -> None:
        decoder = FrameDecoder()
        while data := await client.receive_some(65536):
            decoder.feed(data)
            seen = False
            for request in decoder.frames():  # api key, api version, correlation id, ...
                api_key, _, correlation_id = struct.unpack_from(">hhi", request)
                if api_key == ApiKey.PRODUCE:
                    produce_ids.add(correlation_id)
                    seen = True
            await upstream.send_all(data)
            if seen:
                self.produce_seen.set()
        await upstream.send_eof()

    async def _answers(self, upstream: trio.SocketStream, client: trio.SocketStream, produce_ids: set[int]) -> None:
        decoder = FrameDecoder()
        held: list[bytes] = []
        while data := await upstream.receive_some(65536):
            decoder.feed(data)
            for answer in decoder.frames():  # correlation id, ...
                framed = struct.pack(">i", len(answer)) + answer
                if struct.unpack_from(">i", answer)[0] in produce_ids and not self.coalesced.is_set():
                    held.append(framed)
                    if len(held) == 2:
                        await client.send_all(b"".join(held))
                        self.coalesced.set()
                else:
                    await client.send_all(framed)
        await client.aclose()


@pytest.fixture
def proxied_broker(zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[tuple[BrokerProcess, int]]:
    """A broker that advertises a port nobody listens on yet (a test's proxy), and that port:
    after bootstrap, every connection a client makes to it goes through the proxy."""
    port, proxy_port = free_ports(2)
    broker = BrokerProcess(
        1, zookeeper.hosts, tmp_path / "data", tmp_path / "broker.log", port=port, advertise=f"127.0.0.1:{proxy_port}"
    )
    broker.start()
    try:
        broker.wait_ready()
        yield broker, proxy_port
    finally:
        broker.stop()


async def test_an_answer_read_with_the_one_before_it_is_settled_after_it(
    proxied_broker: tuple[BrokerProcess, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first Produce to a broker goes in a task of its own (the producer has no connection
    yet); the next, started once the first is written, is settled by callback from the
    connection's reader. When both answers come in one read, the reader wakes the first
    request's task and, before that task has run, meets the second answer: the second request
    must be settled only after the first (``Sender._settle_after``), so that a partition's
    batches complete in the order they were sent."""
    broker, proxy_port = proxied_broker
    topic = topic_name("p-one-read")
    settled: list[Any] = []  # the topic's batches, in the order they were settled
    deferred = 0
    settle, settle_after = Sender._settle, Sender._settle_after

    def record_settle(self: Sender, broker: int, batches: list[Any], outcome: Any) -> None:
        settle(self, broker, batches, outcome)
        settled.extend(batch for batch in batches if batch.queue.tp.topic == topic)

    async def record_deferral(self: Sender, *args: Any) -> None:
        nonlocal deferred
        deferred += 1
        await settle_after(self, *args)

    monkeypatch.setattr(Sender, "_settle", record_settle)
    monkeypatch.setattr(Sender, "_settle_after", record_deferral)
    proxy = CoalescingProxy(broker.address)
    handles: list[RecordHandle] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(functools.partial(trio.serve_tcp, proxy.serve, proxy_port, host="127.0.0.1"))
        # Two 400-byte records fill a batch of 1 KiB and seal it; nothing lingers out.
        async with Producer(broker.bootstrap, batch_bytes=1024, linger_ms=60_000, compression="none") as producer:
            await Admin(producer.cluster).create_topic(topic, 1)
            await producer.partitions_for(topic)
            handles += [await producer.enqueue(topic, b"%d" % i + b"-" * 399) for i in range(2)]
            await proxy.produce_seen.wait()  # the first request is written: the second starts from here
            handles += [await producer.enqueue(topic, b"%d" % i + b"-" * 399) for i in range(2, 4)]
            results = [await handle for handle in handles]
        nursery.cancel_scope.cancel()
    assert proxy.coalesced.is_set()
    assert deferred == 1
    assert [(batch.base_offset, batch.record_count) for batch in settled] == [(0, 2), (2, 2)]
    assert [r.offset for r in results] == [0, 1, 2, 3]


# --- a broker stopped and restarted -------------------------------------------------------------


async def test_backpressure_while_the_broker_is_down_then_every_record_once(single_broker: Brokers) -> None:
    (broker,) = single_broker.brokers
    topic = topic_name("p-down")
    buffer_memory = 64 * 1024
    record = 500
    async with (
        Producer(single_broker.bootstrap, buffer_memory=buffer_memory, batch_bytes=4096, linger_ms=1,
                 request_timeout=2.0, reconnect_backoff_max=0.2) as producer,
        Producer(single_broker.bootstrap, acks=1, delivery_timeout_ms=1500, request_timeout=1.0) as impatient,
    ):  # fmt: skip
        await Admin(producer.cluster).create_topic(topic, 2)
        await impatient.cluster.refresh_metadata()
        warm = [await producer.send(topic, b"warm-%d" % i) for i in range(4)]
        await trio.to_thread.run_sync(broker.stop)

        # Against a broker that is gone, a record waits its delivery timeout, then fails naming where.
        with pytest.raises(DeliveryTimeoutError, match=f"records for {topic}-1 not delivered within 1.5 s") as info:
            await impatient.send(topic, b"x", partition=1)
        assert (info.value.topic, info.value.partition, info.value.broker) == (topic, 1, 1)

        sent: list[RecordHandle] = []

        async def produce() -> None:
            for i in range(400):
                sent.append(await producer.enqueue(topic, b"%05d" % i + b"#" * (record - 5)))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce)
            await trio.sleep(1.5)
            # The buffer filled and the sender is blocked, not the buffer growing.
            blocked_at = len(sent)
            assert 0 < blocked_at < 400
            assert producer.buffer_used <= buffer_memory
            assert blocked_at * (record + RECORD_OVERHEAD) <= buffer_memory + 4096
            await trio.sleep(0.5)
            assert len(sent) == blocked_at
            await trio.to_thread.run_sync(broker.start)
            await trio.to_thread.run_sync(broker.wait_ready)
        with trio.fail_after(TIMEOUT):
            await producer.flush()
        stored = await read_topic(producer.cluster, topic)
    assert len(sent) == 400
    values = Counter(r.value for records in stored.values() for r in records)
    expected = [b"%05d" % i + b"#" * (record - 5) for i in range(400)]
    assert all(values[v] == 1 for v in expected), "a record is missing or duplicated"
    assert sum(values.values()) == 400 + len(warm)
    for handle in sent:
        meta = handle.result()
        assert stored[meta.partition][meta.offset].value == expected[sent.index(handle)]


SESSION_TIMEOUT_MS = "2000"


@pytest.fixture
def killable_cluster(zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[Brokers]:
    """Three brokers whose registrations expire soon after a kill -9."""
    yield from start_cluster(zookeeper.hosts, tmp_path, 3, {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS})


async def test_records_keep_flowing_through_a_broker_kill_and_restart(
    killable_cluster: Brokers, zookeeper: ZooKeeperHandle
) -> None:
    topic = topic_name("p-failover")
    partitions = 6
    keys = [b"key-%d" % i for i in range(60)]
    handles: list[tuple[bytes, bytes, RecordHandle]] = []
    async with Producer(
        killable_cluster.bootstrap, linger_ms=2, batch_bytes=2048, reconnect_backoff_max=0.3
    ) as producer:
        await Admin(producer.cluster).create_topic(topic, partitions)
        leaders = {p: producer.cluster.metadata.leader(topic, p) for p in range(partitions)}
        victim = next(b for b in killable_cluster.brokers if b.broker_id == leaders[0])

        async def produce(count: int) -> None:
            for _ in range(count):
                i = len(handles)
                key, value = keys[i % len(keys)], b"value-%05d" % i
                handles.append((key, value, await producer.enqueue(topic, value, key=key)))
                if i % 20 == 0:
                    await trio.sleep(0.005)

        await produce(300)
        victim.kill()
        await produce(300)  # records for the victim's partitions wait; the others go through
        with trio.fail_after(TIMEOUT):
            while not all(
                h.done() for k, _, h in handles if leaders[partition_for_key(k, partitions)] != victim.broker_id
            ):
                await trio.sleep(0.05)
        waiting = [h for k, _, h in handles if leaders[partition_for_key(k, partitions)] == victim.broker_id]
        assert waiting and not any(h.done() for h in waiting[-50:])
        await trio.to_thread.run_sync(victim.wait_deregistered)
        victim.start()
        await trio.to_thread.run_sync(victim.wait_ready, 3)
        await produce(300)
        with trio.fail_after(TIMEOUT):
            await producer.flush()
        stored = await read_topic(producer.cluster, topic)
    for key, value, handle in handles:
        meta = handle.result()
        assert meta.partition == partition_for_key(key, partitions)
        assert stored[meta.partition][meta.offset].value == value
    values = Counter(r.value for records in stored.values() for r in records)
    assert sorted(values) == sorted(v for _, v, _ in handles) and set(values.values()) == {1}
    # Per key, the records are in the order they were sent.
    for records in stored.values():
        by_key: dict[bytes | None, list[bytes]] = {}
        for r in records:
            assert r.value is not None
            by_key.setdefault(r.key, []).append(r.value)
        assert all(v == sorted(v) for v in by_key.values())


# --- Tansu --------------------------------------------------------------------------------------


async def test_produce_to_tansu_and_read_back(tansu: TansuBroker) -> None:
    topic = topic_name("p-tansu")
    # The default producer is idempotent: Tansu 0.6 answers InitProducerId at the version we
    # ask since transactions raised it to v4 (at v1 it answered UNKNOWN_SERVER_ERROR).
    async with Producer(tansu.bootstrap, linger_ms=5) as producer:
        await Admin(producer.cluster).create_topic(topic, 2)
        handles = [await producer.enqueue(topic, b"tansu-%d" % i, key=b"k%d" % (i % 7)) for i in range(300)]
        await producer.flush()
        metas = [h.result() for h in handles]
        raw = RawClient(producer.cluster)
        stored: dict[int, list[Record]] = {}
        for p in range(2):
            records: list[Record] = []
            offset = 0
            with trio.fail_after(TIMEOUT):
                while True:
                    fetched = await raw.fetch_partition(topic, p, offset, max_wait_ms=100)
                    if not fetched.batches:
                        break
                    records += list(fetched.iter_records())
                    offset = fetched.next_offset
            stored[p] = records
    for i, meta in enumerate(metas):
        assert meta.partition == partition_for_key(b"k%d" % (i % 7), 2)
        assert stored[meta.partition][meta.offset].value == b"tansu-%d" % i
    assert sum(len(r) for r in stored.values()) == 300
