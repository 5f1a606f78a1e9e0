"""InitProducerId: producer ids for idempotent producers (kafka-python and
librdkafka ask for one by default).

Transactions are not supported: a transactional id is refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients report as fatal instead of
retrying forever.
"""

from __future__ import annotations

from tributary.broker.cluster.errors import ClusterError
from tributary.broker.context import RequestContext
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import InitProducerIdRequest, InitProducerIdResponse


async def handle(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        return InitProducerIdResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    try:
        producer_id = await ctx.broker.producer_ids.next()
    except ClusterError:
        return InitProducerIdResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0)
