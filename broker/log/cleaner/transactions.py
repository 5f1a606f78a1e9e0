"""Transactions as the cleaner sees them: which transactional batches were aborted, which
transaction markers may go, and where the first still-open transaction starts.

A transactional batch belongs to the producer's open transaction, which its next marker (a
control batch of the same producer) ends, committed or aborted. :func:`scan_transactions`
reads that from the log's batch headers and markers (the aborted-transaction index will say it
directly once the log keeps one). Kafka's rules (LogCleaner's ``CleanedTransactionMetadata``),
applied by :class:`CleanedTransactions` as a clean walks the log in order:

- an aborted transaction's batches are removed (and never enter the key map: an aborted record
  must not hide a committed one);
- an abort marker stays while this pass still met batches of its transaction (they go now; the
  marker goes in a later pass), a commit marker while this pass met batches of its transaction
  that are still there; otherwise it may go: it is then stamped with a delete horizon and
  removed once that has passed, so a consumer within ``delete.retention.ms`` still sees it;
- an empty control batch (a marker already cleaned) may go;
- nothing at or after the first offset of a still-open transaction is cleaned at all (its end
  is unknown): the clean stops at the segment that holds it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tributary.protocol.records import BatchHeader, ControlType


@dataclass(frozen=True, slots=True, order=True)
class AbortedTxn:
    first_offset: int
    producer_id: int
    #: The abort marker's offset.
    last_offset: int


@dataclass(frozen=True, slots=True)
class TxnScan:
    aborted: tuple[AbortedTxn, ...]
    #: Where the first transaction still open at the end of the scan starts, if any.
    first_unstable_offset: int | None


def scan_transactions(batches: Iterable[tuple[BatchHeader, ControlType | None]]) -> TxnScan:
    """The aborted transactions and the first open one, from every batch header of the log in
    order (with the marker type of control batches)."""
    open_txns: dict[int, int] = {}
    aborted: list[AbortedTxn] = []
    for header, marker in batches:
        producer_id = header.producer_id
        if header.is_control:
            first = open_txns.pop(producer_id, None)
            if first is not None and marker is ControlType.ABORT:
                aborted.append(AbortedTxn(first, producer_id, header.last_offset))
        elif header.is_transactional:
            open_txns.setdefault(producer_id, header.base_offset)
    return TxnScan(tuple(sorted(aborted)), min(open_txns.values()) if open_txns else None)


class _Aborted:
    __slots__ = ("seen_batch", "txn")

    def __init__(self, txn: AbortedTxn) -> None:
        self.txn = txn
        self.seen_batch = False


class CleanedTransactions:
    """One pass's view of the transactions it walks through, in offset order."""

    def __init__(self, aborted: Sequence[AbortedTxn]) -> None:
        self._pending = deque(sorted(aborted))
        self._ongoing_aborted: dict[int, _Aborted] = {}
        self._ongoing_committed: set[int] = set()

    def _start_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0].first_offset <= offset:
            txn = pending.popleft()
            self._ongoing_aborted[txn.producer_id] = _Aborted(txn)

    def on_batch(self, header: BatchHeader) -> bool:
        """A data batch read; True if it belongs to an aborted transaction (it goes)."""
        self._start_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        aborted = self._ongoing_aborted.get(header.producer_id)
        if aborted is not None:
            aborted.seen_batch = True
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_marker(self, header: BatchHeader, marker: ControlType | None) -> bool:
        """A control batch read (``marker`` None: empty or unknown); True if it may go."""
        self._start_up_to(header.last_offset)
        if header.record_count == 0:
            return True  # a marker a cleaner already emptied
        if marker is ControlType.ABORT:
            aborted = self._ongoing_aborted.pop(header.producer_id, None)
            return aborted is None or not aborted.seen_batch
        if marker is ControlType.COMMIT:
            if header.producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(header.producer_id)
                return False
            return True
        return False
