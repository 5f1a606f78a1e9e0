"""The broker's Prometheus endpoint on a live broker: every family is served,
and each moves as real clients produce, consume, rebalance, and as ZooKeeper
goes away and comes back."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.fixtures.prometheus import Scrape, exposed_names, fetch_text, poll, scrape
from tests.fixtures.zookeeper import ZooKeeperHandle
from tributary.testing.cluster import Cluster, start_cluster
from tributary.testing.ports import free_port

TOPIC = "metered"
PARTITIONS = 2
MESSAGES = 500
GROUP = "metered-group"
TIMEOUT = 30.0
SETTINGS = {
    # Every produce is flushed before it is acknowledged: the flush histogram moves.
    "log.flush.interval.messages": "1",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "2",
}

FAMILIES = {
    "tributary_broker_requests": "counter",
    "tributary_broker_request_duration_seconds": "histogram",
    "tributary_broker_bytes_in": "counter",
    "tributary_broker_bytes_out": "counter",
    "tributary_broker_connections": "gauge",
    "tributary_broker_connections_accepted": "counter",
    "tributary_broker_connections_refused": "counter",
    "tributary_broker_connections_closed_idle": "counter",
    "tributary_broker_queued_request_bytes": "gauge",
    "tributary_broker_connections_throttled": "gauge",
    "tributary_broker_log_flush_duration_seconds": "histogram",
    "tributary_broker_log_size_bytes": "gauge",
    "tributary_broker_log_segments": "gauge",
    "tributary_broker_log_start_offset": "gauge",
    "tributary_broker_log_end_offset": "gauge",
    "tributary_broker_groups": "gauge",
    "tributary_broker_group_rebalances": "counter",
    "tributary_broker_consumer_groups": "gauge",
    "tributary_broker_consumer_group_rebalances": "counter",
    "tributary_broker_zookeeper_session_state": "gauge",
    "tributary_broker_controller": "gauge",
}


@pytest.fixture
def broker(zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[Cluster]:
    yield from start_cluster(zookeeper.hosts, tmp_path, 1, SETTINGS, metrics=True)


def metrics_port(cluster: Cluster) -> int:
    port = cluster.brokers[0].metrics_port
    assert port is not None
    return port


def produce(bootstrap: str) -> None:
    failures: list[str] = []

    def on_delivery(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            failures.append(str(error))

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": int(TIMEOUT * 1000)})
    for i in range(MESSAGES):
        value = b"value-%06d" % i
        producer.produce(TOPIC, key=b"k%d" % i, value=value, partition=i % PARTITIONS, on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0
    assert failures == []


def group_consumer(bootstrap: str) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([TOPIC])
    return consumer


def poll_consumers(
    consumers: list[Consumer], port: int, condition: Callable[[Scrape, int], bool], what: str
) -> tuple[Scrape, int]:
    """Polls the consumers (their rebalances run inside poll) until the broker's
    metrics satisfy ``condition(scrape, distinct records read)``; returns both.

    Distinct records, counted by partition and offset: the consumers commit nothing, so one that
    rebalances (a session lost on a loaded machine) reads its partitions again from the start."""
    deadline = time.monotonic() + TIMEOUT
    read: set[tuple[int, int]] = set()
    while True:
        for consumer in consumers:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                read.add((message.partition(), message.offset()))
        current = scrape(port)
        if condition(current, len(read)):
            return current, len(read)
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")


def test_every_family_is_served_and_moves_with_traffic(broker: Cluster) -> None:
    port = metrics_port(broker)
    before = scrape(port)
    for name, kind in FAMILIES.items():
        assert before.types.get(name) == kind, f"{name} missing or not a {kind}"
    # Readiness checks spoke Metadata already; the ZooKeeper session is up and this lone broker controls.
    assert before.value("tributary_broker_zookeeper_session_state", state="connected") == 1
    assert before.value("tributary_broker_zookeeper_session_state", state="suspended") == 0
    assert before.value("tributary_broker_zookeeper_session_state", state="lost") == 0
    assert before.value("tributary_broker_controller") == 1
    assert before.get("tributary_broker_requests_total", api="Metadata", version="1") >= 1
    assert before.total("tributary_broker_requests_total", api="Produce") == 0
    assert before.get("tributary_broker_bytes_in_total", topic=TOPIC, default=-1) == -1  # no series yet

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])[TOPIC].result(TIMEOUT)
    produce(broker.bootstrap)

    after = poll(
        port,
        lambda s: s.total("tributary_broker_log_end_offset", topic=TOPIC) == MESSAGES,
        "the produced records in the log end offsets",
    )
    produce_requests = after.total("tributary_broker_requests_total", api="Produce")
    assert produce_requests >= 1
    assert after.value("tributary_broker_request_duration_seconds_count", api="Produce") == produce_requests
    assert after.value("tributary_broker_request_duration_seconds_bucket", api="Produce", le="+Inf") == produce_requests
    assert after.value("tributary_broker_request_duration_seconds_sum", api="Produce") > 0
    assert after.total("tributary_broker_requests_total", api="CreateTopics") == 1
    # Batches are stored exactly as received: the bytes in are the bytes of the log.
    bytes_in = after.value("tributary_broker_bytes_in_total", topic=TOPIC)
    sizes = after.matching("tributary_broker_log_size_bytes", topic=TOPIC)
    assert len(sizes) == PARTITIONS
    assert bytes_in == sum(sizes.values()) > MESSAGES * len(b"value-000000")
    for partition in range(PARTITIONS):
        labels = {"topic": TOPIC, "partition": str(partition)}
        assert after.value("tributary_broker_log_segments", **labels) == 1
        assert after.value("tributary_broker_log_start_offset", **labels) == 0
        assert after.value("tributary_broker_log_end_offset", **labels) == MESSAGES // PARTITIONS
    # flush.messages=1: each acknowledged produce was flushed first; requests that came pipelined
    # to a partition share one flush (tests/broker/test_durability.py holds the guarantee).
    assert after.value("tributary_broker_log_flush_duration_seconds_count") >= 1
    assert after.value("tributary_broker_connections_accepted_total") > before.value(
        "tributary_broker_connections_accepted_total"
    )

    # One group member reads everything: a completed rebalance, a Stable group, bytes out.
    first = group_consumer(broker.bootstrap)
    second: Consumer | None = None
    try:
        stable, _ = poll_consumers(
            [first],
            port,
            lambda s, n: n == MESSAGES and s.value("tributary_broker_groups", state="Stable") == 1,
            "one Stable group after consuming everything",
        )
        assert stable.value("tributary_broker_group_rebalances_total", phase="completed") >= 1
        assert stable.value("tributary_broker_bytes_out_total", topic=TOPIC) >= bytes_in
        assert stable.total("tributary_broker_requests_total", api="Fetch") >= 1
        assert stable.total("tributary_broker_requests_total", api="JoinGroup") >= 1
        assert stable.total("tributary_broker_requests_total", api="SyncGroup") >= 1
        assert stable.value("tributary_broker_connections") >= 2  # the consumer's, at least

        # A second member joins: another rebalance starts and completes.
        started = stable.value("tributary_broker_group_rebalances_total", phase="started")
        completed = stable.value("tributary_broker_group_rebalances_total", phase="completed")
        second = group_consumer(broker.bootstrap)
        poll_consumers(
            [first, second],
            port,
            lambda s, _n: (
                s.value("tributary_broker_group_rebalances_total", phase="started") > started
                and s.value("tributary_broker_group_rebalances_total", phase="completed") > completed
                and s.value("tributary_broker_groups", state="Stable") == 1
            ),
            "a second rebalance of the group",
        )
    finally:
        first.close()
        if second is not None:
            second.close()
    # Both left: the group is Empty, and their connections are closed.
    poll(
        port,
        lambda s: (
            s.value("tributary_broker_groups", state="Empty") == 1
            and s.value("tributary_broker_groups", state="Stable") == 0
        ),
        "the group to become Empty",
    )


def test_zookeeper_session_state_follows_the_server(broker: Cluster, zookeeper: ZooKeeperHandle) -> None:
    port = metrics_port(broker)

    def state_is(name: str) -> bool:
        return scrape(port).value("tributary_broker_zookeeper_session_state", state=name) == 1

    poll(port, lambda s: s.value("tributary_broker_zookeeper_session_state", state="connected") == 1, "connected")
    zookeeper.stop()
    try:
        suspended = poll(
            port,
            lambda s: s.value("tributary_broker_zookeeper_session_state", state="suspended") == 1,
            "suspended after ZooKeeper stopped",
        )
        assert suspended.value("tributary_broker_zookeeper_session_state", state="connected") == 0
    finally:
        zookeeper.start()
    poll(
        port,
        lambda s: s.value("tributary_broker_zookeeper_session_state", state="connected") == 1,
        "connected again after ZooKeeper restarted",
    )
    assert not state_is("suspended")


def test_endpoint_answers_only_metrics_paths(broker: Cluster) -> None:
    port = metrics_port(broker)
    status, content_type, body = fetch_text(port)
    assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
    assert set(FAMILIES) <= set(scrape(port).types)
    assert exposed_names(scrape(port).types) >= {"tributary_broker_requests_total"}
    assert fetch_text(port, "/")[0] == 200
    assert fetch_text(port, "/nothing")[0] == 404
    # A client that sends garbage gets a 400, not a dropped broker.
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"NONSENSE\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 400 ")
    assert "tributary_broker_requests_total" in body


def _broker_command(tmp_path: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "tributary.deploy.cli", "broker", "--id", "1", "--listen", f"127.0.0.1:{free_port()}",
        "--data-dir", str(tmp_path / "data"), "--zookeeper", "127.0.0.1:1", *extra,
    ]  # fmt: skip


def test_a_bad_metrics_port_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = subprocess.run(
        _broker_command(tmp_path, "--metrics-port", "70000"), capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "tributary broker: setting 'metrics.port' must be a port number 0-65535, got 70000"
    ]


def test_a_taken_metrics_port_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "broker.toml"
        config.write_text(f"[metrics]\nport = {port}\n")
        result = subprocess.run(
            _broker_command(tmp_path, "--config", str(config)), capture_output=True, text=True, timeout=60, check=False
        )
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"tributary broker: [Errno 98] cannot listen on 127.0.0.1:{port} (setting 'metrics.port')")
