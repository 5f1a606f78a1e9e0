"""Broker settings: command-line flags, an optional TOML file, and Kafka's defaults.

Every flag is also a key of the TOML file (``data-dir = "/var/lib/tributary"``);
a flag given on the command line wins over the file. Broker settings use
Kafka's names, and TOML's dotted keys spell them naturally
(``log.retention.ms = 86400000``). An unknown key, a missing required setting
or a value of the wrong shape stops start-up with one line naming it.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tributary.broker.group.config import MIGRATION_POLICIES, GroupConfig
from tributary.broker.group.consumer_assignors import ASSIGNOR_CLASS_NAMES, SERVER_ASSIGNORS
from tributary.broker.log.cleaner.config import CleanerConfig
from tributary.broker.log.config import LogConfig
from tributary.broker.replication.config import ReplicationConfig
from tributary.broker.security.authorizer_config import AuthorizerConfig, parse_super_users
from tributary.broker.security.config import SecurityConfig, SecurityConfigError, is_security_key, load_security
from tributary.broker.txn.config import TxnConfig


class ConfigError(ValueError):
    """A setting that is missing or wrong; the message names it."""


@dataclass(frozen=True, slots=True)
class HostPort:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_host_port(name: str, text: str) -> HostPort:
    host, sep, port = str(text).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"setting '{name}' must be HOST:PORT, got {text!r}")
    return HostPort(host.strip("[]"), int(port))


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    broker_id: int
    #: The first listener's bind and advertised addresses (all of them: ``security.listeners``).
    listen: HostPort
    data_dir: Path
    zookeeper: str
    advertise: HostPort
    datacenter: str = "default"
    # broker.rack: where this broker stands for replica placement (default: the datacenter).
    rack: str | None = None
    auto_create_topics: bool = True
    # Limits on auto-creation (broker/auto_create.py): a cap on the cluster's partitions, a
    # rate per broker, and names never auto-created ("" denies none).
    auto_create_max_partitions: int = 10_000
    auto_create_max_per_second: float = 100.0
    auto_create_deny_pattern: str = ""
    default_partitions: int = 1
    socket_request_max_bytes: int = 100 * 1024 * 1024
    # Client connections: broker-wide and from one IP address. Kafka's broker-wide default
    # is unlimited; ours keeps a flood of connections from exhausting file descriptors
    # and memory. Per IP, unlimited as in Kafka (Java's Integer.MAX_VALUE).
    max_connections: int = 10_000
    max_connections_per_ip: int = 2**31 - 1
    # A connection with nothing received, nothing sent and no request in hand for this
    # long (and at most an eighth more) is closed (Kafka's default, 10 minutes); None
    # (-1) never closes one.
    connections_max_idle_ms: int | None = 600_000
    # Bytes of requests read but not yet answered, broker-wide: past it no connection
    # is read from until responses free some (Kafka's default -1, unlimited, lets
    # pipelining clients pin gigabytes); None (-1) is unlimited.
    queued_max_request_bytes: int | None = 256 * 1024 * 1024
    zookeeper_session_timeout_ms: int = 18_000
    # On SIGTERM, first have the controller move this broker's leaderships to other in-sync
    # replicas, waiting at most this long (Kafka retries 3 times 5 s apart), then stop.
    controlled_shutdown: bool = True
    controlled_shutdown_timeout_ms: int = 30_000
    # The controller gives leadership back to each partition's preferred replica when a broker
    # leads too few of its own (after a restart), checked this often (Kafka's defaults).
    auto_leader_rebalance: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    retention_check_interval_ms: int = 300_000
    # How often the broker checks whether a log is due for an fsync.
    flush_scheduler_interval_ms: int = 1_000
    # The scrubber: a pass over every closed segment's CRCs starts this often (-1: never),
    # reading at most this many bytes a second.
    scrub_interval_ms: int = 24 * 60 * 60 * 1000
    scrub_bytes_per_second: int = 8 * 1024 * 1024
    # Logs kept open at once (three file descriptors each at least); -1: as many as the
    # descriptor limit allows with 1024 left for sockets.
    max_open_logs: int = -1
    # Send fetched records with os.sendfile (off: pread + send, for comparison and
    # for transports sendfile cannot reach).
    sendfile: bool = True
    # The Prometheus endpoint (``metrics.port``): None serves none; 0 binds any free
    # port (logged). It binds 127.0.0.1 unless ``metrics.host`` says otherwise.
    metrics_port: int | None = None
    metrics_host: str | None = None
    log: LogConfig = field(default_factory=LogConfig)
    group: GroupConfig = field(default_factory=GroupConfig)
    replication: ReplicationConfig = field(default_factory=ReplicationConfig)
    cleaner: CleanerConfig = field(default_factory=CleanerConfig)
    txn: TxnConfig = field(default_factory=TxnConfig)
    authorizer: AuthorizerConfig = field(default_factory=AuthorizerConfig)
    #: Listeners, TLS, SASL and the inter-broker client (broker/security/config.py); load()
    #: always sets it, the default (one PLAINTEXT listener) serves tests that build a config.
    security: SecurityConfig = field(
        default_factory=lambda: SecurityConfig.plaintext("127.0.0.1", 9092, "127.0.0.1", 9092)
    )
    # The settings the file or the flags gave (the others are defaults): DescribeConfigs
    # reports their source.
    given: frozenset[str] = frozenset()


def _int(name: str, value: Any) -> int:
    return int(_number(name, value, int, "an integer"))


def _int_or_unlimited(name: str, value: Any) -> int | None:
    """Kafka's -1 for "no limit" becomes None."""
    number = _int(name, value)
    return None if number == -1 else number


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("true", "false"):
        return str(value).lower() == "true"
    raise ConfigError(f"setting '{name}' must be true or false, got {value!r}")


