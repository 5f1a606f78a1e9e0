"""Consumer groups with real clients on a real three-broker cluster: three librdkafka
(confluent-kafka) consumers and one kafka-python consumer share a 12-partition topic
through the range assignor; partition ownership is checked from every member's
rebalance callbacks; committed offsets survive a restart of every broker."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CKTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import ConsumerRebalanceListener, KafkaConsumer, OffsetAndMetadata
from kafka import TopicPartition as KPTopicPartition
from kafka.coordinator.assignors.range import RangePartitionAssignor

from tests.fixtures.zookeeper import ZooKeeperHandle
from tributary.protocol import codec
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    CreateTopicsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from tributary.testing.cluster import Cluster, start_cluster
from tributary.testing.wire import WireConnection

TOPIC = "grouped"
PARTITIONS = 12
PER_PARTITION = 40
GROUP = "interop-group"
SESSION_TIMEOUT_MS = 6000
TIMEOUT = 30.0
SETTINGS = {
    "group.initial.rebalance.delay.ms": "300",
    "group.min.session.timeout.ms": "1000",
    "offsets.topic.num.partitions": "6",
}


@pytest.fixture
def cluster(zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[Cluster]:
    yield from start_cluster(zookeeper.hosts, tmp_path, 3, SETTINGS)


@pytest.fixture
def one_broker(zookeeper: ZooKeeperHandle, tmp_path: Path) -> Iterator[Cluster]:
    yield from start_cluster(zookeeper.hosts, tmp_path, 1, SETTINGS)


class Ownership:
    """Which member owns which partition, from the members' own rebalance callbacks."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: dict[int, str] = {}
        self.violations: list[str] = []

    def assigned(self, member: str, partitions: list[int]) -> None:
        with self.lock:
            for p in partitions:
                holder = self.owner.get(p)
                if holder is not None and holder != member:
                    self.violations.append(f"{member} got partition {p} while {holder} still owns it")
                self.owner[p] = member

    def revoked(self, member: str, partitions: list[int]) -> None:
        with self.lock:
            for p in partitions:
                if self.owner.get(p) == member:
                    del self.owner[p]

    def snapshot(self) -> dict[int, str]:
        with self.lock:
            return dict(self.owner)


class Member(threading.Thread):
    """One consumer polling in its own thread (a kafka-python poll blocks through a
    whole rebalance, so the members cannot share one), committing what it consumed."""

    def __init__(self, name: str, bootstrap: str, ownership: Ownership) -> None:
        super().__init__(name=name, daemon=True)
        self.member = name
        self.bootstrap = bootstrap
        self.ownership = ownership
        self.stopping = threading.Event()
        self.errors: list[str] = []
        self.consumed: dict[int, list[int]] = {}

    def record(self, partition: int, offset: int) -> None:
        self.consumed.setdefault(partition, []).append(offset)

    def stop(self) -> None:
        self.stopping.set()
        self.join(TIMEOUT)
        assert not self.is_alive(), f"{self.member} did not stop"


