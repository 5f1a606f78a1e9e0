"""OffsetCommit: store a group's consumed positions in ``__consumer_offsets``.

Partitions of unknown topics are refused with UNKNOWN_TOPIC_OR_PARTITION, as
Kafka does; the rest is validated against the group (member, generation) and
acknowledged once its record is in the log. Read on the group is needed
(GROUP_AUTHORIZATION_FAILED for every partition), and Read on each topic
(TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.broker.group.messages import CommitRequest
from tributary.broker.group.offsets import OffsetAndMetadata, TopicPartition
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import OffsetCommitRequest, OffsetCommitResponse

#: The request carries a retention time in these versions (-1: the broker's).
RETENTION_VERSIONS = range(2, 5)


def _answer(request: OffsetCommitRequest, errors: dict[TopicPartition, ErrorCode]) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        topics=[
            OffsetCommitResponse.OffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    OffsetCommitResponse.OffsetCommitResponsePartition(
                        partition_index=p.partition_index,
                        error_code=errors.get((topic.name, p.partition_index), ErrorCode.UNKNOWN_SERVER_ERROR),
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
    )


async def handle(ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        every = {(t.name, p.partition_index) for t in request.topics for p in t.partitions}
        return _answer(request, dict.fromkeys(every, ErrorCode.GROUP_AUTHORIZATION_FAILED))
    readable = ctx.authorized(AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
    snapshot = ctx.broker.snapshot()
    retention = request.retention_time_ms if ctx.api_version in RETENTION_VERSIONS else -1
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    refused: dict[TopicPartition, ErrorCode] = {}
    for topic in request.topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if topic.name not in readable:
                refused[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if snapshot.partition(topic.name, p.partition_index) is None:
                refused[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            offsets[tp] = OffsetAndMetadata(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch,
                metadata=p.committed_metadata or "",
            )
    if not offsets:
        # Nothing left to commit (Kafka answers at once too): the group is not touched.
        return _answer(request, refused)
    result = await ctx.broker.groups.commit(
        CommitRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id,
            generation_id=request.generation_id_or_member_epoch,
            offsets=offsets,
            refused=refused,
            retention_ms=retention,
        )
    )
    return _answer(request, dict(result.errors))