def _float(name: str, value: Any) -> float:
    return float(_number(name, value, float, "a number"))


def _number(name: str, value: Any, kind: type[int] | type[float], what: str) -> float:
    # TOML gives numbers; strings are allowed too (as Kafka's properties files have them).
    # bool is an int subclass in Python, never a number here; a float is not an integer.
    accepted = (int, str) if kind is int else (int, float, str)
    if isinstance(value, bool) or not isinstance(value, accepted):
        raise ConfigError(f"setting '{name}' must be {what}, got {value!r}")
    try:
        return kind(value)
    except ValueError:
        raise ConfigError(f"setting '{name}' must be {what}, got {value!r}") from None


def _pattern(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"setting '{name}' must be a regular expression in a string, got {value!r}")
    try:
        re.compile(value)
    except re.error as exc:
        raise ConfigError(f"setting '{name}' is not a valid regular expression: {exc}") from None
    return value


def _str(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"setting '{name}' must be a non-empty string, got {value!r}")
    return value


def _assignors(name: str, value: Any) -> tuple[str, ...]:
    """Kafka's list: ``"uniform,range"`` (or a TOML list); Kafka's class names are accepted."""
    items = value if isinstance(value, list) else str(value).split(",")
    names = tuple(ASSIGNOR_CLASS_NAMES.get(str(item).strip(), str(item).strip()) for item in items)
    unknown = [n for n in names if n not in SERVER_ASSIGNORS]
    if not names or unknown:
        raise ConfigError(f"setting '{name}' names unknown assignors {unknown} (known: {', '.join(SERVER_ASSIGNORS)})")
    return names


def _migration_policy(name: str, value: Any) -> str:
    policy = str(value).strip().lower()
    if policy not in MIGRATION_POLICIES:
        raise ConfigError(f"setting '{name}' must be one of {', '.join(MIGRATION_POLICIES)}, got {value!r}")
    return policy


def _text(name: str, value: Any) -> str:
    """A string that may be empty (Kafka's default for authorizer.class.name)."""
    if not isinstance(value, str):
        raise ConfigError(f"setting '{name}' must be a string, got {value!r}")
    return value.strip()


def _principals(name: str, value: Any) -> Any:
    try:
        return parse_super_users(_text(name, value))
    except ValueError as exc:
        raise ConfigError(f"setting '{name}': {exc}") from None


