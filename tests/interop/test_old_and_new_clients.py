"""An old client and a new one side by side: Debian's kcat 1.7.1 (librdkafka 2.0.2) and the newest
confluent-kafka (librdkafka 2.16) in the same consumer group, on the same topic, each also
producing into it.

The broker serves each at the versions it picks from the same ApiVersions answer (the old one at
Fetch v11, Metadata v4, JoinGroup v5...; the new one at Fetch v16 with topic ids, Metadata v12,
flexible group APIs), so the two must agree on everything the group and the log share: the
assignment (each partition to exactly one of them), the committed offsets, and the records, every
one delivered once.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.fixtures.brokers import module_cluster
from tests.interop.wire import wait_for_topic
from tributary.testing.cluster import Cluster
from tributary.testing.polling import eventually
from tributary.testing.zookeeper import ZooKeeperServer

KCAT = shutil.which("kcat") or "/usr/bin/kcat"
TIMEOUT = 60.0
PARTITIONS = 6
PER_CLIENT = 300

pytestmark = pytest.mark.skipif(not Path(KCAT).exists(), reason="kcat is not installed (apt-get install kcat)")


@pytest.fixture(scope="module")
def cluster(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    settings = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}
    yield from module_cluster(zookeeper_server, tmp_path_factory.mktemp("old-and-new"), settings)


def _members(admin: AdminClient, group: str) -> dict[str, set[int]] | None:
    """client id -> partitions, once the group is Stable."""
    described = admin.describe_consumer_groups([group])[group].result(TIMEOUT)
    if described.state.name != "STABLE":
        return None
    return {m.client_id: {tp.partition for tp in m.assignment.topic_partitions} for m in described.members}


def test_kcat_2_0_2_and_confluent_kafka_2_16_share_a_group_and_a_topic(cluster: Cluster, tmp_path: Path) -> None:
    topic, group = f"mixed-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(TIMEOUT)
    wait_for_topic(cluster, topic, PARTITIONS)

    out = tmp_path / "kcat.out"
    with out.open("wb") as sink, (tmp_path / "kcat.err").open("wb") as errors:
        old = subprocess.Popen(
            [KCAT, "-b", cluster.bootstrap, "-G", group, "-X", "client.id=kcat-old",
             "-X", "auto.offset.reset=earliest", "-u", "-q", "-f", "%p:%o:%s\\n", topic],
            stdout=sink, stderr=errors,
        )  # fmt: skip
    new = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": group, "client.id": "ck-new",
         "auto.offset.reset": "earliest", "enable.auto.commit": True, "auto.commit.interval.ms": 200}
    )  # fmt: skip
    new.subscribe([topic])
    received_new: list[tuple[int, int, bytes]] = []
    try:
        # Both are members with a share of the partitions before anything is written.
        def stable() -> dict[str, set[int]] | None:
            new.poll(0.2)
            members = _members(admin, group)
            return members if members and set(members) == {"kcat-old", "ck-new"} else None

        members = eventually(stable, TIMEOUT, "a stable group of kcat and confluent-kafka")
        assert members["kcat-old"] and members["ck-new"]
        assert members["kcat-old"].isdisjoint(members["ck-new"])
        assert members["kcat-old"] | members["ck-new"] == set(range(PARTITIONS))

        # The old client produces (gzip: it compresses only because Produce v0 is advertised)...
        subprocess.run([KCAT, "-P", "-b", cluster.bootstrap, "-t", topic, "-z", "gzip", "-K", ":"],
                       input=b"".join(b"k%d:old-%04d\n" % (i % 17, i) for i in range(PER_CLIENT)),
                       check=True, timeout=TIMEOUT, capture_output=True)  # fmt: skip
        # ... and so does the new one (zstd, idempotent: the defaults of a current producer).
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "compression.type": "zstd"})
        for i in range(PER_CLIENT):
            producer.produce(topic, key=b"k%d" % (i % 17), value=b"new-%04d" % i)
        assert producer.flush(TIMEOUT) == 0

        deadline = time.monotonic() + TIMEOUT
        while True:
            message = new.poll(0.2)
            if message is not None:
                assert message.error() is None, message.error()
                received_new.append((message.partition(), message.offset(), message.value()))
            received_old = _kcat_lines(out)
            if len(received_new) + len(received_old) >= 2 * PER_CLIENT:
                break
            assert time.monotonic() < deadline, f"{len(received_new)} + {len(received_old)} of {2 * PER_CLIENT}"
        time.sleep(0.5)  # nothing more arrives: no record twice
        while (message := new.poll(0.1)) is not None:
            received_new.append((message.partition(), message.offset(), message.value()))
        received_old = _kcat_lines(out)
    finally:
        new.close()
        old.terminate()
        old.wait(TIMEOUT)

    values = sorted(v for _, _, v in received_new + received_old)
    assert values == sorted([b"old-%04d" % i for i in range(PER_CLIENT)] + [b"new-%04d" % i for i in range(PER_CLIENT)])
    # Each read only its own partitions, and together they read each record once.
    assert {p for p, _, _ in received_old} <= members["kcat-old"]
    assert {p for p, _, _ in received_new} <= members["ck-new"]
    positions = [(p, o) for p, o, _ in received_new + received_old]
    assert len(positions) == len(set(positions))
    # What each committed is what it read (kcat commits on leaving, confluent-kafka on close).
    committed = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group}).committed(
        [_tp(topic, p) for p in range(PARTITIONS)], timeout=TIMEOUT
    )
    ends = {p: max((o for q, o, _ in received_new + received_old if q == p), default=-1) + 1 for p in range(PARTITIONS)}
    assert {c.partition: c.offset for c in committed} == ends


def _kcat_lines(path: Path) -> list[tuple[int, int, bytes]]:
    """The messages kcat printed so far (a line it is writing now waits for the next look)."""
    data = path.read_bytes()
    found = []
    for line in data[: data.rfind(b"\n") + 1].splitlines():
        partition, offset, value = line.split(b":", 2)
        found.append((int(partition), int(offset), value))
    return found


def _tp(topic: str, partition: int) -> object:
    from confluent_kafka import TopicPartition  # noqa: PLC0415

    return TopicPartition(topic, partition)
