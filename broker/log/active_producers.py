"""What DescribeProducers reports of a partition's idempotent producers, read off the producer
state without touching it: its id, epoch, last sequence and the timestamp of its last batch.

Kept apart from ``producer_state`` (which decides appends) so that reporting never grows into
the rules; transactional state, when there is some, adds its own columns here.
"""

from __future__ import annotations

from typing import NamedTuple

from tributary.broker.log.producer_state import ProducerStateManager


class ActiveProducer(NamedTuple):
    producer_id: int
    epoch: int
    #: The last sequence number appended (-1: none since the epoch began).
    last_sequence: int
    #: The maximum timestamp of its last batch (-1: none).
    last_timestamp: int


def active_producers(state: ProducerStateManager) -> list[ActiveProducer]:
    """Every producer the partition remembers, by producer id."""
    found = []
    for producer_id, entry in state:
        last = entry.batches[-1] if entry.batches else None
        found.append(
            ActiveProducer(
                producer_id,
                entry.epoch,
                -1 if last is None else last.last_sequence,
                -1 if last is None else last.timestamp,
            )
        )
    return sorted(found)
