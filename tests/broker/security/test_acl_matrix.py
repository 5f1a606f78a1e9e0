"""The ACL matrix, in process: every API the broker serves, asked by a principal without the
permission (its *_AUTHORIZATION_FAILED, and nothing changes: log bytes and offsets, topics and
configs, groups and committed offsets, ACLs), then with exactly the ACLs Kafka requires (it works).
Then PREFIXED patterns, Deny over Allow, super users, hosts.

One real broker (ZooKeeper, logs, coordinator, ACL store) runs in this process
(tests/broker/security/inprocess.py), so that requests can come from ``User:alice`` and
``User:admin`` before connections authenticate. ``User:admin`` is a super user and sets the stage.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from tests.broker.security.inprocess import InProcessBroker
from tests.broker.wire_helpers import batch, values
from tests.fixtures.zookeeper import ZooKeeperServer, server_chroot
from tributary.broker.dispatch import ROUTES
from tributary.broker.security.authorizer_config import ACL_AUTHORIZER
from tributary.protocol import messages as m
from tributary.protocol.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from tributary.protocol.error_codes import ErrorCode as E
from tributary.testing.polling import eventually

ADMIN, ALICE = "User:admin", "User:alice"
HOST = "10.0.0.7"
TOPIC, GROUP, CLUSTER, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
Op = AclOperation
#: The topic every read-only case reads: two partitions, three records in partition 0.
ORDERS = "orders"
#: The group every read-only case looks at: offsets committed for orders-0.
BILLING = "billing"


def grant(kind: ResourceType, name: str, operation: AclOperation, *, who: str = ALICE, host: str = "*",
          pattern: PatternType = PatternType.LITERAL, deny: bool = False) -> AclBinding:  # fmt: skip
    permission = AclPermissionType.DENY if deny else AclPermissionType.ALLOW
    return AclBinding(ResourcePattern(kind, name, pattern), AccessControlEntry(who, host, operation, permission))


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class Stage:
    """The broker, and what ``User:admin`` does on it."""

    def __init__(self, broker: InProcessBroker) -> None:
        self.broker = broker
        #: transactional id -> (producer id, epoch) of its admin-initialised producer.
        self.producers: dict[str, tuple[int, int]] = {}

    def ask(self, principal: str, body: Any, version: int | None = None, host: str = HOST) -> Any:
        return self.broker.request(principal, body, version, host)

    def add_acls(self, bindings: list[AclBinding]) -> None:
        creations = [
            m.CreateAclsRequest.AclCreation(
                resource_type=b.pattern.resource_type,
                resource_name=b.pattern.name,
                resource_pattern_type=b.pattern.pattern_type,
                principal=b.entry.principal,
                host=b.entry.host,
                operation=b.entry.operation,
                permission_type=b.entry.permission_type,
            )
            for b in bindings
        ]
        response = self.ask(ADMIN, m.CreateAclsRequest(creations=creations))
        assert [r.error_code for r in response.results] == [0] * len(bindings), response

    def remove_acls(self, bindings: list[AclBinding]) -> None:
        filters = [
            m.DeleteAclsRequest.DeleteAclsFilter(
                resource_type_filter=b.pattern.resource_type,
                resource_name_filter=b.pattern.name,
                pattern_type_filter=b.pattern.pattern_type,
                principal_filter=b.entry.principal,
                host_filter=b.entry.host,
                operation=b.entry.operation,
                permission_type=b.entry.permission_type,
            )
            for b in bindings
        ]
        response = self.ask(ADMIN, m.DeleteAclsRequest(filters=filters))
        assert all(r.error_code == 0 for r in response.filter_results), response

    def acls(self) -> set[tuple[Any, ...]]:
        """Every ACL, as admin's DescribeAcls lists them."""
        response = self.ask(ADMIN, m.DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None,
                            pattern_type_filter=1, principal_filter=None, host_filter=None, operation=1,
                            permission_type=1))  # fmt: skip
        assert response.error_code == 0, response
        return {
            (r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation, a.permission_type)
            for r in response.resources
            for a in r.acls
        }

    def create_topic(self, name: str, partitions: int = 1) -> None:
        topic = m.CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)
        response = self.ask(ADMIN, m.CreateTopicsRequest(topics=[topic], timeout_ms=15_000))
        assert response.topics[0].error_code == 0, response

    def produce(self, principal: str, topics: dict[str, bytes]) -> dict[str, int]:
        """One batch to partition 0 of each topic: each topic's error code."""
        request = m.ProduceRequest(
            acks=-1,
            timeout_ms=10_000,
            topic_data=[
                m.ProduceRequest.TopicProduceData(
                    name=name, partition_data=[m.ProduceRequest.PartitionProduceData(index=0, records=records)]
                )
                for name, records in topics.items()
            ],
        )
        response = self.ask(principal, request)
        return {t.name: t.partition_responses[0].error_code for t in response.responses}

    def fetch(self, principal: str, topic: str, replica_id: int = -1) -> Any:
        broker = self.broker.broker
        assert broker is not None
        request = m.FetchRequest(
            replica_id=replica_id, replica_state=m.FetchRequest.ReplicaState(replica_id=replica_id),
            max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, session_epoch=-1,
            # By name and by id: the newest versions (13+) name topics by id.
            topics=[m.FetchRequest.FetchTopic(topic=topic, topic_id=broker.snapshot().topics[topic].uuid, partitions=[
                m.FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
        )  # fmt: skip
        return self.ask(principal, request).responses[0].partitions[0]

    def log(self, topic: str) -> tuple[int, bytes]:
        """What "the log is unchanged" compares: its end offset and every byte in it."""
        part = self.fetch(ADMIN, topic)
        assert part.error_code == 0, part
        return part.high_watermark, bytes(part.records or b"")

    def topic_state(self, name: str) -> tuple[int, dict[str, str]] | None:
        """(partition count, config) from the broker's view of the cluster; None when absent."""
        broker = self.broker.broker
        assert broker is not None
        info = broker.snapshot().topics.get(name)
        return None if info is None else (len(info.partitions), dict(info.config))

    def commit(self, principal: str, group: str, topic: str, offset: int) -> Any:
        request = m.OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=-1, member_id="",
            topics=[m.OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
                m.OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])],
        )  # fmt: skip
        return self.ask(principal, request)

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        response = self.ask(ADMIN, m.OffsetFetchRequest(group_id=group, topics=None), 7)
        assert response.error_code == 0, response
        return {(t.name, p.partition_index): p.committed_offset for t in response.topics for p in t.partitions}

    def coordinator_ready(self, group: str) -> None:
        """FindCoordinator creates __consumer_offsets; wait until its partition is loaded here."""

        def ready() -> bool:
            found = self.ask(ADMIN, m.FindCoordinatorRequest(key=group, key_type=0), 3)
            described = self.ask(ADMIN, m.DescribeGroupsRequest(groups=[group])).groups[0]
            return found.error_code == 0 and described.error_code == 0

        eventually(ready, 30, f"a loaded coordinator for {group}")

    def groups(self) -> dict[str, str]:
        response = self.ask(ADMIN, m.ListGroupsRequest())
        return {g.group_id: g.group_state for g in response.groups}

    # --- transactions

    def init_transaction(self, transactional_id: str, *partitions: tuple[str, int]) -> None:
        """As admin: the id initialised (its coordinator loaded first), and with ``partitions``
        a transaction open on them; the producer id and epoch noted in :attr:`producers`."""
        eventually(
            lambda: self.ask(ADMIN, m.FindCoordinatorRequest(key=transactional_id, key_type=1), 3).error_code == 0,
            30, "a transaction coordinator",
        )  # fmt: skip

        def initialised() -> Any:
            found = self.ask(ADMIN, m.InitProducerIdRequest(transactional_id=transactional_id,
                                                            transaction_timeout_ms=60_000))  # fmt: skip
            return found if found.error_code == 0 else None

        found = eventually(initialised, 30, f"InitProducerId for {transactional_id}")
        self.producers[transactional_id] = (found.producer_id, found.producer_epoch)
        if partitions:
            added = self.ask(ADMIN, _add_partitions(self, transactional_id, *partitions))
            assert {p.partition_error_code for t in added.results_by_topic_v3_and_below
                    for p in t.results_by_partition} == {0}, added  # fmt: skip

    def transaction(self, transactional_id: str) -> tuple[int, str, tuple[Any, ...]]:
        """(error, state, partitions) as admin's DescribeTransactions gives them."""
        (found,) = self.ask(ADMIN, m.DescribeTransactionsRequest(transactional_ids=[transactional_id]))\
            .transaction_states  # fmt: skip
        return found.error_code, found.transaction_state, tuple((t.topic, tuple(t.partitions)) for t in found.topics)

    def log_end(self, topic: str, partition: int) -> int:
        broker = self.broker.broker
        assert broker is not None
        found = broker.partitions.get(topic, partition)
        return -1 if found is None else found.log.log_end_offset


