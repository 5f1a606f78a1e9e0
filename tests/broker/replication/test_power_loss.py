"""Power loss, not only process death: one, two or all three replicas lose what they had not
fsynced, at once.

Three brokers, replication factor 3, min.insync.replicas 2. While confluent-kafka produces with
acks=all and idempotence, some brokers are killed with -9 at the same moment and each of their
segment files is cut back to what its last fsync covered (the brokers record it when run with
TRIBUTARY_TEST_FSYNC_JOURNAL: the page cache a killed process leaves behind is what a power cut
loses); the others run on. After a restart every acknowledged record must still be there, once,
in order, except in the one case where nothing can save it:

- one or two replicas cut: no loss, with or without ``high.watermark.fsync``. Every acknowledged
  record is in the page cache of a replica that kept running and was in sync; clean election
  picks it, and the cut replicas, gone from the ISR when their registrations expired, truncate
  to it and catch up before they count again;
- all three cut: no loss only with ``high.watermark.fsync = true`` (the high watermark counts
  only what every in-sync replica has fsynced). Without it the cut loses what no replica had
  fsynced, and the test shows that it does.

CI runs two cut replicas without the setting and three with it; ``--long`` every combination.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.fixtures.zookeeper import ZooKeeperHandle
from tributary.broker.log.checkpoint import RECOVERY_POINT_CHECKPOINT
from tributary.testing.cluster import Cluster
from tributary.testing.history import History, Verdict, read_partitions, wait_until_served

from .test_failover import fully_replicated, wait_for

TOPIC = "durable"
SETTINGS = {
    "zookeeper.session.timeout.ms": "4000",
    "min.insync.replicas": "2",
    "replica.lag.time.max.ms": "5000",
}


def power_cut(data_dir: Path, journal: Path) -> tuple[int, int]:
    """Cut every segment of `data_dir` back to its last fsynced size (remove the ones never
    fsynced) and drop the indexes, which recovery rebuilds; (segments cut, bytes dropped)."""
    synced: dict[str, int] = {}
    if journal.exists():
        for line in journal.read_text().splitlines():
            path, _, size = line.rpartition(" ")
            synced[path] = int(size)
    cut = dropped = 0
    for segment in data_dir.glob("*/*.log"):
        size = segment.stat().st_size
        keep = synced.get(str(segment), 0)
        if keep < size:
            cut += 1
            dropped += size - keep
            if keep:
                os.truncate(segment, keep)
            else:
                segment.unlink()
    for index in [*data_dir.glob("*/*.index"), *data_dir.glob("*/*.timeindex")]:
        index.unlink()
    return cut, dropped


@pytest.fixture
def journals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    # Every broker the test starts inherits the variable; they share one journal (each line
    # names a full path, and appends of a line are atomic).
    journal = tmp_path / "fsync-journal"
    monkeypatch.setenv("TRIBUTARY_TEST_FSYNC_JOURNAL", str(journal))
    yield journal


def cut_power_under_load(cluster: Cluster, journal: Path, victims: int) -> tuple[Verdict, int]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 3, 3)], operation_timeout=30)[TOPIC].result(timeout=30)
    wait_for(lambda: fully_replicated(cluster, TOPIC), 30, "ISR of 3")
    history = History()
    lock = threading.Lock()
    stop = threading.Event()
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 2, "message.timeout.ms": 20_000})  # fmt: skip

    def produce() -> None:
        while not stop.is_set():
            with lock:
                sequence, value = history.next_value()

            def delivered(err: KafkaError | None, msg: object, sequence: int = sequence) -> None:
                with lock:
                    if err is None:
                        history.acknowledge(sequence, msg.partition(), msg.offset())  # type: ignore[attr-defined]
                    else:
                        history.fail(sequence, str(err))

            try:
                producer.produce(TOPIC, value, on_delivery=delivered)
            except BufferError:
                producer.poll(0.05)
            producer.poll(0)
            time.sleep(0.0001)

    thread = threading.Thread(target=produce)
    thread.start()
    try:
        wait_for(lambda: len(history.acknowledged) > 10_000, 60, "acknowledged records")
        cut = cluster.brokers[:victims]  # each leads one partition: leaders go down too
        for broker in cut:  # as close to "at once" as signals get
            assert broker.proc is not None
            broker.proc.kill()
        for broker in cut:
            assert broker.proc is not None
            broker.proc.wait()
    finally:
        stop.set()
        thread.join()
    with lock:
        acknowledged = len(history.acknowledged)
    dropped = 0
    for broker in cut:
        dropped += power_cut(broker.data_dir, journal)[1]
    for broker in cut:
        broker.start()
    for broker in cut:
        broker.wait_ready(expected_brokers=3)
    # Whatever the producer still had in flight failed or will fail: only what was acknowledged
    # before the cut counts.
    producer.flush(30)
    wait_for(lambda: fully_replicated(cluster, TOPIC), 60, "leaders and ISR after the cut")
    print(f"{acknowledged} acknowledged before the cut, {dropped} unsynced bytes dropped")
    wait_until_served(cluster.bootstrap, TOPIC, history)
    verdict = history.check(read_partitions(cluster.bootstrap, TOPIC))
    return verdict, dropped


#: (replicas cut, high.watermark.fsync): CI's, then --long's.
CASES = [(2, False), (3, True)]
LONG_CASES = [(1, False), (1, True), (2, False), (2, True), (3, True), (3, False)]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if {"victims", "hw_fsync"} <= set(metafunc.fixturenames):
        cases = LONG_CASES if metafunc.config.getoption("--long") else CASES
        ids = [f"{v}-cut-{'hw_fsync' if f else 'no_fsync'}" for v, f in cases]
        metafunc.parametrize(("victims", "hw_fsync"), cases, ids=ids)


def test_which_power_cuts_lose_acknowledged_records(
    zookeeper: ZooKeeperHandle, tmp_path: Path, journals: Path, victims: int, hw_fsync: bool
) -> None:
    settings = {**SETTINGS, "high.watermark.fsync": str(hw_fsync).lower()}
    with Cluster(zookeeper.hosts, tmp_path, 3, settings) as cluster:
        verdict, dropped = cut_power_under_load(cluster, journals, victims)
    print(f"{victims} of 3 replicas lost power, high.watermark.fsync = {str(hw_fsync).lower()}: {verdict}; "
          f"{dropped} unsynced bytes were dropped")  # fmt: skip
    if not hw_fsync:  # (with it, the group commits may have fsynced everything by the cut)
        assert dropped > 0, "the cut dropped nothing: it tested nothing"
    if victims == 3 and not hw_fsync:
        # Kafka's default too (log.flush.interval.* never): everything since the last flush goes.
        assert verdict.lost, "all three replicas lost their unsynced tails, yet nothing acknowledged was lost"
        assert not verdict.duplicated and not verdict.out_of_order, verdict
        return
    assert verdict.ok, verdict
    assert verdict.acknowledged > 10_000


def test_after_every_replica_crashed_the_high_watermark_returns_without_new_writes(
    zookeeper: ZooKeeperHandle, tmp_path: Path
) -> None:
    """With high.watermark.fsync, a leader counts only what it has fsynced, and after an unclean
    restart its recovered tail lies past its last checkpointed recovery point. It must fsync that
    tail on taking leadership: when it waited for the next produce instead, a cluster whose every
    replica crashed served nothing, and answered ListOffsets with OFFSET_NOT_AVAILABLE, until
    some producer wrote again."""
    settings = {**SETTINGS, "high.watermark.fsync": "true"}
    with Cluster(zookeeper.hosts, tmp_path, 3, settings) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 3, 3)], operation_timeout=30)[TOPIC].result(timeout=30)
        wait_for(lambda: fully_replicated(cluster, TOPIC), 30, "ISR of 3")
        history = History()
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
        for _ in range(300):
            sequence, value = history.next_value()

            def delivered(err: KafkaError | None, msg: object, sequence: int = sequence) -> None:
                assert err is None, err
                history.acknowledge(sequence, msg.partition(), msg.offset())  # type: ignore[attr-defined]

            producer.produce(TOPIC, value, on_delivery=delivered)
        assert producer.flush(30) == 0
        del producer  # nothing writes after the crash
        for broker in cluster.brokers:
            assert broker.proc is not None
            broker.proc.kill()
            broker.proc.wait()
            # As if the crash came before the next recovery-point checkpoint (one a second):
            # everything in the logs is then a recovered tail.
            (broker.data_dir / RECOVERY_POINT_CHECKPOINT).unlink(missing_ok=True)
        for broker in cluster.brokers:
            broker.start()
        for broker in cluster.brokers:
            broker.wait_ready(expected_brokers=3)
        wait_for(lambda: fully_replicated(cluster, TOPIC), 60, "leaders and ISR after the crash")
        wait_until_served(cluster.bootstrap, TOPIC, history)
        verdict = history.check(read_partitions(cluster.bootstrap, TOPIC))
    assert verdict.ok, verdict
    assert verdict.acknowledged == 300
