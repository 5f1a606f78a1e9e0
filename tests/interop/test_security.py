"""Real clients over every security protocol: confluent-kafka, kafka-python, kcat and the
appliance's own (the Trio client and the blocking fetcher) produce and consume over SASL_SSL
with SCRAM-SHA-512, SASL_PLAINTEXT with PLAIN, and mutual TLS, against one broker with all
four listeners; Metadata answers each with its own listener's addresses."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer

from tests.fixtures.security import LISTENER_OF, SecureCluster, security, start_secure_cluster
from tests.fixtures.zookeeper import server_chroot
from tributary.client.admin.admin import Admin
from tributary.client.blocking import BlockingFetcher
from tributary.client.config import ClientConfig
from tributary.client.consumer.consumer import Consumer as TrioConsumer
from tributary.client.producer.producer import Producer as TrioProducer
from tributary.client.wire.cluster import Cluster
from tributary.client.wire.metadata import TopicPartition
from tributary.testing.zookeeper import ZooKeeperServer

KCAT = shutil.which("kcat") or "/usr/bin/kcat"
MODES = ["scram", "plain", "mtls"]
COUNT = 50
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def secure(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    yield from start_secure_cluster(server_chroot(zookeeper_server, "sec"), tmp_path_factory.mktemp("secure"))


def values(topic: str) -> list[bytes]:
    return [f"{topic}-{i}".encode() for i in range(COUNT)]


def confluent_consume(config: dict[str, Any], topic: str, group: str) -> list[bytes]:
    consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    seen: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(seen) < COUNT and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            seen.append(message.value())
    finally:
        consumer.close()
    return seen


@pytest.mark.parametrize("mode", MODES)
def test_confluent_kafka(secure: SecureCluster, mode: str) -> None:
    topic = f"confluent-{mode}"
    config = secure.client(mode)
    producer = Producer(config)
    for value in values(topic):
        producer.produce(topic, value=value)
    assert producer.flush(TIMEOUT) == 0
    assert confluent_consume(config, topic, f"g-{topic}") == values(topic)


def kafka_python_settings(secure: SecureCluster, mode: str) -> dict[str, Any]:
    pki = secure.pki
    settings: dict[str, Any] = {"bootstrap_servers": secure.bootstrap(mode)}
    if mode == "scram":
        settings.update(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", ssl_cafile=str(pki.ca.path))
    elif mode == "plain":
        settings.update(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN")
    else:
        settings.update(
            security_protocol="SSL",
            ssl_cafile=str(pki.ca.path),
            ssl_certfile=str(pki.alice.certificate),
            ssl_keyfile=str(pki.alice.key),
        )
    if mode != "mtls":
        settings.update(sasl_plain_username="alice", sasl_plain_password="alice-secret")
    return settings


@pytest.mark.parametrize("mode", MODES)
def test_kafka_python(secure: SecureCluster, mode: str) -> None:
    topic = f"kafka-python-{mode}"
    settings = kafka_python_settings(secure, mode)
    producer = KafkaProducer(**settings)
    try:
        for value in values(topic):
            producer.send(topic, value=value).get(timeout=TIMEOUT)
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer(
        topic, group_id=f"g-{topic}", auto_offset_reset="earliest", consumer_timeout_ms=20_000, **settings
    )
    seen: list[bytes] = []
    try:
        for message in consumer:  # stops after consumer_timeout_ms without records
            seen.append(message.value)
            if len(seen) == COUNT:
                break
    finally:
        consumer.close()
    assert seen == values(topic)


@pytest.mark.skipif(not Path(KCAT).exists(), reason="kcat is not installed (apt-get install kcat)")
@pytest.mark.parametrize("mode", MODES)
def test_kcat(secure: SecureCluster, mode: str) -> None:
    """Debian's kcat 1.7.1 (librdkafka 2.0.2): strict about ApiVersions, SASL and TLS included."""
    topic = f"kcat-{mode}"
    options = [arg for key, value in secure.client(mode).items() for arg in ("-X", f"{key}={value}")]
    produced = subprocess.run(
        [KCAT, *options, "-P", "-t", topic],
        input=b"".join(v + b"\n" for v in values(topic)),
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = subprocess.run(
        [KCAT, *options, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert consumed.returncode == 0, consumed.stderr.decode()
    assert consumed.stdout.splitlines() == values(topic)


@pytest.mark.parametrize("mode", MODES)
async def test_the_appliances_trio_client(secure: SecureCluster, mode: str) -> None:
    topic = f"trio-{mode}"
    config = ClientConfig(security=security(secure.pki, mode))
    async with Cluster(secure.bootstrap(mode), config) as cluster:
        await Admin(cluster).create_topic(topic, 1)
    async with TrioProducer(secure.bootstrap(mode), client_config=config) as producer:
        for value in values(topic):
            await producer.send(topic, value)
    seen: list[bytes] = []
    async with TrioConsumer(secure.bootstrap(mode), client_config=config, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        with trio.fail_after(TIMEOUT):
            while len(seen) < COUNT:
                seen += [r.value for r in await consumer.poll(1.0) if r.value is not None]
    assert seen == values(topic)


@pytest.mark.parametrize("mode", MODES)
def test_the_blocking_fetcher(secure: SecureCluster, mode: str) -> None:
    """The Spark executors' fetcher, over the same protocols (records written over PLAINTEXT)."""
    topic = f"blocking-{mode}"
    producer = Producer({"bootstrap.servers": secure.cluster.bootstrap})
    for value in values(topic):
        producer.produce(topic, value=value)
    assert producer.flush(TIMEOUT) == 0
    with BlockingFetcher(secure.bootstrap(mode), ClientConfig(security=security(secure.pki, mode))) as fetcher:
        assert fetcher.offset_bounds(topic) == {0: (0, COUNT)}
        assert [r.value for r in fetcher.records(topic, 0, 0, COUNT)] == values(topic)


def test_metadata_names_the_listener_the_client_came_in_on(secure: SecureCluster) -> None:
    broker = secure.cluster.brokers[0]
    for mode, listener in [("plaintext", "PLAINTEXT"), *LISTENER_OF.items()]:
        config = secure.client(mode) if mode != "plaintext" else {"bootstrap.servers": secure.cluster.bootstrap}
        brokers = AdminClient(config).list_topics(timeout=TIMEOUT).brokers
        assert {b.port for b in brokers.values()} == {broker.listener_ports[listener]}, mode
