"""What goes into the transaction coordinator's state machine and what comes out of it.

Requests come in as plain values; out come results and effects for the driver to carry out:

- :class:`Reply`: complete a waiting request (InitProducerId, AddPartitionsToTxn,
  AddOffsetsToTxn, EndTxn) with its result;
- :class:`Write`: append a record to a ``__transaction_state`` partition, wait until the
  partition's in-sync replicas have it, then report the outcome with
  ``TransactionCoordinator.write_completed(write_id, error)``;
- :class:`SendMarkers`: have the leaders of ``partitions`` append the transaction's marker
  (WriteTxnMarkers), reporting each partition done with ``marker_written`` (or the whole
  transaction given up with ``markers_abandoned``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tributary.protocol.error_codes import ErrorCode

Ticket = int
TopicPartition = tuple[str, int]


# --- requests -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InitRequest:
    transactional_id: str
    timeout_ms: int
    #: KIP-360 (v3+): the (producer id, epoch) the producer holds, asking for the next epoch.
    expected: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class AddPartitionsRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: frozenset[tuple[str, int]]


@dataclass(frozen=True, slots=True)
class EndRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool


# --- results and effects ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InitResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True, slots=True)
class Reply:
    ticket: Ticket
    result: InitResult | ErrorCode


@dataclass(frozen=True, slots=True)
class Write:
    write_id: int
    #: The ``__transaction_state`` partition.
    partition: int
    key: bytes
    #: None: a tombstone (the transactional id expired).
    value: bytes | None


@dataclass(frozen=True, slots=True)
class SendMarkers:
    transactional_id: str
    #: The ``__transaction_state`` partition's leader epoch when the decision was written.
    coordinator_epoch: int
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


Effect = Reply | Write | SendMarkers


@dataclass(frozen=True, slots=True)
class NeedProducerId:
    """InitProducerId must be called again with a fresh producer id (the driver allocates it)."""


NEED_PRODUCER_ID = NeedProducerId()


@dataclass(frozen=True, slots=True)
class TxnDescription:
    error: ErrorCode
    transactional_id: str
    state: str = ""
    timeout_ms: int = 0
    start_ms: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    partitions: tuple[TopicPartition, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class ListedTxn:
    transactional_id: str
    producer_id: int
    state: str
