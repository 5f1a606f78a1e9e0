"""ACLs on a live three-broker cluster, with the clients operators use: ``tributary acls``,
confluent-kafka's and kafka-python's admin clients, producers and consumers.

Until connections authenticate, every client is ``User:ANONYMOUS``; the cluster starts with the
ACLs that principal needs as the cluster's operator and as the brokers' own replication principal
(Alter, Describe and ClusterAction on the Cluster, written into ZooKeeper before the brokers start,
as ``kafka-acls --authorizer-properties zookeeper.connect=...`` would). Its topic and group ACLs are
what the tests give and take away.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest
import trio
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AclBindingFilter as CKAclBindingFilter
from confluent_kafka.admin import AclOperation as CKAclOperation
from confluent_kafka.admin import AclPermissionType as CKAclPermissionType
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.admin import ResourcePatternType as CKResourcePatternType
from confluent_kafka.admin import ResourceType as CKResourceType
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient
from kafka.admin._acls import ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType
from kafka.admin._acls import ResourcePattern as KPResourcePattern
from kafka.admin._acls import ResourcePatternFilter as KPResourcePatternFilter
from kafka.admin._acls import ResourceType as KPResourceType
from kafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError
from kazoo.client import KazooClient

from tests.broker.wire_helpers import batch, connect, latest
from tests.deploy.cli_runner import Result, assert_one_line_error, tributary
from tests.fixtures.zookeeper import ZooKeeperServer, server_chroot
from tributary.client import Producer as TributaryProducer
from tributary.client.errors import BrokerResponseError
from tributary.protocol import messages as m
from tributary.protocol.error_codes import ErrorCode
from tributary.testing.cluster import Cluster, start_cluster, wait_for_leaders
from tributary.testing.polling import eventually
from tributary.testing.wire import WireConnection

ANONYMOUS = "User:ANONYMOUS"
TIMEOUT = 30.0
SETTINGS = {
    "authorizer.class.name": '"kafka.security.authorizer.AclAuthorizer"',
    "offsets.topic.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
}
#: The operator's and the brokers' ACLs, as Kafka's tool writes them into ZooKeeper.
SEED = {
    "version": 1,
    "acls": [
        {"principal": ANONYMOUS, "permissionType": "Allow", "operation": op, "host": "*"}
        for op in ("Alter", "Describe", "ClusterAction")
    ],
}


@pytest.fixture(scope="module")
def cluster(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    hosts = server_chroot(zookeeper_server, "acls")
    zk = KazooClient(hosts=hosts)
    zk.start()
    try:
        zk.create("/kafka-acl/Cluster/kafka-cluster", json.dumps(SEED).encode(), makepath=True)
    finally:
        zk.stop()
        zk.close()
    yield from start_cluster(hosts, tmp_path_factory.mktemp("acls-live"), 3, SETTINGS)


def acls(capsys: pytest.CaptureFixture[str], cluster: Cluster, *argv: str) -> Result:
    return tributary(capsys, "acls", "--bootstrap", cluster.bootstrap, *argv)


def new_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(capsys: pytest.CaptureFixture[str], cluster: Cluster, topic: str) -> None:
    """As the operator: Create on this one topic, then create it (three replicas)."""
    assert (
        acls(
            capsys,
            cluster,
            "add",
            "--allow-principal",
            ANONYMOUS,
            "--operation",
            "Create",
            "--operation",
            "Describe",
            "--topic",
            topic,
        ).status
        == 0
    )
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(TIMEOUT)


def leader_connection(cluster: Cluster, topic: str) -> WireConnection:
    leader = wait_for_leaders(cluster.brokers, topic, 1)[0]
    return connect(cluster.broker(leader))


def test_cli_and_both_admin_clients_agree(capsys: pytest.CaptureFixture[str], cluster: Cluster) -> None:
    topic, group, prefix = new_name("cli"), new_name("readers"), new_name("team")
    added = acls(
        capsys,
        cluster,
        "--output",
        "json",
        "add",
        "--allow-principal",
        "User:alice",
        "--consumer",
        "--topic",
        topic,
        "--group",
        group,
    )
    assert {(r["resource_type"], r["name"], r["operation"]) for r in added.json()} == {
        ("Topic", topic, "Read"),
        ("Topic", topic, "Describe"),
        ("Group", group, "Read"),
    }
    assert (
        acls(
            capsys,
            cluster,
            "add",
            "--deny-principal",
            "User:mallory",
            "--deny-host",
            "10.0.0.9",
            "--operation",
            "Write",
            "--topic",
            prefix,
            "--resource-pattern-type",
            "prefixed",
        ).status
        == 0
    )

    listed = acls(capsys, cluster, "list", "--topic", topic).out
    assert "User:alice" in listed and "Read" in listed and "Describe" in listed
    assert "mallory" not in listed
    prefixed = acls(
        capsys, cluster, "--output", "json", "list", "--topic", f"{prefix}.x", "--resource-pattern-type", "match"
    ).json()
    assert [(r["principal"], r["host"], r["pattern_type"], r["permission"]) for r in prefixed] == [
        ("User:mallory", "10.0.0.9", "PREFIXED", "Deny")
    ]

    # librdkafka's DescribeAcls (v1) sees the same.
    ck = AdminClient({"bootstrap.servers": cluster.bootstrap})
    every = CKAclBindingFilter(
        CKResourceType.ANY, None, CKResourcePatternType.ANY, None, None, CKAclOperation.ANY, CKAclPermissionType.ANY
    )
    found = ck.describe_acls(every).result(TIMEOUT)
    seen = {(b.restype_int, b.name, b.principal, b.operation_int) for b in found}
    assert (2, topic, "User:alice", 3) in seen and (3, group, "User:alice", 3) in seen
    assert (4, "kafka-cluster", ANONYMOUS, 9) in seen  # the ACLs seeded in ZooKeeper

    # kafka-python (flexible v3) creates one; librdkafka deletes it again.
    kp = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=int(TIMEOUT * 1000))
    try:
        pattern = KPResourcePattern(KPResourceType.TOPIC, topic, ACLResourcePatternType.LITERAL)
        created = kp.create_acls([ACL("User:bob", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW, pattern)])
        assert created["failed"] == [] and len(created["succeeded"]) == 1
        listed_kp, _error = kp.describe_acls(
            ACLFilter(
                None,
                None,
                ACLOperation.ANY,
                ACLPermissionType.ANY,
                KPResourcePatternFilter(KPResourceType.TOPIC, topic, ACLResourcePatternType.LITERAL),
            )
        )
        assert {(a.principal, a.operation) for a in listed_kp} == {
            ("User:alice", ACLOperation.READ),
            ("User:alice", ACLOperation.DESCRIBE),
            ("User:bob", ACLOperation.WRITE),
        }
    finally:
        kp.close()
    bob = CKAclBindingFilter(
        CKResourceType.TOPIC,
        topic,
        CKResourcePatternType.LITERAL,
        "User:bob",
        None,
        CKAclOperation.ANY,
        CKAclPermissionType.ANY,
    )
    deleted = ck.delete_acls([bob])[bob].result(TIMEOUT)
    assert [(b.principal, b.operation_int) for b in deleted] == [("User:bob", 4)]

    removed = acls(capsys, cluster, "--output", "json", "remove", "--force", "--topic", topic, "--group", group).json()
    assert len(removed) == 3
    assert "no ACLs" in acls(capsys, cluster, "list", "--topic", topic).out
    assert (
        acls(capsys, cluster, "remove", "--force", "--topic", prefix, "--resource-pattern-type", "prefixed").status == 0
    )


def test_cli_refuses_bad_input_with_one_line(capsys: pytest.CaptureFixture[str], cluster: Cluster) -> None:
    assert_one_line_error(acls(capsys, cluster, "add", "--topic", "t", "--operation", "Read"), 2, "--allow-principal")
    assert_one_line_error(
        acls(capsys, cluster, "add", "--allow-principal", "alice", "--topic", "t"), 2, "'alice' is not a principal"
    )
    assert_one_line_error(
        acls(capsys, cluster, "add", "--allow-principal", "User:a", "--group", "g", "--operation", "Write"),
        2,
        "Group does not have Write",
    )
    assert_one_line_error(
        acls(capsys, cluster, "add", "--allow-principal", "User:a", "--topic", "t", "--operation", "Fly"),
        2,
        "unknown AclOperation 'Fly'",
    )
    assert_one_line_error(
        acls(capsys, cluster, "add", "--allow-principal", "User:a", "--consumer", "--topic", "t"),
        2,
        "--consumer needs --topic and --group",
    )


def test_a_removal_asks_first(
    capsys: pytest.CaptureFixture[str], cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = new_name("kept")
    assert acls(capsys, cluster, "add", "--allow-principal", "User:x", "--topic", topic).status == 0
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("n\n"))
    refused = acls(capsys, cluster, "remove", "--topic", topic)
    assert refused.status == 1 and "nothing removed" in refused.err
    assert "User:x" in acls(capsys, cluster, "list", "--topic", topic).out
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("y\n"))
    assert acls(capsys, cluster, "remove", "--topic", topic).status == 0
    assert "no ACLs" in acls(capsys, cluster, "list", "--topic", topic).out


def _deliveries(producer: Producer, topic: str, count: int) -> list[int | None]:
    """Each message's delivery error code (None: delivered)."""
    results: list[int | None] = []
    for i in range(count):
        producer.produce(
            topic, value=b"v%d" % i, on_delivery=lambda err, msg: results.append(None if err is None else err.code())
        )
    assert producer.flush(TIMEOUT) == 0
    return results


