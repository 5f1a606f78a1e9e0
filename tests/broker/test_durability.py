"""Durability of real broker processes: clean restarts, kill -9 mid-stream, damaged segment tails.

The DESIGN's promise under test: "A broker killed mid-write (recovery truncates the torn tail,
nothing acknowledged and flushed is lost)" and "A corrupt batch is never served".
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer

from tests.broker.wire_helpers import (
    EARLIEST,
    LATEST,
    batch,
    connect,
    create_topics,
    fetch_bytes,
    fetch_one,
    list_offset,
    produce,
    values,
)
from tests.fixtures.zookeeper import ZooKeeperHandle
from tests.interop.wire import read_from_beginning
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import CreateTopicsRequest
from tributary.protocol.records import HEADER_SIZE, iter_batches, iter_records
from tributary.testing.cluster import BrokerProcess, Cluster, start_cluster, wait_for_leaders

TIMEOUT = 30.0
# Short ZooKeeper sessions, so a killed broker's registration expires within a test's time.
SESSION_TIMEOUT_MS = "2000"


# --- wire helpers (on top of tests/broker/wire_helpers.py) ---------------------------------------


def create_named_topic(broker: BrokerProcess, topic: str, partitions: int) -> None:
    with connect(broker) as conn:
        created = create_topics(
            conn, CreateTopicsRequest.CreatableTopic(name=topic, num_partitions=partitions, replication_factor=1)
        )
    assert created == {topic: ErrorCode.NONE}


def offset_of(broker: BrokerProcess, topic: str, partition: int, which: int) -> int:
    """ListOffsets LATEST or EARLIEST."""
    with connect(broker) as conn:
        error, offset, _ = list_offset(conn, topic, which, partition)
    assert error == ErrorCode.NONE
    return int(offset)


def fetch_all(broker: BrokerProcess, topic: str, partition: int, start: int = 0) -> list[tuple[int, bytes | None]]:
    """Every (offset, value) from ``start`` to the log end, checking each batch's CRC."""
    end = offset_of(broker, topic, partition, LATEST)
    records: list[tuple[int, bytes | None]] = []
    offset = start
    with connect(broker) as conn:
        while offset < end:
            buf = fetch_bytes(conn, topic, offset, partition)
            assert buf, f"nothing served at offset {offset}, below the log end {end}"
            for pos, _ in iter_batches(buf):
                for record in iter_records(buf, pos):  # validates the CRC
                    if record.offset >= offset:
                        records.append((record.offset, record.value))
                        offset = record.offset + 1
    return records


def produce_values(broker: BrokerProcess, topic: str, partition: int, values: list[bytes]) -> int:
    """One uncompressed batch of ``values`` with acks=all; returns its base offset."""
    with connect(broker) as conn:
        error, base_offset = produce(conn, topic, batch(*values), partition)
    assert error == ErrorCode.NONE
    return int(base_offset)


# --- process helpers --------------------------------------------------------------------------


def log_openings(broker: BrokerProcess) -> list[str]:
    """How each start of the broker opened its logs: "clean" or "recovered", in order."""
    return re.findall(r"opened \d+ logs in \S+ \((\w+) start\)", broker.log_path.read_text())


def consume_everything(bootstrap: str, topic: str, partitions: int) -> dict[int, list[tuple[int, bytes]]]:
    """partition -> [(offset, value)] from the beginning to the end, through confluent-kafka."""
    consumed, _ = read_from_beginning(bootstrap, topic, partitions, "durability")
    return {p: [(m.offset(), m.value()) for m in messages] for p, messages in consumed.items()}


# --- (a) clean restarts -------------------------------------------------------------------------


