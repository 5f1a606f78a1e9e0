"""The mirror's settings: command-line flags and TOML keys, validated once.

Every flag is also a TOML key, spelled like the flag without its dashes
(``source-alias`` or ``source_alias``), or with dots as Kafka spells its settings
(``socket.receive.buffer.bytes``); a flag given on the command line wins over the
file. Validation happens here, before anything connects, so bad configuration is
one clear line (:class:`MirrorConfigError`).

Each side has its own security, with Kafka's client names (client/security/settings.py):
a ``[security.source]`` and a ``[security.target]`` table in the file (the source is
usually across the WAN, over SASL_SSL; the target local), or, as Kafka's tools take them,
``--source-command-config FILE`` and ``--target-command-config FILE``::

    [security.source]
    security.protocol = "SASL_SSL"
    sasl.mechanism = "SCRAM-SHA-512"
    sasl.username = "mirror-east"
    sasl.password = "${file:/etc/tributary/mirror-east.password}"
    ssl.ca.location = "/etc/tributary/ca.pem"
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from tributary.client.security.settings import (
    PLAINTEXT,
    SecurityConfig,
    SecuritySettingsError,
    load_command_config,
    security_from_settings,
)
from tributary.client.wire.cluster import parse_bootstrap
from tributary.mirror.produce import MAX_DEPTH

#: The compacted topic in the aggregate cluster that maps copied batches to
#: aggregate offsets, for offset translation (see docs/mirror.md).
DEFAULT_OFFSETS_TOPIC = "__tributary_mirror_offsets"

_ALIAS = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class MirrorConfigError(ValueError):
    """Bad mirror configuration; the message names the setting."""


@dataclass(frozen=True, slots=True)
class MirrorConfig:
    #: Bootstrap servers of the source cluster (a datacenter) and of the aggregate cluster.
    source: str
    source_alias: str
    target: str
    #: Source topics to mirror (full match), minus those matching ``exclude``.
    topics: str = ".*"
    exclude: str | None = None
    #: The consumer group on the source cluster that instances of this mirror share;
    #: also the group under which the mirror checkpoints its progress in the aggregate.
    group: str = ""
    #: Prometheus endpoint; None serves none, 0 picks a free port (logged).
    metrics_port: int | None = None
    #: 127.0.0.1 unless told otherwise: a scraper elsewhere needs metrics-host set on purpose.
    metrics_host: str = "127.0.0.1"
    #: Aliases of other mirrors: topics named ``<alias>.*`` for any of them (and for this
    #: mirror's own alias) are copies already and are never mirrored, so active-active cannot loop.
    known_aliases: tuple[str, ...] = ()
    #: Where a partition without any recorded progress starts: "earliest" or "latest".
    start_position: str = "earliest"
    #: Fetching from the source: per request, per partition, the long poll, how many fetch
    #: requests may be in flight on one source connection, and how many fetches of one
    #: partition may be in flight at once (reading ahead at estimated offsets across a long
    #: link: mirror/windows.py; 1 reads a partition one fetch at a time).
    fetch_max_bytes: int = 16 * 1024 * 1024
    fetch_partition_max_bytes: int = 2 * 1024 * 1024
    fetch_max_wait_ms: int = 250
    fetch_sessions: int = 4
    fetch_windows: int = 8
    #: Bytes fetched and not yet acknowledged by the aggregate: the backpressure bound.
    max_inflight_bytes: int = 64 * 1024 * 1024
    #: Requests in flight per connection (fetches to the source, produces to the aggregate).
    max_inflight_requests: int = 16
    #: Batches of one partition in flight to the aggregate at once, in order (at most 5, as
    #: for Kafka's idempotent producer: a leader recognises the last five batches of a
    #: producer sent again). 1 sends the next batch once the previous one was acknowledged.
    #: 5, as Kafka's producer with idempotence: 30% less CPU per GB than 1 with 64 KiB source
    #: batches, and no more with 1 MiB ones (docs/benchmarks.md, "Per CPU, pipelined").
    max_inflight_batches_per_partition: int = 5
    #: SO_SNDBUF / SO_RCVBUF of the connections; None keeps the OS's autotuning.
    #: Across a long link set them near the bandwidth-delay product.
    socket_send_buffer_bytes: int | None = None
    socket_receive_buffer_bytes: int | None = None
    #: Cap on the bytes fetched from the source per second (token bucket); None: no cap.
    bandwidth_bytes_per_second: int | None = None
    #: How often progress is checkpointed (after the aggregate acknowledged the data).
    commit_interval_ms: int = 1000
    #: How often the source's topic list is re-read for newly matching topics and new partitions.
    discovery_interval_ms: int = 5000
    #: Request timeout and the longest pause between reconnection attempts.
    request_timeout_ms: int = 30_000
    reconnect_backoff_max_ms: int = 10_000
    offsets_topic: str = DEFAULT_OFFSETS_TOPIC
    offsets_topic_partitions: int = 8
    #: Source topic configurations copied onto aggregate topics the mirror creates.
    copied_configs: tuple[str, ...] = (
        "cleanup.policy", "retention.ms", "retention.bytes", "max.message.bytes",
        "message.timestamp.type", "min.compaction.lag.ms", "delete.retention.ms",
    )  # fmt: skip
    #: The assignor that splits the source partitions among instances (classic protocol).
    assignor: str = "cooperative-sticky"
    #: ``group.protocol`` of the source group: "classic" (JoinGroup/SyncGroup, ``assignor``)
    #: or "consumer" (KIP-848: the source's coordinator assigns, with its own session timeout
    #: and heartbeat interval; ``session_timeout_ms`` must then not exceed the broker's
    #: ``group.consumer.session.timeout.ms``, since the mirror stops producing once it has
    #: not heard from the coordinator for 80 % of it).
    group_protocol: str = "classic"
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 1000
    #: How long SIGTERM waits for in-flight batches before giving up on them.
    shutdown_timeout_ms: int = 30_000
    #: TLS and SASL of each side (``[security.source]``, ``[security.target]``).
    source_security: SecurityConfig = PLAINTEXT
    target_security: SecurityConfig = PLAINTEXT
    _patterns: tuple[re.Pattern[str], re.Pattern[str] | None] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:  # noqa: PLR0912 (one check per setting)
        if not self.source:
            raise MirrorConfigError("--source is required: the bootstrap servers of the source cluster")
        if not self.target:
            raise MirrorConfigError("--target is required: the bootstrap servers of the aggregate cluster")
        for name in ("source", "target"):
            try:
                parse_bootstrap(getattr(self, name))
            except ValueError as exc:
                raise MirrorConfigError(f"--{name}: {exc}") from None
        for alias in (self.source_alias, *self.known_aliases):
            if not _ALIAS.match(alias or ""):
                raise MirrorConfigError(
                    f"source alias {alias!r} is invalid: use letters, digits, '_' or '-' (no dots: "
                    "the alias is the prefix before the first dot of aggregate topic names)"
                )
        patterns = (self._compile("topics", self.topics), self._compile("exclude", self.exclude))
        object.__setattr__(self, "_patterns", patterns)
        if not self.group:
            object.__setattr__(self, "group", f"tributary-mirror-{self.source_alias}")
        if self.group_protocol not in ("classic", "consumer"):
            raise MirrorConfigError(f"group-protocol must be 'classic' or 'consumer', not {self.group_protocol!r}")
        if self.start_position not in ("earliest", "latest"):
            raise MirrorConfigError(f"start-position must be 'earliest' or 'latest', not {self.start_position!r}")
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            raise MirrorConfigError(f"metrics-port {self.metrics_port} is not a port number")
        positive = (
            "fetch_max_bytes", "fetch_partition_max_bytes", "fetch_sessions", "fetch_windows", "max_inflight_bytes",
            "max_inflight_requests", "max_inflight_batches_per_partition", "commit_interval_ms",
            "discovery_interval_ms", "request_timeout_ms", "reconnect_backoff_max_ms", "offsets_topic_partitions",
            "session_timeout_ms", "heartbeat_interval_ms", "shutdown_timeout_ms",
        )  # fmt: skip
        for name in positive:
            if getattr(self, name) <= 0:
                raise MirrorConfigError(f"{name.replace('_', '-')} must be positive, not {getattr(self, name)}")
        for name in ("socket_send_buffer_bytes", "socket_receive_buffer_bytes", "bandwidth_bytes_per_second"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise MirrorConfigError(f"{name.replace('_', '-')} must be positive, not {value}")
        if self.fetch_max_wait_ms < 0:
            raise MirrorConfigError("fetch-max-wait-ms must not be negative")
        if self.max_inflight_batches_per_partition > MAX_DEPTH:
            raise MirrorConfigError(
                f"max-inflight-batches-per-partition must be at most {MAX_DEPTH} (a leader recognises the last "
                f"{MAX_DEPTH} batches of a producer sent again), not {self.max_inflight_batches_per_partition}"
            )
        if self.max_inflight_bytes < self.fetch_partition_max_bytes:
            raise MirrorConfigError("max-inflight-bytes must be at least fetch-partition-max-bytes")

    @staticmethod
    def _compile(name: str, pattern: str | None) -> re.Pattern[str] | None:
        if pattern is None or pattern == "":
            return None
        try:
            return re.compile(pattern)
        except re.error as exc:
            raise MirrorConfigError(f"--{name} {pattern!r} is not a valid regular expression: {exc}") from None

    @property
    def include_pattern(self) -> re.Pattern[str]:
        include = self._patterns[0]
        assert include is not None  # topics defaults to ".*"
        return include

    @property
    def exclude_pattern(self) -> re.Pattern[str] | None:
        return self._patterns[1]


def _setting_names() -> dict[str, str]:
    """TOML spelling (dashes, underscores, or dots as Kafka's names have them:
    ``socket.receive.buffer.bytes``, ``fetch.max.bytes``) -> field name."""
    names: dict[str, str] = {}
    for f in fields(MirrorConfig):
        if f.name.startswith("_") or f.name.endswith("_security"):
            continue
        names[f.name] = f.name
        names[f.name.replace("_", "-")] = f.name
        names[f.name.replace("_", ".")] = f.name
    # Kafka's consumer name, which TOML reads as the table ``group``: ``group.id = "..."``.
    names["group.id"] = "group"
    return names


def _coerce(name: str, value: Any, default: Any) -> Any:
    """TOML values to the field's type (flags arrive typed already)."""
    if name in ("known_aliases", "copied_configs"):
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise MirrorConfigError(f"{name.replace('_', '-')} must be a list of strings")
        return tuple(value)
    expected = type(default) if default is not None else None
    if name in ("metrics_port", "socket_send_buffer_bytes", "socket_receive_buffer_bytes",
                "bandwidth_bytes_per_second") or expected is int:  # fmt: skip
        if isinstance(value, bool) or not isinstance(value, int):
            raise MirrorConfigError(f"{name.replace('_', '-')} must be an integer, not {value!r}")
        return value
    if expected is str or name in ("exclude",):
        if not isinstance(value, str):
            raise MirrorConfigError(f"{name.replace('_', '-')} must be a string, not {value!r}")
        return value
    return value


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _security_tables(table: dict[str, Any], base: Path) -> dict[str, SecurityConfig]:
    """``[security.source]`` and ``[security.target]`` (taken out of ``table``)."""
    found = table.pop("security", None)
    if found is None:
        return {}
    if not isinstance(found, dict) or set(found) - {"source", "target"}:
        raise MirrorConfigError("[security] holds a [security.source] and a [security.target] table, nothing else")
    result = {}
    for side, settings in found.items():
        if not isinstance(settings, dict):
            raise MirrorConfigError(f"[security.{side}] must be a table of Kafka client settings")
        try:
            result[f"{side}_security"] = security_from_settings(_flatten(settings), base=base)
        except SecuritySettingsError as exc:
            raise MirrorConfigError(f"[security.{side}]: {exc}") from None
    return result