def _consumed(consumer: Consumer, count: int) -> tuple[list[bytes], KafkaError | None]:
    """Up to ``count`` values, or the first error the consumer reports."""
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                return values, message.error()
            values.append(message.value())
        return values, None
    finally:
        consumer.close()


def _consumer(cluster: Cluster, group: str, topic: str) -> Consumer:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    return consumer


def test_producers_refused_then_served(capsys: pytest.CaptureFixture[str], cluster: Cluster) -> None:
    topic = new_name("guarded")
    create_topic(capsys, cluster, topic)  # Describe only: the metadata, not the writing
    with leader_connection(cluster, topic) as conn:
        refused = _deliveries(Producer({"bootstrap.servers": cluster.bootstrap, "retries": 0}), topic, 3)
        assert refused == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 3
        kp = KafkaProducer(bootstrap_servers=cluster.bootstrap, enable_idempotence=False, retries=0)
        try:
            with pytest.raises(TopicAuthorizationFailedError):
                kp.send(topic, b"refused").get(TIMEOUT)
        finally:
            kp.close()
        assert latest(conn, topic) == 0  # nothing was appended

        assert acls(capsys, cluster, "add", "--allow-principal", ANONYMOUS, "--producer", "--topic", topic).status == 0
        assert _deliveries(Producer({"bootstrap.servers": cluster.bootstrap}), topic, 3) == [None] * 3
        # kafka-python's idempotent producer: Write on a topic lets it have a producer id.
        kp = KafkaProducer(bootstrap_servers=cluster.bootstrap)
        try:
            kp.send(topic, b"kafka-python").get(TIMEOUT)
        finally:
            kp.close()
        assert latest(conn, topic) == 4


