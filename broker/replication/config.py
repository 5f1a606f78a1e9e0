"""Replication settings, with Kafka's names and defaults."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ReplicationConfig:
    #: replica.lag.time.max.ms: a follower not caught up for this long leaves the ISR.
    lag_time_max_ms: int = 30_000
    #: replica.fetch.wait.max.ms: how long a follower's fetch waits at the leader for data.
    fetch_wait_max_ms: int = 500
    #: replica.fetch.min.bytes
    fetch_min_bytes: int = 1
    #: replica.fetch.max.bytes: per partition (a larger first batch still comes whole, KIP-74).
    fetch_max_bytes: int = 1024 * 1024
    #: replica.fetch.response.max.bytes: per fetch response.
    fetch_response_max_bytes: int = 10 * 1024 * 1024
    #: replica.fetch.backoff.ms: after a failed fetch or connection.
    fetch_backoff_ms: int = 1_000
    #: replica.socket.timeout.ms: a fetch with no answer this long closes the connection.
    socket_timeout_ms: int = 30_000
    #: min.insync.replicas (broker default; a topic may override it).
    min_insync_replicas: int = 1
    #: default.replication.factor: auto-created topics, and CreateTopics asking for -1.
    default_replication_factor: int = 1
    #: high.watermark.fsync (Tributary's own): the high watermark of a replicated partition
    #: counts only what every in-sync replica has fsynced, so an acknowledged record survives
    #: all of them losing power at once. Followers fsync each fetch's batches before their next
    #: fetch, the leader its appends in group commits: one fsync covers every batch meanwhile.
    high_watermark_fsync: bool = False
    #: unclean.leader.election.enable: only false is supported (a replica outside the ISR
    #: never leads, so nothing acknowledged is given up for availability).
    unclean_leader_election: bool = False

    def __post_init__(self) -> None:
        if self.lag_time_max_ms < 1:
            raise ValueError(f"setting 'replica.lag.time.max.ms' must be at least 1, got {self.lag_time_max_ms}")
        if self.fetch_wait_max_ms >= self.lag_time_max_ms:
            # Kafka's rule: a follower waiting at the leader must not look out of sync meanwhile.
            raise ValueError("setting 'replica.fetch.wait.max.ms' must be below 'replica.lag.time.max.ms'")
        if self.min_insync_replicas < 1:
            raise ValueError(f"setting 'min.insync.replicas' must be at least 1, got {self.min_insync_replicas}")
        if self.default_replication_factor < 1:
            raise ValueError("setting 'default.replication.factor' must be at least 1")
        if self.unclean_leader_election:
            raise ValueError("setting 'unclean.leader.election.enable' = true is not supported")
