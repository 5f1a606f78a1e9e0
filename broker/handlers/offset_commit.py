"""OffsetCommit: store a group's consumed positions in ``__consumer_offsets``.

Partitions of unknown topics are refused with UNKNOWN_TOPIC_OR_PARTITION, as
Kafka does; the rest is validated against the group (member, generation) and
acknowledged once its record is in the log.
"""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.broker.group.messages import CommitRequest
from tributary.broker.group.offsets import OffsetAndMetadata, TopicPartition
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import OffsetCommitRequest, OffsetCommitResponse

#: The request carries a retention time in these versions (-1: the broker's).
RETENTION_VERSIONS = range(2, 5)


async def handle(ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    snapshot = ctx.broker.snapshot()
    retention = request.retention_time_ms if ctx.api_version in RETENTION_VERSIONS else -1
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    refused: dict[TopicPartition, ErrorCode] = {}
    for topic in request.topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if snapshot.partition(topic.name, p.partition_index) is None:
                refused[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            offsets[tp] = OffsetAndMetadata(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch,
                metadata=p.committed_metadata or "",
            )
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
    return OffsetCommitResponse(
        topics=[
            OffsetCommitResponse.OffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    OffsetCommitResponse.OffsetCommitResponsePartition(
                        partition_index=p.partition_index,
                        error_code=result.errors.get((topic.name, p.partition_index), ErrorCode.UNKNOWN_SERVER_ERROR),
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
    )