# key -> (attribute of BrokerConfig, "log.<attribute>" of LogConfig, "group.<attribute>" of
# GroupConfig, "replication.<attribute>" of ReplicationConfig, "cleaner.<attribute>" of
# CleanerConfig, "txn.<attribute>" of TxnConfig or "authorizer.<attribute>" of AuthorizerConfig,
# converter)
_SETTINGS: dict[str, tuple[str, Callable[[str, Any], Any]]] = {
    "id": ("broker_id", _int),
    "listen": ("listen", parse_host_port),
    "data-dir": ("data_dir", lambda n, v: Path(_str(n, v))),
    "zookeeper": ("zookeeper", _str),
    "advertise": ("advertise", parse_host_port),
    "datacenter": ("datacenter", _str),
    "broker.rack": ("rack", _str),
    "auto.create.topics.enable": ("auto_create_topics", _bool),
    "num.partitions": ("default_partitions", _int),
    "auto.create.topics.max.partitions": ("auto_create_max_partitions", _int),
    "auto.create.topics.max.per.second": ("auto_create_max_per_second", _float),
    "auto.create.topics.deny.pattern": ("auto_create_deny_pattern", _pattern),
    "socket.request.max.bytes": ("socket_request_max_bytes", _int),
    "max.connections": ("max_connections", _int),
    "max.connections.per.ip": ("max_connections_per_ip", _int),
    "connections.max.idle.ms": ("connections_max_idle_ms", _int_or_unlimited),
    "queued.max.request.bytes": ("queued_max_request_bytes", _int_or_unlimited),
    "zookeeper.session.timeout.ms": ("zookeeper_session_timeout_ms", _int),
    "controlled.shutdown.enable": ("controlled_shutdown", _bool),
    "controlled.shutdown.timeout.ms": ("controlled_shutdown_timeout_ms", _int),
    "auto.leader.rebalance.enable": ("auto_leader_rebalance", _bool),
    "leader.imbalance.check.interval.seconds": ("leader_imbalance_check_interval_seconds", _int),
    "leader.imbalance.per.broker.percentage": ("leader_imbalance_per_broker_percentage", _int),
    "log.retention.check.interval.ms": ("retention_check_interval_ms", _int),
    "log.flush.scheduler.interval.ms": ("flush_scheduler_interval_ms", _int),
    "log.scrub.interval.ms": ("scrub_interval_ms", _int),
    "log.max.open.logs": ("max_open_logs", _int),
    "log.scrub.bytes.per.second": ("scrub_bytes_per_second", _int),
    "sendfile": ("sendfile", _bool),
    "metrics.port": ("metrics_port", _int),
    "metrics.host": ("metrics_host", _str),
    "message.max.bytes": ("log.max_message_bytes", _int),
    "log.segment.bytes": ("log.segment_bytes", _int),
    "log.record.validation": ("log.record_validation", _str),
    "compression.type": ("log.compression_type", _str),
    "log.max.decompression.ratio": ("log.max_decompression_ratio", _int),
    "log.roll.ms": ("log.segment_ms", _int),
    "log.index.interval.bytes": ("log.index_interval_bytes", _int),
    "log.flush.interval.messages": ("log.flush_messages", _int),
    "log.flush.interval.ms": ("log.flush_ms", _int),
    "log.retention.ms": ("log.retention_ms", _int),
    "log.retention.bytes": ("log.retention_bytes", _int),
    "log.cleanup.policy": ("log.cleanup_policy", _str),
    "log.cleaner.delete.retention.ms": ("log.delete_retention_ms", _int),
    "log.cleaner.min.cleanable.ratio": ("log.min_cleanable_dirty_ratio", _float),
    "log.cleaner.min.compaction.lag.ms": ("log.min_compaction_lag_ms", _int),
    "log.cleaner.max.compaction.lag.ms": ("log.max_compaction_lag_ms", _int),
    "log.cleaner.enable": ("cleaner.enable", _bool),
    "log.cleaner.threads": ("cleaner.threads", _int),
    "log.cleaner.io.max.bytes.per.second": ("cleaner.io_max_bytes_per_second", _float),
    "log.cleaner.dedupe.buffer.size": ("cleaner.dedupe_buffer_size", _int),
    "log.cleaner.io.buffer.load.factor": ("cleaner.io_buffer_load_factor", _float),
    "log.cleaner.backoff.ms": ("cleaner.backoff_ms", _int),
    "log.cleaner.isolation": ("cleaner.isolation", _str),
    "group.initial.rebalance.delay.ms": ("group.initial_rebalance_delay_ms", _int),
    "group.min.session.timeout.ms": ("group.min_session_timeout_ms", _int),
    "group.max.session.timeout.ms": ("group.max_session_timeout_ms", _int),
    "group.consumer.heartbeat.interval.ms": ("group.consumer_heartbeat_interval_ms", _int),
    "group.consumer.min.heartbeat.interval.ms": ("group.consumer_min_heartbeat_interval_ms", _int),
    "group.consumer.max.heartbeat.interval.ms": ("group.consumer_max_heartbeat_interval_ms", _int),
    "group.consumer.session.timeout.ms": ("group.consumer_session_timeout_ms", _int),
    "group.consumer.min.session.timeout.ms": ("group.consumer_min_session_timeout_ms", _int),
    "group.consumer.max.session.timeout.ms": ("group.consumer_max_session_timeout_ms", _int),
    "group.consumer.assignors": ("group.consumer_assignors", _assignors),
    "group.consumer.migration.policy": ("group.consumer_migration_policy", _migration_policy),
    "group.consumer.max.size": ("group.consumer_max_size", _int),
    "offsets.topic.num.partitions": ("group.offsets_topic_partitions", _int),
    "offsets.topic.replication.factor": ("group.offsets_topic_replication_factor", _int),
    "offsets.topic.segment.bytes": ("group.offsets_topic_segment_bytes", _int),
    "offsets.retention.minutes": ("group.offsets_retention_minutes", _int),
    "offsets.retention.check.interval.ms": ("group.offsets_retention_check_interval_ms", _int),
    "offset.metadata.max.bytes": ("group.offset_metadata_max_bytes", _int),
    "replica.lag.time.max.ms": ("replication.lag_time_max_ms", _int),
    "replica.fetch.wait.max.ms": ("replication.fetch_wait_max_ms", _int),
    "replica.fetch.min.bytes": ("replication.fetch_min_bytes", _int),
    "replica.fetch.max.bytes": ("replication.fetch_max_bytes", _int),
    "replica.fetch.response.max.bytes": ("replication.fetch_response_max_bytes", _int),
    "replica.fetch.backoff.ms": ("replication.fetch_backoff_ms", _int),
    "replica.socket.timeout.ms": ("replication.socket_timeout_ms", _int),
    "min.insync.replicas": ("replication.min_insync_replicas", _int),
    "default.replication.factor": ("replication.default_replication_factor", _int),
    "unclean.leader.election.enable": ("replication.unclean_leader_election", _bool),
    "high.watermark.fsync": ("replication.high_watermark_fsync", _bool),
    "transaction.state.log.num.partitions": ("txn.state_log_partitions", _int),
    "transaction.state.log.replication.factor": ("txn.state_log_replication_factor", _int),
    "transaction.state.log.min.isr": ("txn.state_log_min_isr", _int),
    "transaction.state.log.segment.bytes": ("txn.state_log_segment_bytes", _int),
    "transaction.max.timeout.ms": ("txn.max_timeout_ms", _int),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": ("txn.abort_timed_out_interval_ms", _int),
    "transactional.id.expiration.ms": ("txn.transactional_id_expiration_ms", _int),
    "transaction.remove.expired.transaction.cleanup.interval.ms": ("txn.remove_expired_interval_ms", _int),
    "authorizer.class.name": ("authorizer.class_name", _text),
    "super.users": ("authorizer.super_users", _principals),
    "allow.everyone.if.no.acl.found": ("authorizer.allow_everyone_if_no_acl_found", _bool),
}
REQUIRED = ("id", "data-dir", "zookeeper")


