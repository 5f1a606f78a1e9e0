"""TxnOffsetCommit: a group's offsets committed inside a transaction (consume-transform-produce).
Sent to the group's coordinator, which writes them as the producer's transactional batch and
applies them when the transaction's commit marker reaches the partition (dropped on abort).

Partitions of unknown topics are refused with UNKNOWN_TOPIC_OR_PARTITION, as OffsetCommit does.
"""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.broker.group.messages import TxnCommitRequest
from tributary.broker.group.offsets import OffsetAndMetadata, TopicPartition
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import TxnOffsetCommitRequest, TxnOffsetCommitResponse


async def handle(ctx: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    snapshot = ctx.broker.snapshot()
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
    result = await ctx.broker.groups.txn_commit(
        TxnCommitRequest(
            group_id=request.group_id,
            producer_id=request.producer_id,
            producer_epoch=request.producer_epoch,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id,
            generation_id=request.generation_id,
            offsets=offsets,
            refused=refused,
        )
    )
    return TxnOffsetCommitResponse(
        topics=[
            TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(
                        partition_index=p.partition_index,
                        error_code=result.errors.get((topic.name, p.partition_index), ErrorCode.UNKNOWN_SERVER_ERROR),
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
    )