@pytest.fixture(scope="module")
def stage(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stage]:
    settings = {
        "authorizer.class.name": ACL_AUTHORIZER,
        "super.users": ADMIN,
        "offsets.topic.num.partitions": 1,
        "group.initial.rebalance.delay.ms": 0,
        "auto.create.topics.enable": True,
        "transaction.state.log.num.partitions": 1,
    }
    data_dir = tmp_path_factory.mktemp("acl-matrix") / "data"
    with InProcessBroker(server_chroot(zookeeper_server, "acl"), data_dir, settings) as broker:
        stage = Stage(broker)
        stage.create_topic(ORDERS, partitions=2)
        assert stage.produce(ADMIN, {ORDERS: batch(b"a", b"b", b"c")}) == {ORDERS: 0}
        stage.coordinator_ready(BILLING)
        commit = stage.commit(ADMIN, BILLING, ORDERS, 2)
        assert commit.topics[0].partitions[0].error_code == 0
        yield stage


# --- the matrix ----------------------------------------------------------------------------------


@dataclass
class Case:
    """One API: what alice asks, the ACLs Kafka requires for it, and how to tell the outcomes apart.

    ``state`` reads what the request would change (compared before and after the refusal);
    ``denied``/``allowed`` take the response and say whether it is what they expect."""

    name: str
    ask: Callable[[Stage, dict[str, str]], Any]
    grants: Callable[[dict[str, str]], list[AclBinding]]
    denied: Callable[[Any], bool]
    allowed: Callable[[Any], bool]
    state: Callable[[Stage, dict[str, str]], Any] = lambda stage, names: None
    #: What the stage needs first (topics, groups), as admin.
    setup: Callable[[Stage, dict[str, str]], object] = lambda stage, names: None
    #: ACLs alice holds all along: the case shows what is still missing.
    given: Callable[[dict[str, str]], list[AclBinding]] = lambda names: []
    #: Resources of the case's own, named uniquely per run: key -> prefix.
    names: dict[str, str] = field(default_factory=dict)


def _codes(items: Any) -> set[int]:
    return {item.error_code for item in items}


def _describe_configs(kind: int, name: str) -> m.DescribeConfigsRequest:
    return m.DescribeConfigsRequest(
        resources=[m.DescribeConfigsRequest.DescribeConfigsResource(resource_type=kind, resource_name=name,
                                                                   configuration_keys=None)]
    )  # fmt: skip


def _alter_configs(name: str, retention: str) -> m.AlterConfigsRequest:
    return m.AlterConfigsRequest(
        resources=[
            m.AlterConfigsRequest.AlterConfigsResource(
                resource_type=2,
                resource_name=name,
                configs=[m.AlterConfigsRequest.AlterableConfig("retention.ms", retention)],
            )
        ]
    )


def _incremental_alter(name: str, retention: str) -> m.IncrementalAlterConfigsRequest:
    r = m.IncrementalAlterConfigsRequest
    return r(resources=[r.AlterConfigsResource(resource_type=2, resource_name=name, configs=[
        r.AlterableConfig(name="retention.ms", config_operation=0, value=retention)])])  # fmt: skip


def _join(group: str) -> m.JoinGroupRequest:
    return m.JoinGroupRequest(
        group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
        protocol_type="consumer", protocols=[m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")],
    )  # fmt: skip


def _consumer_join(group: str, member: str = "alice-member") -> m.ConsumerGroupHeartbeatRequest:
    return m.ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member, member_epoch=0, rebalance_timeout_ms=10_000,
        subscribed_topic_names=[ORDERS], topic_partitions=[],
    )  # fmt: skip


def _offset_delete(group: str, topic: str) -> m.OffsetDeleteRequest:
    r = m.OffsetDeleteRequest
    return r(group_id=group, topics=[r.OffsetDeleteRequestTopic(name=topic, partitions=[
        r.OffsetDeleteRequestPartition(partition_index=0)])])  # fmt: skip


def _epochs(topic: str) -> m.OffsetForLeaderEpochRequest:
    r = m.OffsetForLeaderEpochRequest
    return r(replica_id=-1, topics=[r.OffsetForLeaderTopic(topic=topic, partitions=[
        r.OffsetForLeaderPartition(partition=0, leader_epoch=0)])])  # fmt: skip


def _list_offsets(topic: str) -> m.ListOffsetsRequest:
    r = m.ListOffsetsRequest
    return r(replica_id=-1, topics=[r.ListOffsetsTopic(name=topic, partitions=[
        r.ListOffsetsPartition(partition_index=0, timestamp=-1)])])  # fmt: skip


def _add_partitions(stage: Stage, transactional_id: str, *partitions: tuple[str, int]) -> m.AddPartitionsToTxnRequest:
    r = m.AddPartitionsToTxnRequest
    producer_id, epoch = stage.producers[transactional_id]
    return r(
        v3_and_below_transactional_id=transactional_id,
        v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[r.AddPartitionsToTxnTopic(name=t, partitions=[p]) for t, p in partitions],
    )


def _added(stage: Stage, transactional_id: str) -> int:
    """alice's AddPartitionsToTxn of orders-0: its error code."""
    response = stage.ask(ALICE, _add_partitions(stage, transactional_id, (ORDERS, 0)))
    return int(response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)


def _add_offsets(stage: Stage, transactional_id: str) -> m.AddOffsetsToTxnRequest:
    producer_id, epoch = stage.producers[transactional_id]
    return m.AddOffsetsToTxnRequest(
        transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch, group_id=BILLING
    )


def _end(stage: Stage, transactional_id: str) -> m.EndTxnRequest:
    producer_id, epoch = stage.producers[transactional_id]
    return m.EndTxnRequest(transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch)


def _txn_offset_commit(stage: Stage, transactional_id: str) -> m.TxnOffsetCommitRequest:
    r = m.TxnOffsetCommitRequest
    producer_id, epoch = stage.producers[transactional_id]
    partition = r.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1)
    return r(
        transactional_id=transactional_id,
        group_id=BILLING,
        producer_id=producer_id,
        producer_epoch=epoch,
        topics=[r.TxnOffsetCommitRequestTopic(name=ORDERS, partitions=[partition])],
    )


def _marker() -> m.WriteTxnMarkersRequest:
    """An abort marker for orders-1 (of a producer nobody knows: the partition takes it)."""
    r = m.WriteTxnMarkersRequest
    topic = r.WritableTxnMarkerTopic(name=ORDERS, partition_indexes=[1])
    marker = r.WritableTxnMarker(producer_id=987_654, producer_epoch=0, transaction_result=False, topics=[topic])
    return r(markers=[marker])


