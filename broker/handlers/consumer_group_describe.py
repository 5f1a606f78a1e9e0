"""ConsumerGroupDescribe (KIP-848): epochs, assignor, members and their current and target
assignments of ``consumer`` groups. A classic group is GROUP_ID_NOT_FOUND here (admin
clients then ask DescribeGroups, as Kafka's and librdkafka's do). Each group needs Describe
(GROUP_AUTHORIZATION_FAILED), and Describe on every topic its members subscribe to or are
assigned (else TOPIC_AUTHORIZATION_FAILED for the group), as in Kafka 4.0."""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.broker.group.messages import ConsumerGroupSummary, NamedPartitions
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse

Response = ConsumerGroupDescribeResponse


def _assignment(partitions: NamedPartitions) -> Response.Assignment:
    return Response.Assignment(
        topic_partitions=[
            Response.TopicPartitions(topic_id=topic_id, topic_name=name, partitions=list(ps))
            for topic_id, name, ps in partitions
        ]
    )


def _described(summary: ConsumerGroupSummary) -> Response.DescribedGroup:
    return Response.DescribedGroup(
        error_code=summary.error,
        error_message=summary.error_message,
        group_id=summary.group_id,
        group_state=summary.state,
        group_epoch=summary.group_epoch,
        assignment_epoch=summary.assignment_epoch,
        assignor_name=summary.assignor,
        members=[
            Response.Member(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=_assignment(m.assignment),
                target_assignment=_assignment(m.target_assignment),
            )
            for m in summary.members
        ],
    )


def _describe(ctx: RequestContext, group_id: str, *, operations: bool) -> Response.DescribedGroup:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return _described(ConsumerGroupSummary(ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id))
    summary = ctx.broker.groups.consumer_describe(group_id)
    topics = {name for m in summary.members for name in m.subscribed_topic_names}
    topics |= {name for m in summary.members for _, name, _ in (*m.assignment, *m.target_assignment) if name}
    if len(ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, topics)) < len(topics):
        message = "The group has members subscribed to or assigned topics it is not authorized to describe."
        return _described(ConsumerGroupSummary(ErrorCode.TOPIC_AUTHORIZATION_FAILED, group_id, message))
    described = _described(summary)
    if operations and summary.error == ErrorCode.NONE:
        described.authorized_operations = ctx.authorized_operations(ResourceType.GROUP, group_id)
    return described


async def handle(ctx: RequestContext, request: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
    operations = request.include_authorized_operations
    return Response(groups=[_describe(ctx, g, operations=operations) for g in request.group_ids])