def test_consumers_refused_then_served(capsys: pytest.CaptureFixture[str], cluster: Cluster) -> None:
    topic, group = new_name("consumed"), new_name("readers")
    create_topic(capsys, cluster, topic)
    assert acls(capsys, cluster, "add", "--allow-principal", ANONYMOUS, "--producer", "--topic", topic).status == 0
    assert _deliveries(Producer({"bootstrap.servers": cluster.bootstrap}), topic, 5) == [None] * 5

    values, error = _consumed(_consumer(cluster, group, topic), 5)
    assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, (values, error)
    assert values == []
    kp = KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap, group_id=group, auto_offset_reset="earliest")
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            kp.poll(timeout_ms=int(TIMEOUT * 1000))
    finally:
        kp.close()

    granted = ("--allow-principal", ANONYMOUS, "--consumer", "--topic", topic, "--group", group)
    assert acls(capsys, cluster, "add", *granted).status == 0
    values, error = _consumed(_consumer(cluster, group, topic), 5)
    assert (values, error) == ([b"v0", b"v1", b"v2", b"v3", b"v4"], None)
    # Read on the topic, but not on another group: that group is refused even so.
    values, error = _consumed(_consumer(cluster, new_name("other-readers"), topic), 5)
    assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_acls_reach_every_broker_within_a_second(cluster: Cluster) -> None:
    topic = new_name("spread")
    creation = m.CreateAclsRequest.AclCreation(
        resource_type=2,
        resource_name=topic,
        resource_pattern_type=3,
        principal="User:carol",
        host="*",
        operation=3,
        permission_type=3,
    )
    describe = m.DescribeAclsRequest(
        resource_type_filter=2,
        resource_name_filter=topic,
        pattern_type_filter=3,
        principal_filter=None,
        host_filter=None,
        operation=1,
        permission_type=1,
    )
    connections = [connect(broker) for broker in cluster.brokers]
    try:
        answer = connections[0].request(m.CreateAclsRequest(creations=[creation]), 1)
        created = time.monotonic()
        assert answer.results[0].error_code == ErrorCode.NONE
        took = {}
        for broker, conn in zip(cluster.brokers, connections, strict=True):
            while not conn.request(describe, 1).resources:
                assert time.monotonic() - created < 1.0, f"broker {broker.broker_id} did not hear within a second"
                time.sleep(0.01)
            took[broker.broker_id] = time.monotonic() - created
        print(f"ACL on every broker after {max(took.values()) * 1000:.0f} ms: {took}")
    finally:
        for conn in connections:
            conn.close()