def _acl_filter(name: str) -> dict[str, Any]:
    return {"resource_type_filter": 2, "resource_name_filter": name, "pattern_type_filter": 3,
            "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}  # fmt: skip


def _scram_users(stage: Stage) -> set[tuple[str, tuple[tuple[int, int], ...]]]:
    """Every user's SCRAM mechanisms and iterations, as admin's DescribeUserScramCredentials lists them."""
    response = stage.ask(ADMIN, m.DescribeUserScramCredentialsRequest(users=None))
    assert response.error_code == 0, response
    return {(r.user, tuple((c.mechanism, c.iterations) for c in r.credential_infos)) for r in response.results}


def _scram_upsert(name: str) -> m.AlterUserScramCredentialsRequest:
    r = m.AlterUserScramCredentialsRequest
    return r(upsertions=[r.ScramCredentialUpsertion(name=name, mechanism=2, iterations=4096, salt=b"s" * 32,
                                                    salted_password=b"p" * 64)])  # fmt: skip


def _some_acl(name: str) -> m.CreateAclsRequest.AclCreation:
    return m.CreateAclsRequest.AclCreation(resource_type=2, resource_name=name, resource_pattern_type=3,
                                           principal="User:bob", host="*", operation=3, permission_type=3)  # fmt: skip


def _delete_records(topic: str, offset: int) -> m.DeleteRecordsRequest:
    r = m.DeleteRecordsRequest
    return r(topics=[r.DeleteRecordsTopic(topic, [r.DeleteRecordsPartition(0, offset)])], timeout_ms=15_000)


def _log_start(stage: Stage, topic: str) -> int:
    broker = stage.broker.broker
    assert broker is not None
    partition = broker.partitions.get(topic, 0)
    assert partition is not None
    return partition.log.log_start_offset


CASES = [
    Case(
        "Produce",
        lambda s, n: s.produce(ALICE, {ORDERS: batch(b"alice")}),
        lambda n: [grant(TOPIC, ORDERS, Op.WRITE)],
        denied=lambda r: r == {ORDERS: E.TOPIC_AUTHORIZATION_FAILED},
        allowed=lambda r: r == {ORDERS: E.NONE},
        state=lambda s, n: s.log(ORDERS),
    ),
    Case(
        "Fetch",
        lambda s, n: s.fetch(ALICE, ORDERS),
        lambda n: [grant(TOPIC, ORDERS, Op.READ)],
        denied=lambda r: r.error_code == E.TOPIC_AUTHORIZATION_FAILED and not r.records,
        allowed=lambda r: r.error_code == E.NONE and values(bytes(r.records))[:3] == [b"a", b"b", b"c"],
    ),
    Case(
        "Fetch from a follower",
        lambda s, n: s.fetch(ALICE, ORDERS, replica_id=2),
        lambda n: [grant(CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION)],
        denied=lambda r: r.error_code == E.TOPIC_AUTHORIZATION_FAILED,
        # Past the check: broker 2 is no replica of orders-0.
        allowed=lambda r: r.error_code == E.NOT_LEADER_OR_FOLLOWER,
    ),
    Case(
        "ListOffsets",
        lambda s, n: s.ask(ALICE, _list_offsets(ORDERS)).topics[0].partitions[0],
        lambda n: [grant(TOPIC, ORDERS, Op.DESCRIBE)],
        denied=lambda r: r.error_code == E.TOPIC_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.NONE and r.offset >= 3,
    ),
    Case(
        "Metadata of a named topic",
        lambda s, n: s.ask(ALICE, m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=ORDERS)])),
        lambda n: [grant(TOPIC, ORDERS, Op.DESCRIBE)],
        denied=lambda r: (
            [(t.name, t.error_code, t.partitions) for t in r.topics] == [(ORDERS, E.TOPIC_AUTHORIZATION_FAILED, [])]
        ),
        allowed=lambda r: r.topics[0].error_code == E.NONE and len(r.topics[0].partitions) == 2,
    ),
    Case(
        "Metadata of every topic",
        lambda s, n: s.ask(ALICE, m.MetadataRequest(topics=None)),
        lambda n: [grant(TOPIC, ORDERS, Op.DESCRIBE)],
        denied=lambda r: ORDERS not in {t.name for t in r.topics},
        allowed=lambda r: ORDERS in {t.name for t in r.topics if t.error_code == 0},
    ),
    Case(
        "Metadata auto-creating a topic",
        lambda s, n: s.ask(ALICE, m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=n["new"])])),
        lambda n: [grant(TOPIC, n["new"], Op.CREATE)],
        denied=lambda r: r.topics[0].error_code == E.TOPIC_AUTHORIZATION_FAILED,
        allowed=lambda r: r.topics[0].error_code in (E.NONE, E.LEADER_NOT_AVAILABLE),
        state=lambda s, n: s.topic_state(n["new"]),
        # Describe alone: it may learn the topic is missing, not create it.
        given=lambda n: [grant(TOPIC, n["new"], Op.DESCRIBE)],
        names={"new": "auto"},
    ),
    Case(
        "CreateTopics",
        lambda s, n: s.ask(
            ALICE,
            m.CreateTopicsRequest(
                topics=[m.CreateTopicsRequest.CreatableTopic(name=n["new"], num_partitions=1, replication_factor=1)],
                timeout_ms=15_000,
            ),
        ).topics[0],
        lambda n: [grant(CLUSTER, CLUSTER_NAME, Op.CREATE)],
        denied=lambda r: r.error_code == E.TOPIC_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.NONE,
        state=lambda s, n: s.topic_state(n["new"]),
        names={"new": "created"},
    ),
    Case(
        "DeleteTopics",
        lambda s, n: s.ask(ALICE, m.DeleteTopicsRequest(topic_names=[n["doomed"]], timeout_ms=15_000), 5).responses[0],
        lambda n: [grant(TOPIC, n["doomed"], Op.DELETE)],
        denied=lambda r: r.error_code == E.TOPIC_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.NONE,
        state=lambda s, n: s.topic_state(n["doomed"]),
        setup=lambda s, n: s.create_topic(n["doomed"]),
        names={"doomed": "doomed"},
    ),
    Case(
        "DeleteRecords",
        lambda s, n: s.ask(ALICE, _delete_records(n["trimmed"], 1)).topics[0].partitions[0],
        lambda n: [grant(TOPIC, n["trimmed"], Op.DELETE)],
        denied=lambda r: r.error_code == E.TOPIC_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.NONE and r.low_watermark == 1,
        state=lambda s, n: (s.log(n["trimmed"]), _log_start(s, n["trimmed"])),
        setup=lambda s, n: (s.create_topic(n["trimmed"]), s.produce(ADMIN, {n["trimmed"]: batch(b"x", b"y")})),
        names={"trimmed": "trimmed"},
    ),
    Case(
        "DescribeProducers",
        lambda s, n: (
            s.ask(ALICE, m.DescribeProducersRequest(topics=[m.DescribeProducersRequest.TopicRequest(ORDERS, [0])]))
            .topics[0]
            .partitions[0]
        ),
        lambda n: [grant(TOPIC, ORDERS, Op.READ)],
        denied=lambda r: r.error_code == E.TOPIC_AUTHORIZATION_FAILED and not r.active_producers,
        allowed=lambda r: r.error_code == E.NONE,
    ),
    Case(
        "DescribeCluster",
        # Anyone may describe the cluster; its authorized operations need Describe on it.
        lambda s, n: s.ask(ALICE, m.DescribeClusterRequest(include_cluster_authorized_operations=True)),
        lambda n: [grant(CLUSTER, CLUSTER_NAME, Op.DESCRIBE)],
        denied=lambda r: r.error_code == E.NONE and r.cluster_authorized_operations == 0 and len(r.brokers) == 1,
        allowed=lambda r: r.cluster_authorized_operations & (1 << Op.DESCRIBE) != 0,
    ),
    Case(
        "CreatePartitions",
        lambda s, n: s.ask(
            ALICE,
            m.CreatePartitionsRequest(
                topics=[m.CreatePartitionsRequest.CreatePartitionsTopic(name=n["grown"], count=3, assignments=None)],
                timeout_ms=15_000,
            ),
        ).results[0],
        lambda n: [grant(TOPIC, n["grown"], Op.ALTER)],
        denied=lambda r: r.error_code == E.TOPIC_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.NONE,
        state=lambda s, n: s.topic_state(n["grown"]),
        setup=lambda s, n: s.create_topic(n["grown"]),
        names={"grown": "grown"},
    ),
    Case(
        "DescribeConfigs of a topic",
        lambda s, n: s.ask(ALICE, _describe_configs(2, ORDERS)).results[0],
        lambda n: [grant(TOPIC, ORDERS, Op.DESCRIBE_CONFIGS)],
        denied=lambda r: r.error_code == E.TOPIC_AUTHORIZATION_FAILED and not r.configs,
        allowed=lambda r: r.error_code == E.NONE and r.configs,
    ),
    Case(
        "DescribeConfigs of a broker",
        lambda s, n: s.ask(ALICE, _describe_configs(4, "1")).results[0],
        lambda n: [grant(CLUSTER, CLUSTER_NAME, Op.DESCRIBE_CONFIGS)],
        denied=lambda r: r.error_code == E.CLUSTER_AUTHORIZATION_FAILED and not r.configs,
        allowed=lambda r: r.error_code == E.NONE and r.configs,
    ),
    Case(
        "AlterConfigs",
        lambda s, n: s.ask(ALICE, _alter_configs(n["configured"], "3600000")).responses[0],
        lambda n: [grant(TOPIC, n["configured"], Op.ALTER_CONFIGS)],
        denied=lambda r: r.error_code == E.TOPIC_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.NONE,
        state=lambda s, n: s.topic_state(n["configured"]),
        setup=lambda s, n: s.create_topic(n["configured"]),
        names={"configured": "configured"},
    ),
    Case(
        "IncrementalAlterConfigs",
        lambda s, n: s.ask(ALICE, _incremental_alter(n["configured"], "7200000")).responses[0],
        lambda n: [grant(TOPIC, n["configured"], Op.ALTER_CONFIGS)],
        denied=lambda r: r.error_code == E.TOPIC_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.NONE,
        state=lambda s, n: s.topic_state(n["configured"]),
        setup=lambda s, n: s.create_topic(n["configured"]),
        names={"configured": "configured"},
    ),
    Case(
        "InitProducerId (idempotent)",
        lambda s, n: s.ask(ALICE, m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000)),
        lambda n: [grant(CLUSTER, CLUSTER_NAME, Op.IDEMPOTENT_WRITE)],
        denied=lambda r: r.error_code == E.CLUSTER_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.NONE and r.producer_id >= 0,
    ),
    Case(
        "InitProducerId (transactional)",
        lambda s, n: s.ask(ALICE, m.InitProducerIdRequest(transactional_id=n["txn"], transaction_timeout_ms=60_000)),
        lambda n: [grant(TXN, n["txn"], Op.WRITE)],
        denied=lambda r: r.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.NONE and r.producer_id >= 0 and r.producer_epoch == 1,
        state=lambda s, n: s.transaction(n["txn"]),
        setup=lambda s, n: s.init_transaction(n["txn"]),
        names={"txn": "init"},
    ),
    Case(
        "AddPartitionsToTxn",
        lambda s, n: _added(s, n["txn"]),
        lambda n: [grant(TOPIC, ORDERS, Op.WRITE)],
        denied=lambda r: r == E.TOPIC_AUTHORIZATION_FAILED,
        allowed=lambda r: r == E.NONE,
        state=lambda s, n: s.transaction(n["txn"]),
        setup=lambda s, n: s.init_transaction(n["txn"]),
        # Write on the transactional id alone: the topic's Write is still missing.
        given=lambda n: [grant(TXN, n["txn"], Op.WRITE)],
        names={"txn": "add"},
    ),
    Case(
        "AddOffsetsToTxn",
        lambda s, n: s.ask(ALICE, _add_offsets(s, n["txn"])),
        lambda n: [grant(GROUP, BILLING, Op.READ)],
        denied=lambda r: r.error_code == E.GROUP_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.NONE,
        state=lambda s, n: s.transaction(n["txn"]),
        setup=lambda s, n: s.init_transaction(n["txn"]),
        given=lambda n: [grant(TXN, n["txn"], Op.WRITE)],
        names={"txn": "offsets"},
    ),
    Case(
        "EndTxn",
        lambda s, n: s.ask(ALICE, _end(s, n["txn"])),
        lambda n: [grant(TXN, n["txn"], Op.WRITE)],
        denied=lambda r: r.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.NONE,
        state=lambda s, n: s.transaction(n["txn"]),
        setup=lambda s, n: s.init_transaction(n["txn"], (ORDERS, 1)),
        names={"txn": "end"},
    ),
    Case(
        "TxnOffsetCommit",
        lambda s, n: s.ask(ALICE, _txn_offset_commit(s, n["txn"])).topics[0].partitions[0].error_code,
        lambda n: [grant(TOPIC, ORDERS, Op.READ)],
        denied=lambda r: r == E.TOPIC_AUTHORIZATION_FAILED,
        allowed=lambda r: r == E.NONE,
        state=lambda s, n: s.committed(BILLING),
        setup=lambda s, n: s.init_transaction(n["txn"]),
        given=lambda n: [grant(TXN, n["txn"], Op.WRITE), grant(GROUP, BILLING, Op.READ)],
        names={"txn": "txnoffsets"},
    ),
    Case(
        "WriteTxnMarkers",
        lambda s, n: s.ask(ALICE, _marker()).markers[0].topics[0].partitions[0].error_code,
        lambda n: [grant(CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION)],
        denied=lambda r: r == E.CLUSTER_AUTHORIZATION_FAILED,
        allowed=lambda r: r == E.NONE,
        state=lambda s, n: s.log_end(ORDERS, 1),
    ),
    Case(
        "DescribeTransactions",
        lambda s, n: s.ask(ALICE, m.DescribeTransactionsRequest(transactional_ids=[n["txn"]])).transaction_states[0],
        lambda n: [grant(TXN, n["txn"], Op.DESCRIBE)],
        denied=lambda r: r.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED and r.producer_id <= 0,
        allowed=lambda r: r.error_code == E.NONE and r.transaction_state == "Empty",
        setup=lambda s, n: s.init_transaction(n["txn"]),
        names={"txn": "described"},
    ),
    Case(
        "ListTransactions",
        lambda s, n: {t.transactional_id for t in s.ask(ALICE, m.ListTransactionsRequest()).transaction_states},
        lambda n: [grant(TXN, n["txn"], Op.DESCRIBE)],
        denied=lambda r: not any(t.startswith("listed") for t in r),
        allowed=lambda r: any(t.startswith("listed") for t in r),
        setup=lambda s, n: s.init_transaction(n["txn"]),
        names={"txn": "listed"},
    ),
    Case(
        "FindCoordinator of a transactional id",
        lambda s, n: s.ask(ALICE, m.FindCoordinatorRequest(key=n["txn"], key_type=1), 2),
        lambda n: [grant(TXN, n["txn"], Op.DESCRIBE)],
        denied=lambda r: r.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED and r.node_id == -1,
        allowed=lambda r: r.error_code == E.NONE and r.node_id == 1,
        setup=lambda s, n: s.init_transaction(n["txn"]),
        names={"txn": "found"},
    ),
    Case(
        "FindCoordinator",
        lambda s, n: s.ask(ALICE, m.FindCoordinatorRequest(key=BILLING, key_type=0), 2),
        lambda n: [grant(GROUP, BILLING, Op.DESCRIBE)],
        denied=lambda r: r.error_code == E.GROUP_AUTHORIZATION_FAILED and r.node_id == -1,
        allowed=lambda r: r.error_code == E.NONE and r.node_id == 1,
    ),
    Case(
        "JoinGroup",
        lambda s, n: s.ask(ALICE, _join(n["joined"])),
        lambda n: [grant(GROUP, n["joined"], Op.READ)],
        denied=lambda r: r.error_code == E.GROUP_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.MEMBER_ID_REQUIRED,  # v4+: the first step of joining
        state=lambda s, n: s.groups().get(n["joined"]),
        names={"joined": "joined"},
    ),
    Case(
        "ConsumerGroupHeartbeat",
        lambda s, n: s.ask(ALICE, _consumer_join(n["modern"])),
        lambda n: [grant(GROUP, n["modern"], Op.READ), grant(TOPIC, ORDERS, Op.DESCRIBE)],
        denied=lambda r: r.error_code == E.GROUP_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.NONE and r.member_epoch == 1,
        state=lambda s, n: s.groups().get(n["modern"]),
        names={"modern": "modern"},
    ),
    Case(
        "ConsumerGroupHeartbeat naming a topic",
        lambda s, n: s.ask(ALICE, _consumer_join(n["modern"])),
        lambda n: [grant(TOPIC, ORDERS, Op.DESCRIBE)],
        denied=lambda r: r.error_code == E.TOPIC_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.NONE,
        state=lambda s, n: s.groups().get(n["modern"]),
        given=lambda n: [grant(GROUP, n["modern"], Op.READ)],
        names={"modern": "modern"},
    ),
    Case(
        "ConsumerGroupDescribe",
        lambda s, n: s.ask(ALICE, m.ConsumerGroupDescribeRequest(group_ids=[n["modern"]])).groups[0],
        lambda n: [grant(GROUP, n["modern"], Op.DESCRIBE), grant(TOPIC, ORDERS, Op.DESCRIBE)],
        denied=lambda r: r.error_code == E.GROUP_AUTHORIZATION_FAILED and not r.members,
        allowed=lambda r: r.error_code == E.NONE and r.group_state == "Stable" and len(r.members) == 1,
        setup=lambda s, n: s.ask(ADMIN, _consumer_join(n["modern"], "admin-member")),
        names={"modern": "modern"},
    ),
    Case(
        "ConsumerGroupDescribe of a group on a topic",
        lambda s, n: s.ask(ALICE, m.ConsumerGroupDescribeRequest(group_ids=[n["modern"]])).groups[0],
        lambda n: [grant(TOPIC, ORDERS, Op.DESCRIBE)],
        denied=lambda r: r.error_code == E.TOPIC_AUTHORIZATION_FAILED and not r.members,
        allowed=lambda r: r.error_code == E.NONE and len(r.members) == 1,
        setup=lambda s, n: s.ask(ADMIN, _consumer_join(n["modern"], "admin-member")),
        given=lambda n: [grant(GROUP, n["modern"], Op.DESCRIBE)],
        names={"modern": "modern"},
    ),
    Case(
        "SyncGroup",
        lambda s, n: s.ask(ALICE, m.SyncGroupRequest(group_id=BILLING, generation_id=1, member_id="m")),
        lambda n: [grant(GROUP, BILLING, Op.READ)],
        denied=lambda r: r.error_code == E.GROUP_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.UNKNOWN_MEMBER_ID,  # past the check
    ),
    Case(
        "Heartbeat",
        lambda s, n: s.ask(ALICE, m.HeartbeatRequest(group_id=BILLING, generation_id=1, member_id="m")),
        lambda n: [grant(GROUP, BILLING, Op.READ)],
        denied=lambda r: r.error_code == E.GROUP_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.UNKNOWN_MEMBER_ID,
    ),
    Case(
        "LeaveGroup",
        lambda s, n: s.ask(
            ALICE, m.LeaveGroupRequest(group_id=BILLING, members=[m.LeaveGroupRequest.MemberIdentity(member_id="m")])
        ),
        lambda n: [grant(GROUP, BILLING, Op.READ)],
        denied=lambda r: r.error_code == E.GROUP_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.NONE and _codes(r.members) == {E.UNKNOWN_MEMBER_ID},
    ),
    Case(
        "OffsetCommit without Read on the group",
        lambda s, n: s.commit(ALICE, BILLING, ORDERS, 3).topics[0].partitions[0],
        lambda n: [grant(GROUP, BILLING, Op.READ)],
        denied=lambda r: r.error_code == E.GROUP_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.NONE,
        state=lambda s, n: s.committed(BILLING),
        given=lambda n: [grant(TOPIC, ORDERS, Op.READ)],
    ),
    Case(
        "OffsetCommit without Read on the topic",
        lambda s, n: s.commit(ALICE, BILLING, ORDERS, 3).topics[0].partitions[0],
        lambda n: [grant(TOPIC, ORDERS, Op.READ)],
        denied=lambda r: r.error_code == E.TOPIC_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.NONE,
        state=lambda s, n: s.committed(BILLING),
        given=lambda n: [grant(GROUP, BILLING, Op.READ)],
    ),
    Case(
        "OffsetFetch",
        lambda s, n: s.ask(ALICE, m.OffsetFetchRequest(group_id=BILLING, topics=None), 7),
        lambda n: [grant(GROUP, BILLING, Op.DESCRIBE), grant(TOPIC, ORDERS, Op.DESCRIBE)],
        denied=lambda r: r.error_code == E.GROUP_AUTHORIZATION_FAILED and not r.topics,
        allowed=lambda r: r.error_code == E.NONE and [t.name for t in r.topics] == [ORDERS],
    ),
    Case(
        "OffsetFetch of a topic it may not describe",
        lambda s, n: (
            s.ask(
                ALICE,
                m.OffsetFetchRequest(
                    group_id=BILLING,
                    topics=[m.OffsetFetchRequest.OffsetFetchRequestTopic(name=ORDERS, partition_indexes=[0])],
                ),
                7,
            )
            .topics[0]
            .partitions[0]
        ),
        lambda n: [grant(TOPIC, ORDERS, Op.DESCRIBE)],
        denied=lambda r: r.error_code == E.TOPIC_AUTHORIZATION_FAILED and r.committed_offset == -1,
        allowed=lambda r: r.error_code == E.NONE and r.committed_offset >= 2,
        given=lambda n: [grant(GROUP, BILLING, Op.DESCRIBE)],
    ),
    Case(
        "OffsetFetch v8 of several groups",
        lambda s, n: {
            g.group_id: g.error_code
            for g in s.ask(
                ALICE,
                m.OffsetFetchRequest(
                    groups=[
                        m.OffsetFetchRequest.OffsetFetchRequestGroup(group_id=BILLING, topics=None),
                        m.OffsetFetchRequest.OffsetFetchRequestGroup(group_id=n["other"], topics=None),
                    ]
                ),
                8,
            ).groups
        },
        lambda n: [grant(GROUP, BILLING, Op.DESCRIBE)],
        denied=lambda r: set(r.values()) == {E.GROUP_AUTHORIZATION_FAILED},
        # Each group on its own: billing is now allowed, the other still refused.
        allowed=lambda r: list(r.values()) == [E.NONE, E.GROUP_AUTHORIZATION_FAILED],
        names={"other": "other"},
    ),
    Case(
        "DescribeGroups",
        lambda s, n: s.ask(ALICE, m.DescribeGroupsRequest(groups=[BILLING])).groups[0],
        lambda n: [grant(GROUP, BILLING, Op.DESCRIBE)],
        denied=lambda r: r.error_code == E.GROUP_AUTHORIZATION_FAILED and r.group_state == "",
        allowed=lambda r: r.error_code == E.NONE and r.group_state == "Empty",
    ),
    Case(
        "ListGroups",
        lambda s, n: {g.group_id for g in s.ask(ALICE, m.ListGroupsRequest()).groups},
        lambda n: [grant(GROUP, BILLING, Op.DESCRIBE)],
        denied=lambda r: BILLING not in r,
        allowed=lambda r: BILLING in r,
    ),
    Case(
        "ListGroups with Describe on the Cluster",
        lambda s, n: {g.group_id for g in s.ask(ALICE, m.ListGroupsRequest()).groups},
        lambda n: [grant(CLUSTER, CLUSTER_NAME, Op.DESCRIBE)],
        denied=lambda r: BILLING not in r,
        allowed=lambda r: BILLING in r,
    ),
    Case(
        "DeleteGroups",
        lambda s, n: s.ask(ALICE, m.DeleteGroupsRequest(groups_names=[n["spent"]])).results[0],
        lambda n: [grant(GROUP, n["spent"], Op.DELETE)],
        denied=lambda r: r.error_code == E.GROUP_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.NONE,
        state=lambda s, n: (s.groups().get(n["spent"]), s.committed(n["spent"])),
        setup=lambda s, n: s.commit(ADMIN, n["spent"], ORDERS, 1),
        names={"spent": "spent"},
    ),
    Case(
        "OffsetDelete without Delete on the group",
        lambda s, n: s.ask(ALICE, _offset_delete(n["pruned"], ORDERS)),
        lambda n: [grant(GROUP, n["pruned"], Op.DELETE)],
        denied=lambda r: r.error_code == E.GROUP_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.NONE and _codes(r.topics[0].partitions) == {E.NONE},
        state=lambda s, n: s.committed(n["pruned"]),
        setup=lambda s, n: s.commit(ADMIN, n["pruned"], ORDERS, 1),
        given=lambda n: [grant(TOPIC, ORDERS, Op.READ)],
        names={"pruned": "pruned"},
    ),
    Case(
        "OffsetDelete without Read on the topic",
        lambda s, n: s.ask(ALICE, _offset_delete(n["pruned"], ORDERS)),
        lambda n: [grant(TOPIC, ORDERS, Op.READ)],
        denied=lambda r: r.error_code == E.NONE and _codes(r.topics[0].partitions) == {E.TOPIC_AUTHORIZATION_FAILED},
        allowed=lambda r: r.error_code == E.NONE and _codes(r.topics[0].partitions) == {E.NONE},
        state=lambda s, n: s.committed(n["pruned"]),
        setup=lambda s, n: s.commit(ADMIN, n["pruned"], ORDERS, 1),
        given=lambda n: [grant(GROUP, n["pruned"], Op.DELETE)],
        names={"pruned": "pruned"},
    ),
    Case(
        "DescribeLogDirs",
        lambda s, n: s.ask(ALICE, m.DescribeLogDirsRequest(topics=None)),
        lambda n: [grant(CLUSTER, CLUSTER_NAME, Op.DESCRIBE)],
        denied=lambda r: r.results == [],
        allowed=lambda r: len(r.results) == 1 and r.results[0].error_code == E.NONE,
    ),
    Case(
        "ElectLeaders",
        lambda s, n: s.ask(
            ALICE,
            m.ElectLeadersRequest(
                election_type=0,
                topic_partitions=[m.ElectLeadersRequest.TopicPartitions(topic=ORDERS, partitions=[0])],
                timeout_ms=10_000,
            ),
        ),
        lambda n: [grant(CLUSTER, CLUSTER_NAME, Op.ALTER)],
        denied=lambda r: _codes(r.replica_election_results[0].partition_result) == {E.CLUSTER_AUTHORIZATION_FAILED},
        allowed=lambda r: _codes(r.replica_election_results[0].partition_result) == {E.ELECTION_NOT_NEEDED},
    ),
    Case(
        "AlterPartitionReassignments",
        lambda s, n: s.ask(
            ALICE,
            m.AlterPartitionReassignmentsRequest(
                timeout_ms=10_000,
                topics=[
                    m.AlterPartitionReassignmentsRequest.ReassignableTopic(
                        name=ORDERS,
                        partitions=[
                            m.AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=0, replicas=None)
                        ],
                    )
                ],
            ),
        ),
        lambda n: [grant(CLUSTER, CLUSTER_NAME, Op.ALTER)],
        denied=lambda r: r.error_code == E.CLUSTER_AUTHORIZATION_FAILED and not r.responses,
        allowed=lambda r: (
            r.error_code == E.NONE and _codes(r.responses[0].partitions) == {E.NO_REASSIGNMENT_IN_PROGRESS}
        ),
    ),
    Case(
        "ListPartitionReassignments",
        lambda s, n: s.ask(ALICE, m.ListPartitionReassignmentsRequest(timeout_ms=10_000, topics=None)),
        lambda n: [grant(CLUSTER, CLUSTER_NAME, Op.DESCRIBE)],
        denied=lambda r: r.error_code == E.CLUSTER_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.NONE,
    ),
    Case(
        "OffsetForLeaderEpoch",
        lambda s, n: s.ask(ALICE, _epochs(ORDERS)).topics[0].partitions[0],
        lambda n: [grant(TOPIC, ORDERS, Op.DESCRIBE)],
        denied=lambda r: r.error_code == E.TOPIC_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.NONE,
    ),
    Case(
        "DescribeAcls",
        lambda s, n: s.ask(ALICE, m.DescribeAclsRequest(**_acl_filter(ORDERS))),
        lambda n: [grant(CLUSTER, CLUSTER_NAME, Op.DESCRIBE)],
        denied=lambda r: r.error_code == E.CLUSTER_AUTHORIZATION_FAILED and not r.resources,
        allowed=lambda r: r.error_code == E.NONE,
    ),
    Case(
        "CreateAcls",
        lambda s, n: s.ask(ALICE, m.CreateAclsRequest(creations=[_some_acl(n["guarded"])])).results[0],
        lambda n: [grant(CLUSTER, CLUSTER_NAME, Op.ALTER)],
        denied=lambda r: r.error_code == E.CLUSTER_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.NONE,
        state=lambda s, n: {a for a in s.acls() if a[1] == n["guarded"]},
        names={"guarded": "guarded"},
    ),
    Case(
        "DeleteAcls",
        lambda s, n: s.ask(
            ALICE, m.DeleteAclsRequest(filters=[m.DeleteAclsRequest.DeleteAclsFilter(**_acl_filter(n["guarded"]))])
        ).filter_results[0],
        lambda n: [grant(CLUSTER, CLUSTER_NAME, Op.ALTER)],
        denied=lambda r: r.error_code == E.CLUSTER_AUTHORIZATION_FAILED and not r.matching_acls,
        allowed=lambda r: r.error_code == E.NONE and len(r.matching_acls) == 1,
        state=lambda s, n: {a for a in s.acls() if a[1] == n["guarded"]},
        setup=lambda s, n: s.ask(ADMIN, m.CreateAclsRequest(creations=[_some_acl(n["guarded"])])),
        names={"guarded": "guarded"},
    ),
    Case(
        "DescribeUserScramCredentials",
        lambda s, n: s.ask(ALICE, m.DescribeUserScramCredentialsRequest(users=None)),
        lambda n: [grant(CLUSTER, CLUSTER_NAME, Op.DESCRIBE)],
        denied=lambda r: r.error_code == E.CLUSTER_AUTHORIZATION_FAILED and not r.results,
        allowed=lambda r: r.error_code == E.NONE,
    ),
    Case(
        "AlterUserScramCredentials",
        lambda s, n: s.ask(ALICE, _scram_upsert(n["user"])).results[0],
        lambda n: [grant(CLUSTER, CLUSTER_NAME, Op.ALTER)],
        denied=lambda r: r.error_code == E.CLUSTER_AUTHORIZATION_FAILED,
        allowed=lambda r: r.error_code == E.NONE,
        state=lambda s, n: _scram_users(s),
        names={"user": "scram"},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_without_the_permission_refused_and_nothing_changes_with_it_allowed(stage: Stage, case: Case) -> None:
    names = {key: unique(prefix) for key, prefix in case.names.items()}
    case.setup(stage, names)
    given, granted = case.given(names), case.grants(names)
    if given:
        stage.add_acls(given)
    try:
        before = case.state(stage, names)
        response = case.ask(stage, names)
        assert case.denied(response), f"{case.name} without {granted}: {response}"
        assert case.state(stage, names) == before, f"{case.name} changed something though refused"
        stage.add_acls(granted)
        response = case.ask(stage, names)
        assert case.allowed(response), f"{case.name} with {granted}: {response}"
        assert not case.denied(response)
    finally:
        stage.remove_acls(given + granted)


#: Every API the broker serves has a case (ApiVersions needs no permission).
CASE_APIS = {c.name.split()[0] for c in CASES}


def test_every_routed_api_is_in_the_matrix() -> None:
    # ApiVersions and the SASL exchange come before any principal is known: they need no permission.
    unguarded = {"ApiVersions", "SaslHandshake", "SaslAuthenticate"}
    served = {m.API_MESSAGES[key][0].__name__.removesuffix("Request") for key in ROUTES} - unguarded
    assert served <= CASE_APIS, f"no matrix case for {sorted(served - CASE_APIS)}"


# --- per resource, patterns, deny over allow, super users, hosts ------------------------------------


@pytest.fixture
def acls(stage: Stage) -> Iterator[Callable[..., None]]:
    """``acls(binding, ...)`` gives bindings for the rest of the test (removed afterwards)."""
    added: list[AclBinding] = []

    def add(*bindings: AclBinding) -> None:
        stage.add_acls(list(bindings))
        added.extend(bindings)

    yield add
    if added:
        stage.remove_acls(added)


def test_a_produce_to_two_topics_fails_only_where_it_is_denied(stage: Stage, acls: Callable[..., None]) -> None:
    mine, theirs = unique("mine"), unique("theirs")
    stage.create_topic(mine)
    stage.create_topic(theirs)
    acls(grant(TOPIC, mine, Op.WRITE))
    before = stage.log(theirs)
    answer = stage.produce(ALICE, {mine: batch(b"ok"), theirs: batch(b"refused")})
    assert answer == {mine: E.NONE, theirs: E.TOPIC_AUTHORIZATION_FAILED}
    assert values(stage.log(mine)[1]) == [b"ok"]
    assert stage.log(theirs) == before == (0, b"")


def test_prefixed_acls_cover_the_names_they_start(stage: Stage, acls: Callable[..., None]) -> None:
    prefix = unique("team")
    inside, outside = f"{prefix}.clicks", unique("elsewhere")
    for name in (inside, outside):
        stage.create_topic(name)
    acls(grant(TOPIC, f"{prefix}.", Op.ALL, pattern=PatternType.PREFIXED))
    assert stage.produce(ALICE, {inside: batch(b"x"), outside: batch(b"y")}) == {
        inside: E.NONE,
        outside: E.TOPIC_AUTHORIZATION_FAILED,
    }
    # A LITERAL ACL named like the prefix covers only the topic of that very name.
    literal_prefix = unique("literal")
    stage.create_topic(f"{literal_prefix}.x")
    acls(grant(TOPIC, literal_prefix, Op.WRITE))
    assert stage.produce(ALICE, {f"{literal_prefix}.x": batch(b"z")}) == {
        f"{literal_prefix}.x": E.TOPIC_AUTHORIZATION_FAILED
    }


def test_deny_wins_over_allow(stage: Stage, acls: Callable[..., None]) -> None:
    prefix = unique("deny")
    topic = f"{prefix}-secret"
    stage.create_topic(topic)
    acls(grant(TOPIC, "*", Op.ALL), grant(TOPIC, prefix, Op.WRITE, pattern=PatternType.PREFIXED, deny=True))
    assert stage.produce(ALICE, {topic: batch(b"no")}) == {topic: E.TOPIC_AUTHORIZATION_FAILED}
    # Denying Write leaves Read and Describe to the allow.
    assert stage.fetch(ALICE, topic).error_code == E.NONE
    # A deny for User:* covers alice too; one from another host does not.
    other = unique("other")
    stage.create_topic(other)
    acls(grant(TOPIC, other, Op.READ, who="User:*", host="10.9.9.9", deny=True))
    assert stage.fetch(ALICE, other).error_code == E.NONE
    acls(grant(TOPIC, other, Op.READ, who="User:*", deny=True))
    assert stage.fetch(ALICE, other).error_code == E.TOPIC_AUTHORIZATION_FAILED


def test_super_users_may_do_anything(stage: Stage, acls: Callable[..., None]) -> None:
    topic = unique("super")
    stage.create_topic(topic)
    acls(
        grant(TOPIC, "*", Op.ALL, who="User:*", deny=True),
        grant(CLUSTER, CLUSTER_NAME, Op.ALL, who="User:*", deny=True),
    )
    assert stage.produce(ADMIN, {topic: batch(b"root")}) == {topic: E.NONE}
    assert stage.fetch(ADMIN, topic).error_code == E.NONE
    assert stage.produce(ALICE, {topic: batch(b"no")}) == {topic: E.TOPIC_AUTHORIZATION_FAILED}


def test_host_acls_match_the_client_address(stage: Stage, acls: Callable[..., None]) -> None:
    topic = unique("hosts")
    stage.create_topic(topic)
    acls(grant(TOPIC, topic, Op.READ, host="10.0.0.7"))
    assert stage.fetch(ALICE, topic).error_code == E.NONE  # alice asks from 10.0.0.7
    request = m.FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, session_epoch=-1,
        topics=[m.FetchRequest.FetchTopic(topic=topic, partitions=[m.FetchRequest.FetchPartition(partition=0)])],
    )  # fmt: skip
    elsewhere = stage.ask(ALICE, request, 12, host="10.0.0.8")  # v12: the last naming topics by name
    assert elsewhere.responses[0].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED


