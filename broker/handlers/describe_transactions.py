"""DescribeTransactions (operators): state, producer, timeout and partitions of transactional ids
this broker coordinates (TRANSACTIONAL_ID_NOT_FOUND, NOT_COORDINATOR otherwise)."""

from __future__ import annotations

from collections import defaultdict

from tributary.broker.context import RequestContext
from tributary.broker.txn.messages import TxnDescription
from tributary.protocol.messages import DescribeTransactionsRequest, DescribeTransactionsResponse

R = DescribeTransactionsResponse


def _state(description: TxnDescription) -> R.TransactionState:
    topics: dict[str, list[int]] = defaultdict(list)
    for topic, partition in description.partitions:
        topics[topic].append(partition)
    return R.TransactionState(
        error_code=description.error,
        transactional_id=description.transactional_id,
        transaction_state=description.state,
        transaction_timeout_ms=description.timeout_ms,
        transaction_start_time_ms=description.start_ms,
        producer_id=description.producer_id,
        producer_epoch=description.producer_epoch,
        topics=[R.TopicData(topic=topic, partitions=partitions) for topic, partitions in topics.items()],
    )


async def handle(ctx: RequestContext, request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    service = ctx.broker.transactions
    return R(transaction_states=[_state(service.describe(t)) for t in request.transactional_ids])
