"""Reading a ``__consumer_offsets`` partition back, in log order, into what each group has:
its stored metadata (a classic group's record, or the records a consumer group (KIP-848) is
rebuilt from), its committed offsets, and the offsets of transactions not yet ended.

Offsets committed inside a transaction (records of a transactional batch, TxnOffsetCommit)
count from their transaction's commit marker on, and go with an abort marker; a plain commit
of the same partition written after them wins over them, as Kafka decides by log offset. Those
whose marker is not in the log yet stay pending in their group.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from tributary.broker.group.consumer_group import ConsumerGroup, InconsistentRecords
from tributary.broker.group.consumer_records import ConsumerRecordError, decode_value
from tributary.broker.group.messages import Loaded, TxnEnd, TxnRecord
from tributary.broker.group.offsets import OffsetAndMetadata, TopicPartition
from tributary.broker.group.records import (
    GroupKey,
    OffsetKey,
    RecordFormatError,
    StoredGroup,
    decode_group_value,
    decode_key,
    decode_offset_value,
)

log = logging.getLogger(__name__)

GroupOffsetsRead = dict[TopicPartition, OffsetAndMetadata]


@dataclass
class PartitionContents:
    #: The last classic group metadata per group (None: a tombstone).
    stored: dict[str, StoredGroup | None] = field(default_factory=dict)
    #: group -> offsets (None: deleted).
    offsets: dict[str, dict[TopicPartition, OffsetAndMetadata | None]] = field(default_factory=dict)
    #: group -> producer id -> the offsets its open transaction committed.
    open_txns: dict[str, dict[int, GroupOffsetsRead]] = field(default_factory=dict)
    #: The consumer groups the records build (deleted ones dropped).
    consumer: dict[str, ConsumerGroup] = field(default_factory=dict)
    #: Which kind of group a group id's last metadata record was ("classic" or "consumer"): a
    #: group that changed type has both kinds of records, the old kind's tombstones first.
    latest: dict[str, str] = field(default_factory=dict)
    skipped: int = 0

    def groups(self) -> list[str]:
        return sorted(set(self.stored) | set(self.offsets) | set(self.open_txns) | set(self.consumer))


def read_partition(partition: int, records: Iterable[Loaded]) -> PartitionContents:
    contents = PartitionContents()
    # producer id -> group -> offsets of its transaction, until its marker
    pending: dict[int, dict[str, GroupOffsetsRead]] = {}
    for entry in records:
        if isinstance(entry, TxnEnd):
            ended = pending.pop(entry.producer_id, {})
            if entry.commit:
                for group_id, committed in ended.items():
                    contents.offsets.setdefault(group_id, {}).update(committed)
            continue
        try:
            if isinstance(entry, TxnRecord):
                _read_txn_record(entry, pending)
            else:
                _read_record(partition, entry, contents, pending)
        except (RecordFormatError, ConsumerRecordError, InconsistentRecords) as exc:
            contents.skipped += 1
            log.warning("__consumer_offsets-%d: skipping a record: %s", partition, exc)
    for producer_id, by_group in pending.items():
        for group_id, txn_offsets in by_group.items():
            if txn_offsets:
                contents.open_txns.setdefault(group_id, {})[producer_id] = txn_offsets
    return contents


def _read_txn_record(entry: TxnRecord, pending: dict[int, dict[str, GroupOffsetsRead]]) -> None:
    key = decode_key(entry.key)
    if isinstance(key, OffsetKey) and entry.value is not None:
        by_group = pending.setdefault(entry.producer_id, {}).setdefault(key.group, {})
        by_group[key.topic, key.partition] = decode_offset_value(entry.value)


def _read_record(
    partition: int,
    entry: tuple[bytes, bytes | None],
    contents: PartitionContents,
    pending: dict[int, dict[str, GroupOffsetsRead]],
) -> None:
    key_bytes, value_bytes = entry
    key = decode_key(key_bytes)
    if isinstance(key, OffsetKey):
        tp = (key.topic, key.partition)
        value = decode_offset_value(value_bytes) if value_bytes is not None else None
        contents.offsets.setdefault(key.group, {})[tp] = value
        for by_group in pending.values():  # a plain commit written later wins
            by_group.get(key.group, {}).pop(tp, None)
    elif isinstance(key, GroupKey):
        contents.stored[key.group] = decode_group_value(value_bytes) if value_bytes is not None else None
        contents.latest[key.group] = "classic"
    else:  # one of a consumer group's records
        group = contents.consumer.get(key.group) or ConsumerGroup(key.group, partition)
        group.replay(key, decode_value(key, value_bytes) if value_bytes is not None else None)
        if group.dead:
            contents.consumer.pop(key.group, None)
        else:
            contents.consumer[key.group] = group
        contents.latest[key.group] = "consumer"
