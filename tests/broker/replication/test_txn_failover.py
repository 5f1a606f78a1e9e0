"""Transactions across kill -9: three brokers, ``__transaction_state`` and the data replicated
three times. A transaction is committed in every partition it wrote to or aborted in every one,
never half, whichever broker dies: its coordinator (the next leader of its ``__transaction_state``
partition loads it and finishes or times it out), or a data partition's leader (the markers go to
the new leader).
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.replication.test_failover import SETTINGS, fully_replicated, partition_states, wait_for
from tests.fixtures.zookeeper import ZooKeeperHandle
from tests.interop.test_transactions import confluent_read
from tributary.protocol.messages import DescribeTransactionsRequest, FindCoordinatorRequest
from tributary.testing.cluster import BrokerProcess, Cluster
from tributary.testing.wire import request

TOPIC, PARTITIONS = "orders", 3
TXN_SETTINGS = {
    **SETTINGS,
    "transaction.state.log.num.partitions": "5",
    "offsets.topic.num.partitions": "5",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
}
TIMEOUT = 60.0


@pytest.fixture
def cluster(zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[Cluster]:
    with Cluster(zookeeper.hosts, tmp_path, 3, TXN_SETTINGS) as running:
        admin = AdminClient({"bootstrap.servers": running.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        yield running


def live(cluster: Cluster) -> BrokerProcess:
    return next(b for b in cluster.brokers if b.proc is not None and b.proc.poll() is None)


def coordinator(cluster: Cluster, transactional_id: str) -> int:
    response = request(live(cluster).address, FindCoordinatorRequest(key=transactional_id, key_type=1), 2)
    assert response.error_code == 0, response
    return int(response.node_id)


def describe(cluster: Cluster, transactional_id: str) -> str | None:
    """The id's state as its coordinator describes it; None while it cannot say."""
    try:
        broker = cluster.broker(coordinator(cluster, transactional_id))
        response = request(broker.address, DescribeTransactionsRequest(transactional_ids=[transactional_id]), 0)
    except (OSError, AssertionError):
        return None
    (state,) = response.transaction_states
    return state.transaction_state if state.error_code == 0 else None


def kill_and_restart(broker: BrokerProcess) -> None:
    broker.kill()
    broker.start()  # at once: it waits for its old registration to expire, then rejoins
    broker.wait_ready(expected_brokers=3)


def txn_producer(cluster: Cluster, transactional_id: str, **extra: object) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "transactional.id": transactional_id,
            "linger.ms": 5,
            "transaction.timeout.ms": 10_000,
            **extra,
        }
    )
    producer.init_transactions(TIMEOUT)
    return producer


def test_an_open_transaction_of_a_killed_coordinator_is_aborted_by_the_next(cluster: Cluster) -> None:
    producer = txn_producer(cluster, "open-at-kill", **{"transaction.timeout.ms": 5000})
    producer.begin_transaction()
    for i in range(30):
        producer.produce(TOPIC, value=b"committed-%d" % i, partition=i % PARTITIONS)
    producer.commit_transaction(TIMEOUT)
    producer.begin_transaction()
    for i in range(30):
        producer.produce(TOPIC, value=b"open-%d" % i, partition=i % PARTITIONS)
    producer.flush(TIMEOUT)
    wait_for(lambda: fully_replicated(cluster, "__transaction_state"), 30, "__transaction_state in sync")
    wait_for(lambda: fully_replicated(cluster, TOPIC), 30, f"{TOPIC} in sync")
    victim = cluster.broker(coordinator(cluster, "open-at-kill"))
    kill_and_restart(victim)
    # The next coordinator read the open transaction from its replica, and timed it out.
    wait_for(lambda: describe(cluster, "open-at-kill") == "CompleteAbort", TIMEOUT, "the abort")
    with pytest.raises(KafkaException):
        producer.commit_transaction(TIMEOUT)
    with contextlib.suppress(KafkaException):
        producer.close()
    committed = [b"committed-%d" % i for i in range(30)]
    assert sorted(confluent_read(cluster.bootstrap, TOPIC, PARTITIONS, "read_committed")) == sorted(committed)
    assert len(confluent_read(cluster.bootstrap, TOPIC, PARTITIONS, "read_uncommitted")) == 60


