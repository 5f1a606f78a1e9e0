"""ConsumerGroupDescribe (KIP-848): epochs, assignor, members and their current and target
assignments of ``consumer`` groups. A classic group is GROUP_ID_NOT_FOUND here (admin
clients then ask DescribeGroups, as Kafka's and librdkafka's do)."""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.broker.group.messages import ConsumerGroupSummary, NamedPartitions
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


async def handle(ctx: RequestContext, request: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
    return Response(groups=[_described(ctx.broker.groups.consumer_describe(g)) for g in request.group_ids])
