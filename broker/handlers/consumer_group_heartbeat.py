"""ConsumerGroupHeartbeat (KIP-848): join, heartbeat in, and leave a ``consumer`` group;
the coordinator answers with the member's epoch and, when it changed, its assignment. Read on
the group is needed (GROUP_AUTHORIZATION_FAILED), and Describe on every topic a heartbeat names
in its subscription (TOPIC_AUTHORIZATION_FAILED), as in Kafka 4.0."""

from __future__ import annotations

import uuid

from tributary.broker.context import RequestContext
from tributary.broker.group.messages import ConsumerHeartbeatRequest
from tributary.broker.handlers.join_group import client_host
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse


def _owned(request: ConsumerGroupHeartbeatRequest) -> dict[uuid.UUID, frozenset[int]] | None:
    if request.topic_partitions is None:
        return None
    owned: dict[uuid.UUID, frozenset[int]] = {}
    for topic in request.topic_partitions:
        # A topic listed twice counts with every entry, as Kafka reads them.
        owned[topic.topic_id] = owned.get(topic.topic_id, frozenset()) | frozenset(topic.partitions)
    return owned


async def handle(ctx: RequestContext, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
    names = request.subscribed_topic_names
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if names and len(ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names)) < len(set(names)):
        return ConsumerGroupHeartbeatResponse(
            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            error_message="The group subscribes to topics it is not authorized to describe.",
        )
    result = await ctx.broker.groups.consumer_heartbeat(
        ConsumerHeartbeatRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            subscribed_topic_names=tuple(names) if names is not None else None,
            subscribed_topic_regex=request.subscribed_topic_regex,
            server_assignor=request.server_assignor,
            owned=_owned(request),
            client_id=ctx.client_id or "",
            client_host=client_host(ctx.peer),
            api_version=ctx.api_version,
        )
    )
    assignment = None
    if result.assignment is not None:
        assignment = ConsumerGroupHeartbeatResponse.Assignment(
            topic_partitions=[
                ConsumerGroupHeartbeatResponse.TopicPartitions(topic_id=topic, partitions=sorted(partitions))
                for topic, partitions in sorted(result.assignment.items(), key=lambda item: item[0].bytes)
            ]
        )
    return ConsumerGroupHeartbeatResponse(
        error_code=result.error,
        error_message=result.error_message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
        assignment=assignment,
    )