class ConfluentMember(Member):
    def run(self) -> None:
        def on_assign(consumer: Consumer, partitions: list[CKTopicPartition]) -> None:
            self.ownership.assigned(self.member, [tp.partition for tp in partitions])

        def on_revoke(consumer: Consumer, partitions: list[CKTopicPartition]) -> None:
            self.ownership.revoked(self.member, [tp.partition for tp in partitions])

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": GROUP,
                "client.id": self.member,
                "partition.assignment.strategy": "range",
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": 500,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        try:
            consumer.subscribe([TOPIC], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
            while not self.stopping.is_set():
                messages = consumer.consume(100, timeout=0.2)
                for message in messages:
                    error = message.error()
                    if error is not None:
                        if error.code() != KafkaError._PARTITION_EOF:
                            self.errors.append(str(error))
                        continue
                    self.record(message.partition(), message.offset())
                if messages:
                    consumer.commit(asynchronous=False)
        except Exception as exc:
            self.errors.append(repr(exc))
        finally:
            consumer.close()  # leaves the group: its partitions go to the others at once


class KafkaPythonMember(Member):
    def run(self) -> None:
        member, ownership = self.member, self.ownership

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                ownership.revoked(member, [tp.partition for tp in revoked])

            def on_partitions_assigned(self, assigned: Any) -> None:
                ownership.assigned(member, [tp.partition for tp in assigned])

        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=GROUP,
            client_id=self.member,
            partition_assignment_strategy=[RangePartitionAssignor],
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=500,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        try:
            consumer.subscribe([TOPIC], listener=Listener())
            while not self.stopping.is_set():
                batches = consumer.poll(timeout_ms=200)
                for tp, records in batches.items():
                    for record in records:
                        self.record(tp.partition, record.offset)
                if batches:
                    consumer.commit()
        except Exception as exc:
            self.errors.append(repr(exc))
        finally:
            consumer.close()


def wait_until(condition: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> float:
    """Seconds it took for ``condition`` to hold."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout, f"timed out waiting for {what}"
        time.sleep(0.05)
    return time.monotonic() - start


def produce(bootstrap: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p in range(PARTITIONS):
        for i in range(start, start + count):
            producer.produce(TOPIC, value=b"%d-%d" % (p, i), partition=p)
    assert producer.flush(TIMEOUT) == 0


def evenly_owned(ownership: Ownership, members: list[Member]) -> bool:
    owners = ownership.snapshot()
    names = {m.member for m in members}
    if set(owners) != set(range(PARTITIONS)) or set(owners.values()) != names:
        return False
    per_member = PARTITIONS // len(members)
    return all(sum(1 for o in owners.values() if o == n) in (per_member, per_member + 1) for n in names)


def consumed_up_to(members: list[Member], end: int) -> bool:
    """Every partition consumed, by whichever members, through offset ``end - 1``."""
    seen: dict[int, set[int]] = {}
    for m in members:
        for p, offsets in list(m.consumed.items()):
            seen.setdefault(p, set()).update(offsets)
    return all(set(range(end)) <= seen.get(p, set()) for p in range(PARTITIONS))


def test_mixed_group_shares_partitions_and_commits_survive_restarts(cluster: Cluster) -> None:
    bootstrap = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])[TOPIC].result(TIMEOUT)
    produce(bootstrap, 0, PER_PARTITION)

    ownership = Ownership()
    members: list[Member] = [ConfluentMember(f"ck-{i}", bootstrap, ownership) for i in range(3)]
    members.append(KafkaPythonMember("kp-0", bootstrap, ownership))
    try:
        for m in members:
            m.start()
        wait_until(lambda: evenly_owned(ownership, members), "four members to share the 12 partitions")
        wait_until(lambda: consumed_up_to(members, PER_PARTITION), "the first records to be consumed")

        # One member stops (and leaves): the three others take its partitions over.
        leaving, members = members[0], members[1:]
        leaving.stop()
        took = wait_until(lambda: evenly_owned(ownership, members), "three members to share the partitions")
        assert took < SESSION_TIMEOUT_MS / 1000
        produce(bootstrap, PER_PARTITION, PER_PARTITION)
        everyone = [leaving, *members]
        wait_until(lambda: consumed_up_to(everyone, 2 * PER_PARTITION), "the new records to be consumed")
    finally:
        for m in members:
            m.stop()
    assert not ownership.violations, ownership.violations
    assert not any(m.errors for m in [leaving, *members]), [m.errors for m in [leaving, *members]]
    assert ownership.snapshot() == {}

    # The group is empty now: a standalone consumer commits positions of its own
    # choosing (generation -1), with metadata.
    positions = {p: 5 + 2 * p for p in range(PARTITIONS)}
    committer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUP, enable_auto_commit=False)
    try:
        committer.commit(
            {KPTopicPartition(TOPIC, p): OffsetAndMetadata(o, f"at {o}", -1) for p, o in positions.items()}
        )
    finally:
        committer.close()

    for broker in cluster.brokers:
        assert broker.stop() == 0
    for broker in cluster.brokers:
        broker.start()
    for broker in cluster.brokers:
        broker.wait_ready(expected_brokers=len(cluster.brokers))

    checker = KafkaConsumer(bootstrap_servers=bootstrap, group_id=GROUP, enable_auto_commit=False)
    try:
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                committed = {p: checker.committed(KPTopicPartition(TOPIC, p), metadata=True) for p in positions}
                break
            except Exception:  # the coordinator may still be loading right after the restart
                assert time.monotonic() < deadline
                time.sleep(0.2)
    finally:
        checker.close()
    assert {p: (c.offset, c.metadata) for p, c in committed.items()} == {
        p: (o, f"at {o}") for p, o in positions.items()
    }

    # A new member resumes exactly at the committed positions.
    first: dict[int, int] = {}
    resumed = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "partition.assignment.strategy": "range",
            "session.timeout.ms": SESSION_TIMEOUT_MS,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        resumed.subscribe([TOPIC])
        deadline = time.monotonic() + TIMEOUT
        while len(first) < PARTITIONS:
            assert time.monotonic() < deadline, f"resumed only {sorted(first)}"
            message = resumed.poll(0.2)
            if message is not None and message.error() is None:
                first.setdefault(message.partition(), message.offset())
    finally:
        resumed.close()
    assert first == positions


# --- every supported version of every group API, over the wire -------------------------------


def _retry(conn: WireConnection, body: Any, version: int, *, field: str = "error_code") -> Any:
    """Sends ``body`` until the answer is not a coordinator-loading (or not-yet-created) error."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        response = conn.request(body, version)
        if getattr(response, field) not in (
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            ErrorCode.NOT_COORDINATOR,
        ):
            return response
        assert time.monotonic() < deadline, response
        time.sleep(0.1)


def test_every_group_api_version_over_the_wire(one_broker: Cluster) -> None:
    broker = one_broker.brokers[0]
    with WireConnection(*broker.address) as conn:
        created = conn.request(
            CreateTopicsRequest(
                topics=[CreateTopicsRequest.CreatableTopic(name="wire-t", num_partitions=2, replication_factor=1)],
                timeout_ms=10_000,
            ),
            4,
        )
        assert created.topics[0].error_code == ErrorCode.NONE
        for version in range(3):
            found = _retry(conn, FindCoordinatorRequest(key="wire-0"), version)
            assert (found.error_code, found.node_id, found.port) == (ErrorCode.NONE, 1, broker.port)
        # A transaction coordinator (key type 1) is found the same way, on __transaction_state.
        txn = _retry(conn, FindCoordinatorRequest(key="tx", key_type=1), 1)
        assert (txn.error_code, txn.node_id, txn.port) == (ErrorCode.NONE, 1, broker.port)

        for version in range(6):
            _one_group_at(conn, f"wire-{version}", version)

        # Static membership (JoinGroup v5): a member id at once, no MEMBER_ID_REQUIRED.
        static = _retry(conn, _join_request("wire-static", "", instance="app-1"), 5)
        assert static.error_code == ErrorCode.NONE and static.member_id.startswith("app-1-")


def _join_request(group: str, member_id: str, instance: str | None = None) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=group,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        rebalance_timeout_ms=10_000,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"subscription")],
    )


