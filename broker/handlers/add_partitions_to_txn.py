"""AddPartitionsToTxn: the partitions a transactional producer is about to write to, recorded
by its coordinator before it writes (so the markers reach every one of them).

A partition of an unknown topic gets UNKNOWN_TOPIC_OR_PARTITION and the others
OPERATION_NOT_ATTEMPTED, as Kafka answers; otherwise they share the coordinator's answer.
"""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.broker.txn.errors import fenced_for
from tributary.broker.txn.messages import AddPartitionsRequest
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

FENCED_VERSION = 2


async def handle(ctx: RequestContext, request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    snapshot = ctx.broker.snapshot()
    wanted = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
    unknown = {tp for tp in wanted if snapshot.partition(*tp) is None}
    errors: dict[tuple[str, int], ErrorCode]
    if unknown:
        errors = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                  for tp in wanted}  # fmt: skip
    else:
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
