"""DescribeProducers (KIP-664): the idempotent producers a partition's leader remembers.

For each producer: id, epoch, last sequence and last timestamp, as the producer state that
deduplicates retries holds them, and for a transactional one the coordinator epoch of its last
marker and the first offset of its open transaction (-1 when there is none). A partition this broker does not lead gets
NOT_LEADER_OR_FOLLOWER (the admin client asks the leader), an unknown one
UNKNOWN_TOPIC_OR_PARTITION. Read on the topic is needed (TOPIC_AUTHORIZATION_FAILED), as in Kafka.
"""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.broker.log.active_producers import active_producers
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import DescribeProducersRequest, DescribeProducersResponse

R = DescribeProducersResponse


def _partition(ctx: RequestContext, topic: str, index: int) -> R.PartitionResponse:
    target = ctx.broker.partitions.lookup(ctx.broker.snapshot(), topic, index)
    if isinstance(target, ErrorCode):
        return R.PartitionResponse(partition_index=index, error_code=target, error_message=target.name)
    return R.PartitionResponse(
        partition_index=index,
        error_code=ErrorCode.NONE,
        active_producers=[
            R.ProducerState(
                producer_id=p.producer_id,
                producer_epoch=p.epoch,
                last_sequence=p.last_sequence,
                last_timestamp=p.last_timestamp,
                coordinator_epoch=p.coordinator_epoch,
                current_txn_start_offset=p.current_txn_start_offset,
            )
            for p in active_producers(target.log.producer_state)
        ],
    )


def _refused(index: int) -> R.PartitionResponse:
    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return R.PartitionResponse(partition_index=index, error_code=code, error_message=code.name)


async def handle(ctx: RequestContext, request: DescribeProducersRequest) -> DescribeProducersResponse:
    readable = ctx.authorized(AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics))
    return R(
        topics=[
            R.TopicResponse(
                name=t.name,
                partitions=[
                    _partition(ctx, t.name, i) if t.name in readable else _refused(i) for i in t.partition_indexes
                ],
            )
            for t in request.topics
        ]
    )