def _one_group_at(conn: WireConnection, group: str, join_version: int) -> None:
    """Join, sync, heartbeat, commit, fetch, describe, list and leave at versions derived
    from ``join_version`` (each API's range is walked by the six groups)."""
    sync_v = heartbeat_v = leave_v = min(join_version, 3)
    commit_v, fetch_v = 2 + join_version, 1 + min(join_version, 4)
    describe_v, list_v = min(join_version, 4), min(join_version, 2)

    joined = _retry(conn, _join_request(group, ""), join_version)
    if join_version >= 4:
        assert joined.error_code == ErrorCode.MEMBER_ID_REQUIRED
        joined = conn.request(_join_request(group, joined.member_id), join_version)
    assert joined.error_code == ErrorCode.NONE, joined
    member = joined.member_id
    assert (joined.generation_id, joined.leader, joined.protocol_name) == (1, member, "range")
    assert [(m.member_id, m.metadata) for m in joined.members] == [(member, b"subscription")]

    synced = conn.request(
        SyncGroupRequest(
            group_id=group,
            generation_id=1,
            member_id=member,
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=member, assignment=b"yours")],
        ),
        sync_v,
    )
    assert (synced.error_code, synced.assignment) == (ErrorCode.NONE, b"yours")
    beat = conn.request(HeartbeatRequest(group_id=group, generation_id=1, member_id=member), heartbeat_v)
    assert beat.error_code == ErrorCode.NONE
    wrong = conn.request(HeartbeatRequest(group_id=group, generation_id=7, member_id=member), heartbeat_v)
    assert wrong.error_code == ErrorCode.ILLEGAL_GENERATION

    committed = conn.request(
        OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=1,
            member_id=member,
            topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(
                    name="wire-t",
                    partitions=[
                        OffsetCommitRequest.OffsetCommitRequestPartition(
                            partition_index=0, committed_offset=17, committed_leader_epoch=0, committed_metadata="m"
                        )
                    ],
                ),
                OffsetCommitRequest.OffsetCommitRequestTopic(
                    name="no-such-topic",
                    partitions=[OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0)],
                ),
            ],
        ),
        commit_v,
    )
    assert [[p.error_code for p in t.partitions] for t in committed.topics] == [
        [ErrorCode.NONE],
        [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION],
    ]
    fetched = conn.request(
        OffsetFetchRequest(
            group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="wire-t", partition_indexes=[0, 1])]
        ),
        fetch_v,
    )
    assert [(p.partition_index, p.committed_offset, p.metadata) for p in fetched.topics[0].partitions] == [
        (0, 17, "m"),
        (1, -1, ""),
    ]
    if fetch_v >= 2:
        everything = conn.request(OffsetFetchRequest(group_id=group, topics=None), fetch_v)
        assert [(t.name, [p.committed_offset for p in t.partitions]) for t in everything.topics] == [("wire-t", [17])]

    (described,) = conn.request(DescribeGroupsRequest(groups=[group]), describe_v).groups
    assert (described.error_code, described.group_state, described.protocol_data) == (ErrorCode.NONE, "Stable", "range")
    assert [(m.member_id, m.member_assignment) for m in described.members] == [(member, b"yours")]
    listed = conn.request(ListGroupsRequest(), list_v)
    assert listed.error_code == ErrorCode.NONE and group in {g.group_id for g in listed.groups}

    if leave_v >= 3:
        leave = LeaveGroupRequest(group_id=group, members=[LeaveGroupRequest.MemberIdentity(member_id=member)])
    else:
        leave = LeaveGroupRequest(group_id=group, member_id=member)
    left = conn.request(leave, leave_v)
    assert left.error_code == ErrorCode.NONE
    (after,) = conn.request(DescribeGroupsRequest(groups=[group]), describe_v).groups
    assert after.group_state == "Empty"


