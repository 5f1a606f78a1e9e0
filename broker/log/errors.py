"""What the log refuses, each with the Kafka error code a broker answers it with.

Malformed batches raise protocol's :class:`~protocol.errors.CorruptRecordError`
or :class:`~protocol.errors.UnsupportedMagicError` unchanged; the errors here
are the log's own decisions.
"""

from __future__ import annotations

from typing import ClassVar

from tributary.protocol.error_codes import ErrorCode
from tributary.protocol.errors import ProtocolError


class LogError(Exception):
    """Base of the log's refusals; ``error_code`` is what a response carries."""

    error_code: ClassVar[ErrorCode] = ErrorCode.UNKNOWN_SERVER_ERROR


class RecordTooLargeError(LogError):
    """A batch larger than the partition's ``max.message.bytes``."""

    error_code = ErrorCode.MESSAGE_TOO_LARGE

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"record batch of {size} bytes exceeds max.message.bytes {limit}")
        self.size = size
        self.limit = limit


class InvalidRecordError(LogError, ProtocolError):
    """A well-formed batch a client may not write (control batch, offset range
    that disagrees with the record count, producer id without a sequence).

    Also a :class:`ProtocolError`, so code that only knows protocol errors
    still refuses the data rather than failing."""

    error_code = ErrorCode.INVALID_RECORD


class OutOfOrderSequenceError(LogError):
    """An idempotent producer's batch whose sequence does not follow the last one."""

    error_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(LogError):
    """A batch from an older epoch of a producer id: a fenced zombie producer."""

    error_code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(LogError):
    """A batch that contradicts the producer's transaction state in this partition: a
    non-transactional batch while its transaction is open, or a new epoch over an open one."""

    error_code = ErrorCode.INVALID_TXN_STATE


class TransactionCoordinatorFencedError(LogError):
    """A transaction marker from a coordinator older than one that already wrote here: a
    coordinator that lost the leadership of its ``__transaction_state`` partition."""

    error_code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class OffsetOutOfRangeError(LogError):
    """An offset below the log start or above the log end."""

    error_code = ErrorCode.OFFSET_OUT_OF_RANGE

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} is outside the log's range [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class LogClosedError(LogError):
    """An operation on a log that was closed or deleted (its topic went away)."""

    error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class StorageError(LogError):
    """The disk under a log failed: no space, an I/O error, no file handle left. The data
    already there is untouched (a failed append is cut back), and the next request tries
    again, so the partition comes back by itself when the condition clears."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR

    def __init__(self, path: object, action: str, cause: OSError | str) -> None:
        reason = cause if isinstance(cause, str) else cause.strerror or str(cause)
        super().__init__(f"{path}: {reason} while {action}")
        self.errno = None if isinstance(cause, str) else cause.errno
        self.reason = reason


class CorruptLogError(LogError):
    """Data the broker had flushed does not read back: bit rot, a bad disk, an outside write.
    Unlike a torn tail (unflushed data a crash cut short, which recovery may cut off), it is
    never truncated away: the partition stays offline, its files untouched, until an operator
    (or, with replication, an in-sync replica) repairs it."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR

    def __init__(self, path: str, position: int, offset: int, reason: str) -> None:
        super().__init__(
            f"{path}: corrupt batch at byte {position} (offset {offset}), below the recovery point: {reason}"
        )
        self.path = path
        self.position = position
        self.offset = offset
        self.reason = reason

    def details(self) -> dict[str, str | int]:
        """What the offline marker records, to raise the same error at the next start."""
        return {"path": self.path, "position": self.position, "offset": self.offset, "reason": self.reason}
