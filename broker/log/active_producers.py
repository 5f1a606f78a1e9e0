"""What DescribeProducers reports of a partition's producers, read off the producer state without
touching it: id, epoch, last sequence, the timestamp of the last batch, and, for a transactional
producer, the coordinator epoch of its last marker and where its open transaction began.

Kept apart from ``producer_state`` (which decides appends) so that reporting never grows into
the rules.
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
    #: The coordinator epoch of the last transaction marker written for it (-1: none).
    coordinator_epoch: int = -1
    #: The first offset of its open transaction (-1: none open).
    current_txn_start_offset: int = -1


def active_producers(state: ProducerStateManager) -> list[ActiveProducer]:
    """Every producer the partition remembers, by producer id."""
    found = []
    for producer_id, entry in state:
        last = entry.batches[-1] if entry.batches else None
        start = entry.current_txn_first_offset
        found.append(
            ActiveProducer(
                producer_id,
                entry.epoch,
                -1 if last is None else last.last_sequence,
                -1 if last is None else last.timestamp,
                entry.coordinator_epoch,
                -1 if start is None else start,
            )
        )
    return sorted(found)