def test_metadata_of_every_topic_shows_only_what_may_be_described(stage: Stage, acls: Callable[..., None]) -> None:
    prefix = unique("shown")
    shown, hidden = f"{prefix}-a", unique("hidden")
    for name in (shown, hidden):
        stage.create_topic(name)
    acls(grant(TOPIC, prefix, Op.READ, pattern=PatternType.PREFIXED))  # Read implies Describe
    listed = {t.name for t in stage.ask(ALICE, m.MetadataRequest(topics=None)).topics}
    assert shown in listed and hidden not in listed
    assert {t.name for t in stage.ask(ADMIN, m.MetadataRequest(topics=None)).topics} >= {shown, hidden}


# --- the ACL APIs themselves -----------------------------------------------------------------------


def test_creations_that_cannot_be_stored_are_refused_one_by_one(stage: Stage) -> None:
    name = unique("checked")
    good = _some_acl(name)
    bad = [
        m.CreateAclsRequest.AclCreation(resource_type=4, resource_name="other-cluster", resource_pattern_type=3,
                                        principal="User:bob", host="*", operation=7, permission_type=3),
        m.CreateAclsRequest.AclCreation(resource_type=2, resource_name=name, resource_pattern_type=3,
                                        principal="bob", host="*", operation=3, permission_type=3),
        m.CreateAclsRequest.AclCreation(resource_type=2, resource_name=name, resource_pattern_type=2,
                                        principal="User:bob", host="*", operation=3, permission_type=3),
        m.CreateAclsRequest.AclCreation(resource_type=2, resource_name=name, resource_pattern_type=3,
                                        principal="User:bob", host="*", operation=1, permission_type=3),
        m.CreateAclsRequest.AclCreation(resource_type=2, resource_name="a/b", resource_pattern_type=3,
                                        principal="User:bob", host="*", operation=3, permission_type=3),
        m.CreateAclsRequest.AclCreation(resource_type=3, resource_name="..", resource_pattern_type=3,
                                        principal="User:bob", host="*", operation=3, permission_type=3),
    ]  # fmt: skip
    response = stage.ask(ADMIN, m.CreateAclsRequest(creations=[good, *bad]))
    assert [r.error_code for r in response.results] == [E.NONE] + [E.INVALID_REQUEST] * len(bad)
    assert all(r.error_message for r in response.results[1:])
    assert {a[1] for a in stage.acls()} & {name, "other-cluster", "a/b"} == {name}
    assert len([a for a in stage.acls() if a[1] == name]) == 1
    # Creating it again is no error and adds nothing.
    assert stage.ask(ADMIN, m.CreateAclsRequest(creations=[good])).results[0].error_code == E.NONE
    assert len([a for a in stage.acls() if a[1] == name]) == 1
    stage.ask(ADMIN, m.DeleteAclsRequest(filters=[m.DeleteAclsRequest.DeleteAclsFilter(**_acl_filter(name))]))