def known_settings() -> Mapping[str, tuple[str, Callable[[str, Any], Any]]]:
    """Every setting the broker reads: name -> (where it lands in BrokerConfig, converter)."""
    return _SETTINGS


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """TOML reads ``log.retention.ms = 1`` as nested tables; Kafka's name is the dotted path."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return _flatten(tomllib.load(f))
    except FileNotFoundError:
        raise ConfigError(f"setting 'config': file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"setting 'config': {path} is not valid TOML: {exc}") from None


def _check_connection_limits(top: Mapping[str, Any]) -> None:
    for name, attr in (("max.connections", "max_connections"), ("max.connections.per.ip", "max_connections_per_ip")):
        if top.get(attr, 1) < 1:
            raise ConfigError(f"setting '{name}' must be at least 1, got {top[attr]}")
    if (idle_ms := top.get("connections_max_idle_ms")) is not None and idle_ms < 1:
        raise ConfigError(f"setting 'connections.max.idle.ms' must be -1 (never) or at least 1, got {idle_ms}")
    if (queued := top.get("queued_max_request_bytes")) is not None and queued < 1024:
        raise ConfigError(f"setting 'queued.max.request.bytes' must be -1 (unlimited) or at least 1024, got {queued}")


def load(flags: Mapping[str, Any], config_file: Path | None = None) -> BrokerConfig:
    """Merge the TOML file (if any) and the flags (which win) into a checked config."""
    settings = read_toml(config_file) if config_file is not None else {}
    settings.update({k: v for k, v in flags.items() if v is not None})
    # Listeners, TLS and SASL keys have their own reader (several are per listener).
    security_settings = {k: settings.pop(k) for k in [k for k in settings if is_security_key(k)]}
    unknown = sorted(set(settings) - set(_SETTINGS))
    if unknown:
        raise ConfigError(f"unknown setting '{unknown[0]}' (known: {', '.join(sorted(_SETTINGS))})")
    for name in REQUIRED:
        if name not in settings:
            raise ConfigError(f"setting '{name}' is missing (give --{name} or '{name} = ...' in the config file)")

    top: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {
        "log": {}, "group": {}, "replication": {}, "cleaner": {}, "txn": {}, "authorizer": {}
    }  # fmt: skip
    for name, value in settings.items():
        attr, convert = _SETTINGS[name]
        section, dot, rest = attr.partition(".")
        target, attr = (sections[section], rest) if dot else (top, attr)
        target[attr] = convert(name, value)

    if top["broker_id"] < 0:
        raise ConfigError(f"setting 'id' must be >= 0, got {top['broker_id']}")
    if top.get("default_partitions", 1) < 1:
        raise ConfigError("setting 'num.partitions' must be >= 1")
    if top.get("socket_request_max_bytes", 1024) < 1024:
        raise ConfigError("setting 'socket.request.max.bytes' must be at least 1024")
    _check_connection_limits(top)
    if not 0 <= top.get("metrics_port", 0) <= 65535:
        raise ConfigError(f"setting 'metrics.port' must be a port number 0-65535, got {top['metrics_port']}")
    listen: HostPort | None = top.get("listen")
    advertise: HostPort | None = top.get("advertise")
    try:
        security = load_security(
            security_settings,
            (listen.host, listen.port) if listen is not None else None,
            (advertise.host, advertise.port) if advertise is not None else None,
        )
    except SecurityConfigError as exc:
        raise ConfigError(str(exc)) from None
    first = security.listeners[0]
    top["listen"] = HostPort(first.bind.host, first.bind.port)
    top["advertise"] = HostPort(first.advertised.host, first.advertised.port)
    top["security"] = security
    try:
        group = GroupConfig(**sections["group"])
        replication = ReplicationConfig(**sections["replication"])
        cleaner = CleanerConfig(**sections["cleaner"])
        txn = TxnConfig(**sections["txn"])
        authorizer = AuthorizerConfig(**sections["authorizer"])
        log_config = LogConfig(**sections["log"])
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return BrokerConfig(
        log=log_config,
        group=group,
        replication=replication,
        cleaner=cleaner,
        txn=txn,
        authorizer=authorizer,
        given=frozenset(settings) | frozenset(security_settings),
        **top,
    )
