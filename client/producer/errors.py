"""The errors only a producer raises (the others are in ``errors.py``).

A send fails with the error its batch ended with: the broker's, named by
:func:`~client.errors.error_for` (MessageTooLargeError,
UnknownTopicOrPartitionError, TopicAuthorizationFailedError, ...), or one
of these. Each names the topic, partition and (when one was involved) broker.
"""

from __future__ import annotations

from tributary.client.errors import KafkaError
from tributary.protocol.error_codes import ErrorCode


class DeliveryTimeoutError(KafkaError, code=ErrorCode.REQUEST_TIMED_OUT):
    """A record was not acknowledged within ``delivery_timeout_ms``: its partition
    had no reachable leader, or every attempt failed with a retriable error. The
    last such error is the ``__cause__`` and ``last_error``. The record may have
    been written by an attempt whose answer was lost (unless idempotence is on
    and a later attempt reached the broker). Retriable, as Kafka's TimeoutException:
    the application may send the record again."""

    def __init__(
        self,
        message: str,
        *,
        last_error: BaseException | None = None,
        error_code: ErrorCode | int | None = None,
        topic: str | None = None,
        partition: int | None = None,
        broker: int | str | None = None,
    ) -> None:
        super().__init__(message, error_code=error_code, topic=topic, partition=partition, broker=broker)
        self.last_error = last_error


class ProducerClosedError(KafkaError):
    """The producer closed (its block was cancelled or raised a BaseException)
    before the record was acknowledged, or a send came after it closed."""


__all__ = ["DeliveryTimeoutError", "ProducerClosedError"]
