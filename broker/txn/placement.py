"""Which ``__transaction_state`` partition, and so which broker, coordinates a transactional id.

As Kafka: ``Utils.abs(transactionalId.hashCode()) % partitionCount``, with Java's
String.hashCode, the same rule that places consumer groups on ``__consumer_offsets``.
"""

from __future__ import annotations

from tributary.broker.group.placement import java_abs, java_string_hashcode

TRANSACTION_STATE_TOPIC = "__transaction_state"


def partition_for(transactional_id: str, partition_count: int) -> int:
    return java_abs(java_string_hashcode(transactional_id)) % partition_count