class TransactionalWriter(threading.Thread):
    """Runs transactions until stopped, each writing ``per_partition`` records to every partition,
    and notes what became of each: committed (commit_transaction returned), aborted (an abortable
    error, then abort_transaction returned), or unknown (a fatal error or a timeout: a new
    producer goes on, and the transaction may have been either)."""

    def __init__(self, cluster: Cluster, transactional_id: str, per_partition: int = 3) -> None:
        super().__init__(name=f"writer-{transactional_id}")
        self.cluster, self.transactional_id, self.per_partition = cluster, transactional_id, per_partition
        self.stop = threading.Event()
        self.outcomes: dict[int, str] = {}
        self.errors: list[str] = []

    def run(self) -> None:
        producer = txn_producer(self.cluster, self.transactional_id)
        n = 0
        while not self.stop.is_set():
            n += 1
            try:
                producer.begin_transaction()
                for p in range(PARTITIONS):
                    for i in range(self.per_partition):
                        producer.produce(TOPIC, value=b"%d:%d:%d" % (n, p, i), partition=p)
                producer.commit_transaction(TIMEOUT)
                self.outcomes[n] = "committed"
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                self.errors.append(str(error))
                if error.txn_requires_abort():
                    try:
                        producer.abort_transaction(TIMEOUT)
                        self.outcomes[n] = "aborted"
                        continue
                    except KafkaException as again:
                        self.errors.append(f"abort: {again}")
                self.outcomes[n] = "unknown"
                with contextlib.suppress(KafkaException):
                    producer.close()
                producer = txn_producer(self.cluster, self.transactional_id)
        with contextlib.suppress(KafkaException):
            producer.close()

    def count(self, outcome: str) -> int:
        return sum(1 for o in list(self.outcomes.values()) if o == outcome)


def test_transactions_commit_or_abort_whole_across_kills(cluster: Cluster) -> None:
    writer = TransactionalWriter(cluster, "across-kills")
    writer.start()
    try:
        wait_for(lambda: writer.count("committed") >= 20, TIMEOUT, "transactions before the kills")
        wait_for(lambda: fully_replicated(cluster, "__transaction_state"), 30, "__transaction_state in sync")
        wait_for(lambda: fully_replicated(cluster, TOPIC), 30, f"{TOPIC} in sync")
        kill_and_restart(cluster.broker(coordinator(cluster, "across-kills")))
        before = writer.count("committed")
        wait_for(lambda: writer.count("committed") >= before + 20, 2 * TIMEOUT, "transactions after the first kill")
        wait_for(lambda: fully_replicated(cluster, TOPIC), 30, f"{TOPIC} in sync again")
        leader = partition_states(live(cluster), TOPIC)[0][0]
        kill_and_restart(cluster.broker(leader))
        before = writer.count("committed")
        wait_for(lambda: writer.count("committed") >= before + 20, 2 * TIMEOUT, "transactions after the second kill")
    finally:
        writer.stop.set()
        writer.join(2 * TIMEOUT)
    assert not writer.is_alive()
    seen = Counter(confluent_read(cluster.bootstrap, TOPIC, PARTITIONS, "read_committed"))
    assert max(seen.values()) == 1, "a record seen twice"
    by_txn = Counter(int(value.split(b":")[0]) for value in seen)
    whole = PARTITIONS * writer.per_partition
    half = {n: count for n, count in by_txn.items() if count != whole}
    assert not half, f"transactions seen in part: {half}"
    committed = {n for n, o in writer.outcomes.items() if o == "committed"}
    aborted = {n for n, o in writer.outcomes.items() if o == "aborted"}
    assert committed <= set(by_txn), f"committed, not seen: {sorted(committed - set(by_txn))}"
    assert not aborted & set(by_txn), f"aborted, yet seen: {sorted(aborted & set(by_txn))}"
    print(f"{len(committed)} committed, {len(aborted)} aborted, {writer.count('unknown')} unknown; {writer.errors}")
