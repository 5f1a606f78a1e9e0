"""The partition log: segments of record batches stored as received, sparse
offset and time indexes, crash recovery, idempotent-producer state, flush
policy and retention. Plain synchronous code (no Trio): the broker runs the
slow parts (fsync) in worker threads.

Modules, one job each: ``config`` (LogConfig), ``errors``, ``index`` (the
``.index``/``.timeindex`` files), ``segment`` (one segment), ``producer_state``,
``reads`` (file regions for sendfile), ``log`` (PartitionLog), ``checkpoint``
(Kafka's checkpoint files), ``manager`` (LogManager, the data directory).
"""

from __future__ import annotations

from tributary.broker.log.config import LogConfig
from tributary.broker.log.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    LogClosedError,
    LogError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
)
from tributary.broker.log.log import AppendResult, PartitionLog
from tributary.broker.log.manager import LogManager, TopicPartition
from tributary.broker.log.reads import FileRegion, ReadResult

__all__ = [
    "AppendResult",
    "FileRegion",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "LogClosedError",
    "LogConfig",
    "LogError",
    "LogManager",
    "OffsetOutOfRangeError",
    "OutOfOrderSequenceError",
    "PartitionLog",
    "ReadResult",
    "RecordTooLargeError",
    "TopicPartition",
]
