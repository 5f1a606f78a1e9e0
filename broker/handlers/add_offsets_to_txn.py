"""AddOffsetsToTxn: a transaction will commit a consumer group's offsets (TxnOffsetCommit, to
the group's coordinator next): the group's ``__consumer_offsets`` partition joins the
transaction, so its marker applies or drops those offsets. Write on the transactional id and Read
on the group are needed (TRANSACTIONAL_ID_, GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.broker.group.placement import OFFSETS_TOPIC
from tributary.broker.txn.errors import fenced_for
from tributary.broker.txn.messages import AddPartitionsRequest
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

FENCED_VERSION = 2


async def handle(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    broker = ctx.broker
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
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
