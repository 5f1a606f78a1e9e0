"""Per-partition log settings: Kafka's topic configs under Python names.

Defaults are Kafka's. A topic's overrides arrive as Kafka names and strings
(``{"retention.ms": "3600000"}``, as stored in ZooKeeper); :meth:`LogConfig.with_overrides`
applies them. Names of topic configs the log does not implement
(``min.insync.replicas``...) are ignored there: they belong to other parts of
the broker.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tributary.protocol.compression import Compression

DAY_MS = 24 * 60 * 60 * 1000
#: Kafka's "never" for the flush settings (Long.MAX_VALUE there).
NEVER = sys.maxsize

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
_CLEANUP_POLICIES = frozenset({"delete", "compact"})
#: ``compression.type``: "producer" keeps each batch as the producer compressed it (the default,
#: and the only value that never decompresses); any other recompresses a batch in another codec.
PRODUCER = "producer"
COMPRESSION_TYPES: Mapping[str, Compression | None] = {
    PRODUCER: None,
    "uncompressed": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}

# Kafka name -> attribute. Every attribute has one.
KAFKA_NAMES: Mapping[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.index.bytes": "segment_index_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "max.message.bytes": "max_message_bytes",
    "message.timestamp.type": "message_timestamp_type",
    "cleanup.policy": "cleanup_policy",
    "delete.retention.ms": "delete_retention_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "producer.id.expiration.ms": "producer_id_expiration_ms",
    "compression.type": "compression_type",
    # Tributary's own: Kafka always decodes compressed batches on append and has no bound.
    "record.validation": "record_validation",
    "max.decompression.ratio": "max_decompression_ratio",
}
_STRING_ATTRIBUTES = frozenset({"message_timestamp_type", "cleanup_policy", "record_validation", "compression_type"})
_FLOAT_ATTRIBUTES = frozenset({"min_cleanable_dirty_ratio"})
#: ``record.validation``: "full" walks every record of every batch before it is appended;
#: "header" trusts the producer's records once the header and CRC check out.
FULL = "full"
HEADER_ONLY = "header"


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * DAY_MS
    #: Roll when an index reaches this size (Kafka preallocates it; we only count).
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    flush_messages: int = NEVER
    flush_ms: int = NEVER
    #: -1: unlimited.
    retention_ms: int = 7 * DAY_MS
    #: -1: unlimited.
    retention_bytes: int = -1
    max_message_bytes: int = 1048588
    #: "CreateTime" keeps producers' timestamps; "LogAppendTime" stamps batches on append.
    message_timestamp_type: str = CREATE_TIME
    #: "delete" (retention deletes old segments), "compact" (the log cleaner keeps the latest
    #: record of each key, see docs/compaction.md) or both, comma-separated.
    cleanup_policy: str = "delete"
    #: How long a tombstone (and a transaction marker whose data is gone) stays readable once
    #: the cleaner first saw it: consumers that read within this long see the delete.
    delete_retention_ms: int = DAY_MS
    #: The cleaner takes a log once its uncleaned bytes are at least this share of it.
    min_cleanable_dirty_ratio: float = 0.5
    #: Records younger than this are never compacted (their segment is left for later).
    min_compaction_lag_ms: int = 0
    #: Records older than this are compacted whatever the dirty ratio, and the active segment
    #: rolls after this long so that they can be (Kafka's Long.MAX_VALUE: never).
    max_compaction_lag_ms: int = NEVER
    #: A broker setting in Kafka: idle time after which an idempotent producer's
    #: sequence state is forgotten.
    producer_id_expiration_ms: int = DAY_MS
    #: What an append checks besides header and CRC (see :data:`FULL`, :data:`HEADER_ONLY`).
    record_validation: str = FULL
    #: A compressed batch whose records inflate past this many times ``max.message.bytes``
    #: is refused (the check streams: it costs time, never memory).
    max_decompression_ratio: int = 100
    #: "producer", or the codec every batch is stored in (see :data:`COMPRESSION_TYPES`).
    compression_type: str = PRODUCER
    #: ``cleanup.policy`` parsed once: every append asks (through :attr:`roll_ms`).
    _policies: frozenset[str] = field(init=False, repr=False, compare=False, default=frozenset())

    def __post_init__(self) -> None:
        for name, attribute in KAFKA_NAMES.items():
            value = getattr(self, attribute)
            if attribute in _STRING_ATTRIBUTES:
                if not isinstance(value, str):
                    raise ValueError(f"{name} must be a string, got {value!r}")
            elif attribute in _FLOAT_ATTRIBUTES:
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise ValueError(f"{name} must be a number, got {value!r}")
            elif isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an integer, got {value!r}")
        # Kafka's lower bounds, from its TopicConfig definitions.
        _at_least("segment.bytes", self.segment_bytes, 14)
        # Index entries hold file positions as int32.
        _at_most("segment.bytes", self.segment_bytes, 2**31 - 1)
        _at_least("segment.ms", self.segment_ms, 1)
        _at_least("segment.index.bytes", self.segment_index_bytes, 4)
        _at_least("index.interval.bytes", self.index_interval_bytes, 0)
        _at_least("flush.messages", self.flush_messages, 1)
        _at_least("flush.ms", self.flush_ms, 0)
        _at_least("retention.ms", self.retention_ms, -1)
        _at_least("retention.bytes", self.retention_bytes, -1)
        _at_least("max.message.bytes", self.max_message_bytes, 0)
        _at_least("producer.id.expiration.ms", self.producer_id_expiration_ms, 1)
        _at_least("max.decompression.ratio", self.max_decompression_ratio, 1)
        _at_least("delete.retention.ms", self.delete_retention_ms, 0)
        _at_least("min.compaction.lag.ms", self.min_compaction_lag_ms, 0)
        _at_least("max.compaction.lag.ms", self.max_compaction_lag_ms, 1)
        if not 0 <= self.min_cleanable_dirty_ratio <= 1:
            raise ValueError(f"min.cleanable.dirty.ratio must be between 0 and 1, got {self.min_cleanable_dirty_ratio}")
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            # Kafka's LogConfig.validateValues: a record could never be both old enough and young enough.
            raise ValueError(
                f"min.compaction.lag.ms ({self.min_compaction_lag_ms}) must not exceed "
                f"max.compaction.lag.ms ({self.max_compaction_lag_ms})"
            )
        if self.record_validation not in (FULL, HEADER_ONLY):
            raise ValueError(f"record.validation must be {FULL} or {HEADER_ONLY}, not {self.record_validation!r}")
        if self.message_timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise ValueError(
                f"message.timestamp.type must be {CREATE_TIME} or {LOG_APPEND_TIME}, "
                f"not {self.message_timestamp_type!r}"
            )
        if self.compression_type not in COMPRESSION_TYPES:
            raise ValueError(
                f"compression.type must be one of {', '.join(COMPRESSION_TYPES)}, not {self.compression_type!r}"
            )
        policies = frozenset(p.strip() for p in self.cleanup_policy.split(","))
        object.__setattr__(self, "_policies", policies)  # frozen: set once, here
        if not policies or not policies <= _CLEANUP_POLICIES:
            raise ValueError(f"cleanup.policy must be delete, compact or both, not {self.cleanup_policy!r}")

    @property
    def cleanup_policies(self) -> frozenset[str]:
        return self._policies

    @property
    def deletes_old_segments(self) -> bool:
        return "delete" in self.cleanup_policies

    @property
    def compacts(self) -> bool:
        """The log cleaner compacts this log (``cleanup.policy`` names compact)."""
        return "compact" in self.cleanup_policies

    @property
    def roll_ms(self) -> int:
        """How long the active segment may stay open: ``segment.ms``, or for a compacted log
        ``max.compaction.lag.ms`` if shorter (Kafka's maxSegmentMs, KIP-354): a record can
        only be compacted once its segment has rolled."""
        if self.compacts:
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms

    @property
    def max_decompressed_bytes(self) -> int:
        """The most a compressed batch's records may inflate to."""
        return max(self.max_message_bytes, 1) * self.max_decompression_ratio

    @property
    def stored_codec(self) -> Compression | None:
        """The codec batches are stored in, or None to keep the producer's."""
        return COMPRESSION_TYPES[self.compression_type]

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    def with_overrides(self, overrides: Mapping[str, str | int]) -> LogConfig:
        """This config with Kafka-named overrides applied; raises ValueError for
        a value of the wrong type or out of range. Unknown names are ignored."""
        changes: dict[str, Any] = {}
        for name, value in overrides.items():
            attribute = KAFKA_NAMES.get(name)
            if attribute is None:
                continue
            if attribute in _STRING_ATTRIBUTES:
                changes[attribute] = str(value)
            elif attribute in _FLOAT_ATTRIBUTES:
                try:
                    changes[attribute] = float(value)
                except ValueError:
                    raise ValueError(f"{name} must be a number, got {value!r}") from None
            else:
                try:
                    changes[attribute] = int(value)
                except ValueError:
                    raise ValueError(f"{name} must be an integer, got {value!r}") from None
        return dataclasses.replace(self, **changes) if changes else self

    def to_kafka(self) -> dict[str, str]:
        """Kafka name -> value as a string, as DescribeConfigs reports them."""
        return {name: str(getattr(self, attribute)) for name, attribute in KAFKA_NAMES.items()}


def _at_least(name: str, value: int, minimum: int) -> None:
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")


def _at_most(name: str, value: int, maximum: int) -> None:
    if value > maximum:
        raise ValueError(f"{name} must be at most {maximum}, got {value}")
