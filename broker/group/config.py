"""Group coordinator settings: Kafka's broker settings under Python names, with Kafka's defaults."""

from __future__ import annotations

from dataclasses import dataclass

from tributary.broker.group.consumer_assignors import SERVER_ASSIGNORS

MINUTE_MS = 60 * 1000

#: ``group.consumer.migration.policy``: which way a group may change type while it has
#: members (an empty group always may): ``upgrade`` classic to consumer when a member joins
#: with ConsumerGroupHeartbeat, ``downgrade`` consumer to classic when the last such member
#: leaves a group of JoinGroup members; Kafka 4.0's default allows both.
MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


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
    # --- consumer groups (KIP-848), Kafka 4.0's names and defaults --------------------------
    #: ``group.consumer.heartbeat.interval.ms``: how often members are told to heartbeat,
    #: within ``group.consumer.min.heartbeat.interval.ms`` and ``...max...``.
    consumer_heartbeat_interval_ms: int = 5000
    consumer_min_heartbeat_interval_ms: int = 5000
    consumer_max_heartbeat_interval_ms: int = 15000
    #: ``group.consumer.session.timeout.ms``: a member not heard from this long is removed,
    #: within ``group.consumer.min.session.timeout.ms`` and ``...max...``.
    consumer_session_timeout_ms: int = 45000
    consumer_min_session_timeout_ms: int = 45000
    consumer_max_session_timeout_ms: int = 60000
    #: ``group.consumer.assignors``: the server assignors members may ask for; the first is
    #: the default.
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    #: ``group.consumer.migration.policy`` (see MIGRATION_POLICIES).
    consumer_migration_policy: str = "bidirectional"
    #: ``group.consumer.max.size``: members a consumer group may have.
    consumer_max_size: int = 2**31 - 1

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
        self._check_consumer_settings()

    def _check_consumer_settings(self) -> None:
        # Kafka's GroupCoordinatorConfig checks, in its words.
        bounds = (
            ("group.consumer.heartbeat.interval.ms", self.consumer_heartbeat_interval_ms,
             self.consumer_min_heartbeat_interval_ms, self.consumer_max_heartbeat_interval_ms),
            ("group.consumer.session.timeout.ms", self.consumer_session_timeout_ms,
             self.consumer_min_session_timeout_ms, self.consumer_max_session_timeout_ms),
        )  # fmt: skip
        for name, value, low, high in bounds:
            if low < 1 or high < low:
                raise ValueError(f"{name}: its min must be >= 1 and <= its max (min {low}, max {high})")
            if not low <= value <= high:
                raise ValueError(f"{name} must be between {low} and {high}, got {value}")
        if self.consumer_heartbeat_interval_ms >= self.consumer_session_timeout_ms:
            raise ValueError("group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms")
        if not self.consumer_assignors:
            raise ValueError("group.consumer.assignors must name at least one assignor")
        unknown = [name for name in self.consumer_assignors if name not in SERVER_ASSIGNORS]
        if unknown:
            known = ", ".join(SERVER_ASSIGNORS)
            raise ValueError(f"group.consumer.assignors: unknown assignors {unknown} (known: {known})")
        if self.consumer_migration_policy not in MIGRATION_POLICIES:
            raise ValueError(f"group.consumer.migration.policy must be one of {', '.join(MIGRATION_POLICIES)}")
        if self.consumer_max_size < 1:
            raise ValueError("group.consumer.max.size must be >= 1")

    @property
    def upgrade_allowed(self) -> bool:
        return self.consumer_migration_policy in ("upgrade", "bidirectional")

    @property
    def downgrade_allowed(self) -> bool:
        return self.consumer_migration_policy in ("downgrade", "bidirectional")

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * MINUTE_MS