def test_acls_survive_a_restart_of_every_broker(capsys: pytest.CaptureFixture[str], cluster: Cluster) -> None:
    allowed, denied = new_name("after-allowed"), new_name("after-denied")
    for topic in (allowed, denied):
        create_topic(capsys, cluster, topic)
    assert (
        acls(capsys, cluster, "add", "--allow-principal", ANONYMOUS, "--operation", "Write", "--topic", allowed).status
        == 0
    )
    before = acls(capsys, cluster, "--output", "json", "list").json()
    cluster.restart()
    for broker in cluster.brokers:
        listed = tributary(capsys, "acls", "--bootstrap", broker.bootstrap, "--output", "json", "list").json()
        assert listed == before, f"broker {broker.broker_id} lost ACLs in the restart"
    for topic, code in ((allowed, ErrorCode.NONE), (denied, ErrorCode.TOPIC_AUTHORIZATION_FAILED)):
        produce = m.ProduceRequest(
            acks=-1,
            timeout_ms=10_000,
            topic_data=[
                m.ProduceRequest.TopicProduceData(
                    name=topic, partition_data=[m.ProduceRequest.PartitionProduceData(index=0, records=batch(b"x"))]
                )
            ],
        )

        def answered(topic: str = topic, produce: m.ProduceRequest = produce) -> tuple[int] | None:
            with leader_connection(cluster, topic) as conn:
                result = conn.request(produce, 8).responses[0].partition_responses[0].error_code
            # Leadership may still be settling right after the restart: ask again.
            return None if result == ErrorCode.NOT_LEADER_OR_FOLLOWER else (result,)

        assert eventually(answered, TIMEOUT, f"an answer from the leader of {topic}") == (code,)


def test_a_refused_init_producer_id_names_the_way_without_idempotence(
    capsys: pytest.CaptureFixture[str], cluster: Cluster
) -> None:
    """With IdempotentWrite on the Cluster and Write on every topic denied, InitProducerId is
    refused: our producer, idempotent by default, fails to start and its error says how to go
    without idempotence. (Deny wins over whatever the module's other tests allowed.)"""
    denials = [
        ("--operation", "IdempotentWrite", "--cluster"),
        ("--operation", "Write", "--topic", "*"),
    ]
    for denial in denials:
        assert acls(capsys, cluster, "add", "--deny-principal", ANONYMOUS, *denial).status == 0
    try:

        async def start() -> None:
            async with TributaryProducer(cluster.bootstrap):
                pass

        with pytest.raises(BrokerResponseError, match="InitProducerId: CLUSTER_AUTHORIZATION_FAILED") as info:
            trio.run(start)
        assert "enable_idempotence=False" in " ".join(info.value.__notes__)
    finally:
        for denial in denials:
            assert acls(capsys, cluster, "remove", "--deny-principal", ANONYMOUS, *denial, "--force").status == 0
