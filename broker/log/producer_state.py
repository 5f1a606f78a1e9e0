"""Idempotent and transactional producers' state, per partition.

For each producer id: its epoch, the metadata of its last five batches (Kafka's
``max.in.flight.requests.per.connection`` limit for idempotence), the epoch of the
transaction coordinator that last wrote a marker for it, and the first offset of its open
transaction if it has one. A retried batch is recognised and answered with the offsets it got
the first time instead of being appended twice; the open transactions give the partition its
last stable offset (:meth:`ProducerStateManager.first_unstable_offset`).

Rules, as Kafka 2.5+ applies them to client appends:

* a batch from an older epoch than the producer's is refused
  (:class:`InvalidProducerEpochError`: a fenced zombie);
* a newer epoch must start at sequence 0;
* within an epoch, each batch's first sequence follows the previous batch's
  last (wrapping from 2**31-1 to 0), else :class:`OutOfOrderSequenceError`;
* a producer id this partition does not know is accepted at any sequence.
  Its state may have expired (``producer.id.expiration.ms``), been deleted
  with old segments, or been lost with a crash beyond the header scan that
  rebuilds it; refusing it (UNKNOWN_PRODUCER_ID, Kafka before 2.5) would make
  the producer reset and renumber, which buys nothing here;
* a transactional batch opens the producer's transaction if none is open; a plain batch
  while one is open, or a new epoch over an open one, is refused
  (:class:`InvalidTxnStateError`);
* a marker (a control batch the coordinator had written) closes the open transaction; it
  is refused from an older producer epoch, or from an older coordinator epoch than the
  last marker's (:class:`TransactionCoordinatorFencedError`). A marker with a newer
  producer epoch (a coordinator that fenced the producer, KIP-360) moves the producer to it.

A closed transaction stays *unreplicated* until the high watermark passes its marker: until
then a consumer reading committed data must not pass its first offset either, or it would
read data whose fate a new leader might not know.

State is rebuilt on open by replaying batch headers (and markers) from a snapshot
(:mod:`.producer_snapshots`); :meth:`ProducerStateManager.to_bytes` writes one. Expiry uses
the broker's clock at append, not batch timestamps: a mirror copying week-old records must
keep its duplicate protection; a producer with an open transaction never expires.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from tributary.broker.log.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from tributary.protocol.crc32c import crc32c
from tributary.protocol.records import BatchHeader, ControlType, Marker

MAX_CACHED_BATCHES = 5
_SEQUENCE_MODULUS = 2**31
NO_OFFSET = -1

#: Version 2 adds each producer's coordinator epoch and open transaction.
_SNAPSHOT_VERSION = 2
_SNAPSHOT_HEAD = struct.Struct(">hI")  # version, CRC-32C of everything after
_SNAPSHOT_BODY_HEAD = struct.Struct(">qi")  # offset, producer count
# producer id, epoch, coordinator epoch, open transaction's first offset (-1: none),
# last offset written, batch count
_SNAPSHOT_PRODUCER = struct.Struct(">qhiqqb")
_SNAPSHOT_BATCH = struct.Struct(">iiqqq")
#: Version 1 (``producer-state.snapshot`` of brokers before transactions): producer id, epoch,
#: batch count; read once, when such a broker's log is opened.
_V1 = 1
_V1_PRODUCER = struct.Struct(">qhb")


def last_sequence(header: BatchHeader) -> int:
    return (header.base_sequence + header.last_offset_delta) % _SEQUENCE_MODULUS


class BatchMetadata(NamedTuple):
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    #: The batch's maximum timestamp as stored (the append time under LogAppendTime).
    timestamp: int


class CompletedTxn(NamedTuple):
    """A transaction a marker closed: its data lies in [first_offset, last_offset)
    (the marker is at ``last_offset``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


class ProducerEntry:
    __slots__ = ("batches", "coordinator_epoch", "current_txn_first_offset", "epoch", "last_append_ms", "last_offset")

    def __init__(self, epoch: int, last_append_ms: int) -> None:
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=MAX_CACHED_BATCHES)
        self.last_append_ms = last_append_ms
        #: The coordinator epoch of the last marker written for this producer (-1: none).
        self.coordinator_epoch = -1
        #: The first offset of the producer's open transaction, if one is open.
        self.current_txn_first_offset: int | None = None
        #: The last offset this producer wrote (data or marker).
        self.last_offset = NO_OFFSET

    @property
    def last_sequence(self) -> int | None:
        return self.batches[-1].last_sequence if self.batches else None

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.epoch:
            return None
        last = last_sequence(header)
        for batch in self.batches:
            if batch.first_sequence == header.base_sequence and batch.last_sequence == last:
                return batch
        return None

    def _move_to_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()