def test_delete_by_match_filter_and_describe_at_version_0(stage: Stage) -> None:
    prefix = unique("match")
    literal = grant(TOPIC, f"{prefix}-x", Op.READ, who="User:bob")
    prefixed = grant(TOPIC, prefix, Op.WRITE, who="User:bob", pattern=PatternType.PREFIXED)
    unrelated = grant(TOPIC, unique("unrelated"), Op.READ, who="User:bob")
    stage.add_acls([literal, prefixed, unrelated])
    # v0 knows no pattern types: it describes the LITERAL ones.
    v0 = stage.ask(ADMIN, m.DescribeAclsRequest(**{**_acl_filter(f"{prefix}-x"), "pattern_type_filter": 3}), 0)
    assert [(r.resource_name, len(r.acls)) for r in v0.resources] == [(f"{prefix}-x", 1)]
    # MATCH: every pattern that applies to a topic of this name.
    match = {**_acl_filter(f"{prefix}-x"), "pattern_type_filter": 2}
    described = stage.ask(ADMIN, m.DescribeAclsRequest(**match), 1)
    assert sorted((r.resource_name, r.pattern_type) for r in described.resources) == [(prefix, 4), (f"{prefix}-x", 3)]
    deleted = stage.ask(ADMIN, m.DeleteAclsRequest(filters=[m.DeleteAclsRequest.DeleteAclsFilter(**match)]), 1)
    matched = deleted.filter_results[0].matching_acls
    assert sorted((a.resource_name, a.pattern_type, a.operation) for a in matched) == [
        (prefix, 4, Op.WRITE), (f"{prefix}-x", 3, Op.READ)
    ]  # fmt: skip
    left = {a[1] for a in stage.acls()}
    assert unrelated.pattern.name in left and prefix not in left and f"{prefix}-x" not in left
    stage.remove_acls([unrelated])


