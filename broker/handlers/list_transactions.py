"""ListTransactions (operators): the transactional ids this broker coordinates, filtered by state,
producer id and (v1, KIP-994) how long their transaction has been running. A cluster-wide list
asks every broker. Only the ids the principal may Describe are listed, as Kafka filters them."""

from __future__ import annotations

from tributary.broker.context import RequestContext
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.messages import ListTransactionsRequest, ListTransactionsResponse

DURATION_VERSION = 1


async def handle(ctx: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    duration = request.duration_filter if ctx.api_version >= DURATION_VERSION else -1
    error, listed, unknown = ctx.broker.transactions.list_transactions(
        list(request.state_filters), list(request.producer_id_filters), duration
    )
    return ListTransactionsResponse(
        error_code=error,
        unknown_state_filters=unknown,
        transaction_states=[
            ListTransactionsResponse.TransactionState(
                transactional_id=t.transactional_id, producer_id=t.producer_id, transaction_state=t.state
            )
            for t in listed
            if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t.transactional_id, log_denied=False)
        ],
    )
