"""AddPartitionsToTxn: the partitions a transactional producer is about to write to, recorded
by its coordinator before it writes (so the markers reach every one of them).

Write on the transactional id is needed (else every partition gets
TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and Write on each topic: a partition of a topic the
principal may not write gets TOPIC_AUTHORIZATION_FAILED, one of an unknown topic
UNKNOWN_TOPIC_OR_PARTITION, and the others then OPERATION_NOT_ATTEMPTED, as Kafka answers;
otherwise they share the coordinator's answer.
"""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.broker.txn.errors import fenced_for
from tributary.broker.txn.messages import AddPartitionsRequest
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

FENCED_VERSION = 2


def _refusals(ctx: RequestContext, request: AddPartitionsToTxnRequest) -> dict[tuple[str, int], ErrorCode]:
    """The partitions refused before the coordinator is asked (empty: none)."""
    wanted = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.v3_and_below_transactional_id):
        return dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    writable = ctx.authorized(AclOperation.WRITE, ResourceType.TOPIC, (t for t, _ in wanted))
    snapshot = ctx.broker.snapshot()
    refused = {
        tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp[0] not in writable else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        for tp in wanted
        if tp[0] not in writable or snapshot.partition(*tp) is None
    }
    if not refused:
        return {}
    return {tp: refused.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in wanted}


async def handle(ctx: RequestContext, request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    wanted = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    errors = _refusals(ctx, request)
    if not errors:
        error = await ctx.broker.transactions.add_partitions(
            AddPartitionsRequest(
                request.v3_and_below_transactional_id,
                request.v3_and_below_producer_id,
                request.v3_and_below_producer_epoch,
                frozenset(wanted),
            )
        )
        errors = dict.fromkeys(wanted, fenced_for(error, ctx.api_version, FENCED_VERSION))
    return AddPartitionsToTxnResponse(
        results_by_topic_v3_and_below=[
            AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(
                name=topic.name,
                results_by_partition=[
                    AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(
                        partition_index=p, partition_error_code=errors[topic.name, p]
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.v3_and_below_topics
        ]
    )
