"""Cross-check the codec against kafka-python 3.x, an independent implementation.

kafka-python 3 builds its messages from its own copy of Kafka's JSON
definitions (a newer Kafka release than ours) with its own encoder and
decoder. For each (message, version) below a realistic value is built,
converted field by field into kafka-python's classes, and then:

* both libraries encode it to the same bytes;
* our decoder reads kafka-python's bytes back to the value;
* kafka-python's decoder reads our bytes back to the value;
* whole frames (length, header, body) cross over in both directions.

A handful of tests at the end build kafka-python objects directly, without the
converter, and assert field values one by one.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import kafka.protocol.admin as kp_admin
import kafka.protocol.consumer as kp_consumer
import kafka.protocol.metadata as kp_metadata
import kafka.protocol.producer as kp_producer

# kafka-python 3.0.12 loads its JSON definitions with importlib.resources.read_text,
# deprecated in Python 3.11; pytest turns that warning into an error.
import kafka.protocol.sasl as kp_sasl
import pytest
from kafka.protocol.schemas.fields.codecs import BitField

from tributary.protocol import codec, headers
from tributary.protocol.framing import FrameDecoder
from tributary.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    ApiKey,
    ApiVersionsRequest,
    ApiVersionsResponse,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    EndTxnRequest,
    EndTxnResponse,
    FetchRequest,
    FetchResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
    MetadataRequest,
    MetadataResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    ProduceRequest,
    ProduceResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
    SyncGroupRequest,
    SyncGroupResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from tributary.protocol.primitives import NULL_UUID
from tributary.protocol.schema import Struct

# kafka-python's message classes by name (they share ours).
KP: dict[str, Any] = {
    name: getattr(module, name)
    for module in (kp_admin, kp_consumer, kp_metadata, kp_producer, kp_sasl)
    for name in module.__all__
}

NO_AUTHORIZED_OPERATIONS = -(2**31)  # Kafka's INT32_MIN default: "not requested"
TOPIC_ID = uuid.UUID("9d1c5b36-3a0b-4a4e-9a5e-6f0b2f1c7d11")


# --- value conversion between our dataclasses and kafka-python's containers ---


# kafka-python's MetadataResponse renames these two (and reads them as bit sets) in a json_patch.
KP_NAMES = {
    "topic_authorized_operations": "authorized_operations",
    "cluster_authorized_operations": "authorized_operations",
}


def _bits_to_kp(value: int) -> set[int] | None:
    bits = {i for i in range(32) if (value & 0xFFFFFFFF) >> i & 1}
    return None if bits == {31} else bits


def _bits_from_kp(bits: set[int] | None) -> int:
    raw = sum(1 << i for i in ({31} if bits is None else bits))
    return raw - (1 << 32) if raw & (1 << 31) else raw


def to_kp(obj: Any, struct: Struct, kp_cls: Any, version: int) -> Any:
    """Our value as a kafka-python container, copying the fields present at ``version``."""
    kwargs: dict[str, Any] = {}
    for f in struct.fields:
        if version not in f.versions:
            continue
        name = KP_NAMES.get(f.attr, f.attr)
        kp_field = kp_cls.fields[name]  # a KeyError here is a naming mismatch
        value = getattr(obj, f.attr)
        if f.struct is not None and value is not None:
            sub = kp_field.data_class
            if f.is_array:
                value = [to_kp(item, f.struct, sub, version) for item in value]
            elif version in f.tagged and value == f.struct.cls():
                value = None  # kafka-python omits a tagged struct only when it is None
            else:
                value = to_kp(value, f.struct, sub, version)
        elif getattr(kp_field, "_type", None) is BitField:
            value = _bits_to_kp(value)
        kwargs[name] = value
    return kp_cls(version=version, **kwargs)


def from_kp(kp_obj: Any, struct: Struct, version: int) -> Any:
    """A kafka-python container as our value, reading the fields present at ``version``."""
    values: dict[str, Any] = {}
    for f in struct.fields:
        if version not in f.versions:
            continue
        name = KP_NAMES.get(f.attr, f.attr)
        value = getattr(kp_obj, name)
        kp_field = type(kp_obj).fields[name]
        if f.struct is not None:
            if value is None:
                value = None if version in f.nullable else f.struct.cls()
            elif f.is_array:
                value = [from_kp(item, f.struct, version) for item in value]
            else:
                value = from_kp(value, f.struct, version)
        elif getattr(kp_field, "_type", None) is BitField:
            value = _bits_from_kp(value)
        elif f.type == "uuid" and value is None:
            value = NULL_UUID
        elif isinstance(value, memoryview | bytearray):
            value = bytes(value)
        values[f.attr] = value
    return struct.cls(**values)


def project(obj: Any, struct: Struct, version: int) -> Any:
    """``obj`` as it reads back at ``version``: absent fields hold their defaults."""
    values: dict[str, Any] = {}
    for f in struct.fields:
        if version not in f.versions:
            continue
        value = getattr(obj, f.attr)
        if value is None:
            assert version in f.nullable, f"builder bug: {f.attr} is not nullable at v{version}"
        elif f.struct is not None:
            value = (
                [project(item, f.struct, version) for item in value]
                if f.is_array
                else project(value, f.struct, version)
            )
        values[f.attr] = value
    return struct.cls(**values)


# --- realistic values, one builder per message ---

Builder = Callable[[int], Any]
BUILDERS: dict[type, Builder] = {}


def builds(cls: type) -> Callable[[Builder], Builder]:
    def register(fn: Builder) -> Builder:
        BUILDERS[cls] = fn
        return fn

    return register


# Opaque to both codecs; a real producer would send a record batch.
RECORDS = bytes.fromhex("0000000000000000000000460000000002c7d2f1d500000000000000000191f0e4a5c0") + b"\x01" * 40


@builds(ApiVersionsRequest)
def _(v: int) -> Any:
    return ApiVersionsRequest(client_software_name="tributary-tests", client_software_version="0.1.0")


@builds(ApiVersionsResponse)
def _(v: int) -> Any:
    r = ApiVersionsResponse
    return r(
        error_code=0,
        api_keys=[
            r.ApiVersion(api_key=0, min_version=3, max_version=8),
            r.ApiVersion(api_key=3, min_version=0, max_version=8),
            r.ApiVersion(api_key=18, min_version=0, max_version=3),
        ],
        throttle_time_ms=25,
        supported_features=[r.SupportedFeatureKey(name="metadata.version", min_version=1, max_version=14)],
        finalized_features_epoch=42,
        finalized_features=[r.FinalizedFeatureKey(name="metadata.version", max_version_level=14, min_version_level=1)],
        zk_migration_ready=True,
    )


@builds(MetadataRequest)
def _(v: int) -> Any:
    r = MetadataRequest
    topics = None if v in (1, 9) else [r.MetadataRequestTopic(name="clicks"), r.MetadataRequestTopic(name="views")]
    return r(
        topics=topics,
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True,
    )


@builds(MetadataResponse)
def _(v: int) -> Any:
    r = MetadataResponse
    return r(
        throttle_time_ms=7,
        brokers=[
            r.MetadataResponseBroker(node_id=1, host="broker-1.dc1", port=9092, rack="rack-a"),
            r.MetadataResponseBroker(node_id=2, host="broker-2.dc1", port=9093, rack=None),
        ],
        cluster_id="tQ2bS9rjSHqfHCFNbiVy7A",
        controller_id=2,
        topics=[
            r.MetadataResponseTopic(
                error_code=0,
                name="clicks",
                topic_id=TOPIC_ID,
                is_internal=False,
                partitions=[
                    r.MetadataResponsePartition(
                        error_code=0,
                        partition_index=0,
                        leader_id=1,
                        leader_epoch=5,
                        replica_nodes=[1, 2],
                        isr_nodes=[1, 2],
                        offline_replicas=[],
                    ),
                    r.MetadataResponsePartition(
                        error_code=9,  # REPLICA_NOT_AVAILABLE
                        partition_index=1,
                        leader_id=2,
                        leader_epoch=3,
                        replica_nodes=[2, 1],
                        isr_nodes=[2],
                        offline_replicas=[1],
                    ),
                ],
                topic_authorized_operations=0b1111_1000,
            ),
            r.MetadataResponseTopic(
                error_code=3,  # UNKNOWN_TOPIC_OR_PARTITION
                name=None if v >= 12 else "missing",
                is_internal=False,
                partitions=[],
                topic_authorized_operations=NO_AUTHORIZED_OPERATIONS,
            ),
        ],
        cluster_authorized_operations=0b1100,
    )


@builds(ProduceRequest)
def _(v: int) -> Any:
    r = ProduceRequest
    return r(
        transactional_id="payments-tx-1" if v >= 7 else None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            r.TopicProduceData(
                name="clicks",
                partition_data=[
                    r.PartitionProduceData(index=0, records=RECORDS),
                    r.PartitionProduceData(index=3, records=None),
                ],
            ),
            r.TopicProduceData(name="views", partition_data=[r.PartitionProduceData(index=1, records=RECORDS[:61])]),
        ],
    )


@builds(ProduceResponse)
def _(v: int) -> Any:
    r = ProduceResponse
    return r(
        responses=[
            r.TopicProduceResponse(
                name="clicks",
                partition_responses=[
                    r.PartitionProduceResponse(
                        index=0,
                        error_code=0,
                        base_offset=1_234_567,
                        log_append_time_ms=1_700_000_000_123,
                        log_start_offset=1000,
                        record_errors=[],
                        error_message=None,
                        current_leader=r.LeaderIdAndEpoch(leader_id=2, leader_epoch=9),
                    ),
                    r.PartitionProduceResponse(
                        index=3,
                        error_code=87,  # INVALID_RECORD
                        base_offset=-1,
                        log_append_time_ms=-1,
                        log_start_offset=-1,
                        record_errors=[
                            r.BatchIndexAndErrorMessage(batch_index=2, batch_index_error_message="null key"),
                            r.BatchIndexAndErrorMessage(batch_index=5, batch_index_error_message=None),
                        ],
                        error_message="compacted topic needs keys",
                    ),
                ],
            )
        ],
        throttle_time_ms=10,
        node_endpoints=[r.NodeEndpoint(node_id=2, host="broker-2.dc1", port=9093, rack="rack-b")],
    )


@builds(FetchRequest)
def _(v: int) -> Any:
    r = FetchRequest
    return r(
        cluster_id="tQ2bS9rjSHqfHCFNbiVy7A" if v >= 12 else None,
        replica_id=-1,
        # v15+: the replica id moved into a tagged struct (a follower's fetch here).
        replica_state=r.ReplicaState(replica_id=3, replica_epoch=17),
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=52_428_800,
        isolation_level=1,
        session_id=77,
        session_epoch=4,
        topics=[
            r.FetchTopic(
                topic="clicks",
                topic_id=TOPIC_ID,
                partitions=[
                    r.FetchPartition(
                        partition=0,
                        current_leader_epoch=5,
                        fetch_offset=1_234_567,
                        last_fetched_epoch=4,
                        log_start_offset=-1,
                        partition_max_bytes=1_048_576,
                        # kafka-python writes this tagged field even at its default (Kafka leaves it
                        # out), so the byte comparison gives it a value.
                        replica_directory_id=uuid.UUID(int=0xD1),
                    ),
                    r.FetchPartition(
                        partition=2,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        partition_max_bytes=65536,
                        replica_directory_id=uuid.UUID(int=0xD2),
                    ),
                ],
            )
        ],
        forgotten_topics_data=[r.ForgottenTopic(topic="views", partitions=[0, 1, 7])],
        rack_id="rack-a",
    )


@builds(FetchResponse)
def _(v: int) -> Any:
    r = FetchResponse
    return r(
        throttle_time_ms=3,
        error_code=0,
        session_id=77,
        responses=[
            r.FetchableTopicResponse(
                topic="clicks",
                partitions=[
                    r.PartitionData(
                        partition_index=0,
                        error_code=0,
                        high_watermark=1_234_600,
                        last_stable_offset=1_234_590,
                        log_start_offset=1000,
                        current_leader=r.LeaderIdAndEpoch(leader_id=1, leader_epoch=5),
                        aborted_transactions=[r.AbortedTransaction(producer_id=4001, first_offset=1_234_570)],
                        preferred_read_replica=2,
                        records=RECORDS,
                    ),
                    r.PartitionData(
                        partition_index=2,
                        error_code=74,  # FENCED_LEADER_EPOCH
                        high_watermark=-1,
                        diverging_epoch=r.EpochEndOffset(epoch=4, end_offset=999),
                        aborted_transactions=None,
                        records=None,
                    ),
                ],
            )
        ],
    )


@builds(ListOffsetsRequest)
def _(v: int) -> Any:
    r = ListOffsetsRequest
    return r(
        replica_id=-1,
        isolation_level=1,
        topics=[
            r.ListOffsetsTopic(
                name="clicks",
                partitions=[
                    r.ListOffsetsPartition(partition_index=0, current_leader_epoch=5, timestamp=-1),
                    r.ListOffsetsPartition(partition_index=1, current_leader_epoch=-1, timestamp=1_700_000_000_000),
                ],
            )
        ],
    )


@builds(ListOffsetsResponse)
def _(v: int) -> Any:
    r = ListOffsetsResponse
    return r(
        throttle_time_ms=1,
        topics=[
            r.ListOffsetsTopicResponse(
                name="clicks",
                partitions=[
                    r.ListOffsetsPartitionResponse(
                        partition_index=0, error_code=0, timestamp=-1, offset=1_234_600, leader_epoch=5
                    ),
                    r.ListOffsetsPartitionResponse(
                        partition_index=1, error_code=6, timestamp=-1, offset=-1, leader_epoch=-1
                    ),
                ],
            )
        ],
    )


@builds(FindCoordinatorRequest)
def _(v: int) -> Any:
    return FindCoordinatorRequest(key="orders-consumer", key_type=0)


@builds(FindCoordinatorResponse)
def _(v: int) -> Any:
    r = FindCoordinatorResponse
    return r(
        throttle_time_ms=4,
        error_code=0,
        error_message=None,
        node_id=2,
        host="broker-2.dc1",
        port=9093,
        coordinators=[
            r.Coordinator(key="orders-consumer", node_id=2, host="broker-2.dc1", port=9093),
            r.Coordinator(key="audit", node_id=-1, host="", port=-1, error_code=15, error_message=None),
        ],
    )


# A consumer-protocol subscription, as JoinGroup carries it (int16 version, then the body).
SUBSCRIPTION = b"\x00\x01" + codec.encode(ConsumerProtocolSubscription(topics=["clicks", "views"]), 1)


@builds(JoinGroupRequest)
def _(v: int) -> Any:
    r = JoinGroupRequest
    return r(
        group_id="orders-consumer",
        session_timeout_ms=45000,
        rebalance_timeout_ms=300000,
        member_id="",
        group_instance_id="host-7" if v >= 5 else None,
        protocol_type="consumer",
        protocols=[
            r.JoinGroupRequestProtocol(name="range", metadata=SUBSCRIPTION),
            r.JoinGroupRequestProtocol(name="roundrobin", metadata=SUBSCRIPTION),
        ],
    )


@builds(JoinGroupResponse)
def _(v: int) -> Any:
    r = JoinGroupResponse
    return r(
        throttle_time_ms=2,
        error_code=0,
        generation_id=12,
        protocol_type="consumer",
        protocol_name="range",
        leader="consumer-1-4f7c",
        member_id="consumer-1-4f7c",
        members=[
            r.JoinGroupResponseMember(member_id="consumer-1-4f7c", group_instance_id=None, metadata=SUBSCRIPTION),
            r.JoinGroupResponseMember(member_id="consumer-2-99aa", group_instance_id="host-7", metadata=b""),
        ],
    )


ASSIGNMENT = b"\x00\x00" + codec.encode(
    ConsumerProtocolAssignment(
        assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(topic="clicks", partitions=[0, 2])]
    ),
    0,
)


@builds(SyncGroupRequest)
def _(v: int) -> Any:
    r = SyncGroupRequest
    return r(
        group_id="orders-consumer",
        generation_id=12,
        member_id="consumer-1-4f7c",
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[
            r.SyncGroupRequestAssignment(member_id="consumer-1-4f7c", assignment=ASSIGNMENT),
            r.SyncGroupRequestAssignment(member_id="consumer-2-99aa", assignment=b""),
        ],
    )


@builds(SyncGroupResponse)
def _(v: int) -> Any:
    return SyncGroupResponse(
        throttle_time_ms=5, error_code=0, protocol_type="consumer", protocol_name="range", assignment=ASSIGNMENT
    )


@builds(HeartbeatRequest)
def _(v: int) -> Any:
    return HeartbeatRequest(
        group_id="orders-consumer", generation_id=12, member_id="consumer-1-4f7c", group_instance_id="host-7"
    )


@builds(HeartbeatResponse)
def _(v: int) -> Any:
    return HeartbeatResponse(throttle_time_ms=6, error_code=27)  # REBALANCE_IN_PROGRESS


@builds(LeaveGroupRequest)
def _(v: int) -> Any:
    r = LeaveGroupRequest
    return r(
        group_id="orders-consumer",
        member_id="consumer-1-4f7c",
        members=[
            r.MemberIdentity(member_id="consumer-1-4f7c", group_instance_id=None, reason="shutting down"),
            r.MemberIdentity(member_id="consumer-2-99aa", group_instance_id="host-7", reason=None),
        ],
    )


@builds(LeaveGroupResponse)
def _(v: int) -> Any:
    r = LeaveGroupResponse
    return r(
        throttle_time_ms=8,
        error_code=0,
        members=[
            r.MemberResponse(member_id="consumer-1-4f7c", group_instance_id=None, error_code=0),
            r.MemberResponse(member_id="consumer-2-99aa", group_instance_id="host-7", error_code=25),
        ],
    )


@builds(OffsetCommitRequest)
def _(v: int) -> Any:
    r = OffsetCommitRequest
    return r(
        group_id="orders-consumer",
        generation_id_or_member_epoch=12,
        member_id="consumer-1-4f7c",
        group_instance_id=None,
        retention_time_ms=86_400_000,
        topics=[
            r.OffsetCommitRequestTopic(
                name="clicks",
                partitions=[
                    r.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=1_234_600, committed_leader_epoch=5, committed_metadata=None
                    ),
                    r.OffsetCommitRequestPartition(
                        partition_index=2, committed_offset=77, committed_leader_epoch=-1, committed_metadata="ckpt-9"
                    ),
                ],
            )
        ],
    )


@builds(OffsetCommitResponse)
def _(v: int) -> Any:
    r = OffsetCommitResponse
    return r(
        throttle_time_ms=9,
        topics=[
            r.OffsetCommitResponseTopic(
                name="clicks",
                partitions=[
                    r.OffsetCommitResponsePartition(partition_index=0, error_code=0),
                    r.OffsetCommitResponsePartition(partition_index=2, error_code=22),  # ILLEGAL_GENERATION
                ],
            )
        ],
    )


@builds(OffsetFetchRequest)
def _(v: int) -> Any:
    r = OffsetFetchRequest
    return r(
        group_id="orders-consumer",
        topics=None if v == 5 else [r.OffsetFetchRequestTopic(name="clicks", partition_indexes=[0, 1, 2])],
        groups=[
            r.OffsetFetchRequestGroup(
                group_id="orders-consumer",
                topics=[r.OffsetFetchRequestTopics(name="clicks", partition_indexes=[0, 2])],
            ),
            r.OffsetFetchRequestGroup(group_id="audit", topics=None),
        ],
        require_stable=True,
    )


@builds(OffsetFetchResponse)
def _(v: int) -> Any:
    r = OffsetFetchResponse
    return r(
        throttle_time_ms=11,
        topics=[
            r.OffsetFetchResponseTopic(
                name="clicks",
                partitions=[
                    r.OffsetFetchResponsePartition(
                        partition_index=0, committed_offset=1_234_600, committed_leader_epoch=5, metadata=None
                    ),
                    r.OffsetFetchResponsePartition(
                        partition_index=1, committed_offset=-1, committed_leader_epoch=-1, metadata="", error_code=0
                    ),
                ],
            )
        ],
        error_code=0,
        groups=[
            r.OffsetFetchResponseGroup(
                group_id="orders-consumer",
                topics=[
                    r.OffsetFetchResponseTopics(
                        name="clicks",
                        partitions=[
                            r.OffsetFetchResponsePartitions(
                                partition_index=0, committed_offset=1_234_600, committed_leader_epoch=5, metadata=None
                            )
                        ],
                    )
                ],
            ),
            r.OffsetFetchResponseGroup(group_id="audit", topics=[], error_code=16),
        ],
    )


@builds(DescribeGroupsRequest)
def _(v: int) -> Any:
    return DescribeGroupsRequest(groups=["orders-consumer", "audit"], include_authorized_operations=True)


@builds(DescribeGroupsResponse)
def _(v: int) -> Any:
    r = DescribeGroupsResponse
    return r(
        throttle_time_ms=12,
        groups=[
            r.DescribedGroup(
                error_code=0,
                group_id="orders-consumer",
                group_state="Stable",
                protocol_type="consumer",
                protocol_data="range",
                members=[
                    r.DescribedGroupMember(
                        member_id="consumer-1-4f7c",
                        group_instance_id="host-7",
                        client_id="consumer-1",
                        client_host="/10.0.0.7",
                        member_metadata=SUBSCRIPTION,
                        member_assignment=ASSIGNMENT,
                    ),
                    r.DescribedGroupMember(
                        member_id="consumer-2-99aa", group_instance_id=None, client_id="c2", client_host="/10.0.0.8"
                    ),
                ],
                authorized_operations=0b1_0110_0000,
            ),
            r.DescribedGroup(error_code=69, group_id="audit", group_state="Dead"),  # GROUP_ID_NOT_FOUND
        ],
    )


@builds(ListGroupsRequest)
def _(v: int) -> Any:
    return ListGroupsRequest(states_filter=["Stable", "PreparingRebalance"])


@builds(ListGroupsResponse)
def _(v: int) -> Any:
    r = ListGroupsResponse
    return r(
        throttle_time_ms=13,
        error_code=0,
        groups=[
            r.ListedGroup(group_id="orders-consumer", protocol_type="consumer", group_state="Stable"),
            r.ListedGroup(group_id="connect-cluster", protocol_type="connect", group_state="Empty"),
        ],
    )


@builds(InitProducerIdRequest)
def _(v: int) -> Any:
    # v3+: KIP-360's epoch bump names the producer id and epoch it holds.
    bump = v >= 3
    return InitProducerIdRequest(
        transactional_id=None if v == 1 else "payments-tx-1",
        transaction_timeout_ms=60000,
        producer_id=4001 if bump else -1,
        producer_epoch=3 if bump else -1,
    )


@builds(InitProducerIdResponse)
def _(v: int) -> Any:
    return InitProducerIdResponse(throttle_time_ms=14, error_code=0, producer_id=4001, producer_epoch=3)


@builds(CreateTopicsRequest)
def _(v: int) -> Any:
    r = CreateTopicsRequest
    return r(
        topics=[
            r.CreatableTopic(
                name="clicks",
                num_partitions=6,
                replication_factor=3,
                assignments=[],
                configs=[
                    r.CreatableTopicConfig(name="cleanup.policy", value="compact"),
                    r.CreatableTopicConfig(name="retention.ms", value=None),
                ],
            ),
            r.CreatableTopic(
                name="views",
                num_partitions=-1,
                replication_factor=-1,
                assignments=[
                    r.CreatableReplicaAssignment(partition_index=0, broker_ids=[1, 2]),
                    r.CreatableReplicaAssignment(partition_index=1, broker_ids=[2, 1]),
                ],
                configs=[],
            ),
        ],
        timeout_ms=15000,
        validate_only=True,
    )


@builds(CreateTopicsResponse)
def _(v: int) -> Any:
    r = CreateTopicsResponse
    return r(
        throttle_time_ms=15,
        topics=[
            r.CreatableTopicResult(
                name="clicks",
                error_code=0,
                error_message=None,
                topic_config_error_code=29,  # TOPIC_AUTHORIZATION_FAILED
                num_partitions=6,
                replication_factor=3,
                configs=[
                    r.CreatableTopicConfigs(
                        name="cleanup.policy", value="compact", read_only=False, config_source=1, is_sensitive=False
                    ),
                    r.CreatableTopicConfigs(
                        name="sasl.jaas.config", value=None, read_only=True, config_source=5, is_sensitive=True
                    ),
                ],
            ),
            r.CreatableTopicResult(
                name="views", error_code=36, error_message="Topic 'views' already exists.", configs=None
            ),
        ],
    )


@builds(DeleteTopicsRequest)
def _(v: int) -> Any:
    return DeleteTopicsRequest(topic_names=["clicks", "views"], timeout_ms=15000)


@builds(DeleteTopicsResponse)
def _(v: int) -> Any:
    r = DeleteTopicsResponse
    return r(
        throttle_time_ms=16,
        responses=[
            r.DeletableTopicResult(name="clicks", error_code=0, error_message=None),
            r.DeletableTopicResult(name="views", error_code=3, error_message="This server does not host it."),
        ],
    )


@builds(ConsumerProtocolSubscription)
def _(v: int) -> Any:
    r = ConsumerProtocolSubscription
    return r(
        topics=["clicks", "views"],
        user_data=b"\x00\x01sticky" if v % 2 else None,
        owned_partitions=[r.TopicPartition(topic="clicks", partitions=[0, 2])],
        generation_id=12,
        rack_id="rack-a",
    )


@builds(ConsumerProtocolAssignment)
def _(v: int) -> Any:
    r = ConsumerProtocolAssignment
    return r(
        assigned_partitions=[
            r.TopicPartition(topic="clicks", partitions=[0, 2]),
            r.TopicPartition(topic="views", partitions=[]),
        ],
        user_data=b"\x00\x00\x00\x01" if v else None,
    )


# The admin APIs the topics and groups commands use.


@builds(CreatePartitionsRequest)
def _(v: int) -> Any:
    r = CreatePartitionsRequest
    return r(
        topics=[
            r.CreatePartitionsTopic(name="clicks", count=6, assignments=None),
            r.CreatePartitionsTopic(name="views", count=2, assignments=[r.CreatePartitionsAssignment(broker_ids=[2])]),
        ],
        timeout_ms=30000,
        validate_only=v % 2 == 1,
    )


@builds(CreatePartitionsResponse)
def _(v: int) -> Any:
    r = CreatePartitionsResponse
    return r(
        throttle_time_ms=3,
        results=[
            r.CreatePartitionsTopicResult(name="clicks", error_code=0, error_message=None),
            r.CreatePartitionsTopicResult(name="views", error_code=37, error_message="count must grow"),
        ],
    )


@builds(DescribeConfigsRequest)
def _(v: int) -> Any:
    r = DescribeConfigsRequest
    return r(
        resources=[
            r.DescribeConfigsResource(resource_type=2, resource_name="clicks", configuration_keys=None),
            r.DescribeConfigsResource(resource_type=4, resource_name="1", configuration_keys=["log.retention.ms"]),
        ],
        include_synonyms=True,
        include_documentation=True,
    )


@builds(DescribeConfigsResponse)
def _(v: int) -> Any:
    r = DescribeConfigsResponse
    return r(
        throttle_time_ms=0,
        results=[
            r.DescribeConfigsResult(
                error_code=0,
                error_message=None,
                resource_type=2,
                resource_name="clicks",
                configs=[
                    r.DescribeConfigsResourceResult(
                        name="retention.ms",
                        value="3600000",
                        read_only=False,
                        is_default=False,
                        config_source=1,
                        is_sensitive=False,
                        synonyms=[r.DescribeConfigsSynonym(name="retention.ms", value="3600000", source=1)],
                        config_type=5,
                        documentation="How long to keep a segment.",
                    ),
                    r.DescribeConfigsResourceResult(
                        name="cleanup.policy",
                        value=None,
                        is_default=True,
                        config_source=5,
                        config_type=7,
                        documentation=None,
                    ),
                ],
            )
        ],
    )


@builds(AlterConfigsRequest)
def _(v: int) -> Any:
    r = AlterConfigsRequest
    return r(
        resources=[
            r.AlterConfigsResource(
                resource_type=2,
                resource_name="clicks",
                configs=[
                    r.AlterableConfig(name="retention.ms", value="60000"),
                    r.AlterableConfig(name="x", value=None),
                ],
            )
        ],
        validate_only=True,
    )


@builds(AlterConfigsResponse)
def _(v: int) -> Any:
    r = AlterConfigsResponse
    return r(
        throttle_time_ms=1,
        responses=[
            r.AlterConfigsResourceResponse(error_code=0, error_message=None, resource_type=2, resource_name="clicks"),
            r.AlterConfigsResourceResponse(error_code=40, error_message="bad", resource_type=2, resource_name="x"),
        ],
    )


@builds(IncrementalAlterConfigsRequest)
def _(v: int) -> Any:
    r = IncrementalAlterConfigsRequest
    return r(
        resources=[
            r.AlterConfigsResource(
                resource_type=2,
                resource_name="clicks",
                configs=[
                    r.AlterableConfig(name="retention.ms", config_operation=0, value="60000"),
                    r.AlterableConfig(name="segment.bytes", config_operation=1, value=None),
                ],
            )
        ],
        validate_only=False,
    )


@builds(IncrementalAlterConfigsResponse)
def _(v: int) -> Any:
    r = IncrementalAlterConfigsResponse
    return r(
        throttle_time_ms=0,
        responses=[
            r.AlterConfigsResourceResponse(error_code=0, error_message=None, resource_type=2, resource_name="clicks")
        ],
    )


@builds(DeleteGroupsRequest)
def _(v: int) -> Any:
    return DeleteGroupsRequest(groups_names=["loader", "mirror-east"])


@builds(DeleteGroupsResponse)
def _(v: int) -> Any:
    r = DeleteGroupsResponse
    return r(
        throttle_time_ms=2,
        results=[
            r.DeletableGroupResult(group_id="loader", error_code=0),
            r.DeletableGroupResult(group_id="mirror-east", error_code=68),
        ],
    )


@builds(OffsetDeleteRequest)
def _(v: int) -> Any:
    r = OffsetDeleteRequest
    return r(
        group_id="loader",
        topics=[
            r.OffsetDeleteRequestTopic(name="clicks", partitions=[r.OffsetDeleteRequestPartition(partition_index=3)])
        ],
    )


@builds(OffsetDeleteResponse)
def _(v: int) -> Any:
    r = OffsetDeleteResponse
    return r(
        error_code=0,
        throttle_time_ms=0,
        topics=[
            r.OffsetDeleteResponseTopic(
                name="clicks", partitions=[r.OffsetDeleteResponsePartition(partition_index=3, error_code=86)]
            )
        ],
    )


@builds(DescribeLogDirsRequest)
def _(v: int) -> Any:
    r = DescribeLogDirsRequest
    return r(topics=[r.DescribableLogDirTopic(topic="clicks", partitions=[0, 1])] if v % 2 else None)


@builds(DescribeLogDirsResponse)
def _(v: int) -> Any:
    r = DescribeLogDirsResponse
    return r(
        throttle_time_ms=0,
        error_code=0,
        results=[
            r.DescribeLogDirsResult(
                error_code=0,
                log_dir="/var/lib/tributary/data",
                topics=[
                    r.DescribeLogDirsTopic(
                        name="clicks",
                        partitions=[
                            r.DescribeLogDirsPartition(partition_index=0, partition_size=123456, offset_lag=0),
                            r.DescribeLogDirsPartition(partition_index=1, partition_size=0, offset_lag=0),
                        ],
                    )
                ],
                total_bytes=10**12,
                usable_bytes=10**11,
            )
        ],
    )


@builds(OffsetForLeaderEpochRequest)
def _(v: int) -> Any:
    r = OffsetForLeaderEpochRequest
    return r(
        replica_id=2,
        topics=[
            r.OffsetForLeaderTopic(
                topic="clicks",
                partitions=[
                    r.OffsetForLeaderPartition(partition=0, current_leader_epoch=7, leader_epoch=5),
                    r.OffsetForLeaderPartition(partition=3, current_leader_epoch=-1, leader_epoch=0),
                ],
            )
        ],
    )


@builds(OffsetForLeaderEpochResponse)
def _(v: int) -> Any:
    r = OffsetForLeaderEpochResponse
    return r(
        throttle_time_ms=0,
        topics=[
            r.OffsetForLeaderTopicResult(
                topic="clicks",
                partitions=[
                    r.EpochEndOffset(error_code=0, partition=0, leader_epoch=4, end_offset=1200),
                    r.EpochEndOffset(error_code=74, partition=3, leader_epoch=-1, end_offset=-1),
                ],
            )
        ],
    )


@builds(AlterPartitionReassignmentsRequest)
def _(v: int) -> Any:
    r = AlterPartitionReassignmentsRequest
    partitions = [
        r.ReassignablePartition(partition_index=0, replicas=[4, 2, 3]),
        r.ReassignablePartition(partition_index=1, replicas=None),  # a cancellation
    ]
    return r(timeout_ms=30_000, topics=[r.ReassignableTopic(name="clicks", partitions=partitions)])


@builds(AlterPartitionReassignmentsResponse)
def _(v: int) -> Any:
    r = AlterPartitionReassignmentsResponse
    partitions = [
        r.ReassignablePartitionResponse(partition_index=0, error_code=0, error_message=None),
        r.ReassignablePartitionResponse(partition_index=1, error_code=85, error_message="not being reassigned"),
    ]
    return r(
        throttle_time_ms=0, error_code=0, error_message=None,
        responses=[r.ReassignableTopicResponse(name="clicks", partitions=partitions)],
    )  # fmt: skip


@builds(ListPartitionReassignmentsRequest)
def _(v: int) -> Any:
    r = ListPartitionReassignmentsRequest
    return r(timeout_ms=30_000, topics=[r.ListPartitionReassignmentsTopics(name="clicks", partition_indexes=[0, 1])])


@builds(ListPartitionReassignmentsResponse)
def _(v: int) -> Any:
    r = ListPartitionReassignmentsResponse
    ongoing = r.OngoingPartitionReassignment(
        partition_index=0, replicas=[4, 2, 3, 1], adding_replicas=[4], removing_replicas=[1]
    )
    return r(
        throttle_time_ms=0, error_code=0, error_message=None,
        topics=[r.OngoingTopicReassignment(name="clicks", partitions=[ongoing])],
    )  # fmt: skip


@builds(DescribeAclsRequest)
def _(v: int) -> Any:
    # Version 0 knows no pattern types: its filter is LITERAL.
    return DescribeAclsRequest(
        resource_type_filter=2, resource_name_filter="clicks", pattern_type_filter=3 if v == 0 else 2,
        principal_filter=None, host_filter="*", operation=1, permission_type=3,
    )  # fmt: skip


@builds(DescribeAclsResponse)
def _(v: int) -> Any:
    r = DescribeAclsResponse
    acls = [
        r.AclDescription(principal="User:alice", host="*", operation=3, permission_type=3),
        r.AclDescription(principal="User:*", host="10.0.0.1", operation=4, permission_type=2),
    ]
    return r(
        throttle_time_ms=0, error_code=0, error_message=None,
        resources=[r.DescribeAclsResource(resource_type=2, resource_name="clicks", pattern_type=3, acls=acls)],
    )  # fmt: skip


@builds(CreateAclsRequest)
def _(v: int) -> Any:
    r = CreateAclsRequest
    creations = [
        r.AclCreation(resource_type=2, resource_name="clicks", resource_pattern_type=3 if v == 0 else 4,
                      principal="User:alice", host="*", operation=3, permission_type=3),
        r.AclCreation(resource_type=4, resource_name="kafka-cluster", resource_pattern_type=3,
                      principal="User:broker", host="*", operation=9, permission_type=3),
    ]  # fmt: skip
    return r(creations=creations)


@builds(CreateAclsResponse)
def _(v: int) -> Any:
    r = CreateAclsResponse
    return r(
        throttle_time_ms=0,
        results=[r.AclCreationResult(0, None), r.AclCreationResult(42, "the resource name is empty")],
    )


@builds(DeleteAclsRequest)
def _(v: int) -> Any:
    r = DeleteAclsRequest
    wanted = r.DeleteAclsFilter(
        resource_type_filter=2, resource_name_filter="clicks", pattern_type_filter=3 if v == 0 else 1,
        principal_filter="User:alice", host_filter=None, operation=1, permission_type=1,
    )  # fmt: skip
    return r(filters=[wanted])


@builds(DeleteAclsResponse)
def _(v: int) -> Any:
    r = DeleteAclsResponse
    matching = r.DeleteAclsMatchingAcl(
        error_code=0, error_message=None, resource_type=2, resource_name="clicks", pattern_type=3,
        principal="User:alice", host="*", operation=3, permission_type=3,
    )  # fmt: skip
    return r(
        throttle_time_ms=0,
        filter_results=[
            r.DeleteAclsFilterResult(error_code=0, error_message=None, matching_acls=[matching]),
            r.DeleteAclsFilterResult(error_code=31, error_message="Alter on the Cluster", matching_acls=[]),
        ],
    )


@builds(ElectLeadersRequest)
def _(v: int) -> Any:
    r = ElectLeadersRequest
    partitions = [r.TopicPartitions(topic="clicks", partitions=[0, 2])]
    return r(election_type=0, topic_partitions=partitions if v % 2 == 0 else None, timeout_ms=30_000)


@builds(ElectLeadersResponse)
def _(v: int) -> Any:
    r = ElectLeadersResponse
    return r(
        throttle_time_ms=0,
        error_code=0,
        replica_election_results=[
            r.ReplicaElectionResult(
                topic="clicks",
                partition_result=[
                    r.PartitionResult(partition_id=0, error_code=0, error_message=None),
                    r.PartitionResult(partition_id=2, error_code=84, error_message="the preferred replica leads"),
                ],
            )
        ],
    )


@builds(DeleteRecordsRequest)
def _(v: int) -> Any:
    r = DeleteRecordsRequest
    partitions = [r.DeleteRecordsPartition(partition_index=0, offset=1200), r.DeleteRecordsPartition(3, -1)]
    return r(topics=[r.DeleteRecordsTopic(name="clicks", partitions=partitions)], timeout_ms=30_000)


@builds(DeleteRecordsResponse)
def _(v: int) -> Any:
    r = DeleteRecordsResponse
    partitions = [
        r.DeleteRecordsPartitionResult(partition_index=0, low_watermark=1200, error_code=0),
        r.DeleteRecordsPartitionResult(partition_index=3, low_watermark=-1, error_code=1),  # OFFSET_OUT_OF_RANGE
    ]
    return r(throttle_time_ms=0, topics=[r.DeleteRecordsTopicResult(name="clicks", partitions=partitions)])


@builds(DescribeClusterRequest)
def _(v: int) -> Any:
    return DescribeClusterRequest(include_cluster_authorized_operations=v == 0, endpoint_type=1)


@builds(DescribeClusterResponse)
def _(v: int) -> Any:
    r = DescribeClusterResponse
    return r(
        throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1,
        cluster_id="tQ2bS9rjSHqfHCFNbiVy7A", controller_id=2,
        brokers=[r.DescribeClusterBroker(1, "10.0.0.1", 9092, "east-a"), r.DescribeClusterBroker(2, "10.0.0.2", 9092)],
    )  # fmt: skip


@builds(DescribeProducersRequest)
def _(v: int) -> Any:
    r = DescribeProducersRequest
    return r(topics=[r.TopicRequest(name="clicks", partition_indexes=[0, 2])])


@builds(DescribeProducersResponse)
def _(v: int) -> Any:
    r = DescribeProducersResponse
    producers = [
        r.ProducerState(producer_id=4001, producer_epoch=0, last_sequence=41, last_timestamp=1_700_000_000_000,
                        coordinator_epoch=-1, current_txn_start_offset=-1),
    ]  # fmt: skip
    return r(
        throttle_time_ms=0,
        topics=[
            r.TopicResponse(
                name="clicks",
                partitions=[
                    r.PartitionResponse(0, error_code=0, error_message=None, active_producers=producers),
                    r.PartitionResponse(partition_index=2, error_code=6, error_message="NOT_LEADER_OR_FOLLOWER"),
                ],
            )
        ],
    )


@builds(AddPartitionsToTxnRequest)
def _(v: int) -> Any:
    r = AddPartitionsToTxnRequest
    topics = [r.AddPartitionsToTxnTopic(name="payments", partitions=[0, 3]), r.AddPartitionsToTxnTopic(name="audit")]
    if v >= 4:
        return r(
            transactions=[
                r.AddPartitionsToTxnTransaction(
                    transactional_id="payments-tx-1",
                    producer_id=4001,
                    producer_epoch=3,
                    verify_only=True,
                    topics=topics,
                )
            ]
        )
    return r(
        v3_and_below_transactional_id="payments-tx-1",
        v3_and_below_producer_id=4001,
        v3_and_below_producer_epoch=3,
        v3_and_below_topics=topics,
    )


@builds(AddPartitionsToTxnResponse)
def _(v: int) -> Any:
    r = AddPartitionsToTxnResponse
    results = [
        r.AddPartitionsToTxnTopicResult(
            name="payments",
            results_by_partition=[
                r.AddPartitionsToTxnPartitionResult(partition_index=0, partition_error_code=0),
                r.AddPartitionsToTxnPartitionResult(partition_index=3, partition_error_code=51),
            ],
        )
    ]
    if v >= 4:
        return r(
            throttle_time_ms=5,
            error_code=0,
            results_by_transaction=[
                r.AddPartitionsToTxnResult(transactional_id="payments-tx-1", topic_results=results)
            ],
        )
    return r(throttle_time_ms=5, results_by_topic_v3_and_below=results)


@builds(AddOffsetsToTxnRequest)
def _(v: int) -> Any:
    return AddOffsetsToTxnRequest(
        transactional_id="payments-tx-1", producer_id=4001, producer_epoch=3, group_id="billing"
    )


@builds(AddOffsetsToTxnResponse)
def _(v: int) -> Any:
    return AddOffsetsToTxnResponse(throttle_time_ms=2, error_code=51)


@builds(EndTxnRequest)
def _(v: int) -> Any:
    return EndTxnRequest(transactional_id="payments-tx-1", producer_id=4001, producer_epoch=3, committed=v % 2 == 0)


@builds(EndTxnResponse)
def _(v: int) -> Any:
    return EndTxnResponse(throttle_time_ms=1, error_code=90, producer_id=4001, producer_epoch=4)


@builds(WriteTxnMarkersRequest)
def _(v: int) -> Any:
    r = WriteTxnMarkersRequest
    return r(
        markers=[
            r.WritableTxnMarker(
                producer_id=4001,
                producer_epoch=3,
                transaction_result=True,
                topics=[r.WritableTxnMarkerTopic(name="payments", partition_indexes=[0, 3])],
                coordinator_epoch=7,
            ),
            r.WritableTxnMarker(producer_id=4002, producer_epoch=0, transaction_result=False, coordinator_epoch=7),
        ]
    )


@builds(WriteTxnMarkersResponse)
def _(v: int) -> Any:
    r = WriteTxnMarkersResponse
    return r(
        markers=[
            r.WritableTxnMarkerResult(
                producer_id=4001,
                topics=[
                    r.WritableTxnMarkerTopicResult(
                        name="payments",
                        partitions=[
                            r.WritableTxnMarkerPartitionResult(partition_index=0, error_code=0),
                            r.WritableTxnMarkerPartitionResult(partition_index=3, error_code=6),
                        ],
                    )
                ],
            )
        ]
    )


@builds(TxnOffsetCommitRequest)
def _(v: int) -> Any:
    r = TxnOffsetCommitRequest
    return r(
        transactional_id="payments-tx-1",
        group_id="billing",
        producer_id=4001,
        producer_epoch=3,
        generation_id=12,
        member_id="billing-1-5f0c",
        group_instance_id=None,
        topics=[
            r.TxnOffsetCommitRequestTopic(
                name="orders",
                partitions=[
                    r.TxnOffsetCommitRequestPartition(
                        partition_index=2, committed_offset=1041, committed_leader_epoch=4, committed_metadata="batch 9"
                    ),
                    r.TxnOffsetCommitRequestPartition(partition_index=5, committed_offset=17, committed_metadata=None),
                ],
            )
        ],
    )


@builds(TxnOffsetCommitResponse)
def _(v: int) -> Any:
    r = TxnOffsetCommitResponse
    return r(
        throttle_time_ms=0,
        topics=[
            r.TxnOffsetCommitResponseTopic(
                name="orders",
                partitions=[
                    r.TxnOffsetCommitResponsePartition(partition_index=2, error_code=0),
                    r.TxnOffsetCommitResponsePartition(partition_index=5, error_code=22),
                ],
            )
        ],
    )


@builds(DescribeTransactionsRequest)
def _(v: int) -> Any:
    return DescribeTransactionsRequest(transactional_ids=["payments-tx-1", "unknown-tx"])


@builds(DescribeTransactionsResponse)
def _(v: int) -> Any:
    r = DescribeTransactionsResponse
    return r(
        throttle_time_ms=0,
        transaction_states=[
            r.TransactionState(
                error_code=0,
                transactional_id="payments-tx-1",
                transaction_state="Ongoing",
                transaction_timeout_ms=60000,
                transaction_start_time_ms=1_700_000_000_000,
                producer_id=4001,
                producer_epoch=3,
                topics=[r.TopicData(topic="payments", partitions=[0, 3])],
            ),
            r.TransactionState(error_code=105, transactional_id="unknown-tx", transaction_state=""),
        ],
    )


@builds(ListTransactionsRequest)
def _(v: int) -> Any:
    return ListTransactionsRequest(state_filters=["Ongoing"], producer_id_filters=[4001], duration_filter=60_000)


@builds(ListTransactionsResponse)
def _(v: int) -> Any:
    r = ListTransactionsResponse
    return r(
        throttle_time_ms=0,
        error_code=0,
        unknown_state_filters=["Frozen"],
        transaction_states=[
            r.TransactionState(transactional_id="payments-tx-1", producer_id=4001, transaction_state="Ongoing")
        ],
    )


@builds(SaslHandshakeRequest)
def _(v: int) -> Any:
    return SaslHandshakeRequest(mechanism="SCRAM-SHA-512")


@builds(SaslHandshakeResponse)
def _(v: int) -> Any:
    return SaslHandshakeResponse(error_code=33, mechanisms=["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])


@builds(SaslAuthenticateRequest)
def _(v: int) -> Any:
    return SaslAuthenticateRequest(auth_bytes=b"n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL")


@builds(SaslAuthenticateResponse)
def _(v: int) -> Any:
    return SaslAuthenticateResponse(
        error_code=58, error_message="Authentication failed", auth_bytes=b"", session_lifetime_ms=0
    )


@builds(DescribeUserScramCredentialsRequest)
def _(v: int) -> Any:
    r = DescribeUserScramCredentialsRequest
    return r(users=[r.UserName(name="alice"), r.UserName(name="mirror-east")])


@builds(DescribeUserScramCredentialsResponse)
def _(v: int) -> Any:
    r = DescribeUserScramCredentialsResponse
    return r(
        throttle_time_ms=0, error_code=0, error_message=None,
        results=[
            r.DescribeUserScramCredentialsResult(
                user="alice", error_code=0, error_message=None,
                credential_infos=[r.CredentialInfo(mechanism=2, iterations=4096)],
            ),
            r.DescribeUserScramCredentialsResult(
                user="bob", error_code=91, error_message="no such user", credential_infos=[]
            ),
        ],
    )  # fmt: skip


@builds(AlterUserScramCredentialsRequest)
def _(v: int) -> Any:
    r = AlterUserScramCredentialsRequest
    return r(
        deletions=[r.ScramCredentialDeletion(name="old", mechanism=1)],
        upsertions=[
            r.ScramCredentialUpsertion(
                name="alice", mechanism=2, iterations=4096, salt=b"salt" * 8, salted_password=bytes(range(64))
            )
        ],
    )


@builds(AlterUserScramCredentialsResponse)
def _(v: int) -> Any:
    r = AlterUserScramCredentialsResponse
    return r(
        throttle_time_ms=0,
        results=[
            r.AlterUserScramCredentialsResult(user="alice", error_code=0, error_message=None),
            r.AlterUserScramCredentialsResult(user="old", error_code=91, error_message="no such credential"),
        ],
    )


# --- the matrix ---

# Every version the broker advertises that changes a message's shape, up to the newest (tagged
# fields, compact types, topic ids, batched groups and keys).
VERSIONS: dict[ApiKey, list[int]] = {
    ApiKey.API_VERSIONS: [0, 1, 2, 3, 4],
    ApiKey.METADATA: [0, 1, 5, 8, 9, 10, 11, 12],
    ApiKey.PRODUCE: [0, 2, 3, 7, 8, 9, 10, 11],
    ApiKey.FETCH: [4, 7, 11, 12, 13, 15, 16, 17],
    ApiKey.LIST_OFFSETS: [1, 5, 6, 7, 8, 9, 10],
    ApiKey.FIND_COORDINATOR: [0, 1, 2, 3, 4, 5, 6],
    ApiKey.JOIN_GROUP: [0, 5, 6, 7, 8, 9],
    ApiKey.SYNC_GROUP: [0, 3, 4, 5],
    ApiKey.HEARTBEAT: [0, 1, 2, 3, 4],
    ApiKey.LEAVE_GROUP: [0, 3, 4, 5],
    ApiKey.OFFSET_COMMIT: [2, 7, 8, 9],
    ApiKey.OFFSET_FETCH: [1, 5, 6, 7, 8, 9],
    ApiKey.DESCRIBE_GROUPS: [0, 1, 2, 3, 4, 5],
    ApiKey.LIST_GROUPS: [0, 1, 2, 3, 4, 5],
    ApiKey.INIT_PRODUCER_ID: [0, 1, 2, 3, 4, 5],
    ApiKey.CREATE_TOPICS: [2, 3, 4, 5, 6, 7],
    ApiKey.DELETE_TOPICS: [1, 2, 3, 4, 5, 6],
    ApiKey.DELETE_RECORDS: [0, 1, 2],
    ApiKey.CREATE_PARTITIONS: [0, 1, 2, 3],
    ApiKey.DESCRIBE_CONFIGS: [0, 1, 2, 3, 4],
    ApiKey.ALTER_CONFIGS: [0, 1, 2],
    ApiKey.INCREMENTAL_ALTER_CONFIGS: [0, 1],
    ApiKey.DELETE_GROUPS: [0, 1, 2],
    ApiKey.OFFSET_DELETE: [0],
    ApiKey.DESCRIBE_LOG_DIRS: [0, 1, 2, 3, 4],
    ApiKey.OFFSET_FOR_LEADER_EPOCH: [0, 1, 2, 3, 4],
    ApiKey.ELECT_LEADERS: [0, 1, 2],
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: [0],
    ApiKey.LIST_PARTITION_REASSIGNMENTS: [0],
    ApiKey.DESCRIBE_CLUSTER: [0, 1],
    ApiKey.DESCRIBE_PRODUCERS: [0],
    ApiKey.ADD_PARTITIONS_TO_TXN: [0, 1, 2, 3, 4],
    ApiKey.ADD_OFFSETS_TO_TXN: [0, 1, 2, 3],
    ApiKey.END_TXN: [0, 1, 2, 3, 5],
    ApiKey.WRITE_TXN_MARKERS: [0, 1],
    ApiKey.TXN_OFFSET_COMMIT: [0, 1, 2, 3],
    ApiKey.DESCRIBE_TRANSACTIONS: [0],
    ApiKey.LIST_TRANSACTIONS: [0, 1],
    ApiKey.SASL_HANDSHAKE: [0, 1],
    ApiKey.SASL_AUTHENTICATE: [0, 1, 2],
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: [0],
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: [0],
    ApiKey.DESCRIBE_ACLS: [0, 1, 2, 3],
    ApiKey.CREATE_ACLS: [0, 1, 2, 3],
    ApiKey.DELETE_ACLS: [0, 1, 2, 3],
}

REQUEST_CLASSES = {cls.SPEC.api_key: cls for cls in BUILDERS if cls.SPEC.kind == "request"}  # type: ignore[attr-defined]
RESPONSE_CLASSES = {cls.SPEC.api_key: cls for cls in BUILDERS if cls.SPEC.kind == "response"}  # type: ignore[attr-defined]
CONSUMER_PROTOCOL = [ConsumerProtocolSubscription, ConsumerProtocolAssignment]

MESSAGE_CASES = [
    pytest.param(classes[api_key], v, id=f"{classes[api_key].__name__}-v{v}")
    for api_key, versions in VERSIONS.items()
    for classes in (REQUEST_CLASSES, RESPONSE_CLASSES)
    for v in versions
] + [pytest.param(cls, v, id=f"{cls.__name__}-v{v}") for cls in CONSUMER_PROTOCOL for v in range(4)]
REQUEST_CASES = [p for p in MESSAGE_CASES if p.values[0].SPEC.kind == "request"]  # type: ignore[union-attr]
RESPONSE_CASES = [p for p in MESSAGE_CASES if p.values[0].SPEC.kind == "response"]  # type: ignore[union-attr]


#: APIs kafka-python 3 has no classes for: the KIP-848 consumer group APIs, checked against
#: Kafka's schemas (test_schema_conformance, test_codec_roundtrip) and against librdkafka on the
#: wire (tests/interop/test_consumer_groups_kip848.py) instead.
NOT_IN_KAFKA_PYTHON = {ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE}


def test_matrix_covers_every_api() -> None:
    assert not any("ConsumerGroup" in name for name in KP), "kafka-python has KIP-848 classes now: test them"
    assert set(REQUEST_CLASSES) == set(RESPONSE_CLASSES) == set(VERSIONS) == set(ApiKey) - NOT_IN_KAFKA_PYTHON
    assert len(MESSAGE_CASES) == 2 * sum(map(len, VERSIONS.values())) + 8


def _case(cls: Any, version: int) -> tuple[Any, Any, Any]:
    """(our expected value at ``version``, kafka-python class, kafka-python value)."""
    expected = project(BUILDERS[cls](version), cls.SPEC.struct, version)
    kp_cls = KP[cls.__name__]
    return expected, kp_cls, to_kp(expected, cls.SPEC.struct, kp_cls, version)


def _kp_encode(kp_obj: Any, version: int) -> bytes:
    # The consumer-protocol data classes prefix an int16 version only when asked for a header.
    return bytes(kp_obj.encode(version=version, header=False))


def _kp_decode(kp_cls: Any, data: bytes, version: int) -> Any:
    return kp_cls.decode(data, version=version, header=False)


@pytest.mark.parametrize(("cls", "version"), MESSAGE_CASES)
def test_same_bytes(cls: Any, version: int) -> None:
    expected, _, kp_obj = _case(cls, version)
    assert codec.encode(expected, version).hex() == _kp_encode(kp_obj, version).hex()


@pytest.mark.parametrize(("cls", "version"), MESSAGE_CASES)
def test_kafka_python_encodes_we_decode(cls: Any, version: int) -> None:
    expected, _, kp_obj = _case(cls, version)
    assert codec.decode(cls, _kp_encode(kp_obj, version), version) == expected


@pytest.mark.parametrize(("cls", "version"), MESSAGE_CASES)
def test_we_encode_kafka_python_decodes(cls: Any, version: int) -> None:
    expected, kp_cls, _ = _case(cls, version)
    decoded = _kp_decode(kp_cls, codec.encode(expected, version), version)
    assert from_kp(decoded, cls.SPEC.struct, version) == expected


@pytest.mark.parametrize(("cls", "version"), REQUEST_CASES)
def test_request_frames_cross_over(cls: Any, version: int) -> None:
    expected, kp_cls, kp_obj = _case(cls, version)
    # kafka-python frame -> our framing, header and body decoders
    kp_obj.with_header(correlation_id=0x1234_5678, client_id="kafka-python-3.0.12")
    kp_frame = bytes(kp_obj.encode(header=True, framed=True))
    decoder = FrameDecoder()
    decoder.feed(kp_frame[:3])
    assert decoder.next_frame() is None
    decoder.feed(kp_frame[3:])
    payload = decoder.next_frame()
    assert payload is not None
    envelope = headers.decode_request_header(payload)
    assert (envelope.api_key, envelope.api_version) == (cls.SPEC.api_key, version)
    assert envelope.correlation_id == 0x1234_5678
    assert envelope.header.client_id == "kafka-python-3.0.12"
    assert headers.decode_request_body(envelope, payload) == expected
    # our frame: byte-identical, and kafka-python reads its header and body
    ours = headers.encode_request(expected, version, correlation_id=0x1234_5678, client_id="kafka-python-3.0.12")
    assert ours.hex() == kp_frame.hex()
    decoded = kp_cls.decode(ours, version=version, header=True, framed=True)
    assert decoded.header.correlation_id == 0x1234_5678
    assert decoded.header.client_id == "kafka-python-3.0.12"
    assert decoded.header.request_api_key == cls.SPEC.api_key
    assert decoded.header.request_api_version == version
    assert from_kp(decoded, cls.SPEC.struct, version) == expected


@pytest.mark.parametrize(("cls", "version"), RESPONSE_CASES)
def test_response_frames_cross_over(cls: Any, version: int) -> None:
    expected, kp_cls, kp_obj = _case(cls, version)
    kp_obj.with_header(correlation_id=-7)
    kp_frame = bytes(kp_obj.encode(header=True, framed=True))
    assert int.from_bytes(kp_frame[:4], "big") == len(kp_frame) - 4
    assert headers.decode_response(cls.SPEC.api_key, version, kp_frame[4:]) == (-7, expected)
    ours = headers.encode_response(expected, version, correlation_id=-7)
    assert ours.hex() == kp_frame.hex()
    decoded = kp_cls.decode(ours, version=version, header=True, framed=True)
    assert decoded.header.correlation_id == -7
    assert from_kp(decoded, cls.SPEC.struct, version) == expected


@pytest.mark.parametrize("cls", CONSUMER_PROTOCOL)
@pytest.mark.parametrize("version", range(4))
def test_consumer_protocol_with_version_prefix(cls: Any, version: int) -> None:
    expected, kp_cls, kp_obj = _case(cls, version)
    with_prefix = bytes(kp_obj.encode(version=version, header=True))
    assert with_prefix[:2] == version.to_bytes(2, "big")
    assert with_prefix[2:] == codec.encode(expected, version)
    # A newer version reads as an older one: the fields it knows, trailing bytes ignored.
    for older in range(version + 1):
        assert codec.decode(cls, with_prefix[2:], older) == project(expected, cls.SPEC.struct, older)
    # ... and kafka-python, reading the prefix, gets the version we wrote.
    decoded = kp_cls.decode(b"\x00" + bytes([version]) + codec.encode(expected, version))
    assert from_kp(decoded, cls.SPEC.struct, version) == expected


# --- kafka-python objects built by hand, fields asserted one by one ---


def test_produce_v3_from_kafka_python() -> None:
    kp = KP["ProduceRequest"]
    obj = kp(
        version=3,
        transactional_id=None,
        acks=1,
        timeout_ms=1500,
        topic_data=[
            kp.TopicProduceData(
                name="events", partition_data=[kp.TopicProduceData.PartitionProduceData(index=4, records=b"batch")]
            )
        ],
    )
    ours = codec.decode(ProduceRequest, bytes(obj.encode(version=3)), 3)
    assert ours.transactional_id is None
    assert (ours.acks, ours.timeout_ms) == (1, 1500)
    assert len(ours.topic_data) == 1
    assert ours.topic_data[0].name == "events"
    assert [(p.index, p.records) for p in ours.topic_data[0].partition_data] == [(4, b"batch")]


def test_metadata_v1_null_topics_from_kafka_python() -> None:
    obj = KP["MetadataRequest"](version=1, topics=None)
    data = bytes(obj.encode(version=1))
    assert data == b"\xff\xff\xff\xff"
    assert codec.decode(MetadataRequest, data, 1).topics is None
    # v0 cannot say "all topics" with null; an empty array means it there.
    assert codec.decode(MetadataRequest, b"\x00\x00\x00\x00", 0).topics == []


def test_api_versions_v3_response_to_kafka_python() -> None:
    r = ApiVersionsResponse
    ours = r(
        api_keys=[r.ApiVersion(api_key=3, min_version=0, max_version=8)],
        throttle_time_ms=0,
        finalized_features_epoch=7,
    )
    frame = headers.encode_response(ours, 3, correlation_id=1)
    decoded = KP["ApiVersionsResponse"].decode(frame, version=3, header=True, framed=True)
    assert decoded.header.correlation_id == 1
    assert decoded.error_code == 0
    assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == [(3, 0, 8)]
    assert decoded.finalized_features_epoch == 7
    assert decoded.supported_features == []
    assert decoded.zk_migration_ready is False


def test_api_versions_error_answer_reads_as_v0_in_kafka_python() -> None:
    # A broker that rejects the requested version answers in v0 with UNSUPPORTED_VERSION;
    # clients (kafka-python included) parse that body as v0 whatever they asked for.
    r = ApiVersionsResponse
    ours = r(error_code=35, api_keys=[r.ApiVersion(api_key=18, min_version=0, max_version=3)])
    frame = headers.encode_response(ours, 0, correlation_id=5)
    decoded = KP["ApiVersionsResponse"].decode(frame, version=3, header=True, framed=True)
    assert decoded.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == [(18, 0, 3)]


def test_fetch_v11_response_from_kafka_python() -> None:
    kp = KP["FetchResponse"]
    topic = kp.FetchableTopicResponse
    part = topic.PartitionData
    obj = kp(
        version=11,
        throttle_time_ms=0,
        error_code=0,
        session_id=9,
        responses=[
            topic(
                topic="events",
                partitions=[
                    part(
                        partition_index=1,
                        error_code=0,
                        high_watermark=100,
                        last_stable_offset=90,
                        log_start_offset=0,
                        aborted_transactions=[part.AbortedTransaction(producer_id=5, first_offset=91)],
                        preferred_read_replica=-1,
                        records=b"\x00" * 12,
                    )
                ],
            )
        ],
    )
    ours = codec.decode(FetchResponse, bytes(obj.encode(version=11)), 11)
    assert ours.session_id == 9
    p = ours.responses[0].partitions[0]
    assert ours.responses[0].topic == "events"
    assert (p.partition_index, p.high_watermark, p.last_stable_offset, p.log_start_offset) == (1, 100, 90, 0)
    assert p.aborted_transactions is not None
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(5, 91)]
    assert p.preferred_read_replica == -1
    assert p.records == b"\x00" * 12


def test_join_group_v5_response_to_kafka_python() -> None:
    r = JoinGroupResponse
    ours = r(
        throttle_time_ms=1,
        generation_id=3,
        protocol_name="range",
        leader="m1",
        member_id="m2",
        members=[r.JoinGroupResponseMember(member_id="m1", group_instance_id=None, metadata=b"\x00\x01")],
    )
    decoded = KP["JoinGroupResponse"].decode(codec.encode(ours, 5), version=5)
    assert (decoded.throttle_time_ms, decoded.error_code, decoded.generation_id) == (1, 0, 3)
    assert (decoded.protocol_name, decoded.leader, decoded.member_id) == ("range", "m1", "m2")
    assert decoded.members[0].member_id == "m1"
    assert decoded.members[0].group_instance_id is None
    assert bytes(decoded.members[0].metadata) == b"\x00\x01"


def test_subscription_v3_from_kafka_python() -> None:
    kp = KP["ConsumerProtocolSubscription"]
    obj = kp(
        version=3,
        topics=["a", "b"],
        user_data=None,
        owned_partitions=[kp.TopicPartition(topic="a", partitions=[1])],
        generation_id=4,
        rack_id="r1",
    )
    data = bytes(obj.encode())  # with the int16 version prefix
    assert data[:2] == b"\x00\x03"
    ours = codec.decode(ConsumerProtocolSubscription, data[2:], 3)
    assert ours.topics == ["a", "b"]
    assert ours.user_data is None
    assert [(t.topic, t.partitions) for t in ours.owned_partitions] == [("a", [1])]
    assert (ours.generation_id, ours.rack_id) == (4, "r1")


def test_create_topics_v5_tagged_field_from_kafka_python() -> None:
    kp = KP["CreateTopicsResponse"]
    result = kp.CreatableTopicResult(
        name="t", error_code=0, error_message=None, topic_config_error_code=29, num_partitions=1, replication_factor=1
    )
    obj = kp(version=5, throttle_time_ms=0, topics=[result])
    ours = codec.decode(CreateTopicsResponse, bytes(obj.encode(version=5)), 5)
    assert ours.topics[0].topic_config_error_code == 29
    assert ours.topics[0].configs == []
