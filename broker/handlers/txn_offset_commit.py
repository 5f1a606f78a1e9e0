"""TxnOffsetCommit: a group's offsets committed inside a transaction (consume-transform-produce).
Sent to the group's coordinator, which writes them as the producer's transactional batch and
applies them when the transaction's commit marker reaches the partition (dropped on abort).

Partitions of unknown topics are refused with UNKNOWN_TOPIC_OR_PARTITION, as OffsetCommit does.
Write on the transactional id (else every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED), Read
on the group (GROUP_AUTHORIZATION_FAILED) and Read on each topic (TOPIC_AUTHORIZATION_FAILED for
its partitions) are needed, as Kafka checks them.
"""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.broker.group.messages import TxnCommitRequest
from tributary.broker.group.offsets import OffsetAndMetadata, TopicPartition
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import TxnOffsetCommitRequest, TxnOffsetCommitResponse


def _answer(request: TxnOffsetCommitRequest, errors: dict[TopicPartition, ErrorCode]) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(
        topics=[
            TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(
                        partition_index=p.partition_index,
                        error_code=errors.get((topic.name, p.partition_index), ErrorCode.UNKNOWN_SERVER_ERROR),
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ]
    )


async def handle(ctx: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    everything = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return _answer(request, dict.fromkeys(everything, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _answer(request, dict.fromkeys(everything, ErrorCode.GROUP_AUTHORIZATION_FAILED))
    readable = ctx.authorized(AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
    snapshot = ctx.broker.snapshot()
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
    return _answer(request, result.errors)
