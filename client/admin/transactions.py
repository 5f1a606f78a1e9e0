"""Transactions for operators: ListTransactions (asked of every broker: each lists the
transactional ids it coordinates) and DescribeTransactions (asked of each id's coordinator),
as Kafka's Admin client and ``kafka-transactions.sh`` do."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import trio

from tributary.client.errors import KafkaError, error_for
from tributary.client.wire.cluster import TRANSACTION_COORDINATOR, Cluster
from tributary.client.wire.metadata import TopicPartition
from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.messages import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    #: Kafka's state name: Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort...
    state: str
    coordinator: int


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    #: When the open transaction began (ms since the epoch), -1 when none is open.
    start_ms: int
    #: The partitions of the open transaction (while it completes: those still without a marker).
    partitions: tuple[TopicPartition, ...]
    coordinator: int


async def _retry_or_raise(cluster: Cluster, error: KafkaError, deadline: float) -> None:
    cluster.note_error(error)
    if not error.retriable or trio.current_time() + cluster.config.retry_backoff > deadline:
        raise error
    await trio.sleep(cluster.config.retry_backoff)


async def list_transactions(
    cluster: Cluster,
    *,
    states: Iterable[str] = (),
    producer_ids: Iterable[int] = (),
    duration_ms: int = -1,
    timeout: float | None = None,
) -> list[TransactionListing]:
    """Every transactional id of the cluster, filtered by state names, producer ids and (brokers
    that know ListTransactions v1) transactions running for at least ``duration_ms``."""
    deadline = trio.current_time() + (cluster.config.api_timeout if timeout is None else timeout)
    request = ListTransactionsRequest(
        state_filters=list(states), producer_id_filters=list(producer_ids), duration_filter=duration_ms
    )
    metadata = await cluster.refresh_metadata()
    listings: dict[str, TransactionListing] = {}
    for broker in sorted(metadata.brokers):
        while True:
            try:
                response: ListTransactionsResponse = await cluster.send(broker, request)
                if response.error_code:
                    raise error_for(response.error_code, broker=broker, context="list transactions")
            except KafkaError as exc:
                await _retry_or_raise(cluster, exc, deadline)
                continue
            for t in response.transaction_states:
                listings[t.transactional_id] = TransactionListing(
                    t.transactional_id, t.producer_id, t.transaction_state, broker
                )
            break
    return sorted(listings.values(), key=lambda t: t.transactional_id)


async def describe_transactions(
    cluster: Cluster, transactional_ids: Iterable[str], *, timeout: float | None = None
) -> dict[str, TransactionDescription]:
    """Each id's state from its coordinator. An unknown id raises the broker's
    TRANSACTIONAL_ID_NOT_FOUND error."""
    deadline = trio.current_time() + (cluster.config.api_timeout if timeout is None else timeout)
    out: dict[str, TransactionDescription] = {}
    for transactional_id in transactional_ids:
        while True:
            try:
                coordinator = await cluster.coordinator_for(transactional_id, key_type=TRANSACTION_COORDINATOR)
                response: DescribeTransactionsResponse = await cluster.send_to_coordinator(
                    transactional_id,
                    DescribeTransactionsRequest(transactional_ids=[transactional_id]),
                    key_type=TRANSACTION_COORDINATOR,
                )
                (state,) = [s for s in response.transaction_states if s.transactional_id == transactional_id]
                if state.error_code:
                    if state.error_code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                        cluster.forget_coordinator(transactional_id, key_type=TRANSACTION_COORDINATOR)
                    raise error_for(
                        state.error_code,
                        broker=coordinator,
                        context=f"describe transactional id {transactional_id!r}",
                    )
            except KafkaError as exc:
                await _retry_or_raise(cluster, exc, deadline)
                continue
            except ValueError:
                raise KafkaError(f"broker did not describe transactional id {transactional_id!r}") from None
            out[transactional_id] = TransactionDescription(
                transactional_id,
                state.transaction_state,
                state.producer_id,
                state.producer_epoch,
                state.transaction_timeout_ms,
                state.transaction_start_time_ms,
                tuple(TopicPartition(t.topic, p) for t in state.topics for p in sorted(t.partitions)),
                coordinator,
            )
            break
    return out