def test_denials_are_counted_by_api_operation_and_resource_type(stage: Stage) -> None:
    broker = stage.broker.broker
    assert broker is not None
    counts = broker.authorizer.metrics.denied
    key = ("Produce", Op.WRITE, TOPIC)
    before = counts.get(key, 0)
    topic = unique("counted")
    stage.create_topic(topic)
    stage.produce(ALICE, {topic: batch(b"x")})
    assert counts.get(key, 0) == before + 1
    # A topic merely left out of an all-topics Metadata is not a denial.
    listed_before = sum(v for (api, _, _), v in counts.items() if api == "Metadata")
    stage.ask(ALICE, m.MetadataRequest(topics=None))
    assert sum(v for (api, _, _), v in counts.items() if api == "Metadata") == listed_before
    text = stage.broker.call(_scrape, broker)
    assert 'tributary_broker_authorization_denied_total{api="Produce",operation="Write",resource_type="Topic"}' in text


async def _scrape(broker: Any) -> str:
    return generate_latest(broker.metrics.registry).decode()


def test_without_an_authorizer_everything_is_allowed_and_the_acl_apis_say_so(
    zookeeper_server: ZooKeeperServer, tmp_path: Path
) -> None:
    with InProcessBroker(server_chroot(zookeeper_server, "open"), tmp_path / "data") as broker:
        stage = Stage(broker)
        stage.create_topic(ORDERS)  # alice may do anything: no authorizer
        assert stage.produce(ALICE, {ORDERS: batch(b"open")}) == {ORDERS: E.NONE}
        described = stage.ask(ALICE, m.DescribeAclsRequest(**_acl_filter(ORDERS)))
        assert (described.error_code, described.error_message) == (E.SECURITY_DISABLED, "no authorizer is configured")
        created = stage.ask(ALICE, m.CreateAclsRequest(creations=[_some_acl(ORDERS)]))
        assert [r.error_code for r in created.results] == [E.SECURITY_DISABLED]
        deleted = stage.ask(
            ALICE, m.DeleteAclsRequest(filters=[m.DeleteAclsRequest.DeleteAclsFilter(**_acl_filter(ORDERS))])
        )
        assert [r.error_code for r in deleted.filter_results] == [E.SECURITY_DISABLED]