def test_a_silent_member_loses_its_partitions_after_its_session_timeout(one_broker: Cluster) -> None:
    """A member that stops heartbeating without leaving (a crashed process): librdkafka,
    the leader, gets its partitions back once the session timeout has passed."""
    silent_session_ms = 2000
    bootstrap = one_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])[TOPIC].result(TIMEOUT)
    ownership = Ownership()
    survivor = ConfluentMember("ck-survivor", bootstrap, ownership)
    survivor.start()
    try:
        wait_until(lambda: len(ownership.snapshot()) == PARTITIONS, "the first member to own everything")
        subscription = b"\x00\x00" + codec.encode(ConsumerProtocolSubscription(topics=[TOPIC]), 0)
        with WireConnection(*one_broker.brokers[0].address, timeout=TIMEOUT) as conn:
            request = JoinGroupRequest(
                group_id=GROUP,
                session_timeout_ms=silent_session_ms,
                rebalance_timeout_ms=10_000,
                protocol_type="consumer",
                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=subscription)],
            )
            required = conn.request(request, 5)
            assert required.error_code == ErrorCode.MEMBER_ID_REQUIRED
            request.member_id = required.member_id
            joined = conn.request(request, 5)  # waits for the survivor to rejoin
            assert joined.error_code == ErrorCode.NONE and joined.leader != joined.member_id
            synced = conn.request(
                SyncGroupRequest(group_id=GROUP, generation_id=joined.generation_id, member_id=joined.member_id),
                3,
            )
            assert synced.error_code == ErrorCode.NONE
            # From here on the raw member says nothing more: its session started now.
            silent_since = time.monotonic()
            assignment = codec.decode(ConsumerProtocolAssignment, synced.assignment[2:], 0)
            mine = {p for tp in assignment.assigned_partitions for p in tp.partitions}
            assert len(mine) == PARTITIONS // 2
            # (The survivor revoked everything before it rejoined, so owning all twelve
            # again can only come from a rebalance without the silent member.)
            wait_until(lambda: len(ownership.snapshot()) == PARTITIONS, "the survivor to own everything")
            took = time.monotonic() - silent_since
            assert silent_session_ms / 1000 - 0.2 < took < silent_session_ms / 1000 + 5
    finally:
        survivor.stop()
    assert not ownership.violations and not survivor.errors, (ownership.violations, survivor.errors)
