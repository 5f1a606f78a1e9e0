"""Topic names and topic-level configs, validated the way Kafka validates them, and
described the way DescribeConfigs reports them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tributary.broker.log.config import COMPRESSION_TYPES, LogConfig

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")

#: Topic configs the log honours; anything else is refused with INVALID_CONFIG
#: rather than silently ignored.
TOPIC_CONFIGS = frozenset(
    {
        "retention.ms",
        "retention.bytes",
        "segment.bytes",
        "segment.ms",
        "segment.index.bytes",
        "index.interval.bytes",
        "flush.messages",
        "flush.ms",
        "max.message.bytes",
        "cleanup.policy",
        "delete.retention.ms",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "max.compaction.lag.ms",
        "compression.type",
        "message.timestamp.type",
    }
)
_STRING_CONFIGS = frozenset({"cleanup.policy", "compression.type", "message.timestamp.type"})
_DOUBLE_CONFIGS = frozenset({"min.cleanable.dirty.ratio"})


def topic_name_error(name: str) -> str | None:
    """Why ``name`` is not a legal topic name, or None if it is (Kafka's Topic.validate)."""
    if not name:
        return "topic name is empty"
    if name in (".", ".."):
        return f"topic name cannot be {name!r}"
    if len(name) > MAX_NAME_LENGTH:
        return f"topic name is {len(name)} characters long, the limit is {MAX_NAME_LENGTH}"
    if not _LEGAL.fullmatch(name):
        return f"topic name {name!r} may contain only ASCII letters, digits, '.', '_' and '-'"
    return None


def colliding_topics(name: str, existing: Iterable[str]) -> list[str]:
    """The existing topics ``name`` collides with (Kafka's Topic.hasCollision): '.' and
    '_' become the same character in metric names, so Kafka refuses to create
    ``a.b`` next to ``a_b``."""
    if "." not in name and "_" not in name:
        return []
    key = name.replace(".", "_")
    return sorted(t for t in existing if t != name and t.replace(".", "_") == key)


def _value_error(key: str, value: str | None) -> str | None:
    if key not in TOPIC_CONFIGS:
        return f"unknown or unsupported topic config {key!r}"
    if key == "compression.type" and value is not None and value not in COMPRESSION_TYPES:
        return f"compression.type must be one of {', '.join(COMPRESSION_TYPES)}, got {value!r}"
    if key == "message.timestamp.type" and value not in (None, "CreateTime"):
        return "message.timestamp.type must be 'CreateTime'"
    if key in _DOUBLE_CONFIGS:
        try:
            float(value or "")
        except ValueError:
            return f"topic config {key!r} must be a number, got {value!r}"
    elif key not in _STRING_CONFIGS:
        try:
            int(value or "")
        except ValueError:
            return f"topic config {key!r} must be an integer, got {value!r}"
    return None


def topic_config_error(configs: Mapping[str, str | None]) -> str | None:
    for key, value in configs.items():
        if (why := _value_error(key, value)) is not None:
            return why
    # The log's own range checks (segment.bytes >= 14, retention.ms >= -1, ...): a value the
    # log would refuse must never reach ZooKeeper, where every broker would trip over it.
    try:
        LogConfig().with_overrides({k: v for k, v in configs.items() if v is not None})
    except ValueError as exc:
        return str(exc)
    return None


# Kafka's ConfigEntry.ConfigType and ConfigSource numbers, as DescribeConfigs v1+/v3+ carry them.
CONFIG_TYPE_STRING = 2
CONFIG_TYPE_INT = 3
CONFIG_TYPE_LONG = 5
CONFIG_TYPE_DOUBLE = 6
CONFIG_TYPE_LIST = 7
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5

_INT_CONFIGS = frozenset({"segment.bytes", "segment.index.bytes", "index.interval.bytes", "max.message.bytes"})
# The broker settings the topic configs default to (Kafka's synonyms).
BROKER_SYNONYMS: Mapping[str, str] = {
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "segment.index.bytes": "log.index.size.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "max.message.bytes": "message.max.bytes",
    "cleanup.policy": "log.cleanup.policy",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "compression.type": "compression.type",
    "message.timestamp.type": "log.message.timestamp.type",
}


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str
    #: SOURCE_DYNAMIC_TOPIC (set on the topic), SOURCE_STATIC_BROKER (the broker's
    #: configuration differs from Kafka's default) or SOURCE_DEFAULT.
    source: int
    config_type: int

    @property
    def is_default(self) -> bool:
        return self.source != SOURCE_DYNAMIC_TOPIC


def config_type(name: str) -> int:
    if name == "cleanup.policy":
        return CONFIG_TYPE_LIST
    if name in _STRING_CONFIGS:
        return CONFIG_TYPE_STRING
    if name in _DOUBLE_CONFIGS:
        return CONFIG_TYPE_DOUBLE
    return CONFIG_TYPE_INT if name in _INT_CONFIGS else CONFIG_TYPE_LONG


def _effective_defaults(broker_defaults: LogConfig) -> dict[str, str]:
    return {name: value for name, value in broker_defaults.to_kafka().items() if name in TOPIC_CONFIGS}


def topic_defaults(broker_defaults: LogConfig) -> dict[str, str]:
    """Every topic config's value for a topic that does not set it."""
    return _effective_defaults(broker_defaults)


def describe_topic_config(overrides: Mapping[str, str], broker_defaults: LogConfig) -> list[ConfigEntry]:
    """Every topic config with its effective value: the topic's override, else the
    broker's default (itself Kafka's default unless the broker's configuration sets it)."""
    ours = _effective_defaults(broker_defaults)
    kafka = _effective_defaults(LogConfig())
    entries = []
    for name in sorted(TOPIC_CONFIGS):
        if name in overrides:
            entries.append(ConfigEntry(name, overrides[name], SOURCE_DYNAMIC_TOPIC, config_type(name)))
        else:
            source = SOURCE_DEFAULT if ours[name] == kafka[name] else SOURCE_STATIC_BROKER
            entries.append(ConfigEntry(name, ours[name], source, config_type(name)))
    return entries


def describe_broker_config(broker_defaults: LogConfig) -> list[ConfigEntry]:
    """The broker's log defaults under their broker names (read-only: set in its TOML)."""
    ours = _effective_defaults(broker_defaults)
    kafka = _effective_defaults(LogConfig())
    return [
        ConfigEntry(
            BROKER_SYNONYMS[name],
            ours[name],
            SOURCE_DEFAULT if ours[name] == kafka[name] else SOURCE_STATIC_BROKER,
            config_type(name),
        )
        for name in sorted(TOPIC_CONFIGS)
    ]
