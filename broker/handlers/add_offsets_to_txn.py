"""AddOffsetsToTxn: a transaction will commit a consumer group's offsets (TxnOffsetCommit, to
the group's coordinator next): the group's ``__consumer_offsets`` partition joins the
transaction, so its marker applies or drops those offsets."""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.broker.group.placement import OFFSETS_TOPIC
from tributary.broker.txn.errors import fenced_for
from tributary.broker.txn.messages import AddPartitionsRequest
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

FENCED_VERSION = 2


async def handle(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    broker = ctx.broker
    if not request.group_id:
        return AddOffsetsToTxnResponse(error_code=ErrorCode.INVALID_GROUP_ID)
    if not await broker.offsets_topic.ensure():
        return AddOffsetsToTxnResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    partition = broker.groups.coordinator.partition_for(request.group_id)
    error = await broker.transactions.add_partitions(
        AddPartitionsRequest(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            frozenset({(OFFSETS_TOPIC, partition)}),
        )
    )
    return AddOffsetsToTxnResponse(error_code=fenced_for(error, ctx.api_version, FENCED_VERSION))
