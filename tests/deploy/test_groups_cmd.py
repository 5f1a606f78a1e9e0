"""``tributary groups`` against a live three-broker cluster with real consumers
(confluent-kafka): describe and lag equal what was produced and committed;
reset-offsets is a dry run unless --execute, refuses while the group is active,
and a consumer restarted after it resumes at the new positions."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TypeVar

import pytest
import trio
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CKTopicPartition

from tests.fixtures.brokers import module_cluster
from tests.fixtures.zookeeper import ZooKeeperServer
from tributary.client.wire.cluster import Cluster as ClientCluster
from tributary.protocol.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from tributary.testing.cluster import Cluster
from tributary.testing.polling import eventually

from .cli_runner import Result, assert_one_line_error, tributary

TIMEOUT = 30.0
SETTINGS = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}
T = TypeVar("T")


@pytest.fixture(scope="module")
def cluster(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from module_cluster(zookeeper_server, tmp_path_factory.mktemp("groups-cmd"), SETTINGS)


def groups(capsys: pytest.CaptureFixture[str], cluster: Cluster, *argv: str) -> Result:
    return tributary(capsys, "groups", "--bootstrap", cluster.bootstrap, *argv)


def wait_for(what: str, probe: Callable[[], T | None]) -> T:
    return eventually(probe, TIMEOUT, what)


def make_topic(capsys: pytest.CaptureFixture[str], cluster: Cluster, counts: dict[int, int]) -> str:
    topic = f"grp-{uuid.uuid4().hex[:10]}"
    made = tributary(
        capsys, "topics", "--bootstrap", cluster.bootstrap, "create", topic, "--partitions", str(len(counts))
    )
    assert made.status == 0, made.err
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5})
    for partition, count in counts.items():
        for i in range(count):
            producer.produce(topic, value=f"{partition}-{i}".encode(), partition=partition)
    assert producer.flush(TIMEOUT) == 0
    return topic


def consumer_of(cluster: Cluster, group: str, topic: str, client_id: str = "lag-test") -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": group,
            "client.id": client_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        }
    )
    consumer.subscribe([topic])
    return consumer


def member(cluster: Cluster, group: str, topic: str, client_id: str = "lag-test") -> Consumer:
    """A consumer in ``group`` that holds every partition of ``topic`` (it is alone); the
    records it polled while joining are dropped, and it never commits by itself."""
    consumer = consumer_of(cluster, group, topic, client_id)

    def assigned() -> list[CKTopicPartition] | None:
        consumer.poll(0.1)  # joins the group; what it returns is dropped
        return consumer.assignment() or None

    wait_for("an assignment", assigned)
    return consumer


def committed(cluster: Cluster, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    try:
        got = consumer.committed([CKTopicPartition(topic, p) for p in range(partitions)], timeout=TIMEOUT)
        return {tp.partition: tp.offset for tp in got if tp.offset >= 0}
    finally:
        consumer.close()


def first_offsets(cluster: Cluster, group: str, topic: str, partitions: int) -> dict[int, int]:
    """Where a consumer of ``group`` starts on each partition: the first record it gets."""
    consumer = consumer_of(cluster, group, topic)
    first: dict[int, int] = {}
    try:
        deadline = time.monotonic() + TIMEOUT
        while len(first) < partitions and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                first.setdefault(message.partition(), message.offset())
    finally:
        consumer.close()
    return first


def test_describe_shows_members_committed_end_and_lag(capsys: pytest.CaptureFixture[str], cluster: Cluster) -> None:
    topic = make_topic(capsys, cluster, {0: 10, 1: 20, 2: 30})
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = member(cluster, group, topic, client_id="lag-reader")
    try:
        consumer.commit(
            offsets=[CKTopicPartition(topic, 0, 4), CKTopicPartition(topic, 1, 20), CKTopicPartition(topic, 2, 0)],
            asynchronous=False,
        )
        (described,) = groups(capsys, cluster, "describe", group, "--output", "json").json()
        assert described["state"] == "Stable"
        assert described["protocol_type"] == "consumer"
        (only,) = described["members"]
        assert only["client_id"] == "lag-reader"
        assert sorted((a["topic"], a["partition"]) for a in only["assignment"]) == [(topic, p) for p in range(3)]
        assert [(o["partition"], o["committed_offset"], o["end_offset"], o["lag"], o["client_id"])
                for o in described["offsets"]] == [
            (0, 4, 10, 6, "lag-reader"),
            (1, 20, 20, 0, "lag-reader"),
            (2, 0, 30, 30, "lag-reader"),
        ]  # fmt: skip
        assert described["total_lag"] == 36

        table = groups(capsys, cluster, "describe", group).out.splitlines()
        assert table[0].startswith(f"Group: {group}  state: Stable  protocol: ")
        assert table[0].endswith("members: 1  total lag: 36")
        assert table[1].split() == ["MEMBER", "CLIENT-ID", "HOST", "ASSIGNMENT"]
        assert table[2].split()[-1] == f"{topic}:0,1,2"
        assert table[3].split() == ["TOPIC", "PARTITION", "COMMITTED", "END", "LAG", "CLIENT-ID"]
        assert table[4].split() == [topic, "0", "4", "10", "6", "lag-reader"]

        listed = {g["group"]: g for g in groups(capsys, cluster, "list", "--output", "json").json()}
        assert listed[group]["state"] == "Stable" and listed[group]["members"] == 1

        # Refused while the group is active: the dry run and --execute alike, changing nothing.
        for extra in ((), ("--execute",)):
            refused = groups(capsys, cluster, "reset-offsets", group, "--all-topics", "--to-earliest", *extra)
            assert_one_line_error(refused, 1, f"group {group} is active (state Stable, 1 members)")
        assert_one_line_error(groups(capsys, cluster, "delete", group), 1, "NON_EMPTY_GROUP")
    finally:
        consumer.close()
    assert committed(cluster, group, topic, 3) == {0: 4, 1: 20, 2: 0}

    # Without members: state Empty, the same offsets, no client ids.
    (described,) = groups(capsys, cluster, "describe", group, "--output", "json").json()
    assert described["state"] == "Empty" and described["members"] == []
    assert [(o["committed_offset"], o["lag"], o["client_id"]) for o in described["offsets"]] == [
        (4, 6, None),
        (20, 0, None),
        (0, 30, None),
    ]


def test_reset_offsets_dry_run_execute_and_restart(capsys: pytest.CaptureFixture[str], cluster: Cluster) -> None:
    topic = make_topic(capsys, cluster, {0: 10, 1: 20, 2: 30})
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = member(cluster, group, topic)
    consumer.commit(
        offsets=[CKTopicPartition(topic, 0, 4), CKTopicPartition(topic, 1, 20), CKTopicPartition(topic, 2, 7)],
        asynchronous=False,
    )
    consumer.close()

    # The dry run shows the plan and changes nothing.
    dry = groups(capsys, cluster, "reset-offsets", group, "--all-topics", "--to-earliest")
    assert dry.status == 0, dry.err
    lines = dry.out.splitlines()
    assert lines[0].split() == ["TOPIC", "PARTITION", "CURRENT", "NEW"]
    assert [line.split() for line in lines[1:4]] == [[topic, "0", "4", "0"], [topic, "1", "20", "0"],
                                                     [topic, "2", "7", "0"]]  # fmt: skip
    assert lines[4] == "dry run: nothing changed; add --execute to apply"
    assert committed(cluster, group, topic, 3) == {0: 4, 1: 20, 2: 7}

    # --shift-by, clamped to the log: 4-5 -> 0, 20-5 -> 15, 7-5 -> 2.
    shifted = groups(capsys, cluster, "reset-offsets", group, "--topic", topic, "--shift-by", "-5", "--execute",
                     "--output", "json")  # fmt: skip
    assert [(o["current_offset"], o["new_offset"]) for o in shifted.json()["offsets"]] == [(4, 0), (20, 15), (7, 2)]
    assert shifted.json()["executed"] is True
    assert committed(cluster, group, topic, 3) == {0: 0, 1: 15, 2: 2}

    # Some partitions only; beyond the end is clamped to it.
    single = groups(
        capsys, cluster, "reset-offsets", group, "--topic", f"{topic}:0,2", "--to-offset", "25", "--execute"
    )
    assert single.status == 0, single.err
    assert single.out.splitlines()[-1] == f"reset the offsets of group {group} for 2 partitions"
    assert committed(cluster, group, topic, 3) == {0: 10, 1: 15, 2: 25}

    # A restarted consumer resumes exactly there.
    groups(capsys, cluster, "reset-offsets", group, "--all-topics", "--to-offset", "3", "--execute")
    assert committed(cluster, group, topic, 3) == {0: 3, 1: 3, 2: 3}
    assert first_offsets(cluster, group, topic, 3) == {0: 3, 1: 3, 2: 3}

    latest = groups(capsys, cluster, "reset-offsets", group, "--all-topics", "--to-latest", "--execute")
    assert latest.status == 0
    assert committed(cluster, group, topic, 3) == {0: 10, 1: 20, 2: 30}


def test_reset_to_datetime(capsys: pytest.CaptureFixture[str], cluster: Cluster) -> None:
    topic = make_topic(capsys, cluster, {0: 0})
    base = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    for i in range(10):  # one record a minute from 12:00
        producer.produce(topic, value=b"v", partition=0, timestamp=int(base.timestamp() * 1000) + i * 60_000)
        # One batch each: the broker answers a time with a batch's first offset (it never decompresses).
        assert producer.flush(TIMEOUT) == 0
    group = f"g-{uuid.uuid4().hex[:8]}"
    plan = groups(capsys, cluster, "reset-offsets", group, "--topic", topic, "--to-datetime", "2024-05-01T12:04:30",
                  "--output", "json")  # fmt: skip
    # A group that never committed: nothing current; the first record at or after 12:04:30 is 5.
    assert plan.json()["offsets"] == [{"topic": topic, "partition": 0, "current_offset": None, "new_offset": 5}]
    # With an explicit offset: 14:02+02:00 is 12:02 UTC.
    executed = groups(capsys, cluster, "reset-offsets", group, "--topic", topic, "--to-datetime",
                      "2024-05-01T14:02:00+02:00", "--execute")  # fmt: skip
    assert executed.status == 0, executed.err
    assert committed(cluster, group, topic, 1) == {0: 2}
    # After the last record: the end of the log.
    groups(
        capsys, cluster, "reset-offsets", group, "--topic", topic, "--to-datetime", "2030-01-01T00:00:00", "--execute"
    )
    assert committed(cluster, group, topic, 1) == {0: 10}
    assert_one_line_error(
        groups(capsys, cluster, "reset-offsets", group, "--topic", topic, "--to-datetime", "yesterday"),
        2,
        "expected ISO 8601",
    )


def test_delete_and_bad_input(capsys: pytest.CaptureFixture[str], cluster: Cluster) -> None:
    topic = make_topic(capsys, cluster, {0: 5})
    group = f"g-{uuid.uuid4().hex[:8]}"
    groups(capsys, cluster, "reset-offsets", group, "--topic", topic, "--to-offset", "2", "--execute")
    assert committed(cluster, group, topic, 1) == {0: 2}
    listed = {g["group"]: g for g in groups(capsys, cluster, "list", "--output", "json").json()}
    assert listed[group]["state"] == "Empty" and listed[group]["members"] == 0

    deleted = groups(capsys, cluster, "delete", group)
    assert deleted.status == 0 and deleted.out == f"deleted group {group}\n"
    assert committed(cluster, group, topic, 1) == {}
    assert group not in {g["group"] for g in groups(capsys, cluster, "list", "--output", "json").json()}
    assert_one_line_error(groups(capsys, cluster, "describe", group), 1, f"no such group: {group}")
    assert_one_line_error(groups(capsys, cluster, "delete", group), 1, "GROUP_ID_NOT_FOUND")

    assert_one_line_error(
        groups(capsys, cluster, "reset-offsets", group, "--topic", "nope", "--to-earliest"), 1, "no such topic: nope"
    )
    assert_one_line_error(
        groups(capsys, cluster, "reset-offsets", group, "--topic", f"{topic}:x", "--to-earliest"), 2, "numbers"
    )
    assert_one_line_error(
        groups(capsys, cluster, "reset-offsets", group, "--topic", f"{topic}:4", "--to-earliest"), 1, "no partition 4"
    )
    assert_one_line_error(
        groups(capsys, cluster, "reset-offsets", group, "--all-topics", "--to-earliest"), 1, "no committed offsets"
    )
    assert_one_line_error(
        groups(capsys, cluster, "reset-offsets", group, "--topic", topic, "--shift-by", "1"), 1, "--shift-by needs"
    )
    # argparse: exactly one target is required.
    assert groups(capsys, cluster, "reset-offsets", group, "--topic", topic).status == 2
    assert groups(capsys, cluster, "reset-offsets", group, "--topic", topic, "--to-earliest", "--to-latest").status == 2


def test_a_kip848_consumer_group_is_listed_described_and_not_reset_while_active(
    capsys: pytest.CaptureFixture[str], cluster: Cluster
) -> None:
    """A consumer (KIP-848) group, joined here with ConsumerGroupHeartbeat: GROUP-TYPE says
    so, describe shows its member (from ConsumerGroupDescribe: DescribeGroups calls such a
    group "Dead"), and reset-offsets refuses while it has one."""
    topic = make_topic(capsys, cluster, {0: 3, 1: 5})
    group = f"g-{uuid.uuid4().hex[:8]}"
    member_id = uuid.uuid4().hex

    async def heartbeat(epoch: int) -> None:
        async with ClientCluster(cluster.bootstrap) as client:
            request = ConsumerGroupHeartbeatRequest(
                group_id=group,
                member_id=member_id,
                member_epoch=epoch,
                rebalance_timeout_ms=30_000,
                subscribed_topic_names=[topic] if epoch == 0 else None,
                topic_partitions=[] if epoch == 0 else None,
            )
            response: ConsumerGroupHeartbeatResponse = await client.send_to_coordinator(group, request)
            assert response.error_code == 0, response

    trio.run(heartbeat, 0)
    listed = {g["group"]: g for g in groups(capsys, cluster, "list", "--output", "json").json()}[group]
    assert (listed["group_type"], listed["protocol_type"], listed["state"], listed["members"]) == (
        "consumer",
        "consumer",
        "Stable",
        1,
    )
    table = groups(capsys, cluster, "list").out.splitlines()
    assert table[0].split() == ["GROUP", "TYPE", "GROUP-TYPE", "STATE", "MEMBERS", "COORDINATOR"]
    row = next(line for line in table if line.startswith(group)).split()
    assert row[1:5] == ["consumer", "consumer", "Stable", "1"]

    (described,) = groups(capsys, cluster, "describe", group, "--output", "json").json()
    assert (described["group_type"], described["state"], described["protocol"]) == ("consumer", "Stable", "uniform")
    (only,) = described["members"]
    assert (only["member_id"], only["member_epoch"]) == (member_id, 1)
    assert sorted((a["topic"], a["partition"]) for a in only["assignment"]) == [(topic, 0), (topic, 1)]
    header = groups(capsys, cluster, "describe", group).out.splitlines()[0]
    assert header.startswith(f"Group: {group}  state: Stable  protocol: uniform  group type: consumer  ")

    refused = groups(capsys, cluster, "reset-offsets", group, "--all-topics", "--to-earliest", "--execute")
    assert_one_line_error(refused, 1, f"group {group} is active (state Stable, 1 members)")

    trio.run(heartbeat, -1)
    (described,) = groups(capsys, cluster, "describe", group, "--output", "json").json()
    assert (described["group_type"], described["state"], described["members"]) == ("consumer", "Empty", [])
