"""Retention in a running broker while consumers hold old positions.

A broker with 64 KiB segments checks retention every 200 ms. Once it has deleted the oldest
segments, a fetch at an offset they held gets OFFSET_OUT_OF_RANGE, the log start offset has moved
to the first remaining segment, clients reset as configured, and the broker goes on serving.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from tests.broker.wire_helpers import (
    EARLIEST,
    LATEST,
    batch,
    connect,
    create_topic,
    fetch_one,
    list_offset,
    produce,
)
from tests.fixtures.brokers import RETENTION_BYTES
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.records import iter_batches, iter_records
from tributary.testing.cluster import BrokerProcess, Cluster
from tributary.testing.wire import WireConnection

TIMEOUT = 20.0
BATCHES, PER_BATCH, VALUE_SIZE = 120, 100, 100
HOUR_MS = 3_600_000


def value_of(offset: int) -> bytes:
    return (b"%08d-" % offset).ljust(VALUE_SIZE, b"x")


def fetch(conn: WireConnection, topic: str, offset: int) -> tuple[int, int, int, list[tuple[int, bytes | None]]]:
    """(error code, log start offset, high watermark, [(offset, value)]) of one Fetch at ``offset``."""
    data = fetch_one(conn, topic, offset, partition_max_bytes=1 << 20)
    buf = bytes(data.records or b"")
    records = [(r.offset, r.value) for pos, _ in iter_batches(buf) for r in iter_records(buf, pos)]
    return data.error_code, data.log_start_offset, data.high_watermark, records


def offset_of(conn: WireConnection, topic: str, which: int) -> int:
    error, offset, _ = list_offset(conn, topic, which)
    assert error == ErrorCode.NONE
    return int(offset)


def produce_batch(conn: WireConnection, topic: str, first_offset: int, timestamp: int | None) -> int:
    """One batch of PER_BATCH records, the values their offsets should get; returns its base offset."""
    error, base_offset = produce(
        conn, topic, batch(*(value_of(first_offset + i) for i in range(PER_BATCH)), timestamp=timestamp)
    )
    assert error == ErrorCode.NONE
    return int(base_offset)


def segment_files(broker: BrokerProcess, topic: str) -> list[tuple[int, int]]:
    """(base offset, size) of each segment on disk, oldest first."""
    found = []
    for path in sorted((broker.data_dir / f"{topic}-0").glob("*.log")):
        try:
            found.append((int(path.stem), path.stat().st_size))
        except FileNotFoundError:
            continue  # deleted between the listing and the stat
    return found


def consumer_config(bootstrap: str, reset: str) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": f"retention-{reset}",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": reset,
    }


def consume_from(bootstrap: str, topic: str, offset: int, reset: str) -> tuple[list[int], list[KafkaError]]:
    """Offsets a confluent-kafka consumer assigned at ``offset`` reads up to the partition's end
    (or until its first error other than end-of-partition), and that error."""
    consumer = Consumer(consumer_config(bootstrap, reset))
    offsets: list[int] = []
    errors: list[KafkaError] = []
    try:
        consumer.assign([TopicPartition(topic, 0, offset)])
        deadline = time.monotonic() + TIMEOUT
        while not errors:
            assert time.monotonic() < deadline, f"read {len(offsets)} records and no end of partition"
            message = consumer.poll(0.5)
            if message is None:
                continue
            if (error := message.error()) is None:
                offsets.append(message.offset())
                assert message.value() == value_of(message.offset())
            elif error.code() == KafkaError._PARTITION_EOF:
                break
            else:
                errors.append(error)
    finally:
        consumer.close()
    return offsets, errors


@pytest.mark.parametrize("policy", ["retention.bytes", "retention.ms"])
def test_fetch_below_the_log_start_after_retention(retaining_broker: Cluster, policy: str) -> None:
    (broker,) = retaining_broker.brokers
    # retention.bytes: the broker's 256 KiB. retention.ms: records stamped an hour ago, kept ten
    # minutes, so every segment but the active one is due as soon as it is rolled.
    configs = {} if policy == "retention.bytes" else {"retention.ms": str(10 * 60_000), "retention.bytes": "-1"}
    timestamp = None if policy == "retention.bytes" else int(time.time() * 1000) - HOUR_MS

    with connect(broker) as conn:
        topic = create_topic(conn, 1, configs)

    # The consumer's connection: it reads the first batch, then holds its position after it.
    consumer = connect(broker)
    producer = connect(broker)
    try:
        assert produce_batch(producer, topic, 0, timestamp) == 0
        error, start, end, records = fetch(consumer, topic, 0)
        assert (error, start, end) == (ErrorCode.NONE, 0, PER_BATCH)
        assert records == [(i, value_of(i)) for i in range(PER_BATCH)]

        for b in range(1, BATCHES):
            assert produce_batch(producer, topic, b * PER_BATCH, timestamp) == b * PER_BATCH
        total = BATCHES * PER_BATCH

        # Until retention has done all it will do with this log: the log start is the first
        # remaining segment, and that segment is not due any more.
        deadline = time.monotonic() + TIMEOUT
        while True:
            earliest = offset_of(producer, topic, EARLIEST)
            segments = segment_files(broker, topic)
            if policy == "retention.bytes":
                settled = sum(size for _, size in segments[1:]) < RETENTION_BYTES
            else:
                settled = len(segments) == 1
            if earliest > 0 and segments and segments[0][0] == earliest and settled:
                break
            assert time.monotonic() < deadline, f"retention left log start {earliest}, segments {segments}"
            time.sleep(0.05)

        assert offset_of(producer, topic, LATEST) == total
        assert earliest % PER_BATCH == 0  # segments start at batch boundaries
        if policy == "retention.bytes":
            remaining = sum(size for _, size in segments)
            assert remaining >= RETENTION_BYTES  # Kafka's rule: never below retention.bytes
        else:
            assert earliest == segments[-1][0]  # only the active segment is left

        # The consumer's next fetch at its old position is out of range, and says where the log starts.
        error, start, end, records = fetch(consumer, topic, PER_BATCH)
        assert (error, start, end, records) == (ErrorCode.OFFSET_OUT_OF_RANGE, earliest, total, [])
        error, start, end, records = fetch(consumer, topic, earliest - 1)
        assert error == ErrorCode.OFFSET_OUT_OF_RANGE
        # ... and it is served again from the log start.
        error, start, end, records = fetch(consumer, topic, earliest)
        assert (error, start, end) == (ErrorCode.NONE, earliest, total)
        assert records[0] == (earliest, value_of(earliest))

        # A real client at the old offset: with auto.offset.reset=error it is told, with
        # auto.offset.reset=earliest it resumes at the log start.
        offsets, errors = consume_from(broker.bootstrap, topic, PER_BATCH, "error")
        assert offsets == []
        assert [e.code() for e in errors] == [KafkaError._AUTO_OFFSET_RESET], errors
        assert "out of range" in errors[0].str().lower()
        offsets, errors = consume_from(broker.bootstrap, topic, PER_BATCH, "earliest")
        assert errors == []
        assert offsets == list(range(earliest, total))

        # The broker keeps accepting and serving.
        assert produce_batch(producer, topic, total, None) == total
        error, start, end, records = fetch(consumer, topic, total)
        assert (error, end) == (ErrorCode.NONE, total + PER_BATCH)
        assert records == [(total + i, value_of(total + i)) for i in range(PER_BATCH)]
    finally:
        consumer.close()
        producer.close()
    assert broker.proc is not None
    assert broker.proc.poll() is None
    assert "Traceback" not in broker.log_path.read_text()
    assert "retention deleted" in broker.log_path.read_text()
