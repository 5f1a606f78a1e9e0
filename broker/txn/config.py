"""Transaction coordinator settings: Kafka's broker settings under Python names, with Kafka's defaults."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TxnConfig:
    #: ``transaction.state.log.num.partitions``: used when the coordinator creates
    #: ``__transaction_state``; once it exists, its actual partition count places transactional ids.
    state_log_partitions: int = 50
    #: ``transaction.state.log.replication.factor``: with fewer live brokers, as many as there are (warned).
    state_log_replication_factor: int = 3
    #: ``transaction.state.log.min.isr``: the topic's ``min.insync.replicas`` (at most its replication
    #: factor, warned): a state change is written only while that many replicas are in sync.
    state_log_min_isr: int = 2
    #: ``transaction.state.log.segment.bytes``.
    state_log_segment_bytes: int = 100 * 1024 * 1024
    #: ``transaction.max.timeout.ms``: a producer asking for a longer ``transaction.timeout.ms``
    #: gets INVALID_TRANSACTION_TIMEOUT.
    max_timeout_ms: int = 900_000
    #: ``transaction.abort.timed.out.transaction.cleanup.interval.ms``: how often transactions open
    #: longer than their timeout are looked for, and aborted (the producer is fenced).
    abort_timed_out_interval_ms: int = 10_000
    #: ``transactional.id.expiration.ms``: a transactional id idle this long (no transaction open)
    #: is forgotten, tombstoned in the log.
    transactional_id_expiration_ms: int = 7 * 24 * 60 * 60 * 1000
    #: ``transaction.remove.expired.transaction.cleanup.interval.ms``.
    remove_expired_interval_ms: int = 60 * 60 * 1000
    #: Kafka's ``request.timeout.ms`` as the coordinator uses it: how long a state change waits for
    #: the in-sync replicas before it is answered COORDINATOR_NOT_AVAILABLE.
    write_timeout_ms: int = 30_000
    #: How long a partition leader waits, before it retries, after a marker it could not write.
    marker_retry_backoff_ms: int = 100

    def __post_init__(self) -> None:
        positive = {
            "transaction.state.log.num.partitions": self.state_log_partitions,
            "transaction.state.log.replication.factor": self.state_log_replication_factor,
            "transaction.state.log.min.isr": self.state_log_min_isr,
            "transaction.max.timeout.ms": self.max_timeout_ms,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": self.abort_timed_out_interval_ms,
            "transactional.id.expiration.ms": self.transactional_id_expiration_ms,
            "transaction.remove.expired.transaction.cleanup.interval.ms": self.remove_expired_interval_ms,
        }
        for name, value in positive.items():
            if value < 1:
                raise ValueError(f"setting '{name}' must be at least 1, got {value}")
        if self.state_log_segment_bytes < 14:
            raise ValueError("setting 'transaction.state.log.segment.bytes' must be at least 14")
