"""EndTxn: commit or abort the producer's transaction. Answered once the decision is in the
replicas of ``__transaction_state``; the markers follow (a new transaction's AddPartitionsToTxn
waits until they are all written). Write on the transactional id is needed
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.broker.txn.errors import fenced_for
from tributary.broker.txn.messages import EndRequest
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import EndTxnRequest, EndTxnResponse

FENCED_VERSION = 2


async def handle(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return EndTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    error = await ctx.broker.transactions.end_txn(
        EndRequest(request.transactional_id, request.producer_id, request.producer_epoch, request.committed)
    )
    return EndTxnResponse(error_code=fenced_for(error, ctx.api_version, FENCED_VERSION))
