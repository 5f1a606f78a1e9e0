"""Metadata: brokers, topics and partition leaders, answered from the registry snapshot.

Every broker answers for the whole cluster, so a client bootstrapping from any
broker finds every partition's leader. A requested topic that does not exist
is created when auto-creation is on and the request allows it (v4+). From v10
every topic carries its id; v12 may ask for topics by id alone (name null), and
an id nobody knows gets UNKNOWN_TOPIC_ID.

Authorization, as Kafka's: an all-topics request shows only the topics the principal may
Describe (the others are left out, not refused); a named topic it may not Describe gets
TOPIC_AUTHORIZATION_FAILED whether or not it exists (nothing is disclosed); auto-creating one
needs Create on the Cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED too. A topic asked
for by id that the principal may not Describe gets TOPIC_AUTHORIZATION_FAILED without its name.
"""

from __future__ import annotations

import logging

import trio

from tributary.broker.cluster.errors import ClusterError, TopicExistsError
from tributary.broker.cluster.model import ClusterSnapshot, TopicInfo
from tributary.broker.context import RequestContext
from tributary.broker.group.placement import OFFSETS_TOPIC
from tributary.broker.topics import colliding_topics, topic_name_error
from tributary.protocol.acl import CLUSTER_NAME, AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import MetadataRequest, MetadataResponse

log = logging.getLogger(__name__)


def _topic(snapshot: ClusterSnapshot, info: TopicInfo) -> MetadataResponse.MetadataResponseTopic:
    partitions = []
    for index, state in sorted(info.partitions.items()):
        alive = [r for r in state.replicas if r in snapshot.brokers]
        # As Kafka's metadata cache: a leader that is not among the live brokers (its
        # registration expired, the controller has not elected yet) is no leader to a client,
        # which could not look up its address (kafka-python's sender fails on it).
        leader = state.leader if state.leader in snapshot.brokers else -1
        partitions.append(
            MetadataResponse.MetadataResponsePartition(
                error_code=ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                partition_index=index,
                leader_id=leader,
                leader_epoch=state.leader_epoch,
                replica_nodes=list(state.replicas),
                isr_nodes=[r for r in state.isr if r in snapshot.brokers],
                offline_replicas=[r for r in state.replicas if r not in alive],
            )
        )
    return MetadataResponse.MetadataResponseTopic(
        error_code=ErrorCode.NONE,
        name=info.name,
        topic_id=info.uuid,
        is_internal=info.name.startswith("__"),
        partitions=partitions,
    )


async def _auto_create(ctx: RequestContext, name: str) -> ErrorCode | None:
    """Creates the topic, unless the auto-creation policy refuses: then its error."""
    broker = ctx.broker
    if name == OFFSETS_TOPIC:
        # Created as the coordinator needs it (partition count, never deleted), not as a user topic.
        await broker.offsets_topic.ensure()
        return None
    snapshot = broker.snapshot()
    in_cluster = sum(len(info.partitions) for info in snapshot.topics.values())
    refused = broker.auto_create.decide(name, broker.config.default_partitions, in_cluster, trio.current_time())
    if refused is not None:
        log.info("auto-creating topic %s for %s refused: %s", name, ctx.peer, refused.name)
        return refused
    replication_factor = broker.config.replication.default_replication_factor
    try:
        await broker.registry.create_topic(
            name, broker.config.default_partitions, {}, replication_factor=replication_factor
        )
    except TopicExistsError:
        return None  # another broker or client created it meanwhile
    except ClusterError as exc:
        log.warning("auto-creating topic %s failed: %s", name, exc)
        return None
    log.info("auto-created topic %s with %d partitions", name, broker.config.default_partitions)
    return None


def _unknown(name: str | None, error: ErrorCode) -> MetadataResponse.MetadataResponseTopic:
    return MetadataResponse.MetadataResponseTopic(error_code=error, name=name)