def test_every_message_survives_restarting_every_broker(broker_cluster: Cluster) -> None:
    topic, partitions, count = "restart-all", 6, 3_000
    create_named_topic(broker_cluster.brokers[0], topic, partitions)
    before = wait_for_leaders(broker_cluster.brokers, topic, partitions)
    assert Counter(before.values()) == {1: 2, 2: 2, 3: 2}

    delivered: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    failures: list[str] = []

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(str(error))
        else:
            delivered[message.partition()].append((message.offset(), message.value()))

    producer = Producer(
        {"bootstrap.servers": broker_cluster.bootstrap, "acks": "all", "compression.type": "zstd", "linger.ms": 5}
    )
    try:
        for i in range(count):
            producer.produce(topic, key=b"k%d" % i, value=b"restart-%06d" % i, on_delivery=on_delivery)
            producer.poll(0)
        assert producer.flush(TIMEOUT) == 0
    finally:
        producer.purge()
        producer.close()
    assert failures == []
    assert sum(map(len, delivered.values())) == count

    def check_everything_is_there() -> None:
        assert wait_for_leaders(broker_cluster.brokers, topic, partitions) == before
        for partition, leader in before.items():
            broker = broker_cluster.brokers[leader - 1]
            assert offset_of(broker, topic, partition, LATEST) == len(delivered[partition])
            assert offset_of(broker, topic, partition, EARLIEST) == 0
        assert consume_everything(broker_cluster.bootstrap, topic, partitions) == delivered

    # A rolling restart: one broker at a time, the others keep running.
    for broker in broker_cluster.brokers:
        assert broker.stop() == 0, broker.log_tail()
        broker.start()
        broker.wait_ready(expected_brokers=3)
    check_everything_is_there()

    # A full restart: every broker down at once, then all back.
    for broker in broker_cluster.brokers:
        assert broker.stop() == 0, broker.log_tail()
    broker_cluster.start()
    check_everything_is_there()

    for broker in broker_cluster.brokers:
        # SIGTERM closed the logs cleanly, so later starts skipped recovery (the first start,
        # on an empty data directory, had no clean-shutdown marker).
        assert log_openings(broker) == ["recovered", "clean", "clean"], broker.log_tail()


# --- (b) kill -9 while producing with fsync-before-ack -------------------------------------------


