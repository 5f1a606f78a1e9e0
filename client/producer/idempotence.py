"""Idempotent production: producer ids and sequence numbers.

An idempotent producer gets a producer id and epoch from InitProducerId and
numbers each partition's records from 0: a batch carries the sequence of its
first record (``base_sequence``). The broker remembers each producer's last
five batches per partition, so a batch sent again after a lost answer is
recognised and answered with the offsets it got the first time instead of
being appended twice; a batch whose sequence does not follow the last one is
refused with OUT_OF_ORDER_SEQUENCE_NUMBER. Sequences are assigned when a batch
is first sent and kept across retries.

When a batch fails for good after it was numbered (a final error, or its
delivery timeout), the partition's later sequences would leave a gap the
broker refuses. Kafka then bumps the epoch; InitProducerId v3+ would be
needed for that, so instead the partition takes a *new producer id* and
renumbers its unacknowledged batches from 0 (:func:`restamp`): the broker
treats a producer id it does not know as a fresh producer. Other partitions
keep theirs.
"""

from __future__ import annotations

import logging

import trio

from tributary.client.errors import KafkaError, RequestTimedOutError, error_for
from tributary.client.wire.cluster import Cluster
from tributary.protocol.messages import InitProducerIdRequest, InitProducerIdResponse
from tributary.protocol.records import set_producer

log = logging.getLogger(__name__)

#: Sequences are int32 and wrap from 2**31 - 1 to 0.
SEQUENCE_MODULUS = 2**31


def restamp(batch: bytes, producer_id: int, producer_epoch: int, base_sequence: int) -> bytes:
    """``batch`` with new producer fields and its CRC recomputed (over the
    compressed records as they are: nothing is recompressed)."""
    buf = bytearray(batch)
    set_producer(buf, 0, producer_id, producer_epoch, base_sequence)
    return bytes(buf)


async def init_producer_id(
    cluster: Cluster, *, timeout: float, transaction_timeout_ms: int = 60_000
) -> tuple[int, int]:
    """A new (producer id, epoch) from any broker, retrying retriable errors
    (COORDINATOR_NOT_AVAILABLE while a broker allocates id blocks, lost
    connections) until ``timeout``; the last error then, or a final one at once."""
    deadline = trio.current_time() + timeout
    while True:
        try:
            response: InitProducerIdResponse = await cluster.send_to_any(
                InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=transaction_timeout_ms)
            )
            if not response.error_code:
                return response.producer_id, response.producer_epoch
            error = error_for(response.error_code, context="InitProducerId")
        except KafkaError as exc:
            error = exc
        if not error.retriable:
            raise error
        if trio.current_time() + cluster.config.retry_backoff > deadline:
            raise RequestTimedOutError(f"no producer id within {timeout:g} s: {error}") from error
        log.debug("InitProducerId failed, retrying: %s", error)
        await trio.sleep(cluster.config.retry_backoff)


__all__ = ["SEQUENCE_MODULUS", "init_producer_id", "restamp"]
