"""InitProducerId: producer ids for idempotent producers (kafka-python and
librdkafka ask for one by default).

Transactions are not supported: a transactional id is refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients report as fatal instead of
retrying forever.

An idempotent producer needs IdempotentWrite on the Cluster or Write on some topic (Kafka's
check since KIP-679), else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from tributary.broker.cluster.errors import ClusterError
from tributary.broker.context import RequestContext
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import InitProducerIdRequest, InitProducerIdResponse


async def handle(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        return InitProducerIdResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    # Write on some topic first: the IdempotentWrite check logs and counts the refusal.
    may_write = ctx.authorize_any(AclOperation.WRITE, ResourceType.TOPIC)
    if not (may_write or ctx.authorize_cluster(AclOperation.IDEMPOTENT_WRITE)):
        return InitProducerIdResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    try:
        producer_id = await ctx.broker.producer_ids.next()
    except ClusterError:
        return InitProducerIdResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0)