class ProducerStateManager:
    """The state of every idempotent or transactional producer that wrote to one partition."""

    __slots__ = ("_ongoing", "_producers", "_unreplicated")

    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}
        # producer id -> first offset of its open transaction (mirrors the entries, for the LSO).
        self._ongoing: dict[int, int] = {}
        # Closed transactions whose marker may not be below the high watermark yet, by marker offset.
        self._unreplicated: deque[CompletedTxn] = deque()

    def __len__(self) -> int:
        return len(self._producers)

    def get(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def __iter__(self) -> Iterator[tuple[int, ProducerEntry]]:
        return iter(self._producers.items())

    # --- appends ------------------------------------------------------------------------

    def check(self, headers: Iterable[BatchHeader]) -> BatchMetadata | None:
        """Validates the batches of one client append, in order, before anything is
        written. Returns the metadata of a batch already in the log if one of
        them is a retry of it (the whole append is then a duplicate, as in
        Kafka); raises if a sequence, an epoch or the transaction state is wrong."""
        # Later batches of the same producer in this append follow the earlier ones:
        # producer id -> (epoch, last sequence, in a transaction).
        pending: dict[int, tuple[int, int, bool]] = {}
        for header in headers:
            producer_id = header.producer_id
            if producer_id < 0:
                continue
            entry = self._producers.get(producer_id)
            if entry is not None:
                duplicate = entry.find_duplicate(header)
                if duplicate is not None:
                    return duplicate
            if producer_id in pending:
                epoch, last, in_txn = pending[producer_id]
                known: tuple[int, int | None] | None = (epoch, last)
            else:
                known = (entry.epoch, entry.last_sequence) if entry is not None else None
                in_txn = entry is not None and entry.current_txn_first_offset is not None
            if known is not None:
                _check_sequence(header, *known)
                if in_txn and not header.is_transactional:
                    raise InvalidTxnStateError(
                        f"producer {producer_id} wrote a non-transactional batch while its transaction is open"
                    )
                if in_txn and header.producer_epoch != known[0]:
                    raise InvalidTxnStateError(
                        f"producer {producer_id} wrote epoch {header.producer_epoch} while its transaction of "
                        f"epoch {known[0]} is open"
                    )
            pending[producer_id] = (
                header.producer_epoch,
                last_sequence(header),
                in_txn or header.is_transactional,
            )
        return None

    def check_coordinator_batches(self, headers: Iterable[BatchHeader]) -> None:
        """The check of batches a coordinator writes on a producer's behalf (a transactional
        offset commit): only that the producer's epoch is not an older one."""
        for header in headers:
            entry = self._producers.get(header.producer_id)
            if entry is not None and header.producer_epoch < entry.epoch:
                raise InvalidProducerEpochError(
                    f"producer {header.producer_id} epoch {header.producer_epoch} is older than its epoch {entry.epoch}"
                )

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Whether a transaction coordinator may write this marker (before it is appended)."""
        entry = self._producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"marker for producer {producer_id} epoch {producer_epoch} is older than its epoch {entry.epoch}"
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"marker for producer {producer_id} from coordinator epoch {coordinator_epoch}, "
                f"older than {entry.coordinator_epoch}"
            )

    def record(self, header: BatchHeader, now_ms: int, marker: Marker | None = None) -> CompletedTxn | None:
        """Remembers a batch written with its final offsets (appended here or copied from a
        leader, or replayed at recovery); ``marker`` is what a control batch holds. Returns
        the transaction a marker closed."""
        producer_id = header.producer_id
        if producer_id < 0:
            return None
        if header.is_control:
            return None if marker is None else self._record_marker(header, now_ms, marker)
        if header.base_sequence < 0:
            return None
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerEntry(header.producer_epoch, now_ms)
        else:
            entry._move_to_epoch(header.producer_epoch)
        sequence = header.base_sequence
        entry.batches.append(
            BatchMetadata(sequence, last_sequence(header), header.base_offset, header.last_offset, header.max_timestamp)
        )
        entry.last_append_ms = now_ms
        entry.last_offset = header.last_offset
        if header.is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = header.base_offset
            self._ongoing[producer_id] = header.base_offset
        return None

    def _record_marker(self, header: BatchHeader, now_ms: int, marker: Marker) -> CompletedTxn:
        producer_id = header.producer_id
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerEntry(header.producer_epoch, now_ms)
        elif header.producer_epoch > entry.epoch:
            entry._move_to_epoch(header.producer_epoch)
        first = entry.current_txn_first_offset
        completed = CompletedTxn(
            producer_id,
            header.base_offset if first is None else first,
            header.base_offset,
            marker.control_type is ControlType.ABORT,
        )
        entry.current_txn_first_offset = None
        entry.coordinator_epoch = max(entry.coordinator_epoch, marker.coordinator_epoch)
        entry.last_append_ms = now_ms
        entry.last_offset = header.base_offset
        self._ongoing.pop(producer_id, None)
        self._unreplicated.append(completed)
        return completed

    # --- the last stable offset ------------------------------------------------------------

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of the earliest transaction a committed-only reader must not pass:
        open, or closed by a marker at or above the high watermark. None when there is none."""
        unreplicated = self._unreplicated
        while unreplicated and unreplicated[0].last_offset < high_watermark:
            unreplicated.popleft()
        first = min(self._ongoing.values(), default=None)
        pending = min((txn.first_offset for txn in unreplicated), default=None)
        if first is None:
            return pending
        return first if pending is None else min(first, pending)

    def first_open_offset(self) -> int | None:
        """The first offset of the earliest open transaction: the last stable offset an aborted
        transaction's index entry records (Kafka's, for ending the search early)."""
        return min(self._ongoing.values(), default=None)

    def open_transactions(self) -> dict[int, int]:
        """producer id -> first offset of its open transaction."""
        return dict(self._ongoing)

    # --- forgetting -------------------------------------------------------------------------

    def expire(self, now_ms: int, max_idle_ms: int) -> int:
        """Forgets producers idle for ``max_idle_ms`` that have no open transaction; returns how many."""
        expired = [
            pid
            for pid, e in self._producers.items()
            if now_ms - e.last_append_ms >= max_idle_ms and e.current_txn_first_offset is None
        ]
        for pid in expired:
            del self._producers[pid]
        return len(expired)

    def truncate_head(self, log_start_offset: int) -> int:
        """Forgets producers whose batches were all deleted with old segments (unless a
        transaction of theirs is still open)."""
        gone = [
            pid
            for pid, e in self._producers.items()
            if e.last_offset < log_start_offset and e.current_txn_first_offset is None
        ]
        for pid in gone:
            del self._producers[pid]
        return len(gone)

    # --- snapshot ---------------------------------------------------------------

    def to_bytes(self, offset: int) -> bytes:
        """A snapshot of the state as of log end ``offset``, checksummed. (Closed transactions
        waiting for the high watermark are not kept: after a restart they count as replicated.)"""
        body = bytearray(_SNAPSHOT_BODY_HEAD.pack(offset, len(self._producers)))
        for producer_id, entry in self._producers.items():
            first = NO_OFFSET if entry.current_txn_first_offset is None else entry.current_txn_first_offset
            body += _SNAPSHOT_PRODUCER.pack(
                producer_id, entry.epoch, entry.coordinator_epoch, first, entry.last_offset, len(entry.batches)
            )
            for batch in entry.batches:
                body += _SNAPSHOT_BATCH.pack(*batch)
        return _SNAPSHOT_HEAD.pack(_SNAPSHOT_VERSION, crc32c(body)) + bytes(body)

    @classmethod
    def from_bytes(cls, data: bytes, now_ms: int) -> tuple[int, ProducerStateManager]:
        """(offset, state) from :meth:`to_bytes`; ValueError if damaged."""
        try:
            version, crc = _SNAPSHOT_HEAD.unpack_from(data, 0)
            body = memoryview(data)[_SNAPSHOT_HEAD.size :]
            if version not in (_V1, _SNAPSHOT_VERSION) or crc32c(body) != crc:
                raise ValueError("producer state snapshot has a bad version or checksum")
            offset, count = _SNAPSHOT_BODY_HEAD.unpack_from(body, 0)
            state = cls()
            pos = _SNAPSHOT_BODY_HEAD.size
            for _ in range(count):
                if version == _V1:
                    producer_id, epoch, batches = _V1_PRODUCER.unpack_from(body, pos)
                    coordinator_epoch, first, last_offset = -1, NO_OFFSET, NO_OFFSET
                    pos += _V1_PRODUCER.size
                else:
                    producer_id, epoch, coordinator_epoch, first, last_offset, batches = _SNAPSHOT_PRODUCER.unpack_from(
                        body, pos
                    )
                    pos += _SNAPSHOT_PRODUCER.size
                entry = state._producers[producer_id] = ProducerEntry(epoch, now_ms)
                entry.coordinator_epoch = coordinator_epoch
                entry.last_offset = last_offset
                if first != NO_OFFSET:
                    entry.current_txn_first_offset = first
                    state._ongoing[producer_id] = first
                for _ in range(batches):
                    entry.batches.append(BatchMetadata(*_SNAPSHOT_BATCH.unpack_from(body, pos)))
                    pos += _SNAPSHOT_BATCH.size
                if entry.batches and entry.last_offset == NO_OFFSET:
                    entry.last_offset = entry.batches[-1].last_offset
        except struct.error as exc:
            raise ValueError(f"producer state snapshot is truncated: {exc}") from None
        if pos != len(body):
            raise ValueError("producer state snapshot has trailing bytes")
        return offset, state


def _check_sequence(header: BatchHeader, epoch: int, last: int | None) -> None:
    if header.producer_epoch < epoch:
        raise InvalidProducerEpochError(
            f"producer {header.producer_id} epoch {header.producer_epoch} is older than its current epoch {epoch}"
        )
    if header.producer_epoch > epoch:
        if header.base_sequence != 0:
            raise OutOfOrderSequenceError(
                f"producer {header.producer_id} started epoch {header.producer_epoch} "
                f"at sequence {header.base_sequence}, not 0"
            )
    elif last is not None and header.base_sequence != (last + 1) % _SEQUENCE_MODULUS:
        raise OutOfOrderSequenceError(
            f"producer {header.producer_id} sent sequence {header.base_sequence} after {last} "
            f"(epoch {header.producer_epoch})"
        )
