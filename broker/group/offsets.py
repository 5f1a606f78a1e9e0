"""Committed offsets: what one group has committed, and which of it has expired.

Kafka's rules (2.1+, KIP-211), which this follows:

- a group that has had members and is Empty now loses all its offsets once it has
  been empty for the retention period (counted from when it became empty);
- a Stable consumer group loses the offsets of topics it no longer subscribes to,
  once they have not been committed for the retention period;
- a group that never had members (offsets committed by a simple consumer or an
  admin tool) loses each offset once it has not been committed for the retention
  period;
- an offset committed with an explicit retention time (OffsetCommit v2-4) expires
  at that time instead;
- an offset with a commit still being written is never expired under it.

Offsets committed inside a transaction (TxnOffsetCommit) are kept apart, per producer, until the
transaction's marker: a commit applies them (unless a plain commit of the same partition was
written after them, as Kafka compares the two records' log offsets), an abort drops them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    #: The leader epoch of the last consumed record (OffsetCommit v6+), -1 if unknown.
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    #: Set only by a commit that asked for its own retention time (OffsetCommit v2-4).
    expire_timestamp: int | None = None


class GroupOffsets:
    """One group's committed offsets."""

    __slots__ = ("_committed", "_pending", "_txn")

    def __init__(self) -> None:
        self._committed: dict[TopicPartition, OffsetAndMetadata] = {}
        # Commits appended but not acknowledged by the log yet, per partition.
        self._pending: Counter[TopicPartition] = Counter()
        # Transactional commits written, waiting for their transaction's marker: producer id -> offsets.
        self._txn: dict[int, dict[TopicPartition, OffsetAndMetadata]] = {}

    def __len__(self) -> int:
        return len(self._committed)

    def __iter__(self) -> Iterator[tuple[TopicPartition, OffsetAndMetadata]]:
        return iter(list(self._committed.items()))

    @property
    def empty(self) -> bool:
        """No offsets and none on their way."""
        return not self._committed and not self._pending and not self._txn

    def pending_transactions(self) -> dict[int, dict[TopicPartition, OffsetAndMetadata]]:
        """producer id -> the offsets its open transaction committed here."""
        return {pid: dict(offsets) for pid, offsets in self._txn.items()}

    def get(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        return self._committed.get(tp)

    def load(self, tp: TopicPartition, value: OffsetAndMetadata | None) -> None:
        """Apply a record read back from the log (None: a tombstone)."""
        if value is None:
            self._committed.pop(tp, None)
        else:
            self._committed[tp] = value
        self._supersede((tp,))

    def begin_commit(self, tps: Iterable[TopicPartition]) -> None:
        # A generator, not the mapping itself: Counter.update would add a mapping's values.
        self._pending.update(tp for tp in tps)

    def end_commit(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], written: bool, *, producer_id: int | None = None
    ) -> None:
        """A commit's append finished: apply it if it was written (a transactional one waits,
        in :meth:`complete_txn`, for its transaction's marker)."""
        for tp in offsets:
            self._pending[tp] -= 1
            if self._pending[tp] <= 0:
                del self._pending[tp]
        if not written:
            return
        if producer_id is not None:
            self._txn.setdefault(producer_id, {}).update(offsets)
            return
        self._committed.update(offsets)
        self._supersede(offsets)

    def _supersede(self, tps: Iterable[TopicPartition]) -> None:
        """A plain commit written after a transaction's offsets wins over them."""
        for pending in self._txn.values():
            for tp in tps:
                pending.pop(tp, None)

    def load_txn(self, producer_id: int, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        """Transactional offsets read back from the log, their marker not found."""
        self._txn.setdefault(producer_id, {}).update(offsets)

    def complete_txn(self, producer_id: int, commit: bool) -> int:
        """The producer's transaction ended: its offsets apply (commit) or go; returns how many."""
        offsets = self._txn.pop(producer_id, {})
        if commit:
            self._committed.update(offsets)
        return len(offsets)

    def remove(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self._committed.pop(tp, None)

    def expired(
        self,
        now_ms: int,
        retention_ms: int,
        *,
        base_timestamp: int | None,
        keep_topics: Collection[str] = (),
    ) -> list[TopicPartition]:
        """The offsets due for deletion now. ``base_timestamp`` is when the group became
        empty (None: count from each offset's commit); offsets of ``keep_topics`` stay."""
        due = []
        for tp, value in self._committed.items():
            if tp[0] in keep_topics or tp in self._pending:
                continue
            if value.expire_timestamp is not None:
                expired = now_ms >= value.expire_timestamp
            else:
                base = value.commit_timestamp if base_timestamp is None else base_timestamp
                expired = now_ms - base >= retention_ms
            if expired:
                due.append(tp)
        return due
