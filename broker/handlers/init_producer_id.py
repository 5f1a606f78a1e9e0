"""InitProducerId: producer ids for idempotent producers, and for transactional ones the id's
next epoch from its transaction coordinator (which fences the previous instance).

Without a transactional id any broker hands out a fresh producer id; with KIP-360's producer id
and epoch (v3+) an idempotent producer asking to recover gets a fresh id too, as Kafka answers.
With one, the coordinator of ``__transaction_state``'s partition for it answers (others say
NOT_COORDINATOR); an open transaction of the id is aborted first (CONCURRENT_TRANSACTIONS, the
client retries).

A transactional producer needs Write on its transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs IdempotentWrite on the
Cluster or Write on some topic (Kafka's check since KIP-679), else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from tributary.broker.cluster.errors import ClusterError
from tributary.broker.context import RequestContext
from tributary.broker.txn.errors import fenced_for
from tributary.broker.txn.messages import InitRequest
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import InitProducerIdRequest, InitProducerIdResponse

#: The first version carrying the producer's id and epoch (KIP-360), and PRODUCER_FENCED.
EXPECTED_VERSION = 3
FENCED_VERSION = 4


async def handle(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    expected = None
    if ctx.api_version >= EXPECTED_VERSION and (request.producer_id >= 0 or request.producer_epoch >= 0):
        if request.producer_id < 0 or request.producer_epoch < 0:
            return InitProducerIdResponse(error_code=ErrorCode.INVALID_REQUEST)
        expected = (request.producer_id, request.producer_epoch)
    transactional_id = request.transactional_id
    if transactional_id is None:
        # Write on some topic first: the IdempotentWrite check logs and counts the refusal.
        may_write = ctx.authorize_any(AclOperation.WRITE, ResourceType.TOPIC)
        if not (may_write or ctx.authorize_cluster(AclOperation.IDEMPOTENT_WRITE)):
            return InitProducerIdResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        try:
            producer_id = await ctx.broker.producer_ids.next()
        except ClusterError:
            return InitProducerIdResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0)
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return InitProducerIdResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    result = await ctx.broker.transactions.init_producer_id(
        InitRequest(transactional_id, request.transaction_timeout_ms, expected)
    )
    return InitProducerIdResponse(
        error_code=fenced_for(result.error, ctx.api_version, FENCED_VERSION),
        producer_id=result.producer_id,
        producer_epoch=result.producer_epoch,
    )
