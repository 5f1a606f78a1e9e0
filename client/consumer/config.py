"""Consumer settings, sans-IO: Kafka's consumer configuration under Python names.

Settings keep Kafka's names and units (``fetch_max_wait_ms`` is
``fetch.max.wait.ms``, in milliseconds), so a Kafka configuration translates
by replacing dots with underscores. Connection-level settings (timeouts,
backoffs, ``metadata_max_age``) are the :class:`~client.config.ClientConfig`
ones; :func:`split_settings` sorts a ``**settings`` mix into the two.

Defaults are Kafka 3.x's, including the assignor list ``("range",
"cooperative-sticky")``: the group votes for the first protocol every member
lists, so a group of default members runs "range", and since "range" is
eager, so is the rebalance protocol (see :attr:`ConsumerConfig.rebalance_protocol`).
Listing "cooperative-sticky" alone switches to cooperative rebalancing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tributary.client.config import ClientConfig
from tributary.client.config import split_settings as split_config
from tributary.client.group.assignors import ASSIGNORS, RebalanceProtocol

OffsetReset = Literal["earliest", "latest", "none"]
GroupProtocol = Literal["classic", "consumer"]
GROUP_PROTOCOLS: tuple[GroupProtocol, ...] = ("classic", "consumer")
OFFSET_RESETS: tuple[OffsetReset, ...] = ("earliest", "latest", "none")
IsolationLevel = Literal["read_uncommitted", "read_committed"]
ISOLATION_LEVELS: tuple[IsolationLevel, ...] = ("read_uncommitted", "read_committed")


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    #: ``group.instance.id``: static membership. A static member that restarts
    #: within ``session_timeout_ms`` gets its partitions back without a
    #: rebalance, and (as in Kafka) does not send LeaveGroup when it closes.
    group_instance_id: str | None = None
    #: ``auto.offset.reset``: where to start a partition without a committed
    #: offset, or whose position fell out of the log. "none" raises
    #: NoOffsetForPartitionError or OffsetOutOfRangeError from poll instead.
    auto_offset_reset: OffsetReset = "latest"
    #: ``enable.auto.commit``: None means "on when there is a group", as Kafka.
    enable_auto_commit: bool | None = None
    #: ``auto.commit.interval.ms``.
    auto_commit_interval_ms: int = 5000
    #: ``fetch.min.bytes`` / ``fetch.max.wait.ms``: a fetch long-polls until
    #: this much data is ready or this long has passed.
    fetch_min_bytes: int = 1
    fetch_max_wait_ms: int = 500
    #: ``fetch.max.bytes`` / ``max.partition.fetch.bytes``: per fetch request
    #: and per partition in it (a first batch larger than either still comes, KIP-74).
    fetch_max_bytes: int = 50 * 1024 * 1024
    max_partition_fetch_bytes: int = 1024 * 1024
    #: ``max.poll.records``: the most records one poll returns.
    max_poll_records: int = 500
    #: ``check.crcs``: verify each batch's CRC-32C before decoding it.
    check_crcs: bool = True
    #: ``session.timeout.ms``: the coordinator drops a member it has not
    #: heard from for this long.
    session_timeout_ms: int = 45_000
    #: ``heartbeat.interval.ms``: how often a member heartbeats, which is
    #: also how soon it hears that a rebalance started.
    heartbeat_interval_ms: int = 3000
    #: ``max.poll.interval.ms``: a member whose application has not polled for
    #: this long leaves the group (its partitions go to others) and rejoins at
    #: the next poll. Also the rebalance timeout sent in JoinGroup, as Kafka does.
    max_poll_interval_ms: int = 300_000
    #: ``partition.assignment.strategy``: assignor names in preference order.
    partition_assignment_strategy: tuple[str, ...] = ("range", "cooperative-sticky")
    #: ``exclude.internal.topics``: a pattern never matches ``__consumer_offsets``.
    exclude_internal_topics: bool = True
    #: ``client.rack``: sent in the subscription (for rack-aware assignors).
    client_rack: str | None = None
    #: ``group.protocol``: "classic" (JoinGroup/SyncGroup, the assignors above run in the
    #: group's leader) or "consumer" (KIP-848: the coordinator assigns, changes are
    #: incremental; ``session_timeout_ms`` and ``heartbeat_interval_ms`` are the broker's).
    group_protocol: GroupProtocol = "classic"
    #: ``group.remote.assignor``: the server assignor to ask for with the consumer protocol
    #: ("uniform", "range"); None: the coordinator's default.
    group_remote_assignor: str | None = None
    #: ``isolation.level``: "read_committed" reads only what transactions committed (up to each
    #: partition's last stable offset, aborted transactions dropped); "read_uncommitted" (Kafka's
    #: default) everything up to the high watermark. Markers are never handed out.
    isolation_level: IsolationLevel = "read_uncommitted"

    def __post_init__(self) -> None:
        if self.auto_offset_reset not in OFFSET_RESETS:
            raise ValueError(f"auto_offset_reset must be one of {OFFSET_RESETS}, not {self.auto_offset_reset!r}")
        if self.group_protocol not in GROUP_PROTOCOLS:
            raise ValueError(f"group_protocol must be one of {GROUP_PROTOCOLS}, not {self.group_protocol!r}")
        if self.isolation_level not in ISOLATION_LEVELS:
            raise ValueError(f"isolation_level must be one of {ISOLATION_LEVELS}, not {self.isolation_level!r}")
        positive = (
            "auto_commit_interval_ms", "fetch_max_bytes", "max_partition_fetch_bytes", "max_poll_records",
            "session_timeout_ms", "heartbeat_interval_ms", "max_poll_interval_ms",
        )  # fmt: skip
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, not {getattr(self, name)}")
        if self.fetch_min_bytes < 0 or self.fetch_max_wait_ms < 0:
            raise ValueError("fetch_min_bytes and fetch_max_wait_ms must not be negative")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("heartbeat_interval_ms must be below session_timeout_ms")
        strategy = tuple(self.partition_assignment_strategy)
        if not strategy:
            raise ValueError("partition_assignment_strategy names no assignor")
        unknown = [name for name in strategy if name not in ASSIGNORS]
        if unknown:
            raise ValueError(f"unknown assignors {unknown}; known: {sorted(ASSIGNORS)}")
        if len(set(strategy)) != len(strategy):
            raise ValueError(f"partition_assignment_strategy lists an assignor twice: {strategy}")
        object.__setattr__(self, "partition_assignment_strategy", strategy)

    @property
    def rebalance_protocol(self) -> RebalanceProtocol:
        """Cooperative only when every configured assignor is (Kafka's ConsumerCoordinator
        picks the protocol all of them support), so a group can move from eager to
        cooperative assignors in two rolling restarts without ever mixing protocols."""
        cooperative = all(ASSIGNORS[name].protocol == "cooperative" for name in self.partition_assignment_strategy)
        return "cooperative" if cooperative else "eager"

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"

    def auto_commit(self, group_id: str | None) -> bool:
        """Whether offsets are committed automatically: only with a group to commit to."""
        if group_id is None:
            return False
        return True if self.enable_auto_commit is None else self.enable_auto_commit


def split_settings(
    settings: Mapping[str, Any], client_config: ClientConfig | None = None
) -> tuple[ConsumerConfig, ClientConfig]:
    """The consumer and client settings named in ``settings`` (ClientConfig fields go
    on top of ``client_config``). An unknown name raises TypeError, listing it."""
    return split_config(settings, ConsumerConfig, client_config, "consumer")


__all__ = ["ISOLATION_LEVELS", "OFFSET_RESETS", "ConsumerConfig", "IsolationLevel", "OffsetReset", "split_settings"]