def load_config(
    flags: Mapping[str, Any], config_file: Path | None = None, command_configs: Mapping[str, Path | None] | None = None
) -> MirrorConfig:
    """Settings from the TOML file, overridden by the flags that were given (not None);
    ``command_configs`` (side -> properties or TOML file) override the file's security tables."""
    names = _setting_names()
    defaults = {f.name: f.default for f in fields(MirrorConfig) if not f.name.startswith("_")}
    values: dict[str, Any] = {}
    if config_file is not None:
        try:
            table = tomllib.loads(config_file.read_text())
        except OSError as exc:
            raise MirrorConfigError(f"cannot read {config_file}: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise MirrorConfigError(f"{config_file} is not valid TOML: {exc}") from None
        table = table.get("mirror", table) if isinstance(table.get("mirror"), dict) else table
        values.update(_security_tables(table, config_file.parent))
        # Dotted keys (Kafka's names: ``socket.receive.buffer.bytes``, ``group.id``) arrive as tables.
        for key, value in _flatten(table).items():
            if key not in names:
                raise MirrorConfigError(f"{config_file}: unknown setting {key!r}")
            values[names[key]] = _coerce(names[key], value, defaults[names[key]])
    for key, value in flags.items():
        if value is not None and key in names:
            values[names[key]] = _coerce(names[key], value, defaults[names[key]])
    for side, path in (command_configs or {}).items():
        if path is not None:
            try:
                values[f"{side}_security"] = load_command_config(path)
            except SecuritySettingsError as exc:
                raise MirrorConfigError(f"--{side}-command-config {exc}") from None
    for required in ("source", "source_alias", "target"):
        if required not in values:
            raise MirrorConfigError(
                f"--{required.replace('_', '-')} is required (on the command line or as a key of --config)"
            )
    return MirrorConfig(**values)


__all__ = ["DEFAULT_OFFSETS_TOPIC", "MirrorConfig", "MirrorConfigError", "load_config"]