def _by_id(ctx: RequestContext, topic: MetadataRequest.MetadataRequestTopic) -> MetadataResponse.MetadataResponseTopic:
    """A topic asked for by id alone (v10+ allows a null name; Kafka serves it from v12)."""
    snapshot = ctx.broker.snapshot()
    info = snapshot.topic_by_uuid(topic.topic_id)
    if info is None or not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, info.name):
        out = _unknown(None, ErrorCode.UNKNOWN_TOPIC_ID if info is None else ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        out.topic_id = topic.topic_id
        return out
    return _topic(snapshot, info)


def _not_created(ctx: RequestContext, name: str, allow_create: bool, snapshot: ClusterSnapshot) -> ErrorCode | None:
    """Why a missing topic is not auto-created, or None when it is to be."""
    invalid = topic_name_error(name) is not None
    if not allow_create:
        return ErrorCode.INVALID_TOPIC_EXCEPTION if invalid else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    may_create = ctx.authorize_cluster(AclOperation.CREATE, log_denied=False) or ctx.authorize(
        AclOperation.CREATE, ResourceType.TOPIC, name
    )
    if not may_create:
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if invalid or colliding_topics(name, snapshot.topics):
        return ErrorCode.INVALID_TOPIC_EXCEPTION  # as Kafka's auto-creation refuses it
    return None


async def _describe(ctx: RequestContext, name: str, allow_create: bool) -> MetadataResponse.MetadataResponseTopic:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
        return _unknown(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    snapshot = ctx.broker.snapshot()
    info = snapshot.topics.get(name)
    if info is not None:
        return _topic(snapshot, info)
    if (why := _not_created(ctx, name, allow_create, snapshot)) is not None:
        return _unknown(name, why)
    refused = await _auto_create(ctx, name)
    if refused is not None:
        return _unknown(name, refused)
    snapshot = ctx.broker.snapshot()
    info = snapshot.topics.get(name)
    # Not there yet: the client retries, as it does for Kafka's LEADER_NOT_AVAILABLE.
    return _topic(snapshot, info) if info is not None else _unknown(name, ErrorCode.LEADER_NOT_AVAILABLE)


async def handle(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    snapshot = broker.snapshot()
    # v0 asks for every topic with an empty list, v1+ with null.
    if request.topics is None or (ctx.api_version == 0 and not request.topics):
        described = ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, snapshot.topics, log_denied=False)
        topics = [_topic(snapshot, info) for name, info in sorted(snapshot.topics.items()) if name in described]
    else:
        allow_create = broker.config.auto_create_topics and (ctx.api_version < 4 or request.allow_auto_topic_creation)
        topics = [
            await _describe(ctx, t.name, allow_create) if t.name is not None else _by_id(ctx, t) for t in request.topics
        ]
        snapshot = broker.snapshot()
    # Each broker at its address on the listener this client came in on (Kafka's rule); a
    # broker without that listener is left out.
    addresses = {b.id: b.address(ctx.listener) for b in snapshot.brokers.values()}
    if request.include_topic_authorized_operations:
        for topic in topics:
            if topic.error_code == ErrorCode.NONE and topic.name is not None:
                topic.topic_authorized_operations = ctx.authorized_operations(ResourceType.TOPIC, topic.name)
    cluster_operations = -(2**31)  # Kafka's "not asked for"
    if request.include_cluster_authorized_operations:
        cluster_operations = ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
    return MetadataResponse(
        cluster_authorized_operations=cluster_operations,
        brokers=[
            MetadataResponse.MetadataResponseBroker(node_id=b.id, host=address[0], port=address[1], rack=b.rack)
            for b in sorted(snapshot.brokers.values(), key=lambda b: b.id)
            if (address := addresses[b.id]) is not None
        ],
        cluster_id=snapshot.cluster_id,
        controller_id=snapshot.controller_id if snapshot.controller_id is not None else -1,
        topics=topics,
    )
