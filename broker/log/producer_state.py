"""Idempotent producers' sequence state, per partition.

For each producer id: its epoch and the metadata of its last five batches
(Kafka's ``max.in.flight.requests.per.connection`` limit for idempotence), so
that a retried batch is recognised and answered with the offsets it got the
first time instead of being appended twice.

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
  the producer reset and renumber, which buys nothing here.

State is rebuilt on open from batch headers (no record is decoded), or loaded
from the snapshot :meth:`ProducerStateManager.to_bytes` wrote at a clean close.
Expiry uses the broker's clock at append, not batch timestamps: a mirror
copying week-old records must keep its duplicate protection.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from tributary.broker.log.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from tributary.protocol.crc32c import crc32c
from tributary.protocol.records import BatchHeader

MAX_CACHED_BATCHES = 5
_SEQUENCE_MODULUS = 2**31

_SNAPSHOT_VERSION = 1
_SNAPSHOT_HEAD = struct.Struct(">hI")  # version, CRC-32C of everything after
_SNAPSHOT_BODY_HEAD = struct.Struct(">qi")  # offset, producer count
_SNAPSHOT_PRODUCER = struct.Struct(">qhb")  # producer id, epoch, batch count
_SNAPSHOT_BATCH = struct.Struct(">iiqqq")


def last_sequence(header: BatchHeader) -> int:
    return (header.base_sequence + header.last_offset_delta) % _SEQUENCE_MODULUS


class BatchMetadata(NamedTuple):
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    #: The batch's maximum timestamp as stored (the append time under LogAppendTime).
    timestamp: int


class ProducerEntry:
    __slots__ = ("batches", "epoch", "last_append_ms")

    def __init__(self, epoch: int, last_append_ms: int) -> None:
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=MAX_CACHED_BATCHES)
        self.last_append_ms = last_append_ms

    @property
    def last_sequence(self) -> int | None:
        return self.batches[-1].last_sequence if self.batches else None

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.epoch:
            return None
        last = last_sequence(header)
        for batch in self.batches:
            if batch.first_sequence == header.base_sequence and batch.last_sequence == last:
                return batch
        return None


class ProducerStateManager:
    """The state of every idempotent producer that wrote to one partition."""

    __slots__ = ("_producers",)

    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def get(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    def check(self, headers: Iterable[BatchHeader]) -> BatchMetadata | None:
        """Validates the batches of one append, in order, before anything is
        written. Returns the metadata of a batch already in the log if one of
        them is a retry of it (the whole append is then a duplicate, as in
        Kafka); raises if a sequence or epoch is wrong."""
        # Later batches of the same producer in this append follow the earlier ones.
        pending: dict[int, tuple[int, int]] = {}
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
                epoch, last = pending[producer_id]
                known: tuple[int, int | None] | None = (epoch, last)
            else:
                known = (entry.epoch, entry.last_sequence) if entry is not None else None
            if known is not None:
                _check_sequence(header, *known)
            pending[producer_id] = (header.producer_epoch, last_sequence(header))
        return None

    def record(self, header: BatchHeader, now_ms: int) -> None:
        """Remembers a batch written with its final offsets."""
        producer_id = header.producer_id
        if producer_id < 0 or header.base_sequence < 0 or header.is_control:
            return
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerEntry(header.producer_epoch, now_ms)
        elif header.producer_epoch != entry.epoch:
            entry.epoch = header.producer_epoch
            entry.batches.clear()
        sequence = header.base_sequence
        entry.batches.append(
            BatchMetadata(sequence, last_sequence(header), header.base_offset, header.last_offset, header.max_timestamp)
        )
        entry.last_append_ms = now_ms

    def expire(self, now_ms: int, max_idle_ms: int) -> int:
        """Forgets producers idle for ``max_idle_ms``; returns how many."""
        expired = [pid for pid, e in self._producers.items() if now_ms - e.last_append_ms >= max_idle_ms]
        for pid in expired:
            del self._producers[pid]
        return len(expired)

    def truncate_head(self, log_start_offset: int) -> int:
        """Forgets producers whose batches were all deleted with old segments."""
        gone = [pid for pid, e in self._producers.items() if e.last_offset < log_start_offset]
        for pid in gone:
            del self._producers[pid]
        return len(gone)

    # --- snapshot ---------------------------------------------------------------

    def to_bytes(self, offset: int) -> bytes:
        """A snapshot of the state as of log end ``offset``, checksummed."""
        body = bytearray(_SNAPSHOT_BODY_HEAD.pack(offset, len(self._producers)))
        for producer_id, entry in self._producers.items():
            body += _SNAPSHOT_PRODUCER.pack(producer_id, entry.epoch, len(entry.batches))
            for batch in entry.batches:
                body += _SNAPSHOT_BATCH.pack(*batch)
        return _SNAPSHOT_HEAD.pack(_SNAPSHOT_VERSION, crc32c(body)) + bytes(body)

    @classmethod
    def from_bytes(cls, data: bytes, now_ms: int) -> tuple[int, ProducerStateManager]:
        """(offset, state) from :meth:`to_bytes`; ValueError if damaged."""
        try:
            version, crc = _SNAPSHOT_HEAD.unpack_from(data, 0)
            body = memoryview(data)[_SNAPSHOT_HEAD.size :]
            if version != _SNAPSHOT_VERSION or crc32c(body) != crc:
                raise ValueError("producer state snapshot has a bad version or checksum")
            offset, count = _SNAPSHOT_BODY_HEAD.unpack_from(body, 0)
            state = cls()
            pos = _SNAPSHOT_BODY_HEAD.size
            for _ in range(count):
                producer_id, epoch, batches = _SNAPSHOT_PRODUCER.unpack_from(body, pos)
                pos += _SNAPSHOT_PRODUCER.size
                entry = state._producers[producer_id] = ProducerEntry(epoch, now_ms)
                for _ in range(batches):
                    entry.batches.append(BatchMetadata(*_SNAPSHOT_BATCH.unpack_from(body, pos)))
                    pos += _SNAPSHOT_BATCH.size
        except struct.error as exc:
            raise ValueError(f"producer state snapshot is truncated: {exc}") from None
        if pos != len(body):
            raise ValueError("producer state snapshot has trailing bytes")
        return offset, state

    def __iter__(self) -> Iterator[tuple[int, ProducerEntry]]:
        return iter(self._producers.items())


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