def test_authorized_operations_as_metadata_and_describe_groups_report_them(
    stage: Stage, acls: Callable[..., None]
) -> None:
    acls(grant(TOPIC, ORDERS, Op.READ), grant(GROUP, BILLING, Op.DELETE), grant(CLUSTER, CLUSTER_NAME, Op.DESCRIBE))
    asked = m.MetadataRequest(
        topics=[m.MetadataRequest.MetadataRequestTopic(name=ORDERS)],
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True,
    )
    metadata = stage.ask(ALICE, asked, 10)  # v11+ no longer carry the Cluster's (DescribeCluster does)
    # Read implies Describe; Describe on the Cluster is all alice has there.
    assert metadata.topics[0].topic_authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)
    assert metadata.cluster_authorized_operations == 1 << Op.DESCRIBE
    assert stage.ask(ALICE, asked).topics[0].topic_authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)
    # Not asked for: Kafka's INT32_MIN.
    plain = stage.ask(ALICE, m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=ORDERS)]))
    assert plain.topics[0].topic_authorized_operations == plain.cluster_authorized_operations == -(2**31)
    group = stage.ask(ALICE, m.DescribeGroupsRequest(groups=[BILLING], include_authorized_operations=True)).groups[0]
    assert group.authorized_operations == (1 << Op.DELETE) | (1 << Op.DESCRIBE)
    admin = stage.ask(ADMIN, m.DescribeGroupsRequest(groups=[BILLING], include_authorized_operations=True)).groups[0]
    assert admin.authorized_operations == sum(1 << op for op in (Op.READ, Op.DESCRIBE, Op.DELETE))
