"""The records of ``__transaction_state``, in Kafka's binary layouts (TransactionLogKey and
TransactionLogValue), so Kafka's tools read the topic as they would a Kafka cluster's.

Key::

    version int16 (0), transactionalId string

Value (a null value is a tombstone: the transactional id expired)::

    version int16 (0; 1 is flexible: compact types, tagged fields),
    producerId int64, producerEpoch int16, transactionTimeoutMs int32, transactionStatus int8,
    transactionPartitions nullable [topic string, partitionIds [int32]],
    transactionLastUpdateTimestampMs int64, transactionStartTimestampMs int64

We write version 0, as Kafka does until ``transaction.version`` 1 is enabled, and read both.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from tributary.broker.txn.state import TxnState
from tributary.protocol.errors import ProtocolError
from tributary.protocol.primitives import Reader, Writer

KEY_VERSION = 0
VALUE_VERSION = 0
_FLEXIBLE = 1

TopicPartition = tuple[str, int]


class RecordFormatError(ValueError):
    """A record of ``__transaction_state`` we cannot read."""


@dataclass(frozen=True, slots=True)
class StoredTxn:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    last_update_ms: int
    start_ms: int


def encode_key(transactional_id: str) -> bytes:
    w = Writer()
    w.int16(KEY_VERSION)
    w.string(transactional_id)
    return w.getvalue()


def decode_key(data: bytes) -> str:
    try:
        r = Reader(data)
        version = r.int16()
        if version != KEY_VERSION:
            raise RecordFormatError(f"unknown key version {version}")
        return r.string()
    except ProtocolError as exc:
        raise RecordFormatError(f"malformed key: {exc}") from None


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = defaultdict(list)
    for topic, partition in sorted(partitions):
        topics[topic].append(partition)
    return topics


def encode_value(txn: StoredTxn) -> bytes:
    w = Writer()
    w.int16(VALUE_VERSION)
    w.int64(txn.producer_id)
    w.int16(txn.producer_epoch)
    w.int32(txn.timeout_ms)
    w.int8(txn.state.id)
    if txn.state is TxnState.EMPTY:
        w.int32(-1)  # Kafka writes null partitions for an Empty transaction
    else:
        topics = _by_topic(txn.partitions)
        w.int32(len(topics))
        for topic, ids in topics.items():
            w.string(topic)
            w.int32(len(ids))
            for partition in ids:
                w.int32(partition)
    w.int64(txn.last_update_ms)
    w.int64(txn.start_ms)
    return w.getvalue()


def decode_value(data: bytes) -> StoredTxn:
    try:
        r = Reader(data)
        version = r.int16()
        if version not in (0, _FLEXIBLE):
            raise RecordFormatError(f"unknown value version {version}")
        flexible = version == _FLEXIBLE
        producer_id = r.int64()
        producer_epoch = r.int16()
        timeout_ms = r.int32()
        status = r.int8()
        count = r.compact_array_length() if flexible else r.array_length()
        partitions: set[TopicPartition] = set()
        for _ in range(max(count, 0)):
            topic = r.compact_string() if flexible else r.string()
            ids = r.compact_array_length() if flexible else r.array_length()
            for _ in range(max(ids, 0)):
                partitions.add((topic, r.int32()))
            if flexible:
                _skip_tagged_fields(r)
        last_update_ms = r.int64()
        start_ms = r.int64()
        if flexible:
            _skip_tagged_fields(r)
        state = TxnState.from_id(status)
    except ProtocolError as exc:
        raise RecordFormatError(f"malformed value: {exc}") from None
    except ValueError as exc:
        raise RecordFormatError(str(exc)) from None
    return StoredTxn(producer_id, producer_epoch, timeout_ms, state, frozenset(partitions), last_update_ms, start_ms)


def _skip_tagged_fields(r: Reader) -> None:
    for _ in range(r.unsigned_varint()):
        r.unsigned_varint()  # tag
        r.raw(r.unsigned_varint(), "tagged field")
