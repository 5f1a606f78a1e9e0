"""The error-code table against kafka-python's independent one: names, values, flags.

kafka-python declares one exception class per code with ``errno``, ``message``
(Kafka's name), ``retriable`` and ``invalid_metadata``. Where our table differs,
the difference is listed below with its reason, so a change to either side shows.
"""

from __future__ import annotations

import pickle

import pytest

from tributary.protocol.error_codes import ErrorCode, Handling

kafka_errors = pytest.importorskip("kafka.errors")

# kafka-python spells a few names as older Kafka releases did.
_OLD_NAMES = {
    ErrorCode.UNKNOWN_SERVER_ERROR: "UNKNOWN",
    ErrorCode.NONE: "NO_ERROR",
    ErrorCode.NOT_LEADER_OR_FOLLOWER: "NOT_LEADER_FOR_PARTITION",
    ErrorCode.MESSAGE_TOO_LARGE: "MESSAGE_SIZE_TOO_LARGE",
    ErrorCode.INVALID_TOPIC_EXCEPTION: "INVALID_TOPIC",
    ErrorCode.INVALID_REPLICA_ASSIGNMENT: "INVALID_REPLICATION_ASSIGNMENT",
}
# Kafka's Java client retries CorruptRecordException (a RetriableException); kafka-python does not.
_RETRIABLE_DIFFERS = {ErrorCode.CORRUPT_MESSAGE}
# Our client refreshes its metadata after these, to find the broker or the controller again.
_OUR_METADATA_ONLY = {ErrorCode.BROKER_NOT_AVAILABLE, ErrorCode.NOT_CONTROLLER}
# Kafka marks these InvalidMetadataException; our table keeps the client's behaviour as it
# was. It requests no elections and no topic ids, so it meets these rarely if at all.
_THEIR_METADATA_ONLY = {
    ErrorCode.LISTENER_NOT_FOUND,
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
    ErrorCode.ELECTION_NOT_NEEDED,
    ErrorCode.UNKNOWN_TOPIC_ID,
    ErrorCode.INCONSISTENT_TOPIC_ID,
}
# Newer than kafka-python's table (Kafka 4.0's KIP-848 regex subscriptions).
_NOT_IN_KAFKA_PYTHON = {ErrorCode.INVALID_REGULAR_EXPRESSION}


def _kafka_python_rows() -> dict[int, type]:
    rows: dict[int, type] = {}
    for value in vars(kafka_errors).values():
        if isinstance(value, type) and issubclass(value, kafka_errors.BrokerResponseError):
            errno = getattr(value, "errno", None)
            if errno is not None:
                # Aliases (IncompatibleBrokerVersion for UNSUPPORTED_VERSION) share a row: the
                # first, kafka-python's own, is the one whose flags count.
                rows.setdefault(errno, value)
    return rows


_THEIRS = _kafka_python_rows()


@pytest.mark.parametrize("code", [c for c in ErrorCode if c not in _NOT_IN_KAFKA_PYTHON], ids=lambda code: code.name)
def test_each_row_matches_kafka_python(code: ErrorCode) -> None:
    theirs = _THEIRS[code.value]
    assert theirs.message == _OLD_NAMES.get(code, code.name)
    assert theirs.retriable == (code.retriable != (code in _RETRIABLE_DIFFERS))
    invalid_metadata = bool(getattr(theirs, "invalid_metadata", False))
    if code in _OUR_METADATA_ONLY:
        assert code.invalidates_metadata and not invalid_metadata
    elif code in _THEIR_METADATA_ONLY:
        assert invalid_metadata and not code.invalidates_metadata
    else:
        assert code.invalidates_metadata == invalid_metadata


def test_the_table_covers_every_code_kafka_python_knows() -> None:
    assert set(_THEIRS) <= {code.value for code in ErrorCode}


def test_rows_are_ints_with_their_handling() -> None:
    row = ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert row == 6 and isinstance(row, int) and ErrorCode(6) is row
    assert row.handling == Handling.RETRIABLE | Handling.INVALIDATES_METADATA
    assert row.retriable and row.invalidates_metadata
    assert ErrorCode.BROKER_NOT_AVAILABLE.invalidates_metadata and not ErrorCode.BROKER_NOT_AVAILABLE.retriable
    assert ErrorCode.MESSAGE_TOO_LARGE.handling is Handling.FINAL
    assert not ErrorCode.NONE.retriable and not ErrorCode.NONE.invalidates_metadata
    # Members survive a round trip through pickle (by value), as plain IntEnum members do.
    assert pickle.loads(pickle.dumps(row)) is row
    assert ErrorCode.of(999) is ErrorCode.UNKNOWN_SERVER_ERROR
