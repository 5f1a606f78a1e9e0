"""Group coordinator settings: Kafka's broker settings under Python names, with Kafka's defaults."""

from __future__ import annotations

from dataclasses import dataclass

MINUTE_MS = 60 * 1000


@dataclass(frozen=True, slots=True)
class GroupConfig:
    #: ``group.initial.rebalance.delay.ms``: how long the first rebalance of an empty group
    #: waits for more members, extended by the same again for each newcomer (up to the
    #: rebalance timeout), so a group starting all at once forms in one generation.
    initial_rebalance_delay_ms: int = 3000
    #: ``group.min.session.timeout.ms`` and ``group.max.session.timeout.ms``: a JoinGroup
    #: asking for a session timeout outside them gets INVALID_SESSION_TIMEOUT.
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    #: ``offsets.topic.num.partitions``: used when the coordinator creates ``__consumer_offsets``;
    #: once it exists, its actual partition count decides where groups live.
    offsets_topic_partitions: int = 50
    # offsets.topic.replication.factor: with fewer live brokers, as many as there are (warned).
    offsets_topic_replication_factor: int = 3
    #: ``offsets.topic.segment.bytes``.
    offsets_topic_segment_bytes: int = 100 * 1024 * 1024
    #: ``offsets.retention.minutes``: committed offsets of a group that has been empty this
    #: long (or, for a group never managed by the coordinator, not committed for this long)
    #: are deleted.
    offsets_retention_minutes: int = 7 * 24 * 60
    #: ``offsets.retention.check.interval.ms``.
    offsets_retention_check_interval_ms: int = 600_000
    #: ``offset.metadata.max.bytes``: longer commit metadata gets OFFSET_METADATA_TOO_LARGE.
    offset_metadata_max_bytes: int = 4096

    def __post_init__(self) -> None:
        if self.initial_rebalance_delay_ms < 0:
            raise ValueError("group.initial.rebalance.delay.ms must be >= 0")
        if not 0 < self.min_session_timeout_ms <= self.max_session_timeout_ms:
            raise ValueError("group.min.session.timeout.ms must be > 0 and <= group.max.session.timeout.ms")
        if self.offsets_topic_partitions < 1:
            raise ValueError("offsets.topic.num.partitions must be >= 1")
        if self.offsets_retention_minutes < 1:
            raise ValueError("offsets.retention.minutes must be >= 1")
        if self.offsets_retention_check_interval_ms < 1:
            raise ValueError("offsets.retention.check.interval.ms must be >= 1")
        if self.offset_metadata_max_bytes < 0:
            raise ValueError("offset.metadata.max.bytes must be >= 0")
        if self.offsets_topic_segment_bytes < 14:
            raise ValueError("offsets.topic.segment.bytes must be >= 14")

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * MINUTE_MS
