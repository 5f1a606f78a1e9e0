"""What the newest versions of each API add, on the wire, against a live three-broker cluster.

Topic ids (Metadata v10+/v12, Fetch v13+, CreateTopics v7, DeleteTopics v6) are the ones
ZooKeeper holds; Produce v0-v2 take v2 batches and refuse magic 0/1 message sets; Fetch v12
answers a diverging epoch, v12+/v16 and Produce v10 name the leader; ListOffsets v7-v10 know
MAX_TIMESTAMP, EARLIEST_LOCAL and LATEST_TIERED; DeleteRecords moves the log start on every
replica and a restart keeps it; DescribeCluster, DescribeProducers, OffsetFetch v8 and
FindCoordinator v4 batches, ListGroups v5 filters, DescribeConfigs of a broker, CreatePartitions
and CreateTopics with manual assignments, compression.type recompressing, DescribeLogDirs v4.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kazoo.client import KazooClient

from tests.broker.wire_helpers import batch, new_topic_name
from tests.fixtures.brokers import module_cluster
from tests.interop.wire import broker_by_id
from tributary.broker.cluster.model import topic_uuid
from tributary.broker.cluster.znodes import decode_topic
from tributary.broker.log.checkpoint import read_checkpoint
from tributary.protocol import messages as m
from tributary.protocol.compression import Compression
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.primitives import NULL_UUID
from tributary.protocol.records import iter_batches, iter_records
from tributary.protocol.supported import SUPPORTED_VERSIONS
from tributary.testing.cluster import BrokerProcess, Cluster, wait_for_leaders
from tributary.testing.polling import eventually
from tributary.testing.wire import WireConnection
from tributary.testing.zookeeper import ZooKeeperServer

SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "1",
    "replica.fetch.wait.max.ms": "100",
    "log.flush.interval.messages": "1",
}
T0 = 1_700_000_000_000
TIMEOUT = 30.0


@pytest.fixture(scope="module")
def cluster(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from module_cluster(zookeeper_server, tmp_path_factory.mktemp("protocol-levels"), SETTINGS)


@pytest.fixture(scope="module")
def zk(cluster: Cluster) -> Iterator[KazooClient]:
    client = KazooClient(hosts=cluster.brokers[0].zookeeper, timeout=5.0)
    client.start()
    yield client
    client.stop()
    client.close()


def ask(broker: BrokerProcess, body: Any, version: int) -> Any:
    with WireConnection(*broker.address, timeout=TIMEOUT) as conn:
        return conn.request(body, version)


def create(cluster: Cluster, partitions: int = 1, replication: int = 1, configs: dict[str, str] | None = None) -> Any:
    """Creates a topic with CreateTopics v7; its result row, once every broker names its leaders."""
    name = new_topic_name()
    topic = m.CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication,
        configs=[m.CreateTopicsRequest.CreatableTopicConfig(k, v) for k, v in (configs or {}).items()],
    )  # fmt: skip
    (result,) = ask(cluster.brokers[0], m.CreateTopicsRequest(topics=[topic], timeout_ms=15_000), 7).topics
    assert result.error_code == ErrorCode.NONE, result
    wait_for_leaders(cluster.brokers, name, partitions)
    return result


def leader_of(cluster: Cluster, topic: str, partition: int = 0) -> BrokerProcess:
    return broker_by_id(cluster, wait_for_leaders(cluster.brokers, topic, partition + 1)[partition])


def produce(broker: BrokerProcess, topic: str, records: bytes, version: int = 11, partition: int = 0) -> Any:
    request = m.ProduceRequest(
        acks=-1, timeout_ms=10_000,
        topic_data=[m.ProduceRequest.TopicProduceData(
            name=topic, partition_data=[m.ProduceRequest.PartitionProduceData(index=partition, records=records)]
        )],
    )  # fmt: skip
    response = ask(broker, request, version)
    (result,) = response.responses[0].partition_responses
    return result


def fetch(broker: BrokerProcess, topic: str, offset: int, version: int, **partition: Any) -> Any:
    """The whole FetchResponse of one partition, named by id from v13."""
    ident = topic_id_of(broker, topic) if version >= 13 else NULL_UUID
    request = m.FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
        topics=[m.FetchRequest.FetchTopic(
            topic=topic, topic_id=ident,
            partitions=[m.FetchRequest.FetchPartition(
                partition=partition.pop("index", 0), fetch_offset=offset, partition_max_bytes=1 << 20, **partition
            )],
        )],
    )  # fmt: skip
    return ask(broker, request, version)


def metadata_request(*names: str) -> m.MetadataRequest:
    return m.MetadataRequest(
        topics=[m.MetadataRequest.MetadataRequestTopic(name=n) for n in names], allow_auto_topic_creation=False
    )


def topic_id_of(broker: BrokerProcess, topic: str) -> uuid.UUID:
    (found,) = ask(broker, metadata_request(topic), 12).topics
    assert found.error_code == ErrorCode.NONE
    return found.topic_id  # type: ignore[no-any-return]


def values_of(data: bytes) -> list[bytes | None]:
    return [r.value for pos, _ in iter_batches(data) for r in iter_records(data, pos)]


# --- topic ids -------------------------------------------------------------------------------------


def test_every_broker_names_a_topic_by_the_id_zookeeper_holds(cluster: Cluster, zk: KazooClient) -> None:
    created = create(cluster, partitions=2)
    stored, _ = decode_topic(zk.get(f"/brokers/topics/{created.name}")[0])
    assert created.topic_id == topic_uuid(stored) != NULL_UUID  # CreateTopics v7
    for broker in cluster.brokers:
        for version in (10, 11, 12):
            (found,) = ask(broker, metadata_request(created.name), version).topics
            assert (found.name, found.topic_id) == (created.name, created.topic_id)
    # v12: by id alone; an id nobody knows is UNKNOWN_TOPIC_ID.
    by_id = m.MetadataRequest(
        topics=[m.MetadataRequest.MetadataRequestTopic(topic_id=created.topic_id, name=None),
                m.MetadataRequest.MetadataRequestTopic(topic_id=uuid.uuid4(), name=None)],
        allow_auto_topic_creation=False,
    )  # fmt: skip
    known, unknown = ask(cluster.brokers[1], by_id, 12).topics
    assert (known.name, known.topic_id, len(known.partitions)) == (created.name, created.topic_id, 2)
    assert (unknown.name, unknown.error_code) == (None, ErrorCode.UNKNOWN_TOPIC_ID)
    # A full listing carries the ids too (v9 is the first flexible version, without them).
    listing = ask(cluster.brokers[2], m.MetadataRequest(topics=None), 12).topics
    assert {t.name: t.topic_id for t in listing}[created.name] == created.topic_id
    assert all(t.topic_id == NULL_UUID for t in ask(cluster.brokers[2], m.MetadataRequest(topics=None), 9).topics)


def test_fetch_v13_and_later_name_topics_by_id(cluster: Cluster) -> None:
    created = create(cluster)
    leader = leader_of(cluster, created.name)
    assert produce(leader, created.name, batch(b"a", b"b")).error_code == ErrorCode.NONE
    for version in (12, 13, 15, 16, 17):
        response = fetch(leader, created.name, 0, version)
        (topic,) = response.responses
        assert topic.topic_id == (created.topic_id if version >= 13 else NULL_UUID)
        (data,) = topic.partitions
        assert (data.error_code, data.high_watermark) == (ErrorCode.NONE, 2)
        assert values_of(bytes(data.records)) == [b"a", b"b"]
    # An id nobody knows.
    request = m.FetchRequest(
        max_wait_ms=0, topics=[m.FetchRequest.FetchTopic(topic_id=uuid.uuid4(), partitions=[
            m.FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024)])],
    )  # fmt: skip
    (topic,) = ask(leader, request, 13).responses
    assert topic.partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_delete_topics_v6_by_id(cluster: Cluster) -> None:
    created = create(cluster)
    request = m.DeleteTopicsRequest(
        topics=[m.DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=created.topic_id),
                m.DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=uuid.uuid4()),
                m.DeleteTopicsRequest.DeleteTopicState(name="both", topic_id=uuid.uuid4())],
        timeout_ms=15_000,
    )  # fmt: skip
    deleted, unknown, both = ask(cluster.brokers[0], request, 6).responses
    assert (deleted.name, deleted.topic_id, deleted.error_code) == (created.name, created.topic_id, ErrorCode.NONE)
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_ID
    assert both.error_code == ErrorCode.INVALID_REQUEST
    (gone,) = ask(cluster.brokers[0], metadata_request(created.name), 12).topics
    assert gone.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# --- produce and fetch ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_take_v2_batches_and_refuse_legacy_message_sets(cluster: Cluster, version: int) -> None:
    created = create(cluster)
    leader = leader_of(cluster, created.name)
    for magic in (0, 1):
        builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
        builder.append(0, T0 if magic else None, b"k", b"legacy")
        refused = produce(leader, created.name, bytes(builder.build()), version)
        assert (refused.error_code, refused.base_offset) == (ErrorCode.INVALID_RECORD, -1)
    accepted = produce(leader, created.name, batch(b"x", b"y", compression=Compression.GZIP), version)
    assert (accepted.error_code, accepted.base_offset) == (ErrorCode.NONE, 0)
    data = fetch(leader, created.name, 0, 11).responses[0].partitions[0]
    assert values_of(bytes(data.records)) == [b"x", b"y"]  # nothing of the refused sets


def test_a_broker_that_is_not_the_leader_names_it(cluster: Cluster) -> None:
    created = create(cluster)
    leader = leader_of(cluster, created.name)
    other = next(b for b in cluster.brokers if b is not leader)
    refused = produce(other, created.name, batch(b"x"), 10)
    assert refused.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert refused.current_leader.leader_id == leader.broker_id
    response = fetch(other, created.name, 0, 16)
    data = response.responses[0].partitions[0]
    assert data.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert data.current_leader.leader_id == leader.broker_id
    (endpoint,) = response.node_endpoints
    assert (endpoint.node_id, endpoint.host, endpoint.port) == (leader.broker_id, *leader.address)
    assert produce(other, created.name, batch(b"x"), 9).current_leader.leader_id == -1  # not in v9


def test_fetch_v12_checks_the_last_fetched_epoch(cluster: Cluster) -> None:
    created = create(cluster)
    leader = leader_of(cluster, created.name)
    produce(leader, created.name, batch(b"a", b"b", b"c"))
    # The fetcher holds an epoch this log never had: it diverges, so no records (Kafka answers
    # the divergence as epoch -1 at -1, its default, which the tagged field leaves out).
    data = fetch(leader, created.name, 3, 12, last_fetched_epoch=5).responses[0].partitions[0]
    assert (data.error_code, data.high_watermark) == (ErrorCode.NONE, 3)
    assert not data.records
    # Its epoch 0 and offset agree with the log: records, no divergence.
    data = fetch(leader, created.name, 1, 12, last_fetched_epoch=0).responses[0].partitions[0]
    assert data.diverging_epoch.epoch == -1
    assert values_of(bytes(data.records))[-1] == b"c"
    # Before v12 there is no such field: the same fetch reads on.
    assert fetch(leader, created.name, 3, 11).responses[0].partitions[0].error_code == ErrorCode.NONE


# --- ListOffsets ------------------------------------------------------------------------------------


def list_offsets(broker: BrokerProcess, topic: str, timestamp: int, version: int) -> Any:
    request = m.ListOffsetsRequest(
        replica_id=-1,
        topics=[m.ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            m.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])],
        timeout_ms=5000,
    )  # fmt: skip
    (result,) = ask(broker, request, version).topics[0].partitions
    assert result.error_code == ErrorCode.NONE, result
    return result


def test_list_offsets_v7_to_v10(cluster: Cluster) -> None:
    created = create(cluster)
    leader = leader_of(cluster, created.name)
    produce(leader, created.name, batch(b"a", b"b", timestamp=T0 + 100))  # stamped T0+100 each
    produce(leader, created.name, batch(b"c", timestamp=T0 + 900))
    produce(leader, created.name, batch(b"d", b"e", timestamp=T0 + 50))
    for version in (7, 8, 9, 10):
        newest = list_offsets(leader, created.name, -3, version)  # MAX_TIMESTAMP (KIP-734)
        assert (newest.offset, newest.timestamp) == (2, T0 + 900)
    assert list_offsets(leader, created.name, -4, 8).offset == 0  # EARLIEST_LOCAL
    tiered = list_offsets(leader, created.name, -5, 9)  # LATEST_TIERED: no tiered storage here
    assert (tiered.offset, tiered.leader_epoch) == (-1, -1)
    assert list_offsets(leader, created.name, -1, 10).offset == 5
    assert list_offsets(leader, created.name, T0 + 200, 10).offset == 2


# --- DeleteRecords -----------------------------------------------------------------------------------


def delete_records(broker: BrokerProcess, topic: str, offset: int, version: int = 2) -> Any:
    partition = m.DeleteRecordsRequest.DeleteRecordsPartition(0, offset)
    request = m.DeleteRecordsRequest(
        topics=[m.DeleteRecordsRequest.DeleteRecordsTopic(topic, [partition])], timeout_ms=15_000
    )
    (result,) = ask(broker, request, version).topics[0].partitions
    return result


def test_delete_records_moves_the_start_on_every_replica_and_a_restart_keeps_it(cluster: Cluster) -> None:
    created = create(cluster, replication=3)
    leader = leader_of(cluster, created.name)
    for i in range(10):
        assert produce(leader, created.name, batch(b"%d" % i)).error_code == ErrorCode.NONE
    other = next(b for b in cluster.brokers if b is not leader)
    assert delete_records(other, created.name, 4).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert delete_records(leader, created.name, 11).error_code == ErrorCode.OFFSET_OUT_OF_RANGE  # past the HW

    done = delete_records(leader, created.name, 4, version=0)
    # Answered once every live replica dropped them: the low watermark is the new start.
    assert (done.error_code, done.low_watermark) == (ErrorCode.NONE, 4)
    below = fetch(leader, created.name, 3, 11).responses[0].partitions[0]
    assert (below.error_code, below.log_start_offset) == (ErrorCode.OFFSET_OUT_OF_RANGE, 4)
    data = fetch(leader, created.name, 4, 11).responses[0].partitions[0]
    assert (data.log_start_offset, values_of(bytes(data.records))[0]) == (4, b"4")
    assert list_offsets(leader, created.name, -2, 5).offset == 4
    assert list_offsets(leader, created.name, -4, 8).offset == 4
    # Each replica's checkpoint holds it (the leader's before it answered).
    for broker in cluster.brokers:
        eventually(
            lambda b=broker: (
                read_checkpoint(Path(b.data_dir) / "log-start-offset-checkpoint").get((created.name, 0)) == 4
            ),
            TIMEOUT,
            f"broker {broker.broker_id}'s log-start-offset-checkpoint to say 4",
        )
    assert delete_records(leader, created.name, -1).low_watermark == 10  # -1: the high watermark
    compacted = create(cluster, configs={"cleanup.policy": "compact"})
    refused = delete_records(leader_of(cluster, compacted.name), compacted.name, -1)
    assert refused.error_code == ErrorCode.POLICY_VIOLATION  # Kafka's rule for compact-only topics

    leader.stop()
    leader.start()
    leader.wait_ready(expected_brokers=3)
    new_leader = leader_of(cluster, created.name)
    assert list_offsets(new_leader, created.name, -2, 5).offset == 10
    restarted_start = eventually(
        lambda: read_checkpoint(Path(leader.data_dir) / "log-start-offset-checkpoint").get((created.name, 0)),
        TIMEOUT,
        "the restarted broker's checkpoint",
    )
    assert restarted_start == 10


# --- cluster, producers, groups ------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
def test_describe_cluster(cluster: Cluster, version: int) -> None:
    response = ask(cluster.brokers[1], m.DescribeClusterRequest(), version)
    assert response.error_code == ErrorCode.NONE
    assert sorted((b.broker_id, b.host, b.port) for b in response.brokers) == sorted(
        (b.broker_id, *b.address) for b in cluster.brokers
    )
    metadata = ask(cluster.brokers[1], m.MetadataRequest(topics=[]), 12)
    assert (response.cluster_id, response.controller_id) == (metadata.cluster_id, metadata.controller_id)
    if version == 1:
        controllers = ask(cluster.brokers[1], m.DescribeClusterRequest(endpoint_type=2), 1)
        assert controllers.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE


def test_describe_producers_lists_the_idempotent_producers_of_a_partition(cluster: Cluster) -> None:
    created = create(cluster)
    leader = leader_of(cluster, created.name)
    init = ask(leader, m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1), 5)
    assert init.error_code == ErrorCode.NONE
    pid, epoch = init.producer_id, init.producer_epoch
    produce(leader, created.name, batch(b"a", b"b", producer_id=pid, producer_epoch=epoch, base_sequence=0,
                                        timestamp=T0))  # fmt: skip
    produce(leader, created.name, batch(b"c", producer_id=pid, producer_epoch=epoch, base_sequence=2, timestamp=T0 + 7))
    produce(leader, created.name, batch(b"plain"))  # not idempotent: not a producer here
    request = m.DescribeProducersRequest(topics=[m.DescribeProducersRequest.TopicRequest(created.name, [0, 5])])
    (topic,) = ask(leader, request, 0).topics
    found, missing = topic.partitions
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    (state,) = found.active_producers
    assert (state.producer_id, state.producer_epoch, state.last_sequence, state.last_timestamp) == (
        pid, epoch, 2, T0 + 7,
    )  # fmt: skip
    assert (state.coordinator_epoch, state.current_txn_start_offset) == (-1, -1)
    other = next(b for b in cluster.brokers if b is not leader)
    assert ask(other, request, 0).topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_describe_producers_shows_an_open_transaction(cluster: Cluster) -> None:
    created = create(cluster, replication=3)
    leader = leader_of(cluster, created.name)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": f"tx-{created.name}"})
    producer.init_transactions(TIMEOUT)
    producer.begin_transaction()
    producer.produce(created.name, value=b"in-a-transaction", partition=0)
    assert producer.flush(TIMEOUT) == 0
    request = m.DescribeProducersRequest(topics=[m.DescribeProducersRequest.TopicRequest(created.name, [0])])

    (state,) = ask(leader, request, 0).topics[0].partitions[0].active_producers
    assert (state.current_txn_start_offset, state.coordinator_epoch) == (0, -1)  # open, no marker yet
    producer.commit_transaction(TIMEOUT)

    def decided() -> Any:
        (after,) = ask(leader, request, 0).topics[0].partitions[0].active_producers
        return after if after.current_txn_start_offset == -1 else None

    after = eventually(decided, TIMEOUT, "the commit marker")
    assert after.producer_id == state.producer_id and after.coordinator_epoch >= 0


def test_group_apis_batch_and_filter(cluster: Cluster) -> None:
    created = create(cluster)
    group = f"g-{uuid.uuid4().hex[:8]}"
    commit = m.OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="",
        topics=[m.OffsetCommitRequest.OffsetCommitRequestTopic(created.name, [
            m.OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=42)])],
    )  # fmt: skip

    def committed() -> Any:
        # As a client does: find the coordinator, commit, and on NOT_COORDINATOR (the named
        # broker has not yet applied its leadership of the offsets partition from ZooKeeper)
        # or COORDINATOR_LOAD_IN_PROGRESS find it again.
        find = ask(cluster.brokers[0], m.FindCoordinatorRequest(key_type=0, coordinator_keys=[group, "other"]), 4)
        assert [c.key for c in find.coordinators] == [group, "other"]
        if any(c.error_code != ErrorCode.NONE for c in find.coordinators):
            assert {c.error_code for c in find.coordinators} <= {ErrorCode.NONE, ErrorCode.COORDINATOR_NOT_AVAILABLE}
            return None
        coordinator = broker_by_id(cluster, find.coordinators[0].node_id)
        code = ask(coordinator, commit, 9).topics[0].partitions[0].error_code
        if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            return None
        assert code == ErrorCode.NONE
        return coordinator

    coordinator = eventually(committed, TIMEOUT, "an offset commit at the group's coordinator")
    fetch_offsets = m.OffsetFetchRequest(groups=[
        m.OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=None),
        m.OffsetFetchRequest.OffsetFetchRequestGroup(group_id=f"{group}-none", topics=[
            m.OffsetFetchRequest.OffsetFetchRequestTopics(created.name, [0])]),
    ])  # fmt: skip
    answered = {g.group_id: g for g in ask(coordinator, fetch_offsets, 8).groups}
    ours = answered[group]
    assert ours.error_code == ErrorCode.NONE
    assert [(t.name, p.committed_offset) for t in ours.topics for p in t.partitions] == [(created.name, 42)]
    # A group coordinated elsewhere is answered on its own, never failing the others.
    assert answered[f"{group}-none"].error_code in (ErrorCode.NONE, ErrorCode.NOT_COORDINATOR)
    listed = ask(coordinator, m.ListGroupsRequest(states_filter=["empty"], types_filter=["Classic"]), 5).groups
    assert group in {g.group_id for g in listed}
    assert {g.group_type for g in listed} == {"classic"}
    assert ask(coordinator, m.ListGroupsRequest(types_filter=["consumer"]), 5).groups == []
    assert ask(coordinator, m.ListGroupsRequest(states_filter=["Stable"]), 4).groups == []


# --- configs, assignments, compression, log dirs --------------------------------------------------


def test_describe_configs_of_a_broker_is_its_whole_configuration(cluster: Cluster) -> None:
    broker = cluster.brokers[1]
    request = m.DescribeConfigsRequest(
        resources=[m.DescribeConfigsRequest.DescribeConfigsResource(4, str(broker.broker_id), None)],
        include_synonyms=True,
    )
    (result,) = ask(broker, request, 4).results
    assert result.error_code == ErrorCode.NONE
    configs = {c.name: c for c in result.configs}
    host, port = broker.address
    assert configs["listeners"].value == f"PLAINTEXT://{host}:{port}"
    assert configs["advertised.listeners"].value == f"PLAINTEXT://{host}:{port}"
    assert configs["log.dirs"].value == str(broker.data_dir)
    assert configs["broker.id"].value == str(broker.broker_id)
    # Set in its file: a static broker config; left alone: the default.
    assert (configs["offsets.topic.num.partitions"].value, configs["offsets.topic.num.partitions"].config_source) == (
        "3", 4,
    )  # fmt: skip
    assert configs["max.connections"].config_source == 5
    assert configs["compression.type"].value == "producer"
    assert all(c.read_only for c in result.configs)
    # Password-like settings are sensitive, their values never sent.
    assert [(c.name, c.value) for c in result.configs if c.is_sensitive] == [("sasl.inter.broker.password", None)]


def test_create_partitions_and_create_topics_with_manual_assignments(cluster: Cluster) -> None:
    created = create(cluster, partitions=1, replication=2)
    grow = m.CreatePartitionsRequest(
        topics=[m.CreatePartitionsRequest.CreatePartitionsTopic(created.name, 3, [
            m.CreatePartitionsRequest.CreatePartitionsAssignment([3, 1]),
            m.CreatePartitionsRequest.CreatePartitionsAssignment([2, 77])])],
        timeout_ms=15_000,
    )  # fmt: skip
    (refused,) = ask(cluster.brokers[0], grow, 3).results
    assert refused.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "77" in refused.error_message
    grow.topics[0].assignments[1].broker_ids = [2, 3]  # type: ignore[index]
    (done,) = ask(cluster.brokers[0], grow, 3).results
    assert done.error_code == ErrorCode.NONE, done
    # The answer waits for the receiving broker's own view (as Kafka's does): another broker's
    # metadata follows ZooKeeper a moment later.
    described = eventually(
        lambda: t if len((t := ask(cluster.brokers[2], metadata_request(created.name), 12).topics[0]).partitions) == 3
        else None,
        TIMEOUT,
        "broker 3 to see the new partitions",
    )  # fmt: skip
    assert {p.partition_index: p.replica_nodes for p in described.partitions} == {
        0: described.partitions[0].replica_nodes, 1: [3, 1], 2: [2, 3],
    }  # fmt: skip
    wrong_factor = m.CreatePartitionsRequest(
        topics=[m.CreatePartitionsRequest.CreatePartitionsTopic(created.name, 4, [
            m.CreatePartitionsRequest.CreatePartitionsAssignment([1])])],
        timeout_ms=15_000,
    )  # fmt: skip
    assert ask(cluster.brokers[0], wrong_factor, 3).results[0].error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT

    manual = m.CreateTopicsRequest.CreatableTopic(
        name=new_topic_name(), num_partitions=-1, replication_factor=-1,
        assignments=[m.CreateTopicsRequest.CreatableReplicaAssignment(0, [1, 99])],
    )  # fmt: skip
    (unknown,) = ask(cluster.brokers[0], m.CreateTopicsRequest(topics=[manual], timeout_ms=15_000), 7).topics
    assert unknown.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "99" in unknown.error_message


def test_a_topic_with_a_codec_stores_every_batch_in_it(cluster: Cluster) -> None:
    created = create(cluster, configs={"compression.type": "gzip"})
    assert {c.name: c.value for c in created.configs}["compression.type"] == "gzip"  # CreateTopics v5+
    leader = leader_of(cluster, created.name)
    for codec in (Compression.ZSTD, Compression.NONE, Compression.GZIP):
        assert produce(leader, created.name, batch(b"v-%d" % codec, compression=codec)).error_code == 0
    data = bytes(fetch(leader, created.name, 0, 11).responses[0].partitions[0].records)
    assert [h.compression for _, h in iter_batches(data)] == [Compression.GZIP] * 3
    assert values_of(data) == [b"v-4", b"v-0", b"v-1"]


def test_describe_log_dirs_v4_reports_the_space_of_the_file_system(cluster: Cluster) -> None:
    (result,) = ask(cluster.brokers[0], m.DescribeLogDirsRequest(topics=None), 4).results
    assert result.error_code == ErrorCode.NONE
    assert 0 < result.usable_bytes <= result.total_bytes


def test_the_broker_advertises_every_api_at_its_newest_version(cluster: Cluster) -> None:
    response = ask(cluster.brokers[0], m.ApiVersionsRequest(client_software_name="t", client_software_version="1"), 4)
    advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert advertised == {int(k): (v.lo, v.hi) for k, v in SUPPORTED_VERSIONS.items()}
    assert advertised[m.ApiKey.PRODUCE] == (0, 11)
    assert advertised[m.ApiKey.FETCH] == (4, 17)
    assert advertised[m.ApiKey.DELETE_RECORDS] == (0, 2)
