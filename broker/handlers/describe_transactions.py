"""DescribeTransactions (operators): state, producer, timeout and partitions of transactional ids
this broker coordinates (TRANSACTIONAL_ID_NOT_FOUND, NOT_COORDINATOR otherwise). Describe on each
id is needed (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); the partitions listed are those of topics
the principal may Describe, as Kafka filters them."""

from __future__ import annotations

from collections import defaultdict

from tributary.broker.context import RequestContext
from tributary.broker.txn.messages import TxnDescription
from tributary.protocol.acl import AclOperation, ResourceType
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import DescribeTransactionsRequest, DescribeTransactionsResponse

R = DescribeTransactionsResponse


def _state(ctx: RequestContext, description: TxnDescription) -> R.TransactionState:
    visible = ctx.authorized(AclOperation.DESCRIBE, ResourceType.TOPIC, (t for t, _ in description.partitions),
                             log_denied=False)  # fmt: skip
    topics: dict[str, list[int]] = defaultdict(list)
    for topic, partition in description.partitions:
        if topic in visible:
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


def _described(ctx: RequestContext, transactional_id: str) -> R.TransactionState:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return R.TransactionState(error_code=code, transactional_id=transactional_id)
    return _state(ctx, ctx.broker.transactions.describe(transactional_id))


async def handle(ctx: RequestContext, request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    return R(transaction_states=[_described(ctx, t) for t in request.transactional_ids])