@pytest.fixture
def flushing_cluster(zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[Cluster]:
    """Three brokers that fsync every message before acknowledging it."""
    yield from start_cluster(
        zookeeper.hosts,
        tmp_path,
        3,
        {"log.flush.interval.messages": "1", "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS},
    )


def test_acknowledged_messages_survive_kill_9_of_the_leader(
    flushing_cluster: Cluster, zookeeper: ZooKeeperHandle
) -> None:
    topic, total, kill_after, window = "kill-9", 12_000, 3_000, 500
    create_named_topic(flushing_cluster.brokers[0], topic, 1)
    leader_id = wait_for_leaders(flushing_cluster.brokers, topic, 1)[0]
    leader = next(b for b in flushing_cluster.brokers if b.broker_id == leader_id)

    acked: list[tuple[int, int]] = []  # (sequence number, offset), in acknowledgement order
    failures: list[tuple[int, str]] = []

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        sequence = int(message.value())
        if error is not None:
            failures.append((sequence, str(error)))
        else:
            acked.append((sequence, message.offset()))

    producer = Producer(
        {
            "bootstrap.servers": flushing_cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "compression.type": "zstd",
            "linger.ms": 1,
            "message.timeout.ms": int(TIMEOUT * 1000),
        }
    )
    sent = 0

    def unacknowledged() -> int:
        return sent - len(acked) - len(failures)

    def send() -> None:
        nonlocal sent
        producer.produce(topic, value=b"%08d" % sent, on_delivery=on_delivery)
        sent += 1
        producer.poll(0)

    try:
        deadline = time.monotonic() + TIMEOUT
        # Stream with a bounded number of unacknowledged messages until enough are acknowledged,
        # then kill -9 the leader while a good part of that window is still unacknowledged.
        while len(acked) < kill_after or unacknowledged() < window // 2:
            assert time.monotonic() < deadline, f"only {len(acked)} acknowledged before the kill"
            if unacknowledged() < window:
                send()
            else:
                producer.poll(0.001)
        killed_with_unacked = unacknowledged()
        leader.kill()
        acked_before_kill = len(acked)
        # More of the stream while the leader is down: it waits in the producer.
        for _ in range(window):
            send()
        leader.wait_deregistered()
        leader.start()
        leader.wait_ready(expected_brokers=3)
        while sent < total:
            send()
        assert producer.flush(TIMEOUT) == 0
    finally:
        producer.purge()
        producer.close()
    assert killed_with_unacked > 0, "nothing was in flight when the leader was killed"
    assert acked_before_kill >= kill_after
    # The second start found no clean-shutdown marker and recovered the logs.
    assert log_openings(leader) == ["recovered", "recovered"]

    log = fetch_all(leader, topic, 0)
    assert [offset for offset, _ in log] == list(range(len(log))), "offsets are not dense"
    served = {offset: int(value or b"-1") for offset, value in log}
    # Every acknowledged message is served at the offset it was acknowledged with.
    lost = [(sequence, offset) for sequence, offset in acked if served.get(offset) != sequence]
    assert lost == [], f"acknowledged but not served: {lost[:10]}"
    # The log holds the stream in order: no gap before an acknowledged message, no duplicate.
    sequences = [served[offset] for offset in range(len(log))]
    assert sequences == sorted(set(sequences)), "the log reorders or duplicates the stream"
    last_acked = max(sequence for sequence, _ in acked)
    assert set(range(last_acked + 1)) <= set(sequences), "a gap in the log below an acknowledged message"
    # The idempotent producer rode out the crash: everything was acknowledged exactly once.
    assert failures == []
    assert sorted(s for s, _ in acked) == list(range(total))
    assert sequences == list(range(total))


# --- (c) damaged segment tails ------------------------------------------------------------------


def active_segment(broker: BrokerProcess, topic: str, partition: int) -> Path:
    directory = broker.data_dir / f"{topic}-{partition}"
    return max(directory.glob("*.log"))


def flip_byte(segment: Path, position: int, mask: int = 0xFF) -> None:
    """Damage one byte of a segment file in place, as bit rot or a stray write would."""
    with segment.open("r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ mask]))


def batch_positions(segment: Path) -> list[tuple[int, int, int]]:
    """(file position, size, record count) of each batch in the segment file."""
    data = segment.read_bytes()
    return [(pos, header.size, header.record_count) for pos, header in iter_batches(data)]


@pytest.fixture
def restartable_broker(zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[Cluster]:
    """One broker whose registration expires soon after a kill -9."""
    yield from start_cluster(zookeeper.hosts, tmp_path, 1, {"zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS})


@pytest.mark.parametrize(
    ("damage", "shutdown"),
    [
        ("truncate", "sigkill"),
        ("corrupt", "sigkill"),
    ],
)
def test_recovery_drops_a_damaged_unflushed_last_batch(
    restartable_broker: Cluster, zookeeper: ZooKeeperHandle, damage: str, shutdown: str
) -> None:
    topic, batches, per_batch = "damaged", 8, 5
    (broker,) = restartable_broker.brokers
    create_named_topic(broker, topic, 1)
    wait_for_leaders([broker], topic, 1)
    values = [[b"batch-%d-record-%d" % (b, r) for r in range(per_batch)] for b in range(batches)]
    assert [produce_values(broker, topic, 0, v) for v in values] == [b * per_batch for b in range(batches)]

    if shutdown == "sigterm":
        assert broker.stop() == 0
    else:
        broker.kill()
    segment = active_segment(broker, topic, 0)
    layout = batch_positions(segment)
    assert [count for _, _, count in layout] == [per_batch] * batches
    last_pos, last_size, _ = layout[-1]
    assert last_pos + last_size == segment.stat().st_size
    if damage == "truncate":
        # A torn write: the file ends in the middle of the last batch.
        os.truncate(segment, last_pos + last_size // 2)
    else:
        # A byte of the last batch's records, inside what its CRC covers.
        flip_byte(segment, last_pos + HEADER_SIZE + (last_size - HEADER_SIZE) // 2)

    if shutdown == "sigkill":
        broker.wait_deregistered()
    broker.start()
    broker.wait_ready()
    wait_for_leaders([broker], topic, 1)
    assert log_openings(broker) == ["recovered", "clean" if shutdown == "sigterm" else "recovered"]

    intact = (batches - 1) * per_batch
    assert offset_of(broker, topic, 0, LATEST) == intact
    assert offset_of(broker, topic, 0, EARLIEST) == 0
    expected = [(b * per_batch + r, v) for b, vs in enumerate(values[:-1]) for r, v in enumerate(vs)]
    assert fetch_all(broker, topic, 0) == expected
    # The log goes on from there, in the same segment.
    assert produce_values(broker, topic, 0, [b"after-recovery"]) == intact
    assert fetch_all(broker, topic, 0, intact) == [(intact, b"after-recovery")]
    assert [count for _, _, count in batch_positions(segment)] == [per_batch] * (batches - 1) + [1]


@pytest.mark.parametrize("damage", ["truncate", "corrupt"])
def test_damage_to_flushed_data_takes_the_partition_offline_and_deletes_nothing(
    restartable_broker: Cluster, damage: str
) -> None:
    # After a clean stop every batch was on disk: a batch that no longer reads back is not a torn
    # write but corruption, and cutting it off would delete acknowledged records (once: about
    # 300,000 of them, with one WARNING line). The partition goes offline instead, its files as
    # they are, and the broker serves its other partitions.
    topic, other, batches, per_batch = "damaged", "intact", 8, 5
    (broker,) = restartable_broker.brokers
    create_named_topic(broker, topic, 1)
    create_named_topic(broker, other, 1)
    wait_for_leaders([broker], topic, 1)
    wait_for_leaders([broker], other, 1)
    produced = [[b"batch-%d-record-%d" % (b, r) for r in range(per_batch)] for b in range(batches)]
    assert [produce_values(broker, topic, 0, v) for v in produced] == [b * per_batch for b in range(batches)]
    assert produce_values(broker, other, 0, [b"kept"]) == 0
    assert broker.stop() == 0

    segment = active_segment(broker, topic, 0)
    layout = batch_positions(segment)
    middle_pos, middle_size, _ = layout[batches // 2]
    if damage == "truncate":
        os.truncate(segment, middle_pos + middle_size // 2)
    else:
        flip_byte(segment, middle_pos + HEADER_SIZE + (middle_size - HEADER_SIZE) // 2)
    damaged = segment.read_bytes()

    broker.start()
    broker.wait_ready()
    with connect(broker) as conn:
        assert produce(conn, topic, batch(b"more")) == (ErrorCode.KAFKA_STORAGE_ERROR, -1)
        assert fetch_one(conn, topic, 0).error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert list_offset(conn, topic, LATEST)[0] == ErrorCode.KAFKA_STORAGE_ERROR
        # The broker's other partitions are served as ever.
        assert produce(conn, other, batch(b"more")) == (ErrorCode.NONE, 1)
        assert values(fetch_bytes(conn, other, 0)) == [b"kept", b"more"]
    assert segment.read_bytes() == damaged, "the damaged segment was changed"
    log = broker.log_path.read_text()
    assert re.search(
        rf"partition damaged-0 is offline: .*{re.escape(segment.name)}: corrupt batch at byte {middle_pos} "
        rf"\(offset {batches // 2 * per_batch}\)",
        log,
    ), broker.log_tail()
    # A second restart finds it the same way: nothing was cut in between.
    assert broker.stop() == 0
    broker.start()
    broker.wait_ready()
    assert segment.read_bytes() == damaged
    with connect(broker) as conn:
        assert produce(conn, topic, batch(b"more")) == (ErrorCode.KAFKA_STORAGE_ERROR, -1)


# --- (d) rot in a closed segment while the broker runs ---------------------------------------


@pytest.fixture
def scrubbing_broker(zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[Cluster]:
    """One broker with small segments whose scrubber passes over them continually."""
    yield from start_cluster(
        zookeeper.hosts,
        tmp_path,
        1,
        {"log.segment.bytes": "4096", "log.scrub.interval.ms": "50", "log.scrub.bytes.per.second": str(64 << 20)},
    )


def test_rot_in_a_closed_segment_is_found_by_the_scrubber_and_never_served_again(
    scrubbing_broker: Cluster,
) -> None:
    # Fetches go out with sendfile, which never looks at the bytes: a segment that rots after it
    # was written would be served as it is. The scrubber re-reads closed segments with their CRCs
    # and takes the partition offline, its files untouched, across restarts too.
    topic, other = "rotting", "healthy"
    (broker,) = scrubbing_broker.brokers
    create_named_topic(broker, topic, 1)
    create_named_topic(broker, other, 1)
    wait_for_leaders([broker], topic, 1)
    wait_for_leaders([broker], other, 1)
    for i in range(40):
        produce_values(broker, topic, 0, [b"record-%03d-" % i + b"x" * 400])
    produce_values(broker, other, 0, [b"kept"])
    closed = sorted((broker.data_dir / f"{topic}-0").glob("*.log"))[:-1]
    assert len(closed) >= 2
    victim = closed[1]
    pos, size, _ = batch_positions(victim)[2]
    flip_byte(victim, pos + HEADER_SIZE + size // 3, 0x10)
    damaged = victim.read_bytes()

    deadline = time.monotonic() + TIMEOUT
    with connect(broker) as conn:
        while (error := produce(conn, topic, batch(b"more"))[0]) == ErrorCode.NONE:
            assert time.monotonic() < deadline, "the scrubber never found the damage"
            time.sleep(0.05)
        assert error == ErrorCode.KAFKA_STORAGE_ERROR
        assert fetch_one(conn, topic, 0).error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert produce(conn, other, batch(b"more")) == (ErrorCode.NONE, 1)
    assert re.search(rf"partition rotting-0 is offline: .*{re.escape(victim.name)}: corrupt batch at byte {pos} ",
                     broker.log_path.read_text()), broker.log_tail()  # fmt: skip

    # A clean restart trusts closed segments, so only the marker keeps the damage from being served.
    assert broker.stop() == 0
    broker.start()
    broker.wait_ready()
    with connect(broker) as conn:
        assert fetch_one(conn, topic, 0).error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert values(fetch_bytes(conn, other, 0)) == [b"kept", b"more"]
    assert victim.read_bytes() == damaged
