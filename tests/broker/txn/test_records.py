"""``__transaction_state`` records in Kafka's layouts (TransactionLogKey, TransactionLogValue)."""

from __future__ import annotations

import struct

import pytest

from tributary.broker.txn.records import (
    RecordFormatError,
    StoredTxn,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from tributary.broker.txn.state import TxnState


def test_key_is_version_0_and_the_id() -> None:
    assert encode_key("tx") == struct.pack(">hh", 0, 2) + b"tx"
    assert decode_key(encode_key("päyments")) == "päyments"
    with pytest.raises(RecordFormatError):
        decode_key(struct.pack(">hh", 1, 2) + b"tx")


def test_value_version_0_field_by_field() -> None:
    txn = StoredTxn(4001, 3, 60_000, TxnState.ONGOING, frozenset({("b", 2), ("a", 0), ("a", 1)}), 1700, 1600)
    expected = (
        struct.pack(">hqhib", 0, 4001, 3, 60_000, 1)
        + struct.pack(">i", 2)  # two topics, sorted, each with its partitions
        + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 1)
        + struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 2)
        + struct.pack(">qq", 1700, 1600)
    )  # fmt: skip
    assert encode_value(txn) == expected
    assert decode_value(expected) == txn


def test_an_empty_transaction_has_null_partitions() -> None:
    txn = StoredTxn(7, 0, 1000, TxnState.EMPTY, frozenset(), 5, -1)
    data = encode_value(txn)
    assert data[17:21] == struct.pack(">i", -1)
    assert decode_value(data) == txn


def test_flexible_version_1_reads_with_tagged_fields() -> None:
    # Kafka 4's transaction.version 1: compact strings and arrays, tagged fields (PreviousProducerId...).
    data = (
        struct.pack(">hqhib", 1, 4001, 3, 60_000, 2)
        + bytes([2])  # one topic (compact: n + 1)
        + bytes([2]) + b"a" + bytes([2]) + struct.pack(">i", 5) + bytes([0])  # topic, [5], no tags
        + struct.pack(">qq", 1700, 1600)
        + bytes([1, 0, 8]) + struct.pack(">q", 4000)  # tag 0 (PreviousProducerId), 8 bytes
    )  # fmt: skip
    assert decode_value(data) == StoredTxn(4001, 3, 60_000, TxnState.PREPARE_COMMIT, frozenset({("a", 5)}), 1700, 1600)


UNKNOWN_STATE = struct.pack(">hqhib", 0, 1, 1, 1, 42) + struct.pack(">iqq", -1, 0, 0)


@pytest.mark.parametrize("damaged", [b"", b"\x00\x00\x00", UNKNOWN_STATE, struct.pack(">hq", 9, 1)])
def test_damaged_values_are_refused(damaged: bytes) -> None:
    with pytest.raises(RecordFormatError):
        decode_value(damaged)
